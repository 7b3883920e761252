"""Getting a compiled kernel: from this process, from the on-disk caches, or by compiling it.

A kernel is looked up in this process, then in the object cache
(``kernels.fast.objcache``: its machine code linked with llvmlite alone, about 2 ms),
then among the kernels shipped with the package (``kernels.fast.shipped``, the same way),
then in Numba's cache (the first load in a process costs about 0.8 s of Numba set-up),
and only then compiled. Numba's path also writes the object cache, so the next process
takes the quick one.

Binders call ``lazy(fn)`` with a module-level kernel body. How a kernel that is not
in the on-disk cache yet is handled depends on the compile mode
(``$PYRUNTIME_COMPILE``, or ``set_compile_mode``):

* ``"sync"``: it compiles now, in this process (seconds to minutes per kernel);
* ``"background"`` (the default): ``lazy`` raises ``KernelNotReady`` instead; the
  fast tier then leaves that instruction to the reference kernel, has the kernel
  compiled by a background process (``kernels.fast.background.compile_detached``) and binds
  it once the cache has it (``FastPlan.poll``). A first run on a fresh machine takes
  seconds, not minutes; later runs speed up as the kernels arrive.

Numba itself is imported only on its path (``kernels.fast.deferred.materialize``): a
process whose kernels all come from the object cache never imports it.

This file holds no jitted code: it is left out of the kernels' cache keys.
"""
from __future__ import annotations

import ctypes
import os
import threading
import warnings
from contextlib import contextmanager

from pyruntime.kernels.fast import deferred, objcache, shipped

_OPTIONS = dict(nopython=True, nogil=True, error_model="numpy")
MODES = ("sync", "background")
_mode = None
_lock = threading.Lock()


class KernelNotReady(BaseException):
    """``lazy(fn)`` in background mode for a kernel the on-disk cache does not hold yet.

    A BaseException, so that binders' ``except Exception`` (a binder declines what it
    cannot bind) lets it through to the fast-tier planner, which defers the instruction."""

    def __init__(self, fn):
        super().__init__(f"{fn.__module__}.{fn.__name__} is not compiled yet")
        self.fn = fn

    @property
    def ref(self) -> tuple:
        return (self.fn.__module__, self.fn.__name__)


def compile_mode() -> str:
    if _mode is not None:
        return _mode
    m = os.environ.get("PYRUNTIME_COMPILE", "").strip().lower()
    return m if m in MODES else "background"


def set_compile_mode(mode: str | None) -> None:
    """``"sync"``, ``"background"``, or None (back to ``$PYRUNTIME_COMPILE``)."""
    global _mode
    if mode is not None and mode not in MODES:
        raise ValueError(f"compile mode must be one of {MODES} or None, got {mode!r}")
    _mode = mode


def kernel_sig():
    """A kernel's Numba signature: ``int64(int64*)`` (imports Numba)."""
    from numba import types

    return types.int64(types.CPointer(types.int64))


def _numba_ready(py_fn):
    """Numba imported, every deferred object real, ``py_fn``'s closure included."""
    deferred.materialize()
    deferred.patch(py_fn)


def compile_kernel(py_fn):
    """The kernel for a module-level kernel body: from a cache, else compiled now (and
    kept in both on-disk caches)."""
    c = load_cached(py_fn)
    if c is not None:
        return c
    _numba_ready(py_fn)
    from numba import cfunc
    from numba.core.errors import NumbaIRAssumptionWarning

    # error_model="numpy": x / 0.0 gives inf/nan as in ATen instead of raising
    # (a Python exception cannot be raised from a kernel running without the GIL).
    with warnings.catch_warnings():
        # Numba's inliner notes a variable of an inlined overload's lambda (``nb.cast_like``)
        # leaving scope: about its own IR, nothing about the kernel
        warnings.simplefilter("ignore", NumbaIRAssumptionWarning)
        res = cfunc(kernel_sig(), cache=True, **_OPTIONS)(py_fn)
    try:
        obj = res._library.serialize_using_object_code()[2][0]
        magic = res._library.codegen.magic_tuple()
    except (AttributeError, ValueError, RuntimeError, IndexError, TypeError):
        return res  # another Numba's internals: no object to keep
    objcache.save(py_fn, obj, res._wrapper_name, magic)
    return res


