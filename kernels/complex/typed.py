"""Compiled complex kernels: ``_conj_physical`` of complex tensors and ``view_as_complex_copy``.

Contiguous tensors; a complex element is a (real, imag) pair of its component
type, so the conjugate negates every second component (ComplexHalf: flips the
sign bit of each uint32 word's high half) and ``view_as_complex`` copies bytes.
Other layouts stay on the reference kernels (``kernels/complex/reference.py``), as do the
FFT ops (pocketfft through numpy).
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (NOT_SUPPORTED, OK, descs, lazy, ptr_like, resize_like,
                                       resize_to)

CHALF, CFLOAT, CDOUBLE = 8, 9, 10
_OF_PART = {5: CHALF, 6: CFLOAT, 7: CDOUBLE}
_PART_BYTES = {CHALF: 2, CFLOAT: 4, CDOUBLE: 8}


@njit(inline="always")
def _negate_odd(pi, po, n, zero):
    x = ptr_like(pi, zero)
    z = ptr_like(po, zero)
    for i in range(n):
        z[2 * i] = x[2 * i]
        z[2 * i + 1] = -x[2 * i + 1]


def conj_kernel(block):
    x, o = descs(block, 0, 2)
    st = resize_like(o, x)
    if st != OK:
        return st
    n = x[D_NUMEL]
    if x[D_DTYPE] == CFLOAT:
        _negate_odd(x[D_DATA], o[D_DATA], n, np.float32(0))
    elif x[D_DTYPE] == CDOUBLE:
        _negate_odd(x[D_DATA], o[D_DATA], n, np.float64(0))
    elif x[D_DTYPE] == CHALF:
        w = ptr_like(x[D_DATA], np.uint32(0))
        z = ptr_like(o[D_DATA], np.uint32(0))
        for i in range(n):
            z[i] = w[i] ^ np.uint32(0x80000000)
    else:
        return NOT_SUPPORTED
    return OK


def view_as_complex_kernel(block):
    x, o = descs(block, 0, 2)
    nd = x[D_NDIM]
    if nd < 1 or x[D_SIZES + nd - 1] != 2 or o[D_NDIM] != nd - 1:
        return NOT_SUPPORTED
    st = resize_to(o, x[D_SIZES:D_SIZES + nd - 1], nd - 1)
    if st != OK:
        return st
    src = ptr_like(x[D_DATA], np.uint8(0))
    dst = ptr_like(o[D_DATA], np.uint8(0))
    for i in range(x[D_NUMEL] * block[2]):  # numel parts x bytes per part
        dst[i] = src[i]
    return OK


def _contiguous(*ts):
    return all(t.is_contiguous() for t in ts)


def bind_conj_physical_complex(ctx, self, out):
    if self.scalar_type not in _PART_BYTES or out.scalar_type != self.scalar_type \
            or out.ndim != self.ndim or not _contiguous(self, out):
        return None
    return ctx.bind(lazy(conj_kernel), [ctx.desc(self), ctx.desc(out)])


@register_fast("aten::view_as_complex_copy.out")
def bind_view_as_complex(ctx, self, out):
    want = _OF_PART.get(self.scalar_type)
    if want is None or out.scalar_type != want or self.ndim < 1 or out.ndim != self.ndim - 1 \
            or not _contiguous(self, out):
        return None
    return ctx.bind(lazy(view_as_complex_kernel),
                    [ctx.desc(self), ctx.desc(out), _PART_BYTES[want]])
