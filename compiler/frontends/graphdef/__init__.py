"""GraphDef frontend: binary or text GraphDef -> IR."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from compiler.frontends.graphdef.lower import lower_graphdef
from compiler.frontends.graphdef.reader import (
    parse_graphdef, parse_graphdef_source, read_graphdef_file, read_graphdef_source,
)
from compiler.ir.graph import Graph
from compiler.ir.signatures import check_signatures


def import_graphdef(graph_def: Any, where: str = "<graph>", encoded: Optional[bytes] = None) -> Graph:
    """Lower a GraphDef message, refusing ops that do not match their OpDef (as TF's importer does);
    `encoded` is the binary it was parsed from, if any (see `lower_graphdef`)."""
    graph = lower_graphdef(graph_def, where, encoded)
    check_signatures(graph, where)
    return graph


def load_graph(path: str | Path) -> Graph:
    """Read and import a GraphDef file."""
    graph_def, encoded = read_graphdef_source(path)
    return import_graphdef(graph_def, str(path), encoded)


def load_graph_bytes(data: bytes, where: str = "<bytes>") -> Graph:
    graph_def, encoded = parse_graphdef_source(data, where)
    return import_graphdef(graph_def, where, encoded)


__all__ = ["import_graphdef", "load_graph", "load_graph_bytes", "lower_graphdef", "parse_graphdef",
           "read_graphdef_file"]
