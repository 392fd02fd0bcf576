"""Nodes that compute the same thing twice, kept once.

The TF graph reaches the export with its duplicates merged (-O2's merge_duplicate_nodes), but
lowering can make new ones: two TF values that turn out to be one ONNX tensor (a recurrent
node's final state, read both as the state and as the last step) each get their own Squeeze.
Two nodes of one op type, domain and attributes reading the same inputs give the same outputs,
so the later one's readers read the earlier one's outputs, and it is removed.

Random ops are the exception: two draws are two different tensors.  Nodes holding subgraphs are
left alone (their bodies are merged within, each in its own graph), as is a node whose output
is a graph output.  The peephole runs on the finished ONNX graph, after dead nodes are pruned.
"""
from __future__ import annotations

from compiler.backends.onnx.builder import GraphBuilder, Node

_RANDOM = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                     "Bernoulli", "Dropout"})


def merge_common_nodes(builder: GraphBuilder) -> int:
    """Merge every repeated computation, here and in subgraphs; returns how many nodes went."""
    merged = sum(merge_common_nodes(sub) for node in list(builder.nodes) for sub in node.subgraphs())
    outputs = {spec.name for spec in builder.outputs}
    first: dict[bytes, Node] = {}
    for node in list(builder.nodes):
        key = _key(node)
        if key is None:
            continue
        kept = first.setdefault(key, node)
        if kept is node or outputs.intersection(node.outputs):
            continue
        for old, new in zip(node.outputs, kept.outputs):
            if old:
                builder.replace_uses(old, new)
        builder.remove(node)
        merged += 1
    return merged


def _key(node: Node) -> bytes | None:
    """What the node computes, without its name and outputs; None for nodes never merged."""
    if node.op_type in _RANDOM or node.subgraphs():
        return None
    proto = node.to_proto()
    proto.ClearField("name")
    del proto.output[:]
    proto.output.extend("" if not out else "o" for out in node.outputs)  # which outputs exist
    return proto.SerializeToString(deterministic=True)
