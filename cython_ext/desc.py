"""The descriptor table: ETensor state mirrored in C-readable rows (see ``abi``).

Python kernels work on ``ETensor`` objects; compiled kernels on descriptor
rows. The fast loop keeps them consistent by pushing a tensor's state to its
row after Python changed it and pulling it back before Python reads it (only
around Python-fallback instructions, at input binding and at output time).
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import (D_CAP, D_DATA, D_DIMORDER, D_DTYPE, D_DYN, D_NDIM, D_NUMEL,
                            D_SIZES, D_STRIDES, DESC_WORDS)
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor


class DescTable:
    """One descriptor row per value index; rows of non-tensor values stay zero."""

    def __init__(self, values, buffers):
        self.arr = np.zeros((max(1, len(values)), DESC_WORDS), np.int64)
        self.base = self.arr.ctypes.data
        # (start address, end, ndarray) of every byte region a data pointer may point into,
        # so that a pointer set by compiled code can be turned back into a numpy view:
        # the method's own buffers, and per row the storage last pushed to it that lies
        # in none of them (a caller's array bound to an input). A row's entry is
        # replaced when its storage changes, so arrays from earlier calls are released.
        self._regions = []
        self._row_regions = {}  # row -> (start, end, ndarray)
        self._last = {}  # row -> (sizes, data pointer) as last synced, to skip no-op pushes
        for b in buffers:
            self.add_region(b)
        for i, v in enumerate(values):
            if isinstance(v, ETensor):
                self.init_row(i, v)

    def add_region(self, buf: np.ndarray) -> None:
        if buf is None or not buf.nbytes:
            return
        a = buf.ctypes.data
        if any(start <= a and a + buf.nbytes <= end for start, end, _ in self._regions):
            return  # a view into a known region (a constant inside the program's bytes)
        self._regions.append((a, a + buf.nbytes, buf))

    def addr(self, i: int) -> int:
        return self.base + i * DESC_WORDS * 8

    def init_row(self, i: int, t: ETensor) -> None:
        row = self.arr[i]
        row[D_DTYPE] = t.scalar_type
        row[D_NDIM] = t.ndim
        row[D_DYN] = int(t.dynamism)
        row[D_DIMORDER:D_DIMORDER + t.ndim] = t.dim_order
        self.push(i, t, force=True)

    def push(self, i: int, t: ETensor, force: bool = False) -> None:
        """ETensor -> row (after Python code changed sizes or storage).

        Without ``force`` a push is skipped when the tensor's sizes and data
        pointer equal what the row held at the last sync of row ``i``.
        """
        key = (t.sizes, t._ptr)
        if not force and self._last.get(i) == key:
            return
        self._last[i] = key
        row = self.arr[i]
        nd = t.ndim
        row[D_DATA] = t._ptr
        row[D_NUMEL] = t.numel
        # compiled resizes grow a tensor up to D_CAP in place: never past the bytes
        # actually behind the pointer (a caller's array bound to a dynamic input is
        # only as large as its current shape)
        cap = t.capacity
        if t.storage is not None and t.storage.nbytes < t.capacity_bytes:
            cap = t.storage.nbytes // t.dtype.itemsize
        row[D_CAP] = cap
        if nd:
            row[D_SIZES:D_SIZES + nd] = t.sizes
            row[D_STRIDES:D_STRIDES + nd] = t.strides()
        if t.storage is not None and t.storage.nbytes:
            self._remember(i, t.storage)
        else:
            self._row_regions.pop(i, None)

    def pull(self, i: int, t: ETensor) -> None:
        """Row -> ETensor (after compiled code may have resized or re-pointed it)."""
        row = self.arr[i]
        nd = t.ndim
        if nd:
            sizes = tuple(row[D_SIZES:D_SIZES + nd].tolist())
            if sizes != t.sizes:
                t.sizes = sizes
                t._view = None
        ptr = int(row[D_DATA])
        if ptr != t._ptr:
            t.set_storage(None if ptr == 0 else self._view_at(ptr, t.capacity_bytes))
        self._last[i] = (t.sizes, t._ptr)

    def copy_row(self, src: int, dst: int) -> None:
        self.arr[dst] = self.arr[src]
        self._last.pop(dst, None)

    def _remember(self, i: int, buf: np.ndarray) -> None:
        a = buf.ctypes.data
        known = self._row_regions.get(i)
        if known is not None and known[0] <= a and a + buf.nbytes <= known[1]:
            return
        for start, end, _ in self._regions:
            if start <= a and a + buf.nbytes <= end:
                self._row_regions.pop(i, None)
                return
        self._row_regions[i] = (a, a + buf.nbytes, buf)

    def _view_at(self, ptr: int, nbytes: int) -> np.ndarray:
        for start, end, buf in (*self._regions, *self._row_regions.values()):
            if start <= ptr < end or (nbytes == 0 and ptr == end):
                off = ptr - start
                return buf.reshape(-1).view(np.uint8)[off:off + min(nbytes, end - ptr)]
        raise ExecuTorchError(ErrorCode.Internal,
                              f"data pointer 0x{ptr:x} is outside every known buffer")
