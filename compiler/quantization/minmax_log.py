"""GTT's min/max range log: reading it, aggregating it, and writing it.

insert_logging(op=RequantizationRange, show_name=true,
message="__requant_min_max:") puts a Print op `NAME__print__` after every
RequantizationRange op `NAME`.  Each run of the graph then writes one line
per op to stderr:

    ;NAME__print__;__requant_min_max:[MIN][MAX]

usually behind a logging prefix (`I0108 21:45:42.261883 1972
logging_ops.cc:79] `) and among unrelated lines.  freeze_requantization_ranges
reads a file of such lines, exactly as GTT does:

- a line counts only if it contains `__print__;__requant_min_max:`;
- split at `;`, the last field after the first that starts with
  `__requant_min_max:` holds the range; split at `[` it must give exactly
  three pieces, the first being `__requant_min_max:` itself;
- each of the other two pieces must split at `]` into exactly two parts
  (anything may follow the `]`), the first being a float as
  absl::SimpleAtof reads it (surrounding ASCII whitespace and a leading `+`
  allowed, `inf`/`nan` and C99 hex floats such as `0x1.8p3` accepted,
  nothing else after the number);
- the field before the range must end in `__print__`; the op name is that
  field without the suffix.

Lines are separated by `\\n` only (a `\\r` stays part of the line and is
harmless after the last `]`).  Every accepted line is one (min, max) record
of that op, in file order.

Per op, the frozen min is the element at index round(n * min_percentile /
100) of the ascending mins, and the frozen max the element at index
round(n * (1 - max_percentile / 100)) of the ascending maxs, clamped to the
last; GTT does this arithmetic in float32 with round-half-away-from-zero,
and so does `percentile_range`.

`format_log_line` and `write_log` write the same format, with each value
spelled so that it reads back to the identical float32.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from compiler.errors import InputError, PipelineError

PRINT_SUFFIX = "__print__"
RANGE_PREFIX = "__requant_min_max:"
FLT_MAX = float(np.finfo(np.float32).max)
LINE_MARKER = PRINT_SUFFIX + ";" + RANGE_PREFIX

# absl::from_chars' general float syntax (which also takes C99 hex floats, as strtod does),
# after SimpleAtof's whitespace and '+' handling.
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?", re.IGNORECASE)
_HEX = re.compile(r"-?0x(?P<digits>[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p(?P<exp>[-+]?[0-9]+))?", re.IGNORECASE)
_SPECIAL = re.compile(r"-?(?:inf(?:inity)?|nan(?:\([0-9a-z_]*\))?)", re.IGNORECASE)
_ASCII_SPACE = " \t\n\v\f\r"

# Per op name, its (min, max) records in file order.
RangeRecords = dict[str, list[tuple[float, float]]]


@dataclass
class MinMaxLog:
    """What a log file held: the records per op and how many lines were read and matched."""

    ranges: RangeRecords = field(default_factory=dict)
    lines: int = 0
    matched: int = 0


# -- reading ---------------------------------------------------------------------------


def parse_float32(text: str) -> Optional[np.float32]:
    """`text` as absl::SimpleAtof reads a float (correctly rounded to float32), or None if it is not one."""
    body = text.strip(_ASCII_SPACE)
    if body.startswith("+"):
        body = body[1:]
        if body.startswith("-"):
            return None
    if _SPECIAL.fullmatch(body):
        return np.float32(float(body.split("(")[0]))
    if _DECIMAL.fullmatch(body):
        return _nearest_float32(float(body), lambda: Fraction(body))
    hex_match = _HEX.fullmatch(body)
    if hex_match:
        return _hex_float32(hex_match.group("digits"), int(hex_match.group("exp") or 0), body.startswith("-"))
    return None


def _hex_float32(digits: str, exponent: int, negative: bool) -> np.float32:
    """A hex float's value rounded once to float32 (far out-of-range exponents short-cut to inf or 0)."""
    whole, _, fraction = digits.partition(".")
    mantissa = int(whole + fraction, 16)
    power = exponent - 4 * len(fraction)
    sign = -1.0 if negative else 1.0
    if mantissa and mantissa.bit_length() + power > 200:
        return np.float32(sign * np.inf)
    if not mantissa or mantissa.bit_length() + power < -200:
        return np.float32(sign * 0.0)
    exact = Fraction(mantissa) * Fraction(2) ** power
    return _nearest_float32(sign * float(exact), lambda: exact if not negative else -exact)


