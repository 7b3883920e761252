"""Numba's decorators and names, applied the first time Numba is needed, not at import.

Importing Numba costs a process 0.25-0.35 s, more than everything else a cached load
does. A process that links every kernel it binds from the object cache
(``kernels.fast.objcache``) never needs Numba, yet the kernel modules hold the
binders too, and their ``@njit`` helpers would import it. So the kernel modules take
Numba's names from here::

    from pyruntime.kernels.fast.deferred import carray, intrinsic, njit, overload, types

Before Numba is needed, ``njit`` and ``intrinsic`` return placeholders that remember
how they were made, ``overload`` remembers its registration, and ``carray``,
``types``, ``cgutils``... are placeholders too. ``materialize()`` (called by
``kernels.fast.jit`` before anything reaches Numba: a compile, a load from Numba's
cache; and by a placeholder called from Python) imports Numba, makes the real
dispatchers and intrinsics, registers the overloads, and puts the real objects
wherever a placeholder was: every project module's globals and the closures of their
functions, which is where Numba looks when it compiles. After that, this module hands
out Numba's own objects and the code runs exactly as if it had imported Numba itself.

``value(factory)`` defers any other module-level Numba object (a type, an external
function) the same way. This file holds no jitted code: it is left out of the kernels'
cache keys.
"""
from __future__ import annotations

import sys
import threading
import types as _pytypes

from pyruntime.kernels.fast._cache import NJIT_DEFAULTS

_lock = threading.RLock()
_done = False
_pending: list = []  # placeholders in the order they were made (overloads register in order)
_real: dict = {}  # id(placeholder) -> the real object, once materialized
_made: list = []  # the placeholders materialized (alive, so that no id is reused)
_hooks: list = []  # when_loaded's functions
_PATCHED_PREFIXES = ("kernels", "delegates", "pyruntime", "tests", "examples", "__main__")


class _Placeholder:
    """Something Numba would have made at import; ``_make()`` makes it."""

    __slots__ = ("_make", "_what", "__weakref__")

    def __init__(self, make, what: str):
        self._make = make
        self._what = what
        with _lock:
            if not _done:
                _pending.append(self)

    def __repr__(self):
        return f"<deferred {self._what}>"

    def _resolved(self):
        materialize()
        return _real[id(self)]

    def __call__(self, *args, **kwargs):
        return self._resolved()(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):  # probes (copy, inspect): no import
            raise AttributeError(name)
        return getattr(self._resolved(), name)


class _Function(_Placeholder):
    """A jitted function not made yet: ``py_func`` is there at once."""

    def __init__(self, make, py_func, what):
        self.py_func = py_func
        self.__name__ = py_func.__name__
        self.__qualname__ = getattr(py_func, "__qualname__", py_func.__name__)
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__
        super().__init__(make, what)


def _numba(path: str):
    """``numba.x.y`` by dotted path (Numba imported)."""
    import importlib

    mod, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(mod), attr) if attr else importlib.import_module(path)


def _name(path: str):
    """Numba's ``path``: the object itself once materialized, else a placeholder."""
    if _done:
        return _numba(path)
    return _Placeholder(lambda: _numba(path), path)


def _decorator(path: str, kind=_Placeholder, defaults=None):
    """Numba's decorator ``path`` (``numba.njit``...): used bare or with options (and
    ``defaults`` for those not given)."""

    def wrap(fn, args, kwargs):
        kwargs = {**(defaults or {}), **kwargs}
        if _done:
            return _numba(path)(*args, **kwargs)(fn) if args or kwargs else _numba(path)(fn)
        make = (lambda: _numba(path)(*args, **kwargs)(fn)) if args or kwargs \
            else (lambda: _numba(path)(fn))
        return kind(make, fn, f"{path}({fn.__qualname__})") if kind is _Function \
            else kind(make, f"{path}({fn.__qualname__})")

    def decorator(*args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) \
                and not isinstance(args[0], _Placeholder):
            return wrap(args[0], (), {})
        return lambda fn: wrap(fn, args, kwargs)

    decorator.__name__ = path.rpartition(".")[2]
    return decorator


njit = _decorator("numba.njit", _Function, NJIT_DEFAULTS)
intrinsic = _decorator("numba.extending.intrinsic")


