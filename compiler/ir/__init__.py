"""gttc's SSA IR: a Graph of named Ops whose results are Values with use-lists.

The public mutation API (documented in docs/WRITING_PASSES.md) is the
methods of these classes: `Graph.create_op`, `erase_op`, `rename`,
`move_before`, `unique_name`; `Op.set_operand`, `add_control_dep`, `attr`;
`Value.replace_all_uses_with`, `uses`, `users`.  `verify` checks every
invariant the pass manager relies on.
"""
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, IRError, Op, Value
from compiler.ir.shapes import Shape
from compiler.ir.tensor import Tensor
from compiler.ir.verifier import verify

__all__ = ["DType", "Graph", "IRError", "Op", "Shape", "Tensor", "Value", "verify"]
