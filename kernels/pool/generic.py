"""Compiled pooling for every dtype the reference takes (``pool_kernel``), and the
family's overview.

Four kernels (``pool.py``, ``upsample.py``, ``grid_sample.py``, ``dist.py``; shared
element access in ``spatial_io.py``) serve every dtype and dim order: elements are addressed through
the descriptors' strides (inputs and outs may be channels-last or any other
dim order) and read/written by run-time scalar type (floats inline, the rest
through ``nb.load_*``/``store_*``; half/bfloat16 convert bit-exactly).

* ``pool_kernel``: avg_pool2d, max_pool2d_with_indices, _adaptive_avg_pool2d
  (fallbacks behind the float32/float64 contiguous kernels of ``pool.py``) and
  max_pool2d_with_indices_backward. Floats are summed in order in the
  reference's compute type (float32 arithmetic for float32 and the half types,
  float64 for float64); integers in int64 with C division; max pooling scans
  the in-bounds taps in order with ATen's rule ``v > max or isnan(v)`` from
  (padding value, tap 0). Planes are visited one by one, or pixel by pixel
  when they interleave (channels-last).
* ``resample_kernel``: upsample_nearest2d (a byte gather with the reference's
  float32 index arithmetic), and upsample_bilinear2d / _upsample_bilinear2d_aa
  as ATen's separable passes: per axis a table of (index, weight) taps, the
  width resampled first into a float64 intermediate, then the height; an axis
  whose size does not change is skipped. Float weights follow the reference
  (op-math precision); uint8 uses ATen's int16 fixed-point weights and integer
  sums, exactly as the reference (kernels/upsample/reference.py) does.
* ``grid_kernel``: grid_sampler_2d (bilinear, nearest, bicubic; zeros,
  border, reflection padding) step by step in the reference's op-math type.
* ``dist_kernel``: _cdist_forward (batch broadcasting, ATen's matrix-product
  Euclidean path for p == 2 and large inputs) and _pdist_forward, in float64.

Where the reference sums in another order (numpy pairwise sums, BLAS
products) float32/float64 results agree to the last bit or so, not bit for
bit; integer, uint8-resampling, pooling-max and grid-sample results are exact.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.spatial_io import (computes_f32, element_offset, hw_view, is_float, ldx,
                                               plane_count, plane_offsets, plane_walk, resize_hw,
                                               r32, stx)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_I64, desc, descs,
                                       is_float_st, lazy, load_f64_call, load_i64_call, ptr_like,
                                       resize_like, scratch, store_f64_call, store_i64_call)
from pyruntime.kernels.pool.typed import (tap_range, avg_words, pair, pool_resize, pool_words,
                                         window_divisor, window_span)


# ---- pooling ----------------------------------------------------------------------------
P_AVG, P_MAX, P_ADAPT, P_MAXBWD = range(4)


@njit(inline="always")
def window_mean(xa, xt, xb, xsh, xsw, h0, h1, w0, w1, dv, lp):
    """In-order sum / ``dv`` (float32 if ``lp``) of rows [h0, h1) x cols [w0, w1) at ``xb``."""
    if lp:  # float32 arithmetic (rounding float64 steps: 3x the latency)
        s32 = np.float32(0.0)
        for a in range(h0, h1):
            for b in range(w0, w1):
                s32 += np.float32(ldx(xa, xt, xb + a * xsh + b * xsw))
        return np.float64(s32 / np.float32(dv))
    s = 0.0
    for a in range(h0, h1):
        for b in range(w0, w1):
            s += ldx(xa, xt, xb + a * xsh + b * xsw)
    return s / dv


@njit
def _mean(x, o, oh, ow, kh, kw, sh, sw, ph, pw, cip, divisor, adaptive, lp):
    """Window means into the (oh, ow) planes of ``o`` (resized): avg_pool2d's windows, or
    _adaptive_avg_pool2d's bins when ``adaptive`` (floats; divisor 0)."""
    if oh == 0 or ow == 0:
        return OK
    nd = x[D_NDIM]
    H = x[D_SIZES + nd - 2]
    W = x[D_SIZES + nd - 1]
    xa, xt, xsh, xsw = hw_view(x)
    oa, ot, osh, osw = hw_view(o)
    fl = is_float_st(xt)
    xo, oo, po, n1, n2, n3 = plane_walk(x, o, oh, ow)
    for u in range(n1):  # no divisions: (plane, i, j) from three loops
        for v in range(n2):
            for t in range(n3):
                p, i, j = (u, v, t) if po else (t, u, v)
                hs, he, h0, h1 = window_span(i, oh, H, kh, sh, ph, adaptive)
                ws, we, w0, w1 = window_span(j, ow, W, kw, sw, pw, adaptive)
                dv = window_divisor(divisor, cip, hs, he, h0, h1, ws, we, w0, w1)
                xb = xo[p]
                at = oo[p] + i * osh + j * osw
                if fl:
                    stx(oa, ot, at, window_mean(xa, xt, xb, xsh, xsw, h0, h1, w0, w1, dv, lp))
                else:
                    si = np.int64(0)
                    for a in range(h0, h1):
                        for b in range(w0, w1):
                            si += load_i64_call(xa, xt, xb + a * xsh + b * xsw)
                    if dv == 0:
                        return INVALID_ARGUMENT
                    q = abs(si) // abs(dv)  # C division: truncates toward zero
                    store_i64_call(oa, ot, at, -q if (si < 0) != (dv < 0) else q)
    return OK


