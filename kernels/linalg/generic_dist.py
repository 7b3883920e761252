"""Compiled _cdist_forward and _pdist_forward (``dist_kernel``) in float64: batch
broadcasting, ATen's matrix-product Euclidean path for p == 2 and large inputs.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.spatial_io import ldx, stx
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, bits_to_f64, desc, lazy, resize_to,
                                       scratch)


# ---- pairwise distances -----------------------------------------------------------------
D_CDIST, D_PDIST = 0, 1


@njit
def _pnorm(a, ab, at, b, bb, bt, M, p):
    """p-norm of row a[ab + k*at] - b[bb + k*bt] over k < M, with ATen's special cases."""
    s = 0.0
    for k in range(M):
        d = abs(ldx(a[D_DATA], a[D_DTYPE], ab + k * at) - ldx(b[D_DATA], b[D_DTYPE], bb + k * bt))
        if p == 0.0:
            s += 1.0 if d != 0.0 else 0.0
        elif p == 1.0:
            s += d
        elif p == 2.0:
            s += d * d
        elif p == math.inf:
            if d > s or d != d:
                s = d
        else:
            s += d ** p
    if p == 2.0:
        return math.sqrt(s)
    if p == 0.0 or p == 1.0 or p == math.inf:
        return s
    return s ** (1.0 / p)


@njit
def _sqnorm(a, ab, at, M):
    s = 0.0
    for k in range(M):
        v = ldx(a[D_DATA], a[D_DTYPE], ab + k * at)
        s += v * v
    return s


@njit
def _cdist(a, b, o, p, mode, sc):
    na, nb, no = a[D_NDIM], b[D_NDIM], o[D_NDIM]
    P, M = a[D_SIZES + na - 2], a[D_SIZES + na - 1]
    R = b[D_SIZES + nb - 2]
    if b[D_SIZES + nb - 1] != M or no != max(na, nb):
        return INVALID_ARGUMENT
    nbt = no - 2
    nbatch = 1
    for i in range(nbt):  # broadcast batch dims, aligned right
        ia = i - (nbt - (na - 2))
        ib = i - (nbt - (nb - 2))
        da = a[D_SIZES + ia] if ia >= 0 else 1
        db = b[D_SIZES + ib] if ib >= 0 else 1
        if da != db and da != 1 and db != 1:
            return INVALID_ARGUMENT
        sc[i] = da if db == 1 else db
        nbatch *= sc[i]
    sc[nbt] = P
    sc[nbt + 1] = R
    st = resize_to(o, sc, no)
    if st != OK:
        return st
    use_mm = p == 2.0 and (mode == 1 or (mode == 0 and (P > 25 or R > 25)))
    an = np.zeros(P if use_mm else 1, np.float64)
    bn = np.zeros(R if use_mm else 1, np.float64)
    ap, am = a[D_STRIDES + na - 2], a[D_STRIDES + na - 1]
    bp, bm = b[D_STRIDES + nb - 2], b[D_STRIDES + nb - 1]
    for t in range(nbatch):
        ao = 0
        bo = 0
        oo = 0
        k = t
        for i in range(nbt - 1, -1, -1):
            idx = k % sc[i]
            k //= sc[i]
            ia = i - (nbt - (na - 2))
            ib = i - (nbt - (nb - 2))
            if ia >= 0 and a[D_SIZES + ia] != 1:
                ao += idx * a[D_STRIDES + ia]
            if ib >= 0 and b[D_SIZES + ib] != 1:
                bo += idx * b[D_STRIDES + ib]
            oo += idx * o[D_STRIDES + i]
        if use_mm:
            for i in range(P):
                an[i] = _sqnorm(a, ao + i * ap, am, M)
            for j in range(R):
                bn[j] = _sqnorm(b, bo + j * bp, bm, M)
        for i in range(P):
            for j in range(R):
                if use_mm:  # ATen's _euclidean_dist: |a|^2 + |b|^2 - 2 a.b, clamped at zero
                    dot = 0.0
                    for m in range(M):
                        dot += ldx(a[D_DATA], a[D_DTYPE], ao + i * ap + m * am) * ldx(
                            b[D_DATA], b[D_DTYPE], bo + j * bp + m * bm)
                    v = math.sqrt(max(an[i] + bn[j] - 2 * dot, 0.0))
                else:
                    v = _pnorm(a, ao + i * ap, am, b, bo + j * bp, bm, M, p)
                stx(o[D_DATA], o[D_DTYPE],
                    oo + i * o[D_STRIDES + nbt] + j * o[D_STRIDES + nbt + 1], v)
    return OK


@njit
def _pdist(x, o, p, sc):
    if x[D_NDIM] != 2 or o[D_NDIM] != 1:
        return INVALID_ARGUMENT
    N, M = x[D_SIZES], x[D_SIZES + 1]
    sc[0] = N * (N - 1) // 2
    st = resize_to(o, sc, 1)
    if st != OK:
        return st
    q = 0
    for i in range(N):
        for j in range(i + 1, N):
            d = _pnorm(x, i * x[D_STRIDES], x[D_STRIDES + 1], x, j * x[D_STRIDES],
                       x[D_STRIDES + 1], M, p)
            stx(o[D_DATA], o[D_DTYPE], q * o[D_STRIDES], d)
            q += 1
    return OK


def dist_kernel(block):
    # [op, x1, x2 (cdist), out, sc, p, compute_mode (0 auto, 1 mm, 2 never)]
    p = bits_to_f64(block[5])
    if block[0] == D_CDIST:
        return _cdist(desc(block[1]), desc(block[2]), desc(block[3]), p, block[6],
                      scratch(block[4], 16))
    return _pdist(desc(block[1]), desc(block[3]), p, scratch(block[4], 16))


@register_fast("aten::_cdist_forward.out")
def bind_cdist_forward(ctx, x1, x2, p, compute_mode, out):
    if x1.ndim < 2 or x2.ndim < 2 or out.ndim != max(x1.ndim, x2.ndim) or out.ndim > 16:
        return None
    if x1.dtype.kind != "f" or x2.dtype.kind != "f" or p < 0 or compute_mode not in (
            None, 0, 1, 2):
        return None
    return ctx.bind(lazy(dist_kernel),
                    [D_CDIST, ctx.desc(x1), ctx.desc(x2), ctx.desc(out), ctx.buffer(16 * 8),
                     ctx.f64(p), int(compute_mode or 0)])


@register_fast("aten::_pdist_forward.out")
def bind_pdist_forward(ctx, self, p, out):
    if self.ndim != 2 or out.ndim != 1 or self.dtype.kind != "f" or p < 0:
        return None
    return ctx.bind(lazy(dist_kernel),
                    [D_PDIST, ctx.desc(self), 0, ctx.desc(out), ctx.buffer(16 * 8), ctx.f64(p),
                     0])
