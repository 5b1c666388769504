"""Calling a function when the application imports a module (a post-import hook).

A ``sys.meta_path`` finder, first on the path while any hook waits, finds a watched module's
spec through the finders after it and wraps its loader; once the module has executed, its hooks
run on the importing thread, each once. Nothing here raises into the application: a failing
hook is logged. With no hook left the finder takes itself off ``sys.meta_path``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

Hook = Callable[[], None]

_lock = threading.Lock()
_hooks: dict[str, list[Hook]] = {}  # module name -> hooks waiting for its import
_local = threading.local()  # .finding: the names this thread's finder is looking up


def when_imported(name: str, hook: Hook) -> None:
    """Call ``hook`` once the module ``name`` (dotted names too) is imported: now, when it is
    already, else right after it executes, on the thread that imports it."""
    with _lock:
        if name not in sys.modules:
            _hooks.setdefault(name, []).append(hook)
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
            if name not in sys.modules:
                return
            # imported by another thread between the two looks: its loader was not wrapped
            _hooks[name].remove(hook)
            _forget(name)
    _ready(name)
    _run(name, [hook])


def waiting() -> list[str]:
    """The modules whose hooks wait for their import."""
    with _lock:
        return sorted(_hooks)


def _forget(name: str) -> None:
    """(under _lock) drop ``name`` when no hook is left, and the finder when no module is."""
    if not _hooks.get(name, True):
        del _hooks[name]
    if not _hooks and _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def _ready(name: str) -> None:
    """Wait until another thread that is executing the module has finished."""
    try:
        importlib.import_module(name)
    except Exception:
        log.debug("%s not importable", name, exc_info=True)


def _run(name: str, hooks: Sequence[Hook]) -> None:
    for hook in hooks:
        try:
            hook()
        except Exception as e:
            log.warning("after the import of %s: %s", name, e)


def _fire(name: str) -> None:
    with _lock:
        hooks = _hooks.pop(name, [])
        _forget(name)
    _run(name, hooks)


class _Loader(importlib.abc.Loader):
    """The module's own loader, with the hooks run after it executes the module."""

    def __init__(self, loader: Any, name: str) -> None:
        self.loader = loader
        self.name = name

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        # the module sees its own loader (resources, pkgutil, reloads), as without the hook
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _fire(self.name)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.loader, attribute)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the watched modules; finds nothing itself."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in _hooks:
            return None
        finding: set[str] | None = getattr(_local, "finding", None)
        if finding is None:
            finding = _local.finding = set()
        if fullname in finding:
            return None  # a finder after this one looks the name up again
        finding.add(fullname)
        try:
            spec = self._find(fullname, path, target)
        finally:
            finding.discard(fullname)
        if spec is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, fullname)
        return spec

    def _find(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def invalidate_caches(self) -> None:
        pass


_FINDER = _Finder()
