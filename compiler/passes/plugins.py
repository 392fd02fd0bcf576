"""Passes from outside the package: plugin files, importable modules and installed entry points.

A plugin is Python code that defines `Pass` subclasses and registers them with
`@register_pass`, exactly as the built-in passes do.  It is loaded from

* a file or an importable module named by `gttc --load-passes=PATH_OR_MODULE`
  (or `load_passes` in Python), or
* an installed package that declares an entry point in the `gttc.passes`
  group; its target is a module (imported for its registrations) or a Pass
  subclass (registered here).  Installed plugins load on first use, with no flag.

Loading is all or nothing: a plugin that fails to import, registers nothing,
or takes a name already taken leaves the registry as it was and raises a
one-line PluginError naming the plugin.  Each loaded pass keeps its origin
(`Pass.origin`), so the pass manager can blame the plugin when its pass
crashes or leaves invalid IR.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterable, Optional

from compiler.errors import PluginError
from compiler.passes.base import PASS_REGISTRY, Pass, PassRegistrationError, register_pass

ENTRY_POINT_GROUP = "gttc.passes"

# Resolved plugin key (file path or module name) -> the passes it registered, to load each once.
_LOADED: dict[str, tuple[str, ...]] = {}
_installed_loaded = False
_GTTC_DIR = str(Path(__file__).resolve().parents[1])


def load_passes(spec: str) -> list[str]:
    """Load one plugin given as a path to a .py file or a module name; returns the pass names it registered."""
    path = Path(spec)
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise PluginError(f"plugin {spec}: no such file")
        key = str(path.resolve())
        origin = f"plugin {spec}"
        importer: Callable[[], object] = lambda: _import_file(path.resolve())
    else:
        key, origin = spec, f"plugin module {spec}"
        importer = lambda: importlib.import_module(spec)
    return _load(key, origin, importer)


def load_installed_plugins() -> list[str]:
    """Load every `gttc.passes` entry point once per process; returns the pass names they registered."""
    global _installed_loaded
    if _installed_loaded:
        return []
    _installed_loaded = True
    names: list[str] = []
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        dist = getattr(entry, "dist", None)
        where = f" of {dist.name}" if dist is not None else ""
        origin = f"entry point '{entry.name} = {entry.value}'{where}"
        names += _load(f"entry-point:{entry.name}={entry.value}", origin, lambda e=entry: _register_target(e.load()))
    return names


def _load(key: str, origin: str, importer: Callable[[], object]) -> list[str]:
    cached = _LOADED.get(key)
    if cached is not None and all(getattr(PASS_REGISTRY.get(n), "origin", None) == origin for n in cached):
        return list(cached)
    before = dict(PASS_REGISTRY)
    try:
        importer()
        added = [name for name, cls in PASS_REGISTRY.items() if before.get(name) is not cls]
        if not added:
            raise PluginError(f"{origin}: registers no passes (decorate Pass subclasses with @register_pass)")
    except BaseException as err:  # noqa: BLE001 - plugin code may fail in any way, even sys.exit
        PASS_REGISTRY.clear()
        PASS_REGISTRY.update(before)
        if isinstance(err, PluginError):
            raise
        raise PluginError(f"{origin}: {describe_plugin_error(err)}") from None
    for name in added:
        PASS_REGISTRY[name].origin = origin
    _LOADED[key] = tuple(added)
    return added


def _import_file(path: Path) -> ModuleType:
    """Import a plugin file under a private module name derived from its path (stable within a process)."""
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    module_name = f"gttc_plugin_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"plugin {path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def _register_target(target: object) -> None:
    """An entry point names a module (already imported by load()) or a Pass subclass."""
    if isinstance(target, ModuleType):
        return
    if isinstance(target, type) and issubclass(target, Pass):
        register_pass(target)
        return
    raise TypeError(f"the target {target!r} is neither a module nor a Pass subclass")


def describe_plugin_error(err: BaseException) -> str:
    """One line: the error and, for plugin code, the plugin's own line that raised it."""
    if isinstance(err, SyntaxError):
        return f"SyntaxError: {err.msg} (line {err.lineno})"
    message = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if isinstance(err, PassRegistrationError):  # already a sentence about the plugin's passes
        text = message
    else:
        text = f"{type(err).__name__}: {message}" if message else type(err).__name__
    frame = _last_plugin_frame(err)
    return f"{text} (line {frame})" if frame else text


def _last_plugin_frame(err: BaseException) -> Optional[int]:
    """Line number of the innermost traceback frame outside gttc and the import machinery."""
    lines = [f.lineno for f in traceback.extract_tb(err.__traceback__)
             if not f.filename.startswith(_GTTC_DIR) and "importlib" not in f.filename and f.lineno]
    return lines[-1] if lines else None


def load_all(specs: Iterable[str]) -> list[str]:
    """Installed plugins first, then each spec in order; the pass names they registered."""
    names = load_installed_plugins()
    for spec in dict.fromkeys(specs):
        names += load_passes(spec)
    return names


__all__ = ["ENTRY_POINT_GROUP", "describe_plugin_error", "load_all", "load_installed_plugins", "load_passes"]
