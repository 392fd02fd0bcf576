"""Cross-check a compiled model against its original, on the same inputs.

The original runs in the reference runtime (gttc's interpreter) or, when the
user asks for `reference="tf"` and TensorFlow is installed, in TensorFlow
itself.  The candidate runs where it belongs: a GraphDef or IR in the
interpreter, an ONNX model in onnxruntime.  Both sides get identical feeds
(random but seeded, or from an .npz), and `compiler.runtime.verify`
measures the difference per output.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from compiler.errors import InputError
from compiler.ir.graph import Graph
from compiler.runtime.interpreter import run_graph
from compiler.runtime.verify import DEFAULT_ATOL, DEFAULT_RTOL, Feeds, VerifyReport, compare_outputs, resolve_feeds

REFERENCES = ("interpreter", "tf")
Candidate = Union[Graph, Path, str, bytes]


def run_reference(graph: Graph, feeds: Mapping[str, np.ndarray], outputs: Sequence[str],
                  reference: str = "interpreter") -> dict[str, np.ndarray]:
    """The original's outputs, computed by gttc's interpreter or by TensorFlow."""
    if reference == "interpreter":
        return run_graph(graph, dict(feeds), list(outputs))
    if reference == "tf":
        from compiler.backends.graphdef import emit_graphdef_bytes

        return run_in_tensorflow(emit_graphdef_bytes(graph), feeds, outputs)
    raise InputError(f"unknown reference '{reference}' (choose from {', '.join(REFERENCES)})")


def run_in_tensorflow(graph_bytes: bytes, feeds: Mapping[str, np.ndarray],
                      outputs: Sequence[str]) -> dict[str, np.ndarray]:
    """Execute a GraphDef in a single-threaded TensorFlow session (imported only here, on request).

    One thread makes TF's float reductions run in a fixed order, so the
    reference numbers repeat from run to run.
    """
    try:
        import tensorflow as tf
    except ImportError:
        raise InputError("--reference=tf needs TensorFlow: pip install 'gttc[tf]'") from None
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(tf.compat.v1.GraphDef.FromString(graph_bytes), name="")
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        values = session.run([_tensor(o) for o in outputs], {_tensor(k): v for k, v in feeds.items()})
    return dict(zip(outputs, values))


def run_candidate(candidate: Candidate, feeds: Mapping[str, np.ndarray],
                  outputs: Sequence[str]) -> dict[str, np.ndarray]:
    """A graph runs in the interpreter; an ONNX model (path or bytes) in onnxruntime."""
    if isinstance(candidate, Graph):
        present = {k: v for k, v in feeds.items() if k.split(":")[0] in candidate}
        return run_graph(candidate, present, list(outputs))
    from compiler.runtime.onnx_runner import run_onnx

    return run_onnx(candidate, feeds, outputs)


def cross_check(original: Graph, candidate: Candidate, inputs: Sequence[str], outputs: Sequence[str],
                feeds: Feeds = None, reference: str = "interpreter", seed: int = 0,
                rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
                min_cosine: Optional[float] = None) -> VerifyReport:
    """Run the original and the candidate on the same feeds and compare every output.

    With `min_cosine` (eight-bit candidates) float outputs are judged by their cosine.
    """
    values = resolve_feeds(original, inputs, feeds, seed)
    expected = run_reference(original, values, outputs, reference)
    return compare_outputs(expected, run_candidate(candidate, values, outputs), rtol, atol, min_cosine)


# Op types that make a graph (TF) or model (ONNX) compute in eight bits.
EIGHT_BIT_OPS = frozenset({"QuantizeV2", "QuantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger",
                           "QLinearConv", "QLinearMatMul"})


def is_eight_bit(candidate: Candidate) -> bool:
    """Whether the candidate quantizes activations (a QuantizeV2 / Quantized* op, or ONNX's integer ops)."""
    if isinstance(candidate, Graph):
        return any(op.type in EIGHT_BIT_OPS or op.type.startswith("Quantized") for op in candidate)
    import onnx

    model = onnx.load_model_from_string(candidate) if isinstance(candidate, bytes) else onnx.load(str(candidate))
    return any(node.op_type in EIGHT_BIT_OPS for node in model.graph.node)


def is_onnx_path(path: Optional[Union[str, Path]]) -> bool:
    return path is not None and str(path).lower().endswith(".onnx")


def _tensor(name: str) -> str:
    return name if ":" in name else f"{name}:0"
