"""NumPy reference kernels for TensorFlow inference ops.

Importing the package imports every kernel module in it (as `compiler.passes`
does for passes), so a new module registers its kernels without editing any
list; `get_kernel(op_type)` then returns `fn(attrs, inputs) -> outputs`
matching TF's CPU semantics.
"""
import importlib
import pkgutil

from .registry import KERNELS, Kernel, KernelError, get_kernel, kernel

_HELPERS = frozenset({"registry", "common"})


def _import_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name not in _HELPERS:
            importlib.import_module(f"{__name__}.{info.name}")


_import_all()

__all__ = ["KERNELS", "Kernel", "KernelError", "get_kernel", "kernel"]
