"""Per-layer error of an eight-bit graph: how far each quantized op's output is from the float layer.

quantize_nodes gives every converted op's float result to a Dequantize that
takes the op's name, so the layer `X` of the eight-bit graph and the op `X` of
the float original compute the same tensor; quantize_activations leaves its
ops (a depthwise convolution, an Add...) in place with dequantized inputs, so
they keep their names too.  Both graphs run in the
interpreter on the same feeds; for each such layer the signal-to-quantization-
noise ratio

    SQNR = 10 log10( sum(float^2) / sum((float - eight_bit)^2) )  dB

says how many bits of the float signal survive (about 6 dB a bit).  The layer
where the SQNR falls most below the layer before it is where the error jumps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from compiler.ir.graph import Graph, Op
from compiler.runtime.interpreter import Interpreter

# What narrows a 32-bit result between the quantized op and its Dequantize.
_NARROWING = frozenset({"Requantize"})


@dataclass(frozen=True)
class LayerError:
    """One quantized layer: the quantized op type and how its output compares with the float layer."""

    name: str
    op_type: str
    sqnr_db: float
    cosine: float
    max_abs: float


def quantized_layers(original: Graph, quantized: Graph) -> list[tuple[str, str]]:
    """(layer name, quantized op type) for every Dequantize standing in for a float op of the original.

    In the eight-bit graph's execution order (graph order after sort_by_execution_order).
    """
    layers = []
    for op in quantized:
        if _reads_eight_bit(op, original):
            layers.append((op.name, op.type))
            continue
        if op.type != "Dequantize" or op.name not in original or not op.operands:
            continue
        if original.op(op.name).type == "Dequantize":
            continue
        source = _quantized_source(op)
        if source is not None:
            layers.append((op.name, source.type))
    return layers


def _reads_eight_bit(op: Op, original: Graph) -> bool:
    """A float op of the original (same name and type) that now reads a dequantized activation:
    quantize_activations' layers, e.g. a depthwise convolution between two quantized ones."""
    if op.type == "Dequantize" or op.name not in original or original.op(op.name).type != op.type:
        return False
    return _reads_pair(op) and not _reads_pair(original.op(op.name))


def _reads_pair(op: Op) -> bool:
    return any(v.op.type == "Dequantize" and v.op.operands and v.op.operands[0].op.type == "QuantizeV2"
               for v in op.operands)


def _quantized_source(dequantize: Op) -> Optional[Op]:
    """The Quantized* op whose result `dequantize` converts back to float (through a Requantize)."""
    producer = dequantize.operands[0].op
    while producer.type in _NARROWING and producer.operands:
        producer = producer.operands[0].op
    return producer if producer.type.startswith("Quantized") else None


def layer_errors(original: Graph, quantized: Graph, feeds: Mapping[str, np.ndarray]) -> list[LayerError]:
    """SQNR, cosine and max error of every quantized layer on `feeds`, in execution order."""
    layers = quantized_layers(original, quantized)
    names = [name for name, _ in layers]
    if not names:
        return []
    ours = Interpreter(quantized).run({k: v for k, v in feeds.items() if k.split(":")[0] in quantized}, names)
    reference = Interpreter(original).run(dict(feeds), names)
    return [_measure(name, op_type, reference[name], ours[name]) for name, op_type in layers]


def _measure(name: str, op_type: str, ref: np.ndarray, got: np.ndarray) -> LayerError:
    r, g = ref.astype(np.float64).ravel(), got.astype(np.float64).ravel()
    noise = float(np.sum((r - g) ** 2))
    signal = float(np.sum(r ** 2))
    sqnr = math.inf if noise == 0 else (10.0 * math.log10(signal / noise) if signal > 0 else -math.inf)
    norms = float(np.linalg.norm(r) * np.linalg.norm(g))
    cosine = float(r @ g / norms) if norms > 0 else float(np.array_equal(r, g))
    return LayerError(name, op_type, sqnr, cosine, float(np.max(np.abs(r - g), initial=0.0)))


def error_jump(errors: Sequence[LayerError]) -> Optional[int]:
    """Index of the layer whose SQNR drops most below the layer before it (None with fewer than two)."""
    finite = [(i, e.sqnr_db) for i, e in enumerate(errors) if math.isfinite(e.sqnr_db)]
    drops = [(previous - current, i) for (_, previous), (i, current) in zip(finite, finite[1:])]
    if not drops:
        return None
    drop, index = max(drops)
    return index if drop > 0 else None


def format_layer_errors(errors: Sequence[LayerError]) -> str:
    """A table, one row per layer, the jump marked with `<-`."""
    if not errors:
        return "per layer: no quantized layers (no Dequantize stands in for a float op of the original)\n"
    jump = error_jump(errors)
    width = max(len("layer"), *(len(e.name) for e in errors))
    lines = [f"per layer ({len(errors)} quantized ops, SQNR of each against the float layer):",
             f"  {'layer':<{width}}  {'op':<22} {'SQNR dB':>8} {'cosine':>10} {'max_abs':>10}"]
    for i, e in enumerate(errors):
        mark = "  <- largest drop" if i == jump else ""
        lines.append(f"  {e.name:<{width}}  {e.op_type:<22} {e.sqnr_db:>8.1f} {e.cosine:>10.6f} {e.max_abs:>10.3e}{mark}")
    return "\n".join(lines) + "\n"


def plot_layer_errors(errors: Sequence[LayerError], image_format: str, title: str) -> bytes:
    """SQNR per layer drawn as an image (`png`, `svg`, `pdf`); needs matplotlib (pip install 'gttc[plot]')."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = [e.sqnr_db if math.isfinite(e.sqnr_db) else np.nan for e in errors]
    figure, axes = plt.subplots(figsize=(max(6.0, 0.22 * len(errors) + 2.0), 4.0))
    axes.plot(range(len(values)), values, marker="o", markersize=3, linewidth=1)
    jump = error_jump(errors)
    if jump is not None:
        axes.plot([jump], [values[jump]], marker="o", markersize=8, color="tab:red", linestyle="none",
                  label=f"largest drop: layer {jump}, {errors[jump].name}")
        axes.legend(loc="best", fontsize=8)
    axes.set_xlabel("quantized layer (execution order)")
    axes.set_ylabel("SQNR against float (dB)")
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=image_format, dpi=110)
    plt.close(figure)
    return buffer.getvalue()


__all__ = ["LayerError", "error_jump", "format_layer_errors", "layer_errors", "plot_layer_errors",
           "quantized_layers"]
