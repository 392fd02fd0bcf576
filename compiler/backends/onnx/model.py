"""Assemble the finished graph into a ModelProto, infer shapes, and run the full checker."""
from __future__ import annotations

from typing import Iterable, Iterator, Optional, Sequence

import onnx
from onnx import helper

from compiler import __version__
from compiler.backends.onnx.builder import GraphBuilder, node_reads
from compiler.backends.onnx.errors import OnnxExportError
from compiler.backends.onnx.report import node_bodies
from compiler.limits import ResourceLimitError


# Other domains' opset versions, for nodes that use them (CategoryMapper: ai.onnx.ml).
DOMAIN_VERSIONS = {"ai.onnx.ml": 3}


def assemble(builder: GraphBuilder, name: str) -> onnx.ModelProto:
    """The model around `builder`'s graph, holding only initializers something reads."""
    used = set().union(*(node_reads(n) for n in builder.nodes)) if builder.nodes else set()
    used |= {o.name for o in builder.outputs}
    graph = builder.to_proto(name, builder.scope.initializer_protos(used))
    opsets = [helper.make_opsetid("", builder.scope.opset)]
    opsets += [helper.make_opsetid(domain, DOMAIN_VERSIONS[domain])
               for domain in sorted({node.domain for node in builder.iter_nodes() if node.domain})]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="gttc", producer_version=__version__)
    model.ir_version = helper.find_min_ir_version_for(opsets)
    return model


def finalize(model: onnx.ModelProto, check: bool = True, propagate_data: bool = True) -> onnx.ModelProto:
    """Complete value_info with ONNX's own inference (strict: a clash is our bug) and check.

    Inference also follows the values of shape-like vectors unless `propagate_data` is false (the
    exporter's static shapes show a long 1-D tensor) or inference without it finds one: ONNX would
    spell out every element of such a vector.
    """
    inferred = _inferred(model, propagate_data=False)
    if propagate_data and not long_vector(_stated_dims(inferred.graph)):
        inferred = _inferred(model, propagate_data=True)
    _forget_invented_symbols(inferred.graph, set(_symbols(model.graph)))
    if check:
        try:
            onnx.checker.check_model(inferred, full_check=True)
        except onnx.checker.ValidationError as err:
            raise OnnxExportError(f"exported model fails the ONNX checker: {err}") from None
    return inferred


def _inferred(model: onnx.ModelProto, propagate_data: bool) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=propagate_data)
    except (onnx.shape_inference.InferenceError, ValueError) as err:  # ValueError: an undefined element type
        raise OnnxExportError(f"exported model fails ONNX shape inference: {err}") from None
    except MemoryError:  # data propagation spells out shape vectors, which huge stated dims make huge
        raise ResourceLimitError("ONNX shape inference ran out of memory on the exported model (a stated "
                                 "dimension too large to spell out)") from None


def _forget_invented_symbols(graph: onnx.GraphProto, declared: set[str]) -> None:
    """Make the dims ONNX's inference named (`unk__N`, one name per unknown dim) in value_info
    unnamed again, in `graph` and its subgraphs; the exporter's own names (`declared`: an input's
    `x_dim0`, which inference carries to every tensor of that batch) stay.  onnxruntime tracks
    every named dim, and the invented names cost it time on each run of a model with dynamic
    shapes: BERT over a dynamic batch and length 9%, GPT-2 4.6%, mtcnn's P-Net 2%."""
    for info in graph.value_info:
        for dim in info.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param not in declared:
                dim.ClearField("dim_param")
    for sub in _subgraphs(graph):
        _forget_invented_symbols(sub, declared)


def _symbols(graph: onnx.GraphProto) -> Iterator[str]:
    """Every dim name stated in `graph` and its subgraphs."""
    for info in [*graph.input, *graph.value_info, *graph.output]:
        for dim in info.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                yield dim.dim_param
    for sub in _subgraphs(graph):
        yield from _symbols(sub)


def _subgraphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    for node in graph.node:
        yield from node_bodies(node)


def _stated_dims(graph: onnx.GraphProto) -> Iterator[Optional[list[Optional[int]]]]:
    """The stated dims of every typed tensor of `graph` and its subgraphs (None where the rank is
    unknown): a loop body's 1-D slice of a huge input is as long as the input's dimension."""
    for info in [*graph.input, *graph.value_info, *graph.output]:
        tensor = info.type.tensor_type
        if tensor.HasField("shape"):
            yield [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
    for sub in _subgraphs(graph):
        yield from _stated_dims(sub)


# A shape or index vector is never this long; ONNX's data propagation would hold one entry per element
# of a 1-D tensor it follows (a Cast of 2^31 drawn numbers took 24 GiB).
LONG_VECTOR = 1 << 16


def long_vector(dims: Iterable[Optional[Sequence[Optional[int]]]]) -> bool:
    """Whether any of these shapes is 1-D and longer than LONG_VECTOR."""
    return any(d is not None and len(d) == 1 and d[0] is not None and d[0] > LONG_VECTOR for d in dims)
