"""The kernel registry: kernels keyed by their exact ExecuTorch op name.

A kernel is a Python callable registered under names such as
``"aten::add.out"``. The runtime calls it with the values of its
KernelCall's ``args`` (spec 4.8), truncated to the number of positional
parameters the function declares, so a kernel names exactly the schema
arguments it uses (the trailing duplicate ``out`` that the emitter appends is
dropped). Values arrive as:

* tensors: :class:`cython_ext.ETensor`;
* Int / Double / Bool / String / Null: ``int`` / ``float`` / ``bool`` / ``str`` / ``None``;
* IntList / DoubleList / BoolList: ``list`` of Python scalars;
* TensorList: ``list`` of ETensor; OptionalTensorList: ``list`` of ETensor or None.

An out-variant kernel writes into its ``out`` tensor(s) (``out.write(array)``
resizes per ExecuTorch's rules and casts) and returns ``None``. A symbolic or
prim op returns its scalar result, which the runtime stores in the
instruction's last value slot.

>>> from pyruntime.kernels.registry import register, get_kernel
>>> @register("demo::twice.out")
... def _twice(self, out):
...     out.write(self.numpy() * 2)
>>> get_kernel("demo::twice.out").arity
2
"""
from __future__ import annotations

import difflib
import threading
import types
from dataclasses import dataclass
from typing import Callable

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError

@dataclass(frozen=True)
class Kernel:
    name: str
    fn: Callable
    arity: int | None  # number of leading args passed; None = all


# Reference kernels. The compiled tier registers binders in ``kernels.fast``.
_REGISTRY: dict[str, Kernel] = {}


def _arity(fn) -> int | None:
    if isinstance(fn, types.FunctionType) and not hasattr(fn, "__wrapped__"):
        # a plain function: its code says it (inspect costs a process ~15 ms at start-up)
        code = fn.__code__
        return None if code.co_flags & 0x04 else code.co_argcount  # 0x04: CO_VARARGS
    import inspect

    params = inspect.signature(fn).parameters.values()
    n = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


def register(*names: str):
    """Decorator registering ``fn`` under each of ``names``; a name registered twice raises."""

    def deco(fn):
        arity = _arity(fn)
        for name in names:
            if name in _REGISTRY:
                raise ExecuTorchError(
                    ErrorCode.RegistrationAlreadyRegistered,
                    f"kernel {name!r} is already registered by {_REGISTRY[name].fn.__module__}")
            _REGISTRY[name] = Kernel(name, fn, arity)
        return fn

    return deco


def has_kernel(name: str) -> bool:
    _load_families()
    return name in _REGISTRY


def get_kernel(name: str) -> Kernel:
    """The reference kernel registered under ``name``; OperatorMissing if none."""
    _load_families()
    k = _REGISTRY.get(name)
    if k is None:
        raise missing_operators_error([name])
    return k


def registered_names() -> list[str]:
    _load_families()
    return sorted(_REGISTRY)


def closest_names(name: str, n: int = 3) -> list[str]:
    _load_families()
    return difflib.get_close_matches(name, list(_REGISTRY), n=n, cutoff=0.5)


def missing_operators_error(names, where: str = "") -> ExecuTorchError:
    lines = []
    for name in names:
        close = closest_names(name)
        hint = f" (closest registered: {', '.join(close)})" if close else ""
        lines.append(f"{name}{hint}")
    prefix = f"{where}: " if where else ""
    return ExecuTorchError(
        ErrorCode.OperatorMissing,
        f"{prefix}no kernel registered for {len(lines)} operator(s): " + "; ".join(lines))


_loaded = False
_load_lock = threading.RLock()


def _load_families():
    # The flag is set only once every family has registered: a second thread loading
    # a program meanwhile waits here instead of seeing a half-filled registry.
    global _loaded
    if not _loaded:
        with _load_lock:
            if not _loaded:
                import pyruntime.kernels.families  # noqa: F401  (registers every family)
                _loaded = True
