"""Rewrites the ONNX export makes on its own copy of the graph before lowering.

Some TF spellings exist only because of a TF limitation (a dilated conv as
SpaceToBatchND -> conv -> BatchToSpaceND, a sign bit read through Bitcast),
need care only in general (Erfc of any argument, where GELU's use of it does
not), spell one ONNX operator as a dozen (LayerNormalization), spell an affine
map as a chain of constant arithmetic (Keras' preprocessing layers), repeat one
layer once per step (Keras' TimeDistributed), compute nothing (a BiasAdd of
zeros) or keep state ONNX has no place for (a TF1 TensorArray, which is a
TensorList in all but name), or leave to run time what the export must know (a
TensorList's item rank).  Each rewrite here turns such a spelling into IR that
lowers to fewer ONNX nodes, computing the same numbers.  They run only on a
copy, and only when one of them matches, so exporting never changes the
caller's graph and costs nothing when nothing matches.  The fused op takes the
name of the op it replaces, so an output named after it still resolves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

from compiler.backends.onnx import (affine_chains, dilated_convs, functional_loops, gelu_erf, height_squeezes,
                                   layer_norm, list_element_shapes, ragged_maps, reshaped_batch_norm, sign_bit,
                                   switch_n, tensor_arrays, unrolled_steps, zero_bias)
from compiler.ir.graph import Graph


@dataclass(frozen=True)
class ExportRewrite:
    """A named rewrite: `find` its sites in a graph, `apply` the sites found to that graph."""

    name: str
    find: Callable[[Graph, Collection[str]], Sequence[Any]]
    apply: Callable[[Graph, Any, Collection[str]], None]


REWRITES = (
    ExportRewrite("list_loops_as_frames", functional_loops.find_list_loops, functional_loops.rewrite_found),
    ExportRewrite("ragged_map_inputs", ragged_maps.find_ragged_inputs, ragged_maps.rewrite_inputs),
    ExportRewrite("ragged_map_results", ragged_maps.find_ragged_results, ragged_maps.rewrite_results),
    ExportRewrite("dilated_convs", dilated_convs.find_dilated_convs, dilated_convs.fuse_found),
    ExportRewrite("unrolled_steps", unrolled_steps.find_unrolled_steps, unrolled_steps.fold_found),
    ExportRewrite("gelu_erf", gelu_erf.find_gelu_erfcs, gelu_erf.rewrite_found),
    ExportRewrite("zero_biases", zero_bias.find_zero_biases, zero_bias.drop_found),
    ExportRewrite("layer_norms", layer_norm.find_layer_norms, layer_norm.rewrite_found),
    ExportRewrite("sign_bits", sign_bit.find_sign_bit_tests, sign_bit.rewrite_found),
    ExportRewrite("affine_chains", affine_chains.find_chains, affine_chains.rewrite_found),
    ExportRewrite("reshaped_batch_norms", reshaped_batch_norm.find_sites, reshaped_batch_norm.fold_found),
    ExportRewrite("height_squeezes", height_squeezes.find_height_squeezes, height_squeezes.sink_found),
    ExportRewrite("switch_cases", switch_n.find_switch_ns, switch_n.rewrite_found),
    ExportRewrite("tensor_arrays", tensor_arrays.find_tensor_arrays, tensor_arrays.rewrite_found),
    ExportRewrite("list_element_shapes", list_element_shapes.find_unknown_rank_lists,
                  list_element_shapes.set_found_shapes),
)

# Op types no lowering handles but a rewrite above turns into ones that do.
EXPORTED_OP_TYPES = tensor_arrays.EXPORTED_OP_TYPES | switch_n.EXPORTED_OP_TYPES


def rewrite_for_export(graph: Graph, named: Collection[str] = ()) -> tuple[Graph, dict[str, int]]:
    """The graph to lower (a rewritten copy, or `graph` itself when nothing matches) and the
    number of sites each rewrite changed.  `named` ops (the caller's inputs and outputs) stay."""
    first = next((k for k, rewrite in enumerate(REWRITES) if rewrite.find(graph, named)), None)
    if first is None:
        return graph, {}
    copy = graph.clone()
    counts = {}
    for rewrite in REWRITES[first:]:  # found in the copy, after the rewrites before it changed it
        found = rewrite.find(copy, named)
        if found:
            rewrite.apply(copy, found, named)
            counts[rewrite.name] = len(found)
    return copy, counts
