"""Eight-bit support shared by the quantization passes and commands.

`minmax_log` reads and writes GTT's min/max range log (what
insert_logging's Print ops write and freeze_requantization_ranges reads).
"""