@njit
def _avg(x, o, kh, kw, sh, sw, ph, pw, ceil_mode, cip, divisor, lp, sc):
    st, _, _, oh, ow = pool_resize(x, o, kh, kw, sh, sw, ph, pw, 1, 1, ceil_mode, sc)
    if st != OK:
        return st
    return _mean(x, o, oh, ow, kh, kw, sh, sw, ph, pw, cip, divisor, False, lp)


@njit
def _max(x, o, oi, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode, fill, sc):
    st, H, W, oh, ow = pool_resize(x, o, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode, sc)
    if st != OK:
        return st
    st = resize_hw(x, oi, oh, ow, sc)
    if st != OK:
        return st
    xa, xt, xsh, xsw = hw_view(x)
    oa, ot, osh, osw = hw_view(o)
    ia, it, ish, isw = hw_view(oi)
    fl = is_float_st(xt)
    xo, oo, po, n1, n2, n3 = plane_walk(x, o, oh, ow)
    io = plane_offsets(oi, plane_count(x))
    for u in range(n1):  # no divisions: (plane, i, j) from three loops
        for v in range(n2):
            for t in range(n3):
                p, i, j = (u, v, t) if po else (t, u, v)
                hs = i * sh - ph
                a0, a1 = tap_range(hs, kh, dh, H)
                ws = j * sw - pw
                b0, b1 = tap_range(ws, kw, dw, W)
                xb = xo[p]
                arg = hs * W + ws  # tap 0, even when it lies in the padding
                if fl:
                    best = -math.inf
                    for a in range(a0, a1):
                        r = hs + a * dh
                        for b in range(b0, b1):
                            c = ws + b * dw
                            val = ldx(xa, xt, xb + r * xsh + c * xsw)
                            # take = val > best or isnan(val), without data-dependent branches
                            msk = -np.int64((val > best) | (val != val))
                            arg = (arg & ~msk) | ((r * W + c) & msk)
                            best = max(best, val) if val == val else val
                    stx(oa, ot, oo[p] + i * osh + j * osw, best)
                else:
                    bi = fill
                    for a in range(a0, a1):
                        r = hs + a * dh
                        for b in range(b0, b1):
                            c = ws + b * dw
                            vi = load_i64_call(xa, xt, xb + r * xsh + c * xsw)
                            if vi > bi:
                                bi = vi
                                arg = r * W + c
                    store_i64_call(oa, ot, oo[p] + i * osh + j * osw, bi)
                if it == ST_I64:
                    ptr_like(ia, np.int64(0))[io[p] + i * ish + j * isw] = arg
                else:
                    store_i64_call(ia, it, io[p] + i * ish + j * isw, arg)
    return OK


@njit
def _adaptive(x, o, oh, ow, lp, sc):
    st = resize_hw(x, o, oh, ow, sc)
    if st != OK:
        return st
    return _mean(x, o, oh, ow, 0, 0, 1, 1, 0, 0, False, 0, True, lp)


