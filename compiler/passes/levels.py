"""Named pipelines: the -O levels and the --target presets.

Each preset is written in the same GTT syntax users type, so `--list-passes`
can show it and a user can paste it into `--transforms`.  A preset is
*available* only when every pass it names is registered: the command line
offers and documents only available presets, so nothing is advertised that
is not built.

* -O0 runs nothing.
* -O1 cleans up: strip unused nodes, remove Identity/CheckNumerics (the pass
  keeps the identities control flow needs), merge duplicates, sort.
* -O2 inlines function calls (PartitionedCall), then runs -O1's cleanup with
  TF1 conds on constant predicates folded away, then GTT's "optimizing for
  deployment" folds, then strip and sort again.

There is no -O3: it would run exactly what -O2 runs, so it is not offered.

A target wraps a level: its `before` passes, the level's passes (the target's
own level unless -O says otherwise), then its `after` passes.

strip_unused_nodes keeps only what the outputs need, so without known
outputs a preset leaves it out and says so in a note.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from compiler.errors import PipelineError
from compiler.passes.base import PASS_REGISTRY
from compiler.passes.pipeline import PassSpec, parse_pipeline

# Passes that need the graph's outputs to do anything sensible.
NEEDS_OUTPUTS = frozenset({"strip_unused_nodes"})

_TIDY = "remove_nodes(op=Identity, op=CheckNumerics) merge_duplicate_nodes(gtt_order=false, switches=false)"
_CLEANUP = f"strip_unused_nodes {_TIDY}"
# Function calls are inlined and dead cond branches removed before the tidy-up, so what they leave
# (Identities of the bodies and branches) is tidied with the rest, and the folds see the inlined convs.
_PRUNE = f"inline_function_calls strip_unused_nodes fold_constant_conds {_TIDY}"
_FOLDS = "fold_constants(ignore_errors=true) fold_batch_norms fold_old_batch_norms fuse_convolutions"
_FINISH = "strip_unused_nodes sort_by_execution_order"
# mobile-int8 quantizes only the ops whose eight-bit kernels beat float: elsewhere each
# quantized op costs a QuantizeV2/Dequantize pair and TF's quantized elementwise kernels
# are slower than its float ones (measured in docs/BENCHMARKS.md).
_FLOAT_BETWEEN = ", ".join(f"ignore_op={op}" for op in (
    "Add", "AvgPool", "BiasAdd", "Concat", "MaxPool", "Mul", "Relu", "Relu6", "Reshape", "ResizeBilinear"))


@dataclass(frozen=True)
class Level:
    """An -O level: a number, a one-line summary and its pipeline text."""

    number: int
    summary: str
    pipeline: str

    @property
    def flag(self) -> str:
        return f"-O{self.number}"

    def specs(self) -> list[PassSpec]:
        return parse_pipeline(self.pipeline)


@dataclass(frozen=True)
class Target:
    """A deployment preset: passes before and after an -O level."""

    name: str
    summary: str
    level: int
    before: str = ""
    after: str = ""

    def specs(self, level: Level) -> list[PassSpec]:
        return parse_pipeline(self.before) + level.specs() + parse_pipeline(self.after)

    def pass_names(self) -> list[str]:
        return [spec.name for spec in parse_pipeline(f"{self.before} {self.after}")]


LEVELS: dict[int, Level] = {
    level.number: level
    for level in (
        Level(0, "no passes", ""),
        Level(1, "cleanup", f"{_CLEANUP} sort_by_execution_order"),
        Level(2, "function-call inlining, cleanup, constant-cond, constant and batch-norm folding, convolution fusion", f"{_PRUNE} {_FOLDS} {_FINISH}"),
    )
}

TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target("portable", "for loading on another machine or runtime: drop device placements and fill in "
               "default attributes first", 2, before="remove_device add_default_attributes"),
        Target("mobile-small", "GTT's shrinking-file-size recipe: store large float weights as eight-bit", 2,
               after="quantize_weights repair_weight_ranges"),
        Target("mobile-int8", "eight-bit weights, convolutions and matmuls, each 32-bit result dequantized "
               "directly; with --calibration also int8-grid weights and eight-bit activations between layers "
               "(Softmax stays float), every range frozen: the model onnxruntime runs in its integer kernels", 2,
               before="add_default_attributes",
               after=f"quantize_weights quantize_nodes({_FLOAT_BETWEEN}) fold_requantize_dequantize "
                     "strip_unused_nodes sort_by_execution_order"),
    )
}


def missing_passes(names: Sequence[str]) -> list[str]:
    """The names that are not registered passes, in order, without repeats."""
    return [name for name in dict.fromkeys(names) if name not in PASS_REGISTRY]


def _level_missing(level: Level) -> list[str]:
    return missing_passes([spec.name for spec in level.specs()])


def _target_missing(target: Target) -> list[str]:
    return missing_passes(target.pass_names() + [spec.name for spec in LEVELS[target.level].specs()])


def available_levels() -> list[Level]:
    """Levels whose every pass is registered, lowest first."""
    return [level for level in LEVELS.values() if not _level_missing(level)]


def available_targets() -> list[Target]:
    """Targets whose every pass (their default level's included) is registered."""
    return [target for target in TARGETS.values() if not _target_missing(target)]


def get_level(number: int) -> Level:
    """The level, or a PipelineError saying why it cannot be used."""
    level = LEVELS.get(number)
    if level is None:
        raise PipelineError(f"no optimization level -O{number} (available: {_level_flags()})")
    missing = _level_missing(level)
    if missing:
        raise PipelineError(f"-O{number} is not available: passes {', '.join(missing)} are not built "
                            f"(available: {_level_flags()})")
    return level


def get_target(name: str) -> Target:
    """The target, or a PipelineError saying why it cannot be used."""
    target = TARGETS.get(name)
    available = ", ".join(t.name for t in available_targets()) or "none"
    if target is None:
        raise PipelineError(f"unknown target '{name}' (available: {available})")
    missing = _target_missing(target)
    if missing:
        raise PipelineError(f"target '{name}' is not available: passes {', '.join(missing)} are not built "
                            f"(available: {available})")
    return target


def _level_flags() -> str:
    return ", ".join(level.flag for level in available_levels())


def preset_pipeline(level: Optional[int] = None, target: Optional[str] = None,
                    outputs_known: bool = True) -> tuple[list[PassSpec], list[str]]:
    """The passes for `-O<level>` and/or `--target`, and notes on anything left out.

    A target supplies its own level when `level` is None; no level and no
    target is -O0.
    """
    chosen_target = get_target(target) if target else None
    if level is None:
        level = chosen_target.level if chosen_target else 0
    chosen_level = get_level(level)
    specs = chosen_target.specs(chosen_level) if chosen_target else chosen_level.specs()
    preset = f"--target={target}" if chosen_target else chosen_level.flag
    return drop_output_passes(specs, outputs_known, preset)


def drop_output_passes(specs: list[PassSpec], outputs_known: bool, preset: str) -> tuple[list[PassSpec], list[str]]:
    """Without known outputs, leave out the passes that need them, with a note."""
    if outputs_known:
        return specs, []
    kept = [spec for spec in specs if spec.name not in NEEDS_OUTPUTS]
    dropped = [name for name in dict.fromkeys(s.name for s in specs) if name in NEEDS_OUTPUTS]
    return kept, [f"{preset}: left out {name} because no outputs were given" for name in dropped]


# The pass that freezes calibrated ranges, and the passes it must follow.
CALIBRATION_PASS = "calibrate_ranges"
_QUANTIZING_PASSES = ("quantize_nodes", "fold_requantize_dequantize")
# With measured ranges every activation between layers can be eight-bit too: weights go on the
# symmetric int8 grid (before the first quantizing pass, so float weights are rounded once) and the
# float ops between quantized kernels get QuantizeV2/Dequantize pairs, so the ONNX export runs in
# onnxruntime's fused U8S8 kernels (docs/QUANTIZATION.md).
CALIBRATED_BEFORE = ("symmetric_weights",)
CALIBRATED_AFTER = ("quantize_activations",)
# After calibration: biases on their accumulator's step, as the integer kernels add them.
CALIBRATED_FINISH = ("align_biases",)
CALIBRATED_EXTRAS = CALIBRATED_BEFORE + CALIBRATED_AFTER + CALIBRATED_FINISH
_FIRST_QUANTIZING = ("quantize_weights", "quantize_nodes")


def with_calibration(specs: list[PassSpec], data: str, activations: bool = True,
                     float_ops: Sequence[str] = ()) -> list[PassSpec]:
    """`specs` with ranges calibrated on `data` frozen right after the last quantizing pass.

    With `activations`, CALIBRATED_BEFORE runs before the first quantizing pass
    and CALIBRATED_AFTER before the calibration, so its ranges are calibrated
    too, and CALIBRATED_FINISH after it; `float_ops` overrides which op types quantize_activations keeps in float.  Without a quantizing pass there is nothing to calibrate:
    that is a usage error.
    """
    positions = [i for i, spec in enumerate(specs) if spec.name in _QUANTIZING_PASSES]
    if not positions:
        raise PipelineError("--calibration needs a pipeline that runs quantize_nodes "
                            "(for example --target=mobile-int8)")
    at = positions[-1] + 1
    first = min(i for i, spec in enumerate(specs) if spec.name in _FIRST_QUANTIZING + _QUANTIZING_PASSES)
    params = {"quantize_activations": [("float_op", op) for op in float_ops]}
    before = [PassSpec(name, []) for name in CALIBRATED_BEFORE if activations]
    after = [PassSpec(name, params.get(name, [])) for name in CALIBRATED_AFTER if activations]
    calibrate = [PassSpec(CALIBRATION_PASS, [("data", data)])]
    finish = [PassSpec(name, []) for name in CALIBRATED_FINISH if activations]
    return specs[:first] + before + specs[first:at] + after + calibrate + finish + specs[at:]


def dynamic_ranges_note(specs: list[PassSpec]) -> list[str]:
    """The one-line note for a quantizing pipeline run without calibration data."""
    if not any(spec.name in _QUANTIZING_PASSES for spec in specs):
        return []
    return ["no --calibration: activation ranges are measured on every run (GTT's dynamic ranges); "
            "an .onnx output quantizes activations with DynamicQuantizeLinear"]


def levels_including(pass_name: str) -> list[Level]:
    """Available levels that run `pass_name` (for --list-passes)."""
    return [level for level in available_levels() if any(s.name == pass_name for s in level.specs())]


def targets_including(pass_name: str) -> list[Target]:
    """Available targets whose own passes include `pass_name`."""
    return [target for target in available_targets() if pass_name in target.pass_names()]


__all__ = [
    "CALIBRATED_AFTER", "CALIBRATED_BEFORE", "CALIBRATED_EXTRAS", "CALIBRATED_FINISH", "CALIBRATION_PASS", "LEVELS", "Level", "NEEDS_OUTPUTS", "TARGETS", "Target",
    "available_levels", "available_targets", "drop_output_passes", "dynamic_ranges_note", "get_level", "get_target",
    "levels_including", "missing_passes", "preset_pipeline", "targets_including", "with_calibration",
]
