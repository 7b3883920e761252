"""Compiled upsample_nearest2d, upsample_bilinear2d and _upsample_bilinear2d_aa of every
dtype (``resample_kernel``), as ATen's separable passes: per axis a table of (index,
weight) taps; uint8 uses ATen's int16 fixed-point weights, as ``kernels/upsample/reference.py``.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.copy_engine import copy_element
from pyruntime.kernels.fast.spatial_io import (U8, is_float, ldix, ldx, resize_hw, r32, stix,
                                               stx)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_BF16, ST_F16, ST_F32,
                                       ST_F64, ST_U8, bits_to_f64, descs, elem_size, lazy,
                                       load_f64_call, scratch, store_f64_call)


# ---- resampling -------------------------------------------------------------------------
R_NEAREST, R_BILINEAR, R_AA = range(3)


@njit(inline="always")
def _near(i, n_in, n_out, has_s, s):
    """The reference's (ATen's) nearest source index, in float32 arithmetic."""
    if n_out == n_in:
        return i
    if n_out == 2 * n_in:
        return i >> 1
    if has_s and s > 0:
        sc = np.float32(1.0 / s)
    else:
        sc = np.float32(np.float64(np.float32(n_in)) / np.float64(np.float32(n_out)))
    v = np.float32(np.float64(np.float32(i)) * np.float64(sc))
    return min(np.int64(math.floor(v)), n_in - 1)


@njit
def _nearest(x, o, H, W, oh, ow, has_sh, sh, has_sw, sw):
    es = elem_size(x[D_DTYPE])
    cols = np.empty(max(ow, 1), np.int64)
    for j in range(ow):
        cols[j] = _near(j, W, ow, has_sw, sw) * x[D_STRIDES + 3]
    N, C = x[D_SIZES], x[D_SIZES + 1]
    for n in range(N):
        for c in range(C):
            xb = n * x[D_STRIDES] + c * x[D_STRIDES + 1]
            ob = n * o[D_STRIDES] + c * o[D_STRIDES + 1]
            for i in range(oh):
                xr = xb + _near(i, H, oh, has_sh, sh) * x[D_STRIDES + 2]
                orow = ob + i * o[D_STRIDES + 2]
                for j in range(ow):
                    copy_element(x[D_DATA], xr + cols[j], o[D_DATA], orow + j * o[D_STRIDES + 3],
                                 es)
    return OK


@njit
def _axis_scale(n_in, n_out, ac, has_s, s, lp):
    """ATen's area_pixel_compute_scale (the reference's ``_scale``)."""
    if ac:
        return r32((n_in - 1) / (n_out - 1), lp) if n_out > 1 else 0.0
    if has_s and s > 0:
        return r32(1.0 / s, lp)
    if lp:
        return r32(np.float64(np.float32(n_in)) / np.float64(np.float32(n_out)), lp)
    return n_in / n_out


@njit
def _table_linear(n_in, n_out, ac, has_s, s, lp, idx, w, sz):
    """Two taps per output: (i0, 1 - lambda), (i1, lambda), in op-math precision."""
    sc = _axis_scale(n_in, n_out, ac, has_s, s, lp)
    for o in range(n_out):
        if ac:
            real = r32(sc * o, lp)
        else:
            real = max(r32(r32(sc * r32(o + 0.5, lp), lp) - 0.5, lp), 0.0)
        i0 = min(np.int64(math.floor(real)), n_in - 1)
        lam = min(max(r32(real - i0, lp), 0.0), 1.0)
        idx[2 * o] = i0
        idx[2 * o + 1] = i0 + 1 if i0 < n_in - 1 else i0
        w[2 * o] = r32(1.0 - lam, lp)
        w[2 * o + 1] = lam
        sz[o] = 2


@njit(inline="always")
def _tent(t):
    t = abs(t)
    return 1.0 - t if t < 1.0 else 0.0


@njit(inline="always")
def tent_taps(o, K, lo, n, center, inv, lp, idx, w):
    """Output ``o``'s ``n`` tent taps from ``lo``, normalized; returns their raw sum."""
    total = 0.0
    for t in range(n):
        v = _tent((lo + t - center + 0.5) * inv)
        w[o * K + t] = v
        idx[o * K + t] = lo + t
        total += v
    if total != 0.0:
        for t in range(n):
            w[o * K + t] = r32(w[o * K + t] / total, lp)
    return total


