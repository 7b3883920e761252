"""What an OpenCL binder sees and returns, and the registry of binders by op name.

A binder ``bind(dev, args) -> Launch | None`` is called once at load with the
instruction's arguments, each tensor as a ``DTensor`` (the host ``ETensor`` with its
device buffer and element offset), everything else as the reference kernel gets it.
It returns the enqueues that compute the op on the device, every argument already set,
or None when this case has no OpenCL kernel (the instruction then runs on the host,
with copies at the boundary). Binders only take static shapes: a dynamic tensor sends
its instruction to the host. An Int another instruction computes at run time reaches
only binders registered with ``late=True``, as a ``Late``: they pass it to their kernel
through ``Launch.late``, set from the method's values before each enqueue.

``dev`` is the plan's ``Target``: the ``Device``'s calls, and ``check(message)``, the
two kernel arguments (the plan's error flag, this instruction's code) of a kernel that
can meet bad input (an index out of range): it sets the flag instead of reading out of
bounds, and the plan raises ``message`` for this instruction after the run.

>>> # @register_cl("aten::relu.out")
>>> # def relu(dev, args): ...; return Launch([(kernel, (n,))])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from pyruntime.cython_ext.tensor import ETensor

_BINDERS: dict[str, Callable] = {}
_LATE: set[str] = set()  # binders that take Late arguments


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


@dataclass(slots=True, frozen=True)
class Late:
    """An Int argument computed at run time: value ``j`` of the method."""
    j: int


@dataclass(slots=True, eq=False)
class Launch:
    """Enqueues of kernels whose arguments are set: ``(kernel, global size)`` each;
    ``keep`` holds buffers the kernels read (shape tables, folded parameters); ``late``:
    ``(kernel, argument position, Late)`` set from the method's values at each enqueue."""
    steps: list
    keep: list = field(default_factory=list)
    late: list = field(default_factory=list)

    def enqueue(self, cl, queue, values=None) -> None:
        for kernel, pos, late in self.late:
            kernel.set_arg(pos, np.int64(values[late.j]))
        for kernel, gsize in self.steps:
            cl.enqueue_nd_range_kernel(queue, kernel, gsize, None)


class Target:
    """The device as one plan's binders see it: the ``Device``'s calls (``kernel``,
    ``buffer``, ...), and the plan's error flag (``check``)."""

    def __init__(self, device):
        self.device = device
        self.flag = device.buffer(4, np.zeros(1, np.int32), "the OpenCL tier's error flag")
        self.code = 1  # the instruction being bound (its pc + 1)
        self.messages: dict[int, str] = {}  # code -> what a set flag means

    def __getattr__(self, name):
        return getattr(self.device, name)

    def check(self, message: str) -> list:
        """The kernel arguments ``(__global int* flag, int code)``: a work-item that meets
        bad input does ``atomic_cmpxchg(flag, 0, code)`` (the first error wins)."""
        self.messages[self.code] = message
        return [self.flag, np.int32(self.code)]

    def read_flag(self, queue) -> int:
        """The code in the flag (0: none), and the flag cleared."""
        v = np.zeros(1, np.int32)
        self.device.download(queue, v.view(np.uint8), self.flag, 0)
        if v[0]:
            self.device.upload(queue, self.flag, 0, np.zeros(4, np.uint8))
        return int(v[0])


def register_cl(*names: str, late: bool = False):
    def deco(fn):
        for n in names:
            _BINDERS[n] = fn
            if late:
                _LATE.add(n)
        return fn
    return deco


def takes_late(name: str) -> bool:
    return name in _LATE


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
