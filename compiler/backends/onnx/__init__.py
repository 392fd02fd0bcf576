"""ONNX backend: lower the IR to an ONNX model with layout propagation (NHWC -> NCHW).

    from compiler.backends.onnx import export, export_with_report
    model = export(graph, ["input"], ["Identity"], opset=17)
    result = export_with_report(graph, ["input"], ["Identity"])
    print(result.report.summary())

`compare_with_tf2onnx` (module `tf2onnx_compare`) converts the same graph
with tf2onnx; it imports TensorFlow lazily, this package never does.
"""
from compiler.backends.onnx.errors import OnnxExportError, UnsupportedOpError
from compiler.backends.onnx.exporter import ExportResult, export, export_with_report
from compiler.backends.onnx.opset import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET
from compiler.backends.onnx.qoperator import to_qoperator
from compiler.backends.onnx.registry import supported_op_types
from compiler.backends.onnx.report import ExportReport

__all__ = [
    "DEFAULT_OPSET", "MAX_OPSET", "MIN_OPSET", "ExportReport", "ExportResult", "OnnxExportError",
    "UnsupportedOpError", "export", "export_with_report", "supported_op_types", "to_qoperator",
]