@njit
def _table_aa(n_in, n_out, ac, has_s, s, lp, K, idx, w, sz):
    """The reference's antialiased weights: tent widened by the downscale, normalized."""
    sc = _axis_scale(n_in, n_out, ac, has_s, s, lp)
    support = sc if sc >= 1.0 else 1.0
    inv = r32(1.0 / sc, lp) if sc >= 1.0 else 1.0
    for o in range(n_out):
        center = r32(sc * r32(o + 0.5, lp), lp)
        lo = max(np.int64(r32(r32(center - support, lp) + 0.5, lp)), 0)
        hi = min(np.int64(r32(r32(center + support, lp) + 0.5, lp)), n_in)
        n = min(max(hi - lo, 0), K)
        tent_taps(o, K, lo, n, center, inv, lp, idx, w)
        sz[o] = n


@njit
def _table_u8(n_in, n_out, ac, has_s, s, aa, K, idx, w, sz):
    """ATen's uint8 weights (double precision, rounded to int16 fixed point); the precision."""
    sc = _axis_scale(n_in, n_out, ac, has_s, s, False)
    wmax = 0.0
    if aa:
        support = sc if sc >= 1.0 else 1.0
        inv = 1.0 / sc if sc >= 1.0 else 1.0
        for o in range(n_out):
            center = sc * (o + 0.5)
            lo = max(np.int64(center - support + 0.5), 0)
            n = min(max(min(np.int64(center + support + 0.5), n_in) - lo, 0), K)
            if tent_taps(o, K, lo, n, center, inv, False, idx, w) != 0.0:
                for t in range(n):
                    wmax = max(wmax, w[o * K + t])
            sz[o] = n
    else:
        for o in range(n_out):
            real = sc * o if ac else max(sc * (o + 0.5) - 0.5, 0.0)
            i0 = min(np.int64(math.floor(real)), n_in - 1)
            lam = min(max(real - i0, 0.0), 1.0)
            w0 = _tent(-lam)
            w1 = _tent(1.0 - lam)
            idx[2 * o] = i0
            idx[2 * o + 1] = i0
            if i0 >= n_in - 1:  # one tap holding both weights
                w[2 * o] = w0 + w1
                sz[o] = 1
            else:
                w[2 * o] = w0
                w[2 * o + 1] = w1
                idx[2 * o + 1] = i0 + 1
                sz[o] = 2
            wmax = max(wmax, w[2 * o])
            if sz[o] == 2:
                wmax = max(wmax, w[2 * o + 1])
    prec = 0
    while prec < 22 and np.int64(0.5 + wmax * (1 << (prec + 1))) < (1 << 15):
        prec += 1
    scale = np.float64(1 << prec)
    for o in range(n_out):
        for t in range(sz[o]):
            v = w[o * K + t] * scale
            w[o * K + t] = np.float64(np.int64(v - 0.5) if v < 0 else np.int64(v + 0.5))
    return prec


@njit
def _pass(sa, st, ssn, ssc, ssr, ssq, da, dt, dsn, dsc, dsr, dsq, N, C, R, Q, idx, w, sz, K,
          lp, u8, prec):
    """One separable pass: dst[n, c, r, q] = sum_t w[q, t] * src[n, c, r, idx[q, t]].

    uint8 sums in ATen's fixed point: (sum(w * x) + 2**(prec-1)) >> prec, clamped. When the
    destination is contiguous along r (the height pass), whole rows are accumulated tap by
    tap; otherwise output by output. (The loops are written out: from an inlined helper
    they ran several times slower.)"""
    rows = abs(dsr) < abs(dsq)
    fbuf = np.zeros(R if rows and not lp else 1, np.float64)
    gbuf = np.zeros(R if rows and lp else 1, np.float32)
    ibuf = np.zeros(R if rows and u8 else 1, np.int64)
    for n in range(N):
        for c in range(C):
            sb = n * ssn + c * ssc
            db = n * dsn + c * dsc
            if rows:
                for q in range(Q):
                    k0 = q * K
                    do = db + q * dsq
                    if u8:
                        for r in range(R):
                            ibuf[r] = np.int64(1) << (prec - 1)
                        for t in range(sz[q]):
                            wt = np.int64(w[k0 + t])
                            so = sb + idx[k0 + t] * ssq
                            for r in range(R):
                                ibuf[r] += wt * ldix(sa, st, so + r * ssr)
                        for r in range(R):
                            stix(da, dt, do + r * dsr, min(max(ibuf[r] >> prec, 0), 255))
                    elif lp:  # float32 arithmetic: w is float32, so each step rounds once
                        for r in range(R):
                            gbuf[r] = 0.0
                        for t in range(sz[q]):
                            w32 = np.float32(w[k0 + t])
                            so = sb + idx[k0 + t] * ssq
                            for r in range(R):
                                gbuf[r] += w32 * np.float32(ldx(sa, st, so + r * ssr))
                        for r in range(R):
                            stx(da, dt, do + r * dsr, np.float64(gbuf[r]))
                    else:
                        for r in range(R):
                            fbuf[r] = 0.0
                        for t in range(sz[q]):
                            wt = w[k0 + t]
                            so = sb + idx[k0 + t] * ssq
                            for r in range(R):
                                fbuf[r] += wt * ldx(sa, st, so + r * ssr)
                        for r in range(R):
                            stx(da, dt, do + r * dsr, fbuf[r])
            else:
                for r in range(R):
                    sr = sb + r * ssr
                    dr = db + r * dsr
                    for q in range(Q):
                        k0 = q * K
                        if u8:
                            ai = np.int64(1) << (prec - 1)
                            for t in range(sz[q]):
                                ai += np.int64(w[k0 + t]) * ldix(sa, st, sr + idx[k0 + t] * ssq)
                            stix(da, dt, dr + q * dsq, min(max(ai >> prec, 0), 255))
                        elif lp:
                            a32 = np.float32(0.0)
                            for t in range(sz[q]):
                                a32 += np.float32(w[k0 + t]) * np.float32(
                                    ldx(sa, st, sr + idx[k0 + t] * ssq))
                            stx(da, dt, dr + q * dsq, np.float64(a32))
                        else:
                            acc = 0.0
                            for t in range(sz[q]):
                                acc += w[k0 + t] * ldx(sa, st, sr + idx[k0 + t] * ssq)
                            stx(da, dt, dr + q * dsq, acc)


