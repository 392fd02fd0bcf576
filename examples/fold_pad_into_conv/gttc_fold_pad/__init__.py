"""An example gttc plugin: the fold_pad_into_conv pass (see docs/WRITING_PASSES.md in gttc)."""