@njit
def _max_backward(g, x, ix, gi, acc_addr, lp):
    """grad_input[plane, indices[k]] += grad_output[k], in order, then cast to grad_input."""
    st = resize_like(gi, x)
    if st != OK:
        return st
    nd = x[D_NDIM]
    P = plane_count(x)
    HW = x[D_SIZES + nd - 2] * x[D_SIZES + nd - 1]
    n = P * HW
    acc = ptr_like(acc_addr, np.float64(0))
    for q in range(n):
        acc[q] = 0.0
    ng = g[D_NUMEL]
    if ix[D_NUMEL] != ng or (P == 0 and ng != 0) or (P != 0 and ng % P != 0):
        return INVALID_ARGUMENT
    K = ng // P if P else 0
    for k in range(ng):
        idx = load_i64_call(ix[D_DATA], ix[D_DTYPE], element_offset(ix, k))
        if idx < 0 or idx >= HW:
            return INVALID_ARGUMENT
        q = (k // K) * HW + idx
        acc[q] = r32(acc[q] + load_f64_call(g[D_DATA], g[D_DTYPE], element_offset(g, k)), lp)
    for q in range(n):
        store_f64_call(gi[D_DATA], gi[D_DTYPE], element_offset(gi, q), acc[q])
    return OK


def pool_kernel(block):
    op = block[0]
    if op == P_MAXBWD:  # [op, grad_output, self, indices, grad_input, acc, lp]
        return _max_backward(desc(block[1]), desc(block[2]), desc(block[3]), desc(block[4]),
                             block[5], block[6] != 0)
    x, o = descs(block, 1, 2)
    sc = scratch(block[3], 16)
    if op == P_AVG:  # [op, x, out, sc, kh, kw, sh, sw, ph, pw, ceil, cip, divisor, lp]
        return _avg(x, o, block[4], block[5], block[6], block[7], block[8], block[9],
                    block[10] != 0, block[11] != 0, block[12], block[13] != 0, sc)
    if op == P_MAX:  # [op, x, out, sc, kh, kw, sh, sw, ph, pw, dh, dw, ceil, fill, indices]
        return _max(x, o, desc(block[14]), block[4], block[5], block[6], block[7], block[8],
                    block[9], block[10], block[11], block[12] != 0, block[13], sc)
    if op == P_ADAPT:  # [op, x, out, sc, oh, ow, lp]
        return _adaptive(x, o, block[4], block[5], block[6] != 0, sc)
    return NOT_SUPPORTED


def _pool_ok(self, *outs):
    return self.ndim in (3, 4) and all(o.ndim == self.ndim for o in outs)


def bind_avg_pool2d_any(ctx, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override, out):
    if not _pool_ok(self, out):
        return None
    words = avg_words(kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override)
    if words is None:
        return None
    return ctx.bind(lazy(pool_kernel), [P_AVG, ctx.desc(self), ctx.desc(out), ctx.buffer(16 * 8)]
                    + words + [int(computes_f32(self.dtype))])


def bind_max_pool2d_with_indices_any(ctx, self, kernel_size, stride, padding, dilation, ceil_mode,
                                     out, indices):
    if not _pool_ok(self, out, indices):
        return None
    words = pool_words(kernel_size, stride, padding, dilation, ceil_mode)
    if words is None:
        return None
    dt = self.dtype
    fill = 0 if is_float(dt) or dt == np.bool_ else int(np.iinfo(dt).min)
    return ctx.bind(lazy(pool_kernel), [P_MAX, ctx.desc(self), ctx.desc(out), ctx.buffer(16 * 8)]
                    + words + [fill, ctx.desc(indices)])


def bind_adaptive_avg_pool2d_any(ctx, self, output_size, out):
    # integer inputs (torch rejects them) stay on the reference kernel
    if not _pool_ok(self, out) or not is_float(self.dtype):
        return None
    osz = pair(output_size)
    if osz is None or min(osz) < 0:
        return None
    return ctx.bind(lazy(pool_kernel),
                    [P_ADAPT, ctx.desc(self), ctx.desc(out), ctx.buffer(16 * 8), osz[0], osz[1],
                     int(computes_f32(self.dtype))])


@register_fast("aten::max_pool2d_with_indices_backward.grad_input")
def bind_max_pool2d_with_indices_backward(ctx, grad_output, self, kernel_size, stride, padding,
                                          dilation, ceil_mode, indices, grad_input):
    # integer gradients (torch rejects them) stay on the reference kernel
    if self.ndim not in (3, 4) or grad_input.ndim != self.ndim \
            or not is_float(grad_output.dtype) or indices.dtype.kind not in "iu":
        return None
    return ctx.bind(lazy(pool_kernel),
                    [P_MAXBWD, ctx.desc(grad_output), ctx.desc(self), ctx.desc(indices),
                     ctx.desc(grad_input), ctx.buffer(grad_input.capacity * 8),
                     int(computes_f32(grad_output.dtype))])
