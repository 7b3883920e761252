"""Where Numba caches compiled kernels: one folder per kernel module, keyed by its sources.

Numba invalidates a cached function only when its own file changes, but our
kernels inline helpers from other modules (``nb``, the copy engine) and bake
in their constants. Each module's cache key is therefore a hash of its own
source and of every project module it imports, directly or through others:
an edited helper can never serve stale machine code, and an edit recompiles
only the modules that depend on it (not every kernel, as one key for the whole
tree would). The cache lives in ``$PYRUNTIME_CACHE`` (default
``~/.cache/pyruntime``), never in site-packages.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numba
from numba.core.caching import CacheImpl as _CacheImpl, _CacheLocator

_ROOT = Path(__file__).resolve().parents[2]  # the folder holding kernels/ and cython_ext/
_PACKAGES = ("kernels", "cython_ext")
_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+([\w\s,()]+)|import\s+([\w.]+))",
                     re.MULTILINE)


def cache_root() -> str:
    root = os.environ.get("PYRUNTIME_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyruntime")
    return os.path.join(root, "numba")


def _module_file(name: str) -> Path | None:
    if name.split(".")[0] not in _PACKAGES:
        return None
    p = _ROOT.joinpath(*name.split("."))
    for f in (p.with_suffix(".py"), p / "__init__.py"):
        if f.is_file():
            return f
    return None


def _imports(path: Path) -> set:
    """Project module files ``path`` imports (``from a.b import c`` may name module c)."""
    out = set()
    for frm, names, plain in _IMPORT.findall(path.read_text()):
        mod = frm or plain
        f = _module_file(mod)
        if f is not None:
            out.add(f)
        if frm:
            for n in re.split(r"[\s,()]+", names):
                sub = _module_file(f"{frm}.{n}") if n else None
                if sub is not None:
                    out.add(sub)
    return out


_KEYS: dict = {}


def source_key(path: Path) -> str:
    """Hash of ``path`` and of every project module reachable through its imports."""
    path = path.resolve()
    key = _KEYS.get(path)
    if key is None:
        seen, todo = set(), [path]
        while todo:
            f = todo.pop()
            if f not in seen:
                seen.add(f)
                todo += _imports(f) - seen
        h = hashlib.sha256(numba.__version__.encode())
        for f in sorted(seen):
            h.update(str(f.relative_to(_ROOT)).encode())
            h.update(f.read_bytes())
        key = _KEYS[path] = h.hexdigest()[:16]
    return key


class KernelCacheLocator(_CacheLocator):
    """Numba cache locator for functions defined in ``kernels/`` (see the module doc)."""

    def __init__(self, py_func, py_file):
        self._lineno = py_func.__code__.co_firstlineno
        path = Path(py_file)
        self._key = source_key(path)
        self._path = os.path.join(cache_root(), f"{path.stem}-{self._key}")

    def get_cache_path(self):
        return self._path

    def get_source_stamp(self):
        return self._key

    def get_disambiguator(self):
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file):
        try:
            inside = Path(py_file).resolve().is_relative_to(_ROOT / "kernels")
        except (OSError, ValueError):
            return None
        if not inside:
            return None
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self


def install() -> None:
    """Make Numba look up kernels/ functions with ``KernelCacheLocator`` first."""
    if KernelCacheLocator not in _CacheImpl._locator_classes:
        _CacheImpl._locator_classes.insert(0, KernelCacheLocator)
