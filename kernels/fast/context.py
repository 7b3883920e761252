"""BindContext: what a binder uses to build an argument block."""
from __future__ import annotations

import numpy as np


class BindContext:
    """Maps tensors to descriptor-row addresses and keeps argument blocks alive.

    A block is a list of int64 words: descriptor addresses (``ctx.desc(t)``),
    integers, and floats stored bit-for-bit (``ctx.f64(x)``).
    """

    def __init__(self, table, rows_by_id, scratch):
        self.table = table
        self._rows = rows_by_id
        self.blocks = []
        self.scratch = scratch  # list of scratch buffers to keep alive

    def desc(self, t) -> int:
        return self.table.addr(self._rows[id(t)])

    @staticmethod
    def f64(x) -> int:
        return int(np.array(float(x), np.float64).view(np.int64))

    def buffer(self, nbytes: int) -> int:
        """Address of a zeroed scratch buffer owned by the method."""
        b = np.zeros(max(int(nbytes), 1) + 64, np.uint8)
        self.scratch.append(b)
        return b.ctypes.data

    def bind(self, cfunc, words):
        block = np.array([int(w) for w in words], np.int64)
        self.blocks.append(block)
        return cfunc.address, block.ctypes.data
