"""Load and save models by file suffix, with atomic writes.

`.pb` is binary GraphDef, `.pbtxt` text GraphDef, `.ir` gttc's textual IR,
`.onnx` an ONNX model (which also needs the graph's inputs and outputs).
Writes go to a temporary file in the target's folder and are renamed into
place, so a failed run never leaves a partial output, and never overwrite
the input.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from compiler.errors import InputError
from compiler.frontends.graphdef import load_graph
from compiler.ir.graph import Graph

if TYPE_CHECKING:
    from compiler.backends.onnx import ExportReport

IR_SUFFIX = ".ir"
ONNX_SUFFIX = ".onnx"
GRAPHDEF_TEXT_SUFFIXES = (".pbtxt", ".pbtext", ".prototxt")


def load_model(path: str | Path) -> Graph:
    """Read a GraphDef (binary or text) or a textual IR file."""
    if str(path).endswith(IR_SUFFIX):
        from compiler.ir.parser import parse_graph

        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: cannot read textual IR ({err})") from None
        return parse_graph(text, str(path))
    return load_graph(path)


def output_format(path: str | Path) -> str:
    """`graphdef`, `graphdef-text`, `ir` or `onnx`, from the suffix."""
    name = str(path).lower()
    if name.endswith(ONNX_SUFFIX):
        return "onnx"
    if name.endswith(IR_SUFFIX):
        return "ir"
    if name.endswith(GRAPHDEF_TEXT_SUFFIXES):
        return "graphdef-text"
    return "graphdef"


def serialize(graph: Graph, fmt: str) -> bytes:
    if fmt == "ir":
        from compiler.ir.printer import print_graph

        return print_graph(graph).encode("utf-8")
    from compiler.backends.graphdef import emit_graphdef_bytes, emit_graphdef_text

    if fmt == "graphdef-text":
        return emit_graphdef_text(graph).encode("utf-8")
    return emit_graphdef_bytes(graph)


def check_output_path(out: str | Path, inputs: list[str | Path]) -> None:
    """Refuse outputs that would overwrite an input or land in a missing folder."""
    target = Path(out)
    for src in inputs:
        if target.exists() and Path(src).exists() and os.path.samefile(target, src):
            raise InputError(f"{out}: refusing to overwrite the input file")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{out}: folder '{parent}' does not exist")


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file and a rename.

    The file gets the permissions a plain `open(path, "w")` would give it
    (0666 less the umask), not the temporary file's private 0600.
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_model(graph: Graph, path: str | Path, writer: Callable[[str | Path, bytes], None] = write_atomic) -> int:
    """Serialize a GraphDef or IR file by suffix and write atomically; returns the byte count."""
    data = serialize(graph, output_format(path))
    writer(path, data)
    return len(data)


# How an eight-bit graph is written to ONNX (compiler/backends/onnx/qoperator.py):
# - qlinear: ONNX's own integer operators (QLinearConv, QLinearMatMul, eight-bit MaxPool...)
#   where a group has one, QuantizeLinear/DequantizeLinear around the float op elsewhere;
# - qdq: QuantizeLinear/DequantizeLinear around every float op, for runtimes that fuse
#   groups themselves (TensorRT, onnxruntime's own quantization tools);
# - qoperator: qlinear plus onnxruntime's com.microsoft operators (QLinearAdd, QGemm...).
ONNX_QUANT_FORMATS = ("qlinear", "qdq", "qoperator")
DEFAULT_QUANT_FORMAT = "qlinear"


def serialize_onnx(graph: Graph, inputs: Sequence[str], outputs: Sequence[str],
                   opset: Optional[int] = None, quant_format: str = DEFAULT_QUANT_FORMAT) -> tuple[bytes, "ExportReport"]:
    """ONNX model bytes (default opset unless given) and the export report; `quant_format`
    is one of ONNX_QUANT_FORMATS."""
    from compiler.backends.onnx import DEFAULT_OPSET, export_with_report

    result = export_with_report(graph, inputs, outputs, opset or DEFAULT_OPSET, quant_format=quant_format)
    return result.model.SerializeToString(), result.report
