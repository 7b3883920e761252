"""BindContext: what a binder uses to build an argument block."""
from __future__ import annotations

import numpy as np


class IntSlot(int):
    """An Int argument computed at run time (by a prim op such as ``sym_size``).

    Its int value is only the load-time placeholder; a binder registered with
    ``dynamic_ints=True`` must pass ``ctx.int_ref(x)`` to its kernel, which reads
    the current value through that address on every run.
    """

    def __new__(cls, value, addr):
        o = int.__new__(cls, value)
        o.addr = addr
        return o


class BindContext:
    """Maps tensors to descriptor-row addresses and keeps argument blocks alive.

    A block is a list of int64 words: descriptor addresses (``ctx.desc(t)``),
    integers, and floats stored bit-for-bit (``ctx.f64(x)``).
    """

    def __init__(self, table, rows_by_id, scratch, threads=1, math="exact"):
        self.table = table
        self._rows = rows_by_id
        self.blocks = []
        self.scratch = scratch  # list of scratch buffers to keep alive
        self.threads = threads  # how many parts a binder may split a kernel into
        # "fast": a binder may pick a kernel that fuses multiply-adds, reassociates sums or
        # approximates transcendentals (pyruntime.mathmode); "exact": ExecuTorch's numbers
        self.math = math
        self.fast_picks = 0  # how many binds took a fast-math kernel (inspect --ops counts)

    def pick_fast(self) -> int:
        """1 when the method runs ``math="fast"`` (counted: this bind takes a fast-math
        kernel), else 0: binders put it in the argument block or choose a kernel by it."""
        if self.math != "fast":
            return 0
        self.fast_picks += 1
        return 1

    def desc(self, t) -> int:
        return self.table.addr(self._rows[id(t)])

    @staticmethod
    def f64(x) -> int:
        return int(np.array(float(x), np.float64).view(np.int64))

    def buffer(self, nbytes: int) -> int:
        """Address of a zeroed scratch buffer owned by the method (its pages written now,
        at load, rather than faulted in by the first execute)."""
        b = np.empty(max(int(nbytes), 1) + 64, np.uint8)
        b.fill(0)
        self.scratch.append(b)
        return b.ctypes.data

    def int_ref(self, x) -> int:
        """Address of an int64 holding ``x`` at run time: the run-time slot of an
        ``IntSlot``, else a constant word owned by the method."""
        if isinstance(x, IntSlot):
            return x.addr
        w = np.array([int(x)], np.int64)
        self.scratch.append(w)
        return w.ctypes.data

    def bind(self, cfunc, words):
        block = np.array([int(w) for w in words], np.int64)
        self.blocks.append(block)
        return cfunc.address, block.ctypes.data

    def bind_split(self, cfunc, whole, parts, prep, post=None):
        """A kernel split into parts that the loop runs at once on its thread pool
        (``cython_ext._loop``): ``fn(prep)`` (checks, output resize), then ``fn`` on
        every block of ``parts`` (disjoint outputs, scratch of their own), then
        ``fn(post)`` if given. ``whole`` is the same call in one block, what an event
        tracer runs. Returns ``(fn, block, prep, parts, n, post)`` for
        ``Loop.set_kernel``, or ``bind(cfunc, whole)`` for fewer than two parts."""
        fn, block = self.bind(cfunc, whole)
        if len(parts) < 2:
            return fn, block
        from pyruntime.cython_ext._loop import ensure_threads

        ensure_threads(len(parts))
        addrs = np.array([self.bind(cfunc, w)[1] for w in parts], np.int64)
        self.blocks.append(addrs)
        return (fn, block, self.bind(cfunc, prep)[1], addrs.ctypes.data, len(parts),
                0 if post is None else self.bind(cfunc, post)[1])