@njit
def _table(op, n_in, n_out, ac, has_s, s, lp, u8):
    if op == R_AA:
        sc = _axis_scale(n_in, n_out, ac, has_s, s, lp and not u8)
        K = np.int64(math.ceil(sc if sc >= 1.0 else 1.0)) * 2 + 1
    else:
        K = 2
    idx = np.zeros(max(n_out * K, 1), np.int64)
    w = np.zeros(max(n_out * K, 1), np.float64)
    sz = np.zeros(max(n_out, 1), np.int64)
    prec = 0
    if u8:
        prec = _table_u8(n_in, n_out, ac, has_s, s, op == R_AA, K, idx, w, sz)
    elif op == R_AA:
        _table_aa(n_in, n_out, ac, has_s, s, lp, K, idx, w, sz)
    else:
        _table_linear(n_in, n_out, ac, has_s, s, lp, idx, w, sz)
    return idx, w, sz, K, prec


@njit
def _separable(op, x, o, H, W, oh, ow, ac, has_sh, sh, has_sw, sw):
    N, C = x[D_SIZES], x[D_SIZES + 1]
    xt = x[D_DTYPE]
    u8 = xt == ST_U8
    lp = xt == ST_F32 or xt == ST_F16 or xt == ST_BF16
    need_w = ow != W
    need_h = oh != H
    if not need_w and not need_h:  # same size: a copy (cast to out's dtype)
        for n in range(N):
            for c in range(C):
                for i in range(H):
                    for j in range(W):
                        so = (n * x[D_STRIDES] + c * x[D_STRIDES + 1] + i * x[D_STRIDES + 2]
                              + j * x[D_STRIDES + 3])
                        store_f64_call(o[D_DATA], o[D_DTYPE], n * o[D_STRIDES]
                                       + c * o[D_STRIDES + 1] + i * o[D_STRIDES + 2]
                                       + j * o[D_STRIDES + 3], load_f64_call(x[D_DATA], xt, so))
        return OK
    if need_w and need_h:  # width first, into a float64 intermediate (N, C, H, ow)
        tmp = np.empty(max(N * C * H * ow, 1), np.float64)
        ta = np.int64(tmp.ctypes.data)
        idx, w, sz, K, prec = _table(op, W, ow, ac, has_sw, sw, lp, u8)
        _pass(x[D_DATA], xt, x[D_STRIDES], x[D_STRIDES + 1], x[D_STRIDES + 2], x[D_STRIDES + 3], ta,
              ST_F64, C * H * ow, H * ow, ow, 1, N, C, H, ow, idx, w, sz, K, lp, u8, prec)
        idx, w, sz, K, prec = _table(op, H, oh, ac, has_sh, sh, lp, u8)
        _pass(ta, ST_F64, C * H * ow, H * ow, 1, ow, o[D_DATA], o[D_DTYPE], o[D_STRIDES],
              o[D_STRIDES + 1], o[D_STRIDES + 3], o[D_STRIDES + 2], N, C, ow, oh, idx, w, sz, K, lp,
              u8, prec)
        if tmp.size == 0:  # keeps the intermediate alive through both passes
            return NOT_SUPPORTED
    elif need_w:
        idx, w, sz, K, prec = _table(op, W, ow, ac, has_sw, sw, lp, u8)
        _pass(x[D_DATA], xt, x[D_STRIDES], x[D_STRIDES + 1], x[D_STRIDES + 2], x[D_STRIDES + 3],
              o[D_DATA], o[D_DTYPE], o[D_STRIDES], o[D_STRIDES + 1], o[D_STRIDES + 2],
              o[D_STRIDES + 3], N, C, H, ow, idx, w, sz, K, lp, u8, prec)
    else:
        idx, w, sz, K, prec = _table(op, H, oh, ac, has_sh, sh, lp, u8)
        _pass(x[D_DATA], xt, x[D_STRIDES], x[D_STRIDES + 1], x[D_STRIDES + 3], x[D_STRIDES + 2],
              o[D_DATA], o[D_DTYPE], o[D_STRIDES], o[D_STRIDES + 1], o[D_STRIDES + 3],
              o[D_STRIDES + 2], N, C, W, oh, idx, w, sz, K, lp, u8, prec)
    return OK


