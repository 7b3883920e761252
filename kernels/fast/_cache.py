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

import functools
import hashlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the folder holding kernels/ and cython_ext/
_PACKAGES = ("kernels", "cython_ext")
# `from a.b import c, d`, `from a.b import (c,\n d)`, `import a.b`, at any indent; a name
# list never runs into the next line unless parenthesized
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[\w \t,]+)"
                     r"|import[ \t]+([\w.]+))", re.MULTILINE)
# Options every ``njit`` function gets unless it names them (``deferred.njit``), part of
# every kernel's key. IEEE division, as the kernels' cfuncs (``kernels.fast.jit``) and the
# C++ loops have: with Numba's default ("python") a float division checks its divisor and
# raises, and that check keeps LLVM from vectorizing the loop around it (a fast-math gelu
# ran 5x slower).
NJIT_DEFAULTS = {"error_model": "numpy"}
# Project files that hold no code a kernel compiles (the binder registry, the argument
# block builder, this locator): followed for their imports, left out of the hash, so
# editing them recompiles nothing. Keep it so: a jitted helper belongs in another file.
CACHED_DIRS = ("kernels", "delegates")  # whose compiled functions are cached here
_NOT_COMPILED = frozenset({"kernels/fast/__init__.py", "kernels/fast/_cache.py",
                           "kernels/fast/context.py", "kernels/fast/jit.py",
                           "kernels/fast/objcache.py", "kernels/fast/binder_index.py",
                           "kernels/fast/deferred.py", "kernels/fast/shipped.py"})


# Project files whose compiled code also depends on this process, not on sources alone:
# what each one's key adds (``kernels.libm`` compiles glibc's expf and part of its erff in,
# as the C library here computes them: see ``kernels.libm_variant``)
def _libm_tag() -> bytes:
    from pyruntime.kernels.libm_variant import tag

    return tag().encode()


_HOST_TAGS = {"kernels/libm.py": _libm_tag}


def cache_root() -> str:
    root = os.environ.get("PYRUNTIME_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyruntime")
    return os.path.join(root, "numba")


def _module_file(name: str) -> Path | None:
    name = name.removeprefix("pyruntime.")  # the installed name: the folders sit in pyruntime
    if name.split(".")[0] not in _PACKAGES:
        return None
    p = ROOT.joinpath(*name.split("."))
    for f in (p.with_suffix(".py"), p / "__init__.py"):
        if f.is_file():
            return f
    return None


_SOURCES: dict = {}  # path -> bytes, read once per process
_IMPORTED: dict = {}  # path -> frozenset of project files it imports


def _source(path: Path) -> bytes:
    b = _SOURCES.get(path)
    if b is None:
        b = _SOURCES[path] = path.read_bytes()
    return b


def _imports(path: Path) -> set:
    """Project module files ``path`` imports (``from a.b import c`` may name module c)."""
    got = _IMPORTED.get(path)
    if got is None:
        got = _IMPORTED[path] = frozenset(_scan_imports(path))
    return set(got)


def _scan_imports(path: Path) -> set:
    out = set()
    for frm, names, plain in _IMPORT.findall(_source(path).decode()):
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


