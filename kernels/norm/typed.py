"""Compiled normalization: batch norm (inference), layer norm, group norm (float32/float64).

Contiguous tensors only (other dim orders stay on the reference kernel).
Per-element arithmetic follows the reference (``kernels/norm/reference.py``) in the
tensor dtype: batch norm folds each channel into one scale and shift and
writes ``x * scale + shift``; layer and group norm write
``((x - mean) * rstd) * w + b``. Statistics (mean, biased variance of the
centered values) are accumulated in float64 and rounded to the dtype, so they
agree with the reference's pairwise float32 sums to the last bit or so.
Like the reference, inference batch norm resizes ``save_mean``/``save_invstd``
to size 0 and writes nothing to them.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DTYPE, D_NDIM, D_NUMEL, D_SIZES
from pyruntime.kernels.fast.deferred import carray, njit, overload, types
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_F64,
                                       bits_to_f64, desc, descs, flat, lane_sum, lazy, resize_both,
                                       resize_like, sum_seg)
from pyruntime.kernels.fast.nb import cast_like, scratch

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
U = np.uint64  # unsigned indices: no negative-index wraparound code in inner loops


def _ok(t, dtype):
    return t is None or (t.dtype == dtype and t.is_contiguous())


def _d(ctx, t):
    return 0 if t is None else ctx.desc(t)


@njit(inline="always")
def _opt(addr, n, fallback):
    """Optional per-channel vector of ``n`` elements: (present, descriptor, valid)."""
    if addr == 0:
        return False, fallback, True
    d = desc(addr)
    return True, d, d[D_NUMEL] == n


# ---- batch norm (inference) --------------------------------------------------------

@njit(error_model="numpy")
def bn_typed(x, w_addr, b_addr, rm, rv, eps, o0, o1, o2, sc, m):
    nd = x[D_NDIM]
    if nd < 2:
        return INVALID_ARGUMENT
    C = x[D_SIZES + 1]
    if rm[D_NUMEL] != C or rv[D_NUMEL] != C:
        return INVALID_ARGUMENT
    hw, wd, wok = _opt(w_addr, C, x)
    hb, bd, bok = _opt(b_addr, C, x)
    if not (wok and bok):
        return INVALID_ARGUMENT
    st = resize_like(o0, x)
    if st != OK:
        return st
    sc[0] = 0
    st = resize_both(o1, o2, sc, 1)
    if st != OK:
        return st
    N = x[D_SIZES]
    inner = 1
    for i in range(2, nd):
        inner *= x[D_SIZES + i]
    if x[D_NUMEL] == 0:
        return OK
    xv = flat(x, m)
    z = flat(o0, m)
    mean = flat(rm, m)
    var = flat(rv, m)
    wv = flat(wd, m) if hw else mean
    bv = flat(bd, m) if hb else mean
    # ExecuTorch's portable loop, rounding as it does: invstd in double, then
    # (x - mean) * invstd * weight + bias in the tensor's type, left to right
    for n in range(N):
        for c in range(C):
            invstd = cast_like(1.0 / math.sqrt(np.float64(var[c]) + eps), m)
            mu = mean[c]
            wc = wv[c] if hw else cast_like(1.0, m)
            bc = bv[c] if hb else cast_like(0.0, m)
            base = (n * C + c) * inner
            for i in range(inner):
                z[U(base + i)] = (xv[U(base + i)] - mu) * invstd * wc + bc
    return OK


def batch_norm_kernel(block):
    x = desc(block[0])
    rm, rv = descs(block, 3, 2)
    eps = bits_to_f64(block[5])
    o0, o1, o2 = descs(block, 6, 3)
    sc = scratch(block[9], 16)
    if o0[D_DTYPE] == ST_F32:
        return bn_typed(x, block[1], block[2], rm, rv, eps, o0, o1, o2, sc, np.float32(0))
    if o0[D_DTYPE] == ST_F64:
        return bn_typed(x, block[1], block[2], rm, rv, eps, o0, o1, o2, sc, np.float64(0))
    return NOT_SUPPORTED


def bind_batch_norm_no_training(ctx, input, weight, bias, running_mean, running_var,
                                momentum, eps, out0, out1, out2):
    dt = input.dtype
    if dt not in FLOATS or input.ndim < 2 or not input.is_contiguous():
        return None
    if not all(_ok(t, dt) for t in (weight, bias, running_mean, running_var, out0, out1, out2)):
        return None
    if running_mean is None or running_var is None or out1.ndim != 1 or out2.ndim != 1:
        return None
    return ctx.bind(lazy(batch_norm_kernel),
                    [ctx.desc(input), _d(ctx, weight), _d(ctx, bias), ctx.desc(running_mean),
                     ctx.desc(running_var), ctx.f64(eps), ctx.desc(out0), ctx.desc(out1),
                     ctx.desc(out2), ctx.buffer(16 * 8)])


# ---- layer norm / group norm: shared row statistics and normalization --------------

@njit(inline="always")
def _sq_dev(v, mean):
    d = v - mean
    return d * d


_sum_sq_dev = lane_sum(_sq_dev)


@njit(inline="always")
def _stats(xv, b, n, eps, m):
    """(mean, rstd) of xv[b:b+n] in m's type: float64 sums in four lanes (no serial
    dependency chain), the variance from the centered values like the reference."""
    mean = cast_like(sum_seg(xv, b, n) / n, m)
    var = cast_like(_sum_sq_dev(xv, b, n, mean) / n, m)
    return mean, cast_like(1.0, m) / math.sqrt(var + eps)


@njit(inline="always")
def empty_stats(mv, rv, rows, m):
    """The mean (0) and rstd (NaN) of ``rows`` empty rows, as the reference gives them."""
    for r in range(rows):
        mv[r] = cast_like(0.0, m)
        rv[r] = cast_like(math.nan, m)
    return OK


def at(v, i):
    """``v[i]`` for an array, ``v`` itself for a scalar (numba only)."""
    raise NotImplementedError


@overload(at, inline="always")
def _at(v, i):
    if isinstance(v, types.Array):
        return lambda v, i: v[i]
    return lambda v, i: v


@njit(inline="always")
def normalize_seg(z, xv, b, n, mean, rstd, w, bias, hw, hb):
    """``z[b:b+n] = ((xv[b:b+n] - mean) * rstd) * w + bias``, the weight and bias per element
    (arrays, from index 0) or one for the whole segment (scalars); each applied only if
    present (``hw``, ``hb``): adding a zero bias would turn -0.0 into 0.0."""
    if hw and hb:
        for i in range(n):
            z[U(b + i)] = ((xv[U(b + i)] - mean) * rstd) * at(w, i) + at(bias, i)
    elif hw:
        for i in range(n):
            z[U(b + i)] = ((xv[U(b + i)] - mean) * rstd) * at(w, i)
    elif hb:
        for i in range(n):
            z[U(b + i)] = ((xv[U(b + i)] - mean) * rstd) + at(bias, i)
    else:
        for i in range(n):
            z[U(b + i)] = (xv[U(b + i)] - mean) * rstd


@njit(error_model="numpy")
def ln_typed(x, w_addr, b_addr, eps, o0, om, orr, k, ns, sc, m):
    nd = x[D_NDIM]
    n = 1
    for i in range(k):
        if x[D_SIZES + nd - k + i] != ns[i]:
            return INVALID_ARGUMENT
        n *= ns[i]
    hw, wd, wok = _opt(w_addr, n, x)
    hb, bd, bok = _opt(b_addr, n, x)
    if not (wok and bok):
        return INVALID_ARGUMENT
    st = resize_like(o0, x)
    if st != OK:
        return st
    rows = 1
    for i in range(nd - k):
        sc[i] = x[D_SIZES + i]
        rows *= x[D_SIZES + i]
    for i in range(nd - k, nd):
        sc[i] = 1
    st = resize_both(om, orr, sc, nd)
    if st != OK:
        return st
    mv = flat(om, m)
    rv = flat(orr, m)
    e = cast_like(eps, m)
    if n == 0:
        return empty_stats(mv, rv, rows, m)
    xv = flat(x, m)
    z = flat(o0, m)
    wv = flat(wd, m) if hw else z
    bv = flat(bd, m) if hb else z
    for r in range(rows):
        b = r * n
        mean, rstd = _stats(xv, b, n, e, m)
        mv[r] = mean
        rv[r] = rstd
        normalize_seg(z, xv, b, n, mean, rstd, wv, bv, hw, hb)
    return OK


def layer_norm_kernel(block):
    x = desc(block[0])
    eps = bits_to_f64(block[3])
    o0, om, orr = descs(block, 4, 3)
    k = block[7]
    sc = scratch(block[8], 16)
    ns = carray(block, 9 + k)[9:]
    if o0[D_DTYPE] == ST_F32:
        return ln_typed(x, block[1], block[2], eps, o0, om, orr, k, ns, sc, np.float32(0))
    if o0[D_DTYPE] == ST_F64:
        return ln_typed(x, block[1], block[2], eps, o0, om, orr, k, ns, sc, np.float64(0))
    return NOT_SUPPORTED


def bind_layer_norm(ctx, input, normalized_shape, weight, bias, eps, out0, out1, out2):
    dt = input.dtype
    if dt not in FLOATS or not input.is_contiguous() or input.ndim > 16:
        return None
    if not all(_ok(t, dt) for t in (weight, bias, out0, out1, out2)):
        return None
    ns = [int(s) for s in normalized_shape]
    k = len(ns)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != tuple(ns):
        return None
    if out0.ndim != input.ndim or out1.ndim != input.ndim or out2.ndim != input.ndim:
        return None
    return ctx.bind(lazy(layer_norm_kernel),
                    [ctx.desc(input), _d(ctx, weight), _d(ctx, bias), ctx.f64(eps),
                     ctx.desc(out0), ctx.desc(out1), ctx.desc(out2), k,
                     ctx.buffer(16 * 8)] + ns)


@njit(error_model="numpy")
def gn_typed(x, w_addr, b_addr, N, C, HxW, G, eps, o0, om, orr, sc, m):
    if x[D_NUMEL] != N * C * HxW or (x[D_NDIM] >= 2 and x[D_SIZES + 1] != C) or G < 1 or C % G != 0:
        return INVALID_ARGUMENT
    hw, wd, wok = _opt(w_addr, C, x)
    hb, bd, bok = _opt(b_addr, C, x)
    if not (wok and bok):
        return INVALID_ARGUMENT
    st = resize_like(o0, x)
    if st != OK:
        return st
    sc[0] = N
    sc[1] = G
    st = resize_both(om, orr, sc, 2)
    if st != OK:
        return st
    mv = flat(om, m)
    rv = flat(orr, m)
    e = cast_like(eps, m)
    cg = C // G
    n = cg * HxW
    if n == 0:
        return empty_stats(mv, rv, N * G, m)
    xv = flat(x, m)
    z = flat(o0, m)
    wv = flat(wd, m) if hw else z
    bv = flat(bd, m) if hb else z
    for r in range(N * G):
        b = r * n
        mean, rstd = _stats(xv, b, n, e, m)
        mv[r] = mean
        rv[r] = rstd
        g = r % G
        for cc in range(cg):
            c = g * cg + cc
            # one weight and bias per channel; an absent one is not read (hw/hb), ``mean``
            # only gives it its type
            wc = wv[c] if hw else mean
            bb = bv[c] if hb else mean
            normalize_seg(z, xv, b + cc * HxW, HxW, mean, rstd, wc, bb, hw, hb)
    return OK


def group_norm_kernel(block):
    x = desc(block[0])
    N = block[3]
    C = block[4]
    HxW = block[5]
    G = block[6]
    eps = bits_to_f64(block[7])
    o0, om, orr = descs(block, 8, 3)
    sc = scratch(block[11], 16)
    if o0[D_DTYPE] == ST_F32:
        return gn_typed(x, block[1], block[2], N, C, HxW, G, eps, o0, om, orr, sc,
                         np.float32(0))
    if o0[D_DTYPE] == ST_F64:
        return gn_typed(x, block[1], block[2], N, C, HxW, G, eps, o0, om, orr, sc,
                         np.float64(0))
    return NOT_SUPPORTED


def bind_group_norm(ctx, input, weight, bias, N, C, HxW, group, eps, out0, out1, out2):
    dt = input.dtype
    if dt not in FLOATS or not input.is_contiguous():
        return None
    if not all(_ok(t, dt) for t in (weight, bias, out0, out1, out2)):
        return None
    N, C, HxW, group = int(N), int(C), int(HxW), int(group)
    if group < 1 or C % group or min(N, C, HxW) < 0:
        return None
    if out0.ndim != input.ndim or out1.ndim != 2 or out2.ndim != 2:
        return None
    return ctx.bind(lazy(group_norm_kernel),
                    [ctx.desc(input), _d(ctx, weight), _d(ctx, bias), N, C, HxW, group,
                     ctx.f64(eps), ctx.desc(out0), ctx.desc(out1), ctx.desc(out2),
                     ctx.buffer(16 * 8)])
