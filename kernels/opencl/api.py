"""What an OpenCL binder sees and returns, and the registry of binders by op name.

A binder ``bind(dev, args) -> Launch | None`` is called once at load with the
instruction's arguments, each tensor as a ``DTensor`` (the host ``ETensor`` with its
device buffer and element offset), everything else as the reference kernel gets it.
It returns the enqueues that compute the op on the device, every argument already set,
or None when this case has no OpenCL kernel (the instruction then runs on the host,
with copies at the boundary). Binders only take static shapes: a dynamic tensor sends
its instruction to the host.

>>> # @register_cl("aten::relu.out")
>>> # def relu(dev, args): ...; return Launch([(kernel, (n,))])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from pyruntime.cython_ext.tensor import ETensor

_BINDERS: dict[str, Callable] = {}


@dataclass(slots=True, eq=False)
class DTensor:
    """A tensor on the device: ``t`` (sizes, dtype) at ``buf`` + ``off`` elements."""
    t: ETensor
    buf: object
    off: int
    const: bool = False  # a constant of the program: its host bytes are valid at load

    @property
    def dtype(self) -> np.dtype:
        return self.t.dtype

    @property
    def sizes(self) -> tuple:
        return self.t.sizes

    @property
    def numel(self) -> int:
        return self.t.numel

    def strides(self) -> tuple:
        return self.t.strides()

    def contiguous(self) -> bool:
        return self.t.is_contiguous()


@dataclass(slots=True, eq=False)
class Launch:
    """Enqueues of kernels whose arguments are set: ``(kernel, global size)`` each;
    ``keep`` holds buffers the kernels read (shape tables, folded parameters)."""
    steps: list
    keep: list = field(default_factory=list)

    def enqueue(self, cl, queue) -> None:
        for kernel, gsize in self.steps:
            cl.enqueue_nd_range_kernel(queue, kernel, gsize, None)


def register_cl(*names: str):
    def deco(fn):
        for n in names:
            _BINDERS[n] = fn
        return fn
    return deco


def get_binder(name: str):
    return _BINDERS.get(name)


def registered() -> list[str]:
    return sorted(_BINDERS)


# ---- helpers the families share ------------------------------------------------------
def i64(*xs) -> list:
    return [np.int64(x) for x in xs]


def table(dev, values, where: str = "") -> object:
    """A small read-only int64 buffer (shapes and strides a kernel decodes)."""
    a = np.asarray(list(values) or [0], np.int64)
    return dev.buffer(a.nbytes, a, where)


def same_dtype(*ts) -> bool:
    return all(isinstance(t, DTensor) for t in ts) and len({t.dtype for t in ts}) == 1


def contiguous(*ts) -> bool:
    return all(isinstance(t, DTensor) and t.contiguous() for t in ts)