def load_cached(py_fn):
    """The kernel for ``py_fn`` from the object cache (``kernels.fast.objcache``: no Numba
    machinery), the kernels shipped with the package (``kernels.fast.shipped``) or Numba's
    cache, or None; never compiles."""
    c = objcache.load(py_fn)
    if c is None:
        c = shipped.load(py_fn)
    return c if c is not None else _load_numba_cached(py_fn)


def _load_numba_cached(py_fn):
    """What ``numba.cfunc(..., cache=True)`` does up to its cache lookup (Numba has no
    public call for "load, but do not compile"), keeping the object code it reads for
    the object cache."""
    _numba_ready(py_fn)
    from numba import cfunc
    from numba.core import sigutils
    from numba.core.ccallback import CFunc
    from numba.core.compiler_lock import global_compiler_lock

    try:
        res = CFunc(py_fn, sigutils.normalize_signature(kernel_sig()), locals={},
                    options=dict(_OPTIONS))
        res.enable_caching()
        with global_compiler_lock:
            codegen = res._targetdescr.target_context.codegen()
            objects = []

            def unserialize(state, _real=codegen.unserialize_library):
                if state[1] == "object":  # (name, "object", (object code, bitcode))
                    objects.append(state[2][0])
                return _real(state)

            codegen.unserialize_library = unserialize  # this call only: the lock is held
            try:
                cres = res._cache.load_overload(res._sig, res._targetdescr.target_context)
            finally:
                del codegen.unserialize_library
            if cres is None:
                return None
            res._cache_hits += 1
            res._library = cres.library
            res._wrapper_name = cres.fndesc.llvm_cfunc_wrapper_name
            res._wrapper_address = res._library.get_pointer_to_function(res._wrapper_name)
            magic = codegen.magic_tuple()
        if len(objects) == 1:
            objcache.save(py_fn, objects[0], res._wrapper_name, magic)
        return res
    except AttributeError:  # another Numba's internals: compiling is always right
        return cfunc(kernel_sig(), cache=True, **_OPTIONS)(py_fn)


_COMPILED: dict = {}
_recorded = None  # {KernelRef: None} while ``recording()`` runs
_STUB_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
_STUB = _STUB_TYPE(lambda p: 0x10)  # NotSupported, if a recorded load ever ran a kernel


class _Stub:
    address = ctypes.cast(_STUB, ctypes.c_void_p).value


@contextmanager
def recording():
    """Within it, ``lazy`` compiles nothing: it records each kernel asked for, as
    ``(module, name)`` in the dict this yields, and hands back a stub (a kernel that
    returns NotSupported), so a load binds every instruction without compiling (what
    ``pyruntime warmup`` does to find a program's kernels). One at a time per process.

    >>> # with recording() as seen: program.load_method("forward")   # list(seen)
    """
    global _recorded
    with _lock:
        if _recorded is not None:
            raise RuntimeError("pyruntime.kernels.fast.jit.recording() is already active")
        _recorded = {}
    try:
        yield _recorded
    finally:
        _recorded = None


def lazy(py_fn):
    """The compiled kernel for ``py_fn`` (see the module doc): binders call ``lazy(fn)``."""
    if _recorded is not None:
        _recorded[(py_fn.__module__, py_fn.__name__)] = None
        return _Stub
    c = _COMPILED.get(py_fn)
    if c is not None:
        return c
    if compile_mode() == "background":
        c = load_cached(py_fn)
        if c is None:
            raise KernelNotReady(py_fn)
        return _keep(py_fn, c)
    return compile_now(py_fn)


def is_ready(py_fn) -> bool:
    """Whether ``lazy(py_fn)`` would return at once (it loads the kernel if it can)."""
    if py_fn in _COMPILED:
        return True
    try:
        c = load_cached(py_fn)
    except Exception:  # noqa: BLE001 - a cache that cannot be read: not ready
        return False
    return c is not None and _keep(py_fn, c) is not None


def compile_now(py_fn):
    """Compile ``py_fn`` in this process whatever the mode (or take it from the cache)."""
    return _keep(py_fn, compile_kernel(py_fn))


def _keep(py_fn, c):
    """The kernel this process keeps for ``py_fn``: the first one stored wins."""
    with _lock:
        return _COMPILED.setdefault(py_fn, c)