def overload(target, *args, **kwargs):
    """``numba.extending.overload``: registered now if Numba is loaded, else on
    ``materialize()``. Returns the implementation function unchanged."""

    def deco(fn):
        if _done:
            _numba("numba.extending.overload")(target, *args, **kwargs)(fn)
        else:
            _Placeholder(lambda: _numba("numba.extending.overload")(target, *args, **kwargs)(fn),
                         f"overload({getattr(target, '__name__', target)})")
        return fn

    return deco


def value(factory, what: str = "value"):
    """``factory()`` (which may import Numba), made on ``materialize()``."""
    return factory() if _done else _Placeholder(factory, what)


def vectorize(*args, **kwargs):
    """``numba.vectorize`` (imports Numba: a ufunc is made at once)."""
    materialize()
    return _numba("numba.vectorize")(*args, **kwargs)


def __getattr__(name):  # carray, types, cgutils: Numba's own, or placeholders
    path = _NAMES.get(name)
    if path is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    obj = _name(path)
    if not isinstance(obj, _Placeholder):
        return obj
    with _lock:
        return globals().setdefault(name, obj)  # one placeholder per name


_NAMES = {"carray": "numba.carray", "types": "numba.core.types",
          "cgutils": "numba.core.cgutils"}


def when_loaded(fn):
    """Call ``fn()`` once Numba is imported (now, if it is; else when ``materialize()``
    imports it). Returns a function that cancels the call if it has not happened yet."""
    with _lock:
        if not _done and "numba" not in sys.modules:
            _hooks.append(fn)
            return lambda: _hooks.remove(fn) if fn in _hooks else None
    fn()
    return lambda: None


def loaded() -> bool:
    """Whether ``materialize()`` has run (Numba is imported and everything is real)."""
    return _done


def materialize() -> None:
    """Import Numba and make every deferred object real (see the module doc). Idempotent
    and thread-safe; costs a process Numba's import the first time."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        from pyruntime.kernels.fast import _cache

        _cache.install()
        while _pending:  # in the order they were made: overloads register in source order
            p = _pending[0]
            _real[id(p)] = p._make()  # (if it raises, it stays pending: a later call retries)
            _made.append(p)  # kept alive: its id is the key
            _pending.pop(0)
        _patch_everywhere(_real)
        for name in _NAMES:
            globals().pop(name, None)  # later imports get Numba's own (module __getattr__)
        _done = True
        hooks = list(_hooks)
        _hooks.clear()
    for fn in hooks:
        fn()


def patch(fn) -> None:
    """Put the real objects into ``fn``'s closure (a kernel body made by a factory) and
    the closures of the functions it holds; after ``materialize()``."""
    materialize()
    _patch_function(fn, _real, set())


def _patch_everywhere(mapping: dict) -> None:
    seen: set = set()
    for modname, mod in list(sys.modules.items()):
        if mod is None or not modname.startswith(_PATCHED_PREFIXES) or modname == __name__:
            continue
        d = getattr(mod, "__dict__", None)
        if d is not None:
            _patch_dict(d, mapping, seen)
    for p in _made:  # closures of the wrapped functions themselves
        if isinstance(p, _Function):
            _patch_function(p.py_func, mapping, seen)


def _patch_dict(d: dict, mapping: dict, seen: set) -> None:
    for k, v in list(d.items()):
        r = mapping.get(id(v))
        if r is not None and isinstance(v, _Placeholder):
            d[k] = r
        elif isinstance(v, _pytypes.FunctionType):
            _patch_function(v, mapping, seen)
        elif isinstance(v, tuple) and any(isinstance(x, _Placeholder) for x in v):
            d[k] = tuple(_real_of(x, mapping) for x in v)
        elif isinstance(v, list) and any(isinstance(x, _Placeholder) for x in v):
            v[:] = [_real_of(x, mapping) for x in v]
        elif isinstance(v, dict) and v is not d:
            for kk, x in list(v.items()):
                if isinstance(x, _Placeholder):
                    v[kk] = _real_of(x, mapping)


def _real_of(x, mapping: dict):
    return mapping.get(id(x), x) if isinstance(x, _Placeholder) else x


def _patch_function(fn, mapping: dict, seen: set) -> None:
    if id(fn) in seen:
        return
    seen.add(id(fn))
    for cell in fn.__closure__ or ():
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        r = mapping.get(id(v))
        if r is not None and isinstance(v, _Placeholder):
            cell.cell_contents = r
        elif isinstance(v, _pytypes.FunctionType):
            _patch_function(v, mapping, seen)
        elif isinstance(v, _Function):
            _patch_function(v.py_func, mapping, seen)