def resample_kernel(block):
    # [op, x, out, sc, has_size, oh, ow, has_sh, sh, has_sw, sw, align_corners]
    op = block[0]
    x, o = descs(block, 1, 2)
    sc = scratch(block[3], 16)
    if x[D_NDIM] != 4:
        return INVALID_ARGUMENT
    H, W = x[D_SIZES + 2], x[D_SIZES + 3]
    has_sh, has_sw = block[7] != 0, block[9] != 0
    sh, sw = bits_to_f64(block[8]), bits_to_f64(block[10])
    if block[4] != 0:
        oh, ow = block[5], block[6]
    else:  # int(H * scale), as the reference
        oh, ow = np.int64(H * sh), np.int64(W * sw)
    if oh < 0 or ow < 0:
        return INVALID_ARGUMENT
    st = resize_hw(x, o, oh, ow, sc)
    if st != OK:
        return st
    if o[D_NUMEL] == 0:
        return OK
    if H == 0 or W == 0:
        return INVALID_ARGUMENT
    if op == R_NEAREST:
        return _nearest(x, o, H, W, oh, ow, has_sh, sh, has_sw, sw)
    return _separable(op, x, o, H, W, oh, ow, block[11] != 0, has_sh, sh, has_sw, sw)


def _bind_resample(ctx, op, x, out, output_size, scale_factors, align_corners=False, scales=None):
    if x.ndim != 4 or out.ndim != 4:
        return None
    if op == R_NEAREST:
        if out.dtype != x.dtype:  # a byte gather
            return None
    elif x.dtype == U8:
        if out.dtype != U8:
            return None
    elif not is_float(x.dtype):  # other integer types: the reference kernel
        return None
    if output_size is not None and scale_factors is not None:
        return None
    words = [op, ctx.desc(x), ctx.desc(out), ctx.buffer(16 * 8)]
    if output_size is not None:
        if len(output_size) != 2:
            return None
        words += [1, int(output_size[0]), int(output_size[1])]
        sh, sw = scales if scales is not None else (None, None)
    else:
        if scale_factors is None or len(scale_factors) != 2:
            return None
        words += [0, 0, 0]
        sh, sw = scale_factors
    words += [int(sh is not None), ctx.f64(sh or 0.0), int(sw is not None), ctx.f64(sw or 0.0),
              int(bool(align_corners))]
    return ctx.bind(lazy(resample_kernel), words)


@register_fast("aten::upsample_nearest2d.vec_out")
def bind_upsample_nearest2d(ctx, input, output_size, scale_factors, out):
    return _bind_resample(ctx, R_NEAREST, input, out, output_size, scale_factors)


@register_fast("aten::upsample_bilinear2d.vec_out")
def bind_upsample_bilinear2d(ctx, input, output_size, align_corners, scale_factors, out):
    return _bind_resample(ctx, R_BILINEAR, input, out, output_size, scale_factors, align_corners)


@register_fast("aten::_upsample_bilinear2d_aa.out")
def bind_upsample_bilinear2d_aa(ctx, self, output_size, align_corners, scales_h, scales_w, out):
    if output_size is None:
        return None
    return _bind_resample(ctx, R_AA, self, out, output_size, None, align_corners,
                          (scales_h, scales_w))
