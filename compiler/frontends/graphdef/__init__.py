"""GraphDef frontend: binary or text GraphDef -> IR."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from compiler.frontends.graphdef.lower import lower_graphdef
from compiler.frontends.graphdef.reader import parse_graphdef, read_graphdef_file
from compiler.ir.graph import Graph
from compiler.ir.signatures import check_signatures


def import_graphdef(graph_def: Any, where: str = "<graph>") -> Graph:
    """Lower a GraphDef message, refusing ops that do not match their OpDef (as TF's importer does)."""
    graph = lower_graphdef(graph_def, where)
    check_signatures(graph, where)
    return graph


def load_graph(path: str | Path) -> Graph:
    """Read and import a GraphDef file."""
    return import_graphdef(read_graphdef_file(path), str(path))


def load_graph_bytes(data: bytes, where: str = "<bytes>") -> Graph:
    return import_graphdef(parse_graphdef(data, where), where)


__all__ = ["import_graphdef", "load_graph", "load_graph_bytes", "lower_graphdef", "parse_graphdef",
           "read_graphdef_file"]
