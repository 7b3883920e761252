"""The compiled (fast) tier: binders that attach compiled kernels to instructions.

A binder is registered under the exact op name, like a reference kernel, and
is called once at method load with the instruction's values (same parameter
names as the reference kernel) and a ``BindContext``. It checks dtypes and
arguments, and returns ``ctx.bind(cfunc, words)`` (a compiled kernel plus its
argument block) or ``None`` to leave the instruction to the reference kernel.
Compiled kernels are Numba ``cfunc``s over the descriptor ABI
(``cython_ext.abi``), compiled on first use and cached on disk by Numba.

Kernel modules take Numba's names (``njit``, ``carray``, ``types``...) from
``kernels.fast.deferred``, never from ``numba``: Numba is imported only when a kernel
must compile or load through it, so a process whose kernels all come from the object
cache (``kernels.fast.objcache``) never pays for its import, and the reference tier
never imports this package.
"""
from __future__ import annotations

import importlib
import threading

from pyruntime.kernels.fast import binder_index

_BINDERS: dict = {}
_FALLBACKS: dict = {}
_DYNAMIC_INTS: set = set()


def register_fast(*names, fallback: bool = False, dynamic_ints: bool = False):
    """Register a binder under exact op names.

    One specialized binder per op; ``fallback=True`` registers a generic
    (any-dtype) binder that is tried when the specialized one declines or
    does not exist. ``dynamic_ints=True`` says the binder accepts
    ``context.IntSlot`` arguments (Ints computed at run time) and reads them
    through ``ctx.int_ref``; other binders only ever see load-time constants.
    """
    def deco(fn):
        table = _FALLBACKS if fallback else _BINDERS
        for n in names:
            if n in table:
                raise ValueError(f"fast binder {n!r} registered twice")
            table[n] = fn
            if dynamic_ints and not fallback:
                _DYNAMIC_INTS.add(n)
        return fn
    return deco


def dynamic_binder(name: str):
    """The binder to call when some Int arguments are computed at run time: the
    specialized binder if it accepts ``IntSlot``s (fallbacks never see them), else None."""
    _import_for(name)
    return _BINDERS[name] if name in _DYNAMIC_INTS else None


def _chain(first, second):
    def binder(ctx, *values):
        r = first(ctx, *values)
        return second(ctx, *values) if r is None else r
    binder.__name__ = first.__name__
    return binder


def kernel_modules() -> list[str]:
    """Every module holding binders: each family's ``typed*`` (typed hot paths) and
    ``generic*`` (one kernel per family for every dtype) modules."""
    from pyruntime.kernels import family_modules

    return family_modules("fast")


_loaded = False
_load_lock = threading.RLock()
_index = None  # binder_index's record: op -> modules to import (False: none usable)
_ready: set = set()  # ops whose modules are imported


def _registered() -> set:
    """(table, op) pairs: an op may have a specialized binder and a fallback, each
    registered by its own module."""
    return {("s", n) for n in _BINDERS} | {("f", n) for n in _FALLBACKS}


def _load_binders():
    # as kernels.registry: the flag is set after every module registered, under a lock
    global _loaded
    with _load_lock:
        if _loaded:
            return
        modules = kernel_modules()
        clean = not _registered()  # nothing imported yet: every registration is seen below
        index = {}
        for name in modules:
            before = _registered()
            importlib.import_module(name)
            for op in sorted({op for _, op in _registered() - before}):
                index.setdefault(op, []).append(name)
        _loaded = True
        if clean and set(index) == {op for _, op in _registered()}:
            binder_index.write(index)


def _import_for(name: str) -> None:
    """Import the modules that register binders for ``name`` (all of them for "")."""
    global _index
    if _loaded or name in _ready:
        return
    with _load_lock:
        if _index is None:
            _index = binder_index.read() or False
        if not _index or not name:
            _load_binders()
            return
        for mod in _index.get(name, ()):  # an op not in the record has no binder
            importlib.import_module(mod)
        _ready.add(name)


def get_binder(name: str):
    """The binder for op ``name`` (None: the op stays on the reference tier); "" imports
    every binder module."""
    _import_for(name)
    first, second = _BINDERS.get(name), _FALLBACKS.get(name)
    if first is None or second is None:
        return first or second
    return _chain(first, second)


def fast_names() -> list[str]:
    get_binder("")
    return sorted(set(_BINDERS) | set(_FALLBACKS))