def _nearest_float32(as_double: float, exact: Callable[[], Fraction]) -> np.float32:
    """Round to float32 once: via the double, except where the double landed on a float32 tie."""
    with np.errstate(over="ignore"):
        single = np.float32(as_double)
        if float(single) == as_double or not math.isfinite(as_double):
            return single
        toward = np.float32(math.copysign(np.inf, as_double - _f32_value(single)))
        other = np.nextafter(single, toward) if np.isfinite(single) else np.float32(math.copysign(FLT_MAX, as_double))
    midpoint = (_f32_value(single) + _f32_value(other)) / 2
    if midpoint != as_double or exact() == Fraction(midpoint):
        return single  # not a tie, or a true one that ties-to-even already settled
    other_is_nearer = (exact() > Fraction(midpoint)) == (_f32_value(other) > _f32_value(single))
    return other if other_is_nearer else single


def _f32_value(x: np.float32) -> float:
    """A float32 as a double, with infinity standing where rounding puts it: at 2**128."""
    return float(x) if np.isfinite(x) else math.copysign(2.0 ** 128, float(x))


def parse_log_line(line: str) -> Optional[tuple[str, np.float32, np.float32]]:
    """(op name, min, max) if the line is a range record GTT would accept, else None."""
    if LINE_MARKER not in line:
        return None
    fields = line.split(";")
    found = [i for i in range(1, len(fields)) if fields[i].startswith(RANGE_PREFIX)]
    if not found:
        return None
    index = found[-1]
    pieces = fields[index].split("[")
    if len(pieces) != 3 or pieces[0] != RANGE_PREFIX:
        return None
    low, high = _bracketed_number(pieces[1]), _bracketed_number(pieces[2])
    if low is None or high is None:
        return None
    name_field = fields[index - 1]
    if not name_field.endswith(PRINT_SUFFIX):
        return None
    return name_field[: -len(PRINT_SUFFIX)], low, high


def _bracketed_number(piece: str) -> Optional[np.float32]:
    parts = piece.split("]")
    if len(parts) != 2:
        return None
    return parse_float32(parts[0])


def parse_log(text: str) -> MinMaxLog:
    """All range records in `text`, grouped per op in file order; other lines are ignored."""
    log = MinMaxLog()
    lines = text.split("\n")
    log.lines = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
    for line in lines:
        record = parse_log_line(line)
        if record is not None:
            name, low, high = record
            log.ranges.setdefault(name, []).append((float(low), float(high)))
            log.matched += 1
    return log


def read_log(path: str | Path) -> MinMaxLog:
    """Parse a log file; a missing or unreadable file is an InputError naming it."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise InputError(f"cannot read min/max log file '{path}': {err.strerror or err}") from None
    return parse_log(data.decode("utf-8", errors="surrogateescape"))


# -- aggregating -----------------------------------------------------------------------


def _round_half_away(value: np.float32) -> int:
    """std::round of a float32, as an int."""
    x = float(value)
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def percentile_indices(count: int, min_percentile: float, max_percentile: float) -> tuple[int, int]:
    """GTT's indices into the sorted mins and maxs, in float32; both clamped into [0, count - 1].

    GTT clamps only the max index from above and the min index from below,
    so a min_percentile near 100 makes it read past the end of its array
    (undefined); gttc clamps that index to the last element.
    """
    n = np.float32(count)
    hundred = np.float32(100.0)
    min_index = _round_half_away(n * (np.float32(min_percentile) / hundred))
    max_index = _round_half_away(n * (np.float32(1.0) - np.float32(max_percentile) / hundred))
    last = count - 1
    return min(max(min_index, 0), last), min(max(max_index, 0), last)


def percentile_range(pairs: Sequence[tuple[float, float]], min_percentile: float,
                     max_percentile: float) -> tuple[float, float]:
    """The (min, max) GTT freezes for one op's records (float32 values as floats)."""
    if not pairs:
        raise ValueError("percentile_range needs at least one (min, max) pair")
    mins = sorted(float(np.float32(low)) for low, _ in pairs)
    maxs = sorted(float(np.float32(high)) for _, high in pairs)
    min_index, max_index = percentile_indices(len(pairs), min_percentile, max_percentile)
    return mins[min_index], maxs[max_index]


