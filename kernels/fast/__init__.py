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
import sys
import threading

from pyruntime.kernels.fast import binder_index

_BINDERS: dict = {}
_DYNAMIC_INTS: set = set()


def register_fast(*names, dynamic_ints: bool = False):
    """Register a binder under exact op names: one binder per op.

    ``dynamic_ints=True`` says the binder accepts ``context.IntSlot`` arguments
    (Ints computed at run time) and reads them through ``ctx.int_ref``; other
    binders only ever see load-time constants. An op with both a typed and a
    generic kernel registers the binder that chooses between them
    (``register_choice``, in the family's ``choose.py``).
    """
    def deco(fn):
        for n in names:
            if n in _BINDERS:
                raise ValueError(f"fast binder {n!r} registered twice")
            _BINDERS[n] = fn
            if dynamic_ints:
                _DYNAMIC_INTS.add(n)
        return fn
    return deco


def register_choice(name: str, typed, generic, dynamic_ints: bool = False):
    """Register op ``name``'s binder: ``typed`` (the hot dtypes and layouts) where it
    binds, else ``generic`` (every dtype and layout the family's generic kernel takes).

    The generic binder never sees run-time Ints: with ``dynamic_ints=True`` only the
    typed binder may take ``IntSlot`` arguments.

    >>> register_choice("aten::avg_pool2d.out", typed.bind_avg_pool2d,
    ...                 generic.bind_avg_pool2d_any)   # doctest: +SKIP
    """
    from pyruntime.kernels.fast.context import IntSlot

    def binder(ctx, *values):
        bound = typed(ctx, *values)
        if bound is None and not (dynamic_ints and _holds(values, IntSlot)):
            bound = generic(ctx, *values)
        return bound
    binder.__name__ = f"{typed.__name__}_else_{generic.__name__}"
    binder.__qualname__ = binder.__name__
    binder.__module__ = sys._getframe(1).f_globals["__name__"]  # the family's choose.py
    binder.typed, binder.generic = typed, generic
    return register_fast(name, dynamic_ints=dynamic_ints)(binder)


def _holds(values, kind) -> bool:
    return any(isinstance(v, kind) or (isinstance(v, list) and any(isinstance(x, kind) for x in v))
               for v in values)


def dynamic_binder(name: str):
    """The binder to call when some Int arguments are computed at run time, if the
    op's binder accepts ``IntSlot``s, else None."""
    _import_for(name)
    return _BINDERS[name] if name in _DYNAMIC_INTS else None


def kernel_modules() -> list[str]:
    """Every module holding binders: each family's ``typed*`` (typed hot paths),
    ``generic*`` (one kernel per family for every dtype) and ``choose`` (ops with both)
    modules."""
    from pyruntime.kernels import family_modules

    return family_modules("fast")


_loaded = False
_load_lock = threading.RLock()
_index = None  # binder_index's record: op -> modules to import (False: none usable)
_ready: set = set()  # ops whose modules are imported


def _registered() -> set:
    return set(_BINDERS)


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
            for op in sorted(_registered() - before):
                index.setdefault(op, []).append(name)
        _loaded = True
        if clean and set(index) == _registered():
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
    return _BINDERS.get(name)


def fast_names() -> list[str]:
    get_binder("")
    return sorted(_BINDERS)