@functools.cache
def numba_version() -> str:
    """Numba's version, without importing it (its import is what a cached load avoids):
    from the version file its release wheels carry (importlib.metadata's first call costs
    a process about 20 ms of imports and a scan of sys.path), else from its metadata."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("numba")  # locates the package, imports nothing
        text = Path(spec.origin).with_name("_version.py").read_text()
        found = re.search(r'"version":\s*"([^"]+)"', text)
        if found:
            return found.group(1)
    except (AttributeError, ImportError, OSError, TypeError, ValueError):
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba")
    except PackageNotFoundError:  # a source checkout on sys.path
        import numba

        return numba.__version__


def cache_name(path: Path) -> str:
    """A kernel file's cache folder name before its key: its folder and stem
    (``complex.typed``, ``fast.gemm``), since every family folder has a ``typed.py``."""
    return f"{path.parent.name}.{path.stem}"


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
        h = hashlib.sha256(numba_version().encode())
        h.update(repr(sorted(NJIT_DEFAULTS.items())).encode())
        for f in sorted(seen):
            rel = f.relative_to(ROOT).as_posix()
            if rel not in _NOT_COMPILED:
                h.update(rel.encode())
                h.update(_source(f))
                if rel in _HOST_TAGS:
                    h.update(_HOST_TAGS[rel]())
        key = _KEYS[path] = h.hexdigest()[:16]
    return key


def install() -> None:
    """Make Numba look up kernels/ and delegates/ functions with ``KernelCacheLocator``
    first (imports
    Numba: ``kernels.fast.deferred.materialize`` calls it)."""
    from numba.core.caching import CacheImpl

    if locator_class() not in CacheImpl._locator_classes:
        CacheImpl._locator_classes.insert(0, locator_class())
    if not any(isinstance(f, _ArraymathWithoutScipy) for f in sys.meta_path):
        sys.meta_path.insert(0, _ArraymathWithoutScipy())


@functools.cache
def locator_class():
    """``KernelCacheLocator``, Numba's cache locator for functions defined in ``kernels/``
    and ``delegates/`` (the class is made on first use: it subclasses one of Numba's)."""
    from numba.core.caching import _CacheLocator

    class KernelCacheLocator(_CacheLocator):
        """Numba cache locator for functions defined in ``kernels/`` and ``delegates/`` (see
        the module doc)."""

        def __init__(self, py_func, py_file):
            self._lineno = py_func.__code__.co_firstlineno
            self._py_file = py_file  # numba's warning for an uncachable function reads it
            path = Path(py_file)
            self._key = source_key(path)
            self._path = os.path.join(cache_root(), f"{cache_name(path)}-{self._key}")

        def get_cache_path(self):
            return self._path

        def get_source_stamp(self):
            return self._key

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            try:  # kernels/ and the delegates' compiled entries (as objcache.path_for)
                src = Path(py_file).resolve()
                if not any(src.is_relative_to(ROOT / d) for d in CACHED_DIRS):
                    return None
            except (OSError, ValueError):
                return None
            self = cls(py_func, py_file)
            try:
                self.ensure_cache_path()
            except OSError:
                return None
            return self

    return KernelCacheLocator


class _ArraymathWithoutScipy(importlib.abc.MetaPathFinder):
    """Imports ``numba.np.arraymath`` with ``scipy.linalg`` hidden, unless it is loaded.

    Numba imports that module when its first function compiles or loads from Numba's
    cache (a process that links every kernel from ``kernels.fast.objcache`` never does),
    and it probes for BLAS by importing ``scipy.linalg`` (0.3-1 s: half the cost of a
    process's first cached-kernel load). Our kernels call BLAS through their own
    function pointers (``kernels.fast.blas``), never through numba's ``np.dot``.
    The probe's only effect is ``np.convolve``/``np.correlate`` in jitted code using
    a plain loop instead of ``np.dot``; ``np.dot`` itself still finds scipy when
    someone compiles it (Numba checks again then). ``PYRUNTIME_NUMBA_SCIPY=1`` keeps
    the probe."""

    NAME = "numba.np.arraymath"

    def find_spec(self, name, path, target=None):
        if name != self.NAME or "scipy.linalg" in sys.modules \
                or os.environ.get("PYRUNTIME_NUMBA_SCIPY") == "1":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _HidingLoader(spec.loader)
        return spec


class _HidingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        sys.modules["scipy.linalg"] = None  # its import raises ImportError: no BLAS probe
        try:
            self._loader.exec_module(module)
        finally:
            if sys.modules.get("scipy.linalg", 0) is None:
                del sys.modules["scipy.linalg"]
