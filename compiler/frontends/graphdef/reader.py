"""Read GraphDef files, binary or text, into protobuf messages.

Every failure becomes an InputError whose one line names the file and the
problem, so the command line can report it and exit with code 2.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from compiler.errors import InputError
from compiler.proto import graph_pb2

TEXT_SUFFIXES = (".pbtxt", ".pbtext", ".txt", ".prototxt")


def is_text_path(path: str | Path) -> bool:
    return str(path).lower().endswith(TEXT_SUFFIXES)


def read_graphdef_file(path: str | Path) -> graph_pb2.GraphDef:
    """Load `path`; the suffix picks text or binary, and either falls back to the other."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a GraphDef file") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    return parse_graphdef(data, str(path), text_first=is_text_path(p))


def parse_graphdef(data: bytes, where: str = "<bytes>", text_first: bool = False) -> graph_pb2.GraphDef:
    """Parse serialized bytes as a GraphDef, rejecting anything that is not one."""
    return parse_graphdef_source(data, where, text_first)[0]


def parse_graphdef_source(data: bytes, where: str = "<bytes>",
                          text_first: bool = False) -> tuple[graph_pb2.GraphDef, Optional[bytes]]:
    """`parse_graphdef`, and `data` itself when it parsed as binary (else None): the lowering then
    reuses large tensors' bytes from it."""
    if not data:
        raise InputError(f"{where}: empty file, not a GraphDef")
    attempts = (_parse_text, _parse_binary) if text_first else (_parse_binary, _parse_text)
    errors = []
    for attempt in attempts:
        try:
            graph = attempt(data)
        except (DecodeError, text_format.ParseError, UnicodeDecodeError, ValueError) as err:
            errors.append(str(err).splitlines()[0] if str(err) else type(err).__name__)
            continue
        if len(graph.node) == 0 and not graph.library.function:
            errors.append("it parses but holds no nodes")
            continue
        return graph, data if attempt is _parse_binary else None
    kind = "text" if text_first else "binary"
    raise InputError(f"{where}: not a valid {kind} GraphDef ({errors[0]})")


def _parse_binary(data: bytes) -> graph_pb2.GraphDef:
    return graph_pb2.GraphDef.FromString(data)


def _parse_text(data: bytes) -> graph_pb2.GraphDef:
    graph = graph_pb2.GraphDef()
    text_format.Parse(data.decode("utf-8"), graph)
    return graph
