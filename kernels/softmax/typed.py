"""Compiled ``_softmax.out`` / ``_log_softmax.out`` over any dim (float32/float64).

The input is viewed as (outer, D, inner) around the softmax dim. For the last
dim (inner == 1) each row takes four contiguous passes: the max (four
branch-free lanes), the exps stored in the out tensor (float32 through a
vectorizable polynomial, ``_exp_f32``; with ``math="fast"`` the float32 ``exp_fast``),
their float64 sum, then the scaling.
For another dim a (D, inner) slab is swept row by row with per-column max and
sum vectors, so every inner loop is contiguous. Stabilized like the
reference: ``exp(x - max)``; NaN anywhere in a row gives a NaN row, an all
-inf row too. That is ``_log_softmax.out`` (an ExecuTorch optimized kernel whose
vectorized order is not reproduced), and ``_softmax.out`` with ``math="fast"``;
otherwise ``_softmax.out`` is ExecuTorch's portable loop element by element
(``_softmax_et``), bit for bit (a row's float32 exps first, through ``libm.expf_map``).
From 16K elements a last-dim softmax splits its rows across the loop's threads.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DTYPE, D_NDIM, D_NUMEL, D_SIZES
from pyruntime.kernels.fast.deferred import carray, njit, overload, types
from pyruntime.kernels.fast.nb import (NOT_SUPPORTED, OK, SPLIT_WHOLE, ST_F32, ST_F64,
                                       bits_to_f64, cast_like, descs, f64_to_bits, flat, lazy,
                                       ptr_like, resize_like, sum_seg)
from pyruntime.kernels.fast.fastmath import exp_fast
from pyruntime.kernels.libm import E_EXP, c_exp, expf_map

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
SPLIT_ELEMS = 1 << 14  # split across threads from this many elements (as the unary ops)
U = np.uint64  # unsigned indices: no negative-index wraparound code in inner loops


LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
SHIFTER = 6755399441055744.0  # 1.5 * 2**52: adding it leaves an integer in the low bits


@njit(inline="always")
def exp_poly(xd):
    """exp(x) of a float64 for float32-precision results: a degree-8 polynomial on
    [-ln2/2, ln2/2] (relative error ~2e-10) times 2**n built from bits; branch-free, so
    loops vectorize. NaN -> NaN; below -110 (far under float32's smallest subnormal) it
    stays ~1e-48."""
    xc = min(max(xd, -110.0), 89.0)
    n = np.floor(xc * LOG2E + 0.5)  # a float: see below
    r = (xc - n * LN2_HI) - n * LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (
        1.0 / 120 + r * (1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320))))))))
    # 2**n from bits: n + 1023 sits in the low mantissa bits of n + 1023 + SHIFTER, and the
    # shift to the exponent field drops the rest (AVX2 has no vector conversion between
    # float64 and int64: an integer n, as math.floor gives, kept the loop partly scalar)
    e = p * bits_to_f64(f64_to_bits(n + (1023.0 + SHIFTER)) << 52)
    return e if xd == xd else xd


@njit(inline="always")
def _exp_f32(x):
    """exp of a float32 through ``exp_poly`` (correctly rounded about as often as libm's
    expf). No call, no branch: the loops using it vectorize. NaN -> NaN, -inf -> 0."""
    return np.float32(exp_poly(np.float64(x)))


def exp_like(x, m):
    """exp(x) in m's type (numba only)."""
    raise NotImplementedError


@overload(exp_like)
def _exp_like(x, m):
    if m == types.float32:
        return lambda x, m: _exp_f32(x)
    return lambda x, m: math.exp(x)


def exp_fast_like(x, m):
    """exp(x) in m's type for ``math="fast"`` (numba only): float32 through
    ``fastmath.exp_fast`` (within 0.7 ulp, 8 lanes where ``_exp_f32`` has 4)."""
    raise NotImplementedError


@overload(exp_fast_like)
def _exp_fast_like(x, m):
    if m == types.float32:
        return lambda x, m: exp_fast(x)
    return lambda x, m: math.exp(x)


@njit(inline="always")
def _mx(a, v):
    """NaN-propagating max step, branch-free (NaN is sticky)."""
    return v if (v > a) | (v != v) else a


@njit(inline="always")
def _max_seg(xv, b, n):
    """max of xv[b:b+n] (n >= 1), NaN if any is NaN; four independent lanes."""
    m0 = xv[U(b)]
    m1 = m0
    m2 = m0
    m3 = m0
    i = 1
    while i + 4 <= n:
        m0 = _mx(m0, xv[U(b + i)])
        m1 = _mx(m1, xv[U(b + i + 1)])
        m2 = _mx(m2, xv[U(b + i + 2)])
        m3 = _mx(m3, xv[U(b + i + 3)])
        i += 4
    while i < n:
        m0 = _mx(m0, xv[U(b + i)])
        i += 1
    return _mx(_mx(_mx(m0, m1), m2), m3)


def _exp_row(xv, z, b, n, mx, m):
    """z[b:b+n] = exp(xv[b:b+n] - mx) through ``libm.expf_map`` on float32: True if it
    did (numba only)."""
    raise NotImplementedError


@overload(_exp_row)
def _exp_row_ov(xv, z, b, n, mx, m):
    if m != types.float32:
        return lambda xv, z, b, n, mx, m: False

    def impl(xv, z, b, n, mx, m):
        expf_map(E_EXP, xv[b:b + n], z[b:b + n], mx)
        return True
    return impl


@njit(inline="always", error_model="numpy")
def _softmax_et(xv, z, r0, r1, D, inner, m):
    """ExecuTorch's portable ``_softmax.out``, element by element: per (row, column)
    ``max = x[0]``, ``max = x[d] < max ? max : x[d]``; ``sum`` adds ``exp(x[d] - max)``
    in order; ``out = exp(x[d] - max) / sum``. All in m's type, libm's exp. Rows
    [r0, r1) of the (outer, D, inner) view."""
    for r in range(r0, r1):
        for j in range(inner):
            b = r * D * inner + j
            # a row's max in any order gives the same outputs when it has no NaN (a
            # signed zero's sign changes no x - max); else ExecuTorch's scan, for its NaN
            mx = _max_seg(xv, b, D) if inner == 1 else xv[U(b)]
            if inner > 1 or mx != mx:
                mx = xv[U(b)]
                for d in range(1, D):
                    v = xv[U(b + d * inner)]
                    if not v < mx:
                        mx = v
            if inner == 1 and _exp_row(xv, z, b, D, mx, m):  # the exps first, vectorized
                s = z[U(b)]
                for d in range(1, D):
                    s = z[U(b + d)] + s
            else:
                s = cast_like(0.0, m)
                for d in range(D):
                    e = c_exp(xv[U(b + d * inner)] - mx)
                    z[U(b + d * inner)] = e
                    s = e if d == 0 else e + s
            for d in range(D):
                z[U(b + d * inner)] = z[U(b + d * inner)] / s
    return OK


# block word 0: what the kernel computes
MODE_SOFTMAX, MODE_LOG_SOFTMAX, MODE_SOFTMAX_FAST = range(3)


@njit(error_model="numpy")
def _softmax_typed(mode, x, o, dim, scr, nscr, m, part, npart, least):
    """Rows [outer * part // npart, outer * (part + 1) // npart) when split across threads
    (``npart`` > 0; last-dim softmax only, whose rows share no scratch), as
    ``elementwise.typed.unary_prep``: the prep call (``part`` < 0) resizes and, below
    ``least`` elements, does the whole call."""
    done = OK
    if npart == 0 or part < 0:
        st = resize_like(o, x)  # (contiguous dim orders: checked at bind)
        if st != OK:
            return st
        if part < 0:
            if o[D_NUMEL] >= least:
                return OK
            npart, done = 0, SPLIT_WHOLE
    nd = x[D_NDIM]
    if o[D_NUMEL] == 0:
        return done
    outer = 1
    D = 1
    inner = 1
    if nd > 0:
        for i in range(dim):
            outer *= x[D_SIZES + i]
        D = x[D_SIZES + dim]
        for i in range(dim + 1, nd):
            inner *= x[D_SIZES + i]
    xv = flat(x, m)
    z = flat(o, m)
    r0, r1 = (outer * part // npart, outer * (part + 1) // npart) if npart else (0, outer)
    if mode == MODE_SOFTMAX:
        _softmax_et(xv, z, r0, r1, D, inner, m)
        return done
    log = mode == MODE_LOG_SOFTMAX
    if inner == 1:
        for r in range(r0, r1):
            b = r * D
            mx = _max_seg(xv, b, D)
            if log:  # exps, stored in out (vectorizes)
                for i in range(D):
                    z[U(b + i)] = exp_like(xv[U(b + i)] - mx, m)
            else:
                for i in range(D):
                    z[U(b + i)] = exp_fast_like(xv[U(b + i)] - mx, m)
            s = cast_like(sum_seg(z, b, D), m)
            if log:
                ls = math.log(s)
                for i in range(D):
                    z[U(b + i)] = (xv[U(b + i)] - mx) - ls
            else:
                for i in range(D):
                    z[U(b + i)] = z[U(b + i)] / s
        return done
    # columns: per-column max (in m's type) and sum (float64) vectors
    if inner <= nscr:
        mxv = carray(ptr_like(scr, m), inner)
        smv = carray(ptr_like(scr + 8 * nscr, 0.0), inner)
    else:
        mxv = np.full(inner, m)
        smv = np.empty(inner, np.float64)
    slab = D * inner
    for r in range(outer):
        b = r * slab
        for j in range(inner):
            mxv[j] = xv[U(b + j)]
            smv[j] = 0.0
        for d in range(1, D):
            bd = b + d * inner
            for j in range(inner):
                v = xv[U(bd + j)]
                if v > mxv[j] or v != v:
                    mxv[j] = v
        for d in range(D):
            bd = b + d * inner
            if log:
                for j in range(inner):
                    z[U(bd + j)] = exp_like(xv[U(bd + j)] - mxv[j], m)
            else:
                for j in range(inner):
                    z[U(bd + j)] = exp_fast_like(xv[U(bd + j)] - mxv[j], m)
            for j in range(inner):
                smv[j] += z[U(bd + j)]
        if log:
            for j in range(inner):
                smv[j] = math.log(cast_like(smv[j], m))
            for d in range(D):
                bd = b + d * inner
                for j in range(inner):
                    z[U(bd + j)] = (xv[U(bd + j)] - mxv[j]) - cast_like(smv[j], m)
        else:
            for j in range(inner):
                mxv[j] = cast_like(smv[j], m)
            for d in range(D):
                bd = b + d * inner
                for j in range(inner):
                    z[U(bd + j)] = z[U(bd + j)] / mxv[j]
    return OK


def softmax_kernel(block):
    mode = block[0]
    x, o = descs(block, 1, 2)
    dim = block[3]
    if x[D_DTYPE] != o[D_DTYPE]:
        return NOT_SUPPORTED
    part, npart, least = block[6], block[7], block[8]
    if o[D_DTYPE] == ST_F32:
        return _softmax_typed(mode, x, o, dim, block[4], block[5], np.float32(0), part, npart,
                              least)
    if o[D_DTYPE] == ST_F64:
        return _softmax_typed(mode, x, o, dim, block[4], block[5], np.float64(0), part, npart,
                              least)
    return NOT_SUPPORTED


def _bind_softmax(ctx, log, self, dim, half_to_float, out):
    if self.dtype not in FLOATS or out.dtype != self.dtype or half_to_float:
        return None
    if not self.is_contiguous() or not out.is_contiguous() or out.ndim != self.ndim:
        return None
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        return None
    nd = max(self.ndim, 1)
    if not -nd <= dim < nd:
        return None
    dim = int(dim) % nd
    inner = 1
    for s in self.shape[dim + 1:]:
        inner *= s
    nscr = inner if inner > 1 else 0
    mode = MODE_LOG_SOFTMAX if log else MODE_SOFTMAX_FAST if ctx.pick_fast() else MODE_SOFTMAX
    words = [mode, ctx.desc(self), ctx.desc(out), dim, ctx.buffer(16 * nscr), nscr]
    rows = out.numel // max(out.shape[dim] if out.ndim else 1, 1)
    # last-dim rows split across threads (each row whole, so the bits never depend on it)
    n = min(ctx.threads, rows) if inner == 1 and out.numel >= SPLIT_ELEMS else 1
    if n < 2:
        return ctx.bind(lazy(softmax_kernel), words + [0, 0, 0])
    return ctx.bind_split(lazy(softmax_kernel), words + [0, 0, 0],
                          [words + [k, n, 0] for k in range(n)], words + [-1, n, SPLIT_ELEMS])


def bind_softmax(ctx, self, dim, half_to_float, out):
    return _bind_softmax(ctx, False, self, dim, half_to_float, out)


def bind_log_softmax(ctx, self, dim, half_to_float, out):
    return _bind_softmax(ctx, True, self, dim, half_to_float, out)
