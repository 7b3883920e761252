"""Broadcasting and N-d walks over descriptors (``kernels.fast.nb``'s layout).

Operands broadcast right-aligned to a result of ``nd`` dims, as ATen does: a dim an
operand lacks, or has of size 1, repeats (size 1, stride 0). ``index_offset`` and
``next_index`` walk a multi-index in row-major order for the strided fallbacks.
"""
from __future__ import annotations

from pyruntime.kernels.fast.deferred import njit
from pyruntime.cython_ext.abi import D_NDIM, D_SIZES, D_STRIDES


@njit(inline="always")
def bcast_dim(d, i, nd):
    """(size, element stride) of ``d``'s dim under dim ``i`` of an ``nd``-dim result."""
    j = i - (nd - d[D_NDIM])
    if j < 0:
        return 1, 0
    s = d[D_SIZES + j]
    return s, d[D_STRIDES + j] if s != 1 else 0


@njit(inline="always")
def bcast_size(s, d):
    """Size ``s`` broadcast with size ``d``; -1 where they clash (neither 1 nor equal)."""
    if d == 1:
        return s
    return -1 if s != 1 and s != d else d


@njit(inline="always")
def index_offset(idx, d):
    """Element offset in ``d`` of the multi-index ``idx[:d[2]]``."""
    p = 0
    for i in range(d[D_NDIM]):
        p += idx[i] * d[D_STRIDES + i]
    return p


@njit(inline="always")
def next_index(idx, d):
    """Steps ``idx`` to the next multi-index of ``d``'s sizes, last dim fastest."""
    for i in range(d[D_NDIM] - 1, -1, -1):
        idx[i] += 1
        if idx[i] < d[D_SIZES + i]:
            return
        idx[i] = 0