def check_percentile(value: float, name: str) -> float:
    """`value` as a percentage in [0, 100], or a PipelineError naming the parameter."""
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 100.0:
        raise PipelineError(f"{name} must be between 0 and 100, got {value}")
    return number


def finite_records(records: Mapping[str, Sequence[tuple[float, float]]]) -> tuple[RangeRecords, int]:
    """The records without NaN ranges (GTT's sort of NaNs is undefined) and how many were dropped.

    An op left with no records is left out.
    """
    kept: RangeRecords = {}
    dropped = 0
    for name, pairs in records.items():
        finite = [(low, high) for low, high in pairs if not (math.isnan(low) or math.isnan(high))]
        dropped += len(pairs) - len(finite)
        if finite:
            kept[name] = finite
    return kept, dropped


def aggregate_records(records: Mapping[str, Sequence[tuple[float, float]]], min_percentile: float,
                      max_percentile: float) -> dict[str, tuple[float, float]]:
    """Per op, the (min, max) GTT would freeze; NaN records are ignored and ops with only those left out."""
    kept, _ = finite_records(records)
    return {name: percentile_range(pairs, min_percentile, max_percentile) for name, pairs in kept.items()}


# -- writing ---------------------------------------------------------------------------


def float_text(value: float) -> str:
    """The shortest spelling that reads back (by parse_float32) to the same float32."""
    single = np.float32(value)
    if not np.isfinite(single):
        return "nan" if np.isnan(single) else ("inf" if single > 0 else "-inf")
    magnitude = abs(float(single))
    if magnitude == 0.0 or 1e-4 <= magnitude < 1e16:
        return np.format_float_positional(single, unique=True, trim="-")
    return np.format_float_scientific(single, unique=True, trim="-")


def format_log_line(op_name: str, min: float, max: float) -> str:  # noqa: A002 - the format's own words
    """One record, as insert_logging's Print writes it (without a logging prefix or newline)."""
    if not op_name or any(c in op_name for c in ";[]\n"):
        raise InputError(f"cannot log a range for op name {op_name!r}: it must be non-empty "
                         "and hold no ';', '[', ']' or newline")
    return f";{op_name}{PRINT_SUFFIX};{RANGE_PREFIX}[{float_text(min)}][{float_text(max)}]"


def format_log(records: Mapping[str, Sequence[tuple[float, float]]]) -> str:
    """Many records as a log: run by run (the k-th pair of every op, in mapping order), one per line."""
    runs = max((len(pairs) for pairs in records.values()), default=0)
    lines = [format_log_line(name, *pairs[run])
             for run in range(runs) for name, pairs in records.items() if run < len(pairs)]
    return "".join(line + "\n" for line in lines)


def write_log(path: str | Path, records: Mapping[str, Sequence[tuple[float, float]]]) -> None:
    """Write `records` to `path` in GTT's log format, atomically; an unwritable path is an InputError."""
    from compiler.modelio import write_atomic

    try:
        write_atomic(path, format_log(records).encode("utf-8"))
    except OSError as err:
        raise InputError(f"cannot write min/max log file '{path}': {err.strerror or err}") from None


__all__ = [
    "LINE_MARKER", "MinMaxLog", "PRINT_SUFFIX", "RANGE_PREFIX", "RangeRecords", "aggregate_records",
    "check_percentile", "finite_records", "float_text", "format_log", "format_log_line", "parse_float32", "parse_log", "parse_log_line", "percentile_indices",
    "percentile_range", "read_log", "write_log",
]
