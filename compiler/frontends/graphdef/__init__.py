"""GraphDef frontend: binary or text GraphDef -> IR."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from compiler.frontends.graphdef.lower import lower_graphdef
from compiler.frontends.graphdef.reader import parse_graphdef, parse_graphdef_source, read_graphdef_file
from compiler.ir.graph import Graph
from compiler.ir.signatures import check_signatures


def import_graphdef(graph_def: Any, where: str = "<graph>", encoded: Optional[bytes] = None) -> Graph:
    """Lower a GraphDef message, refusing ops that do not match their OpDef (as TF's importer does);
    `encoded` is the binary it was parsed from, if any (see `lower_graphdef`)."""
    graph = lower_graphdef(graph_def, where, encoded)
    check_signatures(graph, where)
    return graph


def load_graph(path: str | Path) -> Graph:
    """Read and import a GraphDef file.  Its bytes are dropped once parsed: keeping them to reuse
    large tensors' encodings would hold a second copy of the model for the whole compile."""
    return import_graphdef(read_graphdef_file(path), str(path))


def load_graph_bytes(data: bytes, where: str = "<bytes>") -> Graph:
    """Parse and import `data`, which the caller holds anyway: large tensors are reused from it."""
    graph_def, encoded = parse_graphdef_source(data, where)
    return import_graphdef(graph_def, where, encoded)


__all__ = ["import_graphdef", "load_graph", "load_graph_bytes", "lower_graphdef", "parse_graphdef",
           "read_graphdef_file"]
