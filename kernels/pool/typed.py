"""Compiled 2-D pooling over contiguous (N, C, H, W) or (C, H, W) float32/float64 inputs.

``max_pool2d_with_indices``: per output element the window taps are scanned
in order with the reference's (ATen's) update rule ``v > max or isnan(v)``,
starting from (-inf, tap 0): padding taps hold -inf and never win, so only
the in-bounds taps are visited and the result (values and flat per-plane
int64 indices) is the reference's, including its corner cases.
The taps are read with branch-free updates: a data-dependent branch per tap
mispredicts often and cost 2-3x.
``avg_pool2d`` sums the in-bounds taps in order in the tensor dtype (as
ExecuTorch's portable kernel does) and divides by the reference's divisor;
``_adaptive_avg_pool2d`` averages ATen's bins ``[floor(i*H/oh),
ceil((i+1)*H/oh))`` (any output size; the reference's numpy sums round
differently in the last bit). Output sizes follow ATen's
pooling_output_shape at run time (input sizes may be dynamic).
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.spatial_io import _planes, _resize_hw
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_F64, ST_I64, cast_like,
                             desc, flat, lazy, scratch)

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
U = np.uint64  # unsigned indices: no negative-index wraparound code in inner loops


@njit(inline="always")
def _out_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1  # floor division, as in Python
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


@njit(inline="always")
def _tap_range(start, k, d, size):
    """Taps t in [t0, t1) with 0 <= start + t*d < size."""
    if d == 1:  # no divisions in the common case
        t0 = -start if start < 0 else 0
        t1 = size - start if start + k > size else k
    else:
        t0 = (-start + d - 1) // d if start < 0 else 0
        t1 = (size - start + d - 1) // d if start + (k - 1) * d >= size else k
    if t1 < t0:
        t1 = t0
    return t0, t1


@njit(error_model="numpy")
def _max_typed(x, o, oi, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode, sc, m):
    nd = x[2]
    H = x[8 + nd - 2]
    W = x[8 + nd - 1]
    oh = _out_size(H, kh, sh, ph, dh, ceil_mode)
    ow = _out_size(W, kw, sw, pw, dw, ceil_mode)
    if oh < 1 or ow < 1:
        return INVALID_ARGUMENT
    st = _resize_hw(x, o, oh, ow, sc)
    if st != OK:
        return st
    st = _resize_hw(x, oi, oh, ow, sc)
    if st != OK:
        return st
    P = _planes(x)
    if P == 0:
        return OK
    xv = flat(x, m)
    z = flat(o, m)
    zi = flat(oi, np.int64(0))
    ninf = cast_like(-math.inf, m)
    for p in range(P):
        xb = p * H * W
        ob = p * oh * ow
        for i in range(oh):
            hs = i * sh - ph
            a0, a1 = _tap_range(hs, kh, dh, H)
            for j in range(ow):
                ws = j * sw - pw
                b0, b1 = _tap_range(ws, kw, dw, W)
                best = ninf
                arg = hs * W + ws  # tap 0, even when it lies in the padding
                for a in range(a0, a1):
                    ri = (hs + a * dh) * W + ws
                    r = xb + ri
                    for b in range(b0, b1):
                        v = xv[U(r + b * dw)]
                        # take = v > best or isnan(v), without data-dependent branches
                        msk = -np.int64((v > best) | (v != v))
                        arg = (arg & ~msk) | ((ri + b * dw) & msk)
                        best = max(best, v) if v == v else v
                z[U(ob + i * ow + j)] = best
                zi[U(ob + i * ow + j)] = arg
    return OK


def max_pool_kernel(block):
    x = desc(block[0])
    o = desc(block[1])
    oi = desc(block[2])
    sc = scratch(block[12], 16)
    if x[1] != o[1] or oi[1] != ST_I64:
        return NOT_SUPPORTED
    if o[1] == ST_F32:
        return _max_typed(x, o, oi, block[3], block[4], block[5], block[6], block[7], block[8],
                          block[9], block[10], block[11] != 0, sc, np.float32(0))
    if o[1] == ST_F64:
        return _max_typed(x, o, oi, block[3], block[4], block[5], block[6], block[7], block[8],
                          block[9], block[10], block[11] != 0, sc, np.float64(0))
    return NOT_SUPPORTED


def _pair(v, default=None):
    v = list(v) if v is not None else []
    if not v and default is not None:
        return list(default)
    if len(v) == 1:
        v = [v[0], v[0]]
    if len(v) != 2 or any(isinstance(e, bool) or not isinstance(e, (int, np.integer)) for e in v):
        return None
    return [int(e) for e in v]


def _pool_params(self, kernel_size, stride, padding, dilation):
    """(k, s, p, d) validated like the reference, or None (the reference raises)."""
    k = _pair(kernel_size)
    if k is None:
        return None
    s, p, d = _pair(stride, default=k), _pair(padding), _pair(dilation)
    if s is None or p is None or d is None:
        return None
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        return None
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        return None
    return k, s, p, d


def _pool_input_ok(self, *outs):
    return (self.dtype in FLOATS and self.ndim in (3, 4) and self.is_contiguous()
            and all(o.is_contiguous() and o.ndim == self.ndim for o in outs))


@register_fast("aten::max_pool2d_with_indices.out")
def bind_max_pool2d_with_indices(ctx, self, kernel_size, stride, padding, dilation, ceil_mode,
                                 out, indices):
    if not _pool_input_ok(self, out, indices) or out.dtype != self.dtype \
            or indices.dtype != np.dtype(np.int64):
        return None
    prm = _pool_params(self, kernel_size, stride, padding, dilation)
    if prm is None:
        return None
    k, s, p, d = prm
    return ctx.bind(lazy(max_pool_kernel),
                    [ctx.desc(self), ctx.desc(out), ctx.desc(indices), k[0], k[1], s[0], s[1],
                     p[0], p[1], d[0], d[1], int(bool(ceil_mode)), ctx.buffer(16 * 8)])


@njit(error_model="numpy")
def _avg_typed(x, o, kh, kw, sh, sw, ph, pw, ceil_mode, cip, divisor, sc, m):
    nd = x[2]
    H = x[8 + nd - 2]
    W = x[8 + nd - 1]
    oh = _out_size(H, kh, sh, ph, 1, ceil_mode)
    ow = _out_size(W, kw, sw, pw, 1, ceil_mode)
    if oh < 1 or ow < 1:
        return INVALID_ARGUMENT
    st = _resize_hw(x, o, oh, ow, sc)
    if st != OK:
        return st
    P = _planes(x)
    if P == 0:
        return OK
    xv = flat(x, m)
    z = flat(o, m)
    for p in range(P):
        xb = p * H * W
        ob = p * oh * ow
        for i in range(oh):
            hs = i * sh - ph
            he = min(hs + kh, H + ph)
            h0 = max(hs, 0)
            h1 = min(he, H)
            for j in range(ow):
                ws = j * sw - pw
                we = min(ws + kw, W + pw)
                w0 = max(ws, 0)
                w1 = min(we, W)
                s = cast_like(0.0, m)
                for a in range(h0, h1):
                    r = xb + a * W
                    for b in range(w0, w1):
                        s += xv[U(r + b)]
                if divisor != 0:
                    div = divisor
                elif cip:
                    div = (he - hs) * (we - ws)
                else:
                    div = (h1 - h0) * (w1 - w0)
                z[U(ob + i * ow + j)] = s / cast_like(div, m)
    return OK


def avg_pool_kernel(block):
    x = desc(block[0])
    o = desc(block[1])
    sc = scratch(block[11], 16)
    if x[1] != o[1]:
        return NOT_SUPPORTED
    if o[1] == ST_F32:
        return _avg_typed(x, o, block[2], block[3], block[4], block[5], block[6], block[7],
                          block[8] != 0, block[9] != 0, block[10], sc, np.float32(0))
    if o[1] == ST_F64:
        return _avg_typed(x, o, block[2], block[3], block[4], block[5], block[6], block[7],
                          block[8] != 0, block[9] != 0, block[10], sc, np.float64(0))
    return NOT_SUPPORTED


@register_fast("aten::avg_pool2d.out")
def bind_avg_pool2d(ctx, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override, out):
    if not _pool_input_ok(self, out) or out.dtype != self.dtype:
        return None
    prm = _pool_params(self, kernel_size, stride, padding, [1, 1])
    if prm is None:
        return None
    k, s, p, _ = prm
    if divisor_override is not None and (isinstance(divisor_override, bool) or not isinstance(
            divisor_override, (int, np.integer)) or divisor_override == 0):
        return None
    div = 0 if divisor_override is None else int(divisor_override)
    return ctx.bind(lazy(avg_pool_kernel),
                    [ctx.desc(self), ctx.desc(out), k[0], k[1], s[0], s[1], p[0], p[1],
                     int(bool(ceil_mode)), int(bool(count_include_pad)), div,
                     ctx.buffer(16 * 8)])


@njit(error_model="numpy")
def _adaptive_typed(x, o, oh, ow, sc, m):
    nd = x[2]
    H = x[8 + nd - 2]
    W = x[8 + nd - 1]
    st = _resize_hw(x, o, oh, ow, sc)
    if st != OK:
        return st
    P = _planes(x)
    if P == 0 or oh == 0 or ow == 0:
        return OK
    xv = flat(x, m)
    z = flat(o, m)
    for p in range(P):
        xb = p * H * W
        ob = p * oh * ow
        for i in range(oh):
            h0 = (i * H) // oh
            h1 = ((i + 1) * H + oh - 1) // oh
            for j in range(ow):
                w0 = (j * W) // ow
                w1 = ((j + 1) * W + ow - 1) // ow
                s = cast_like(0.0, m)
                for a in range(h0, h1):
                    r = xb + a * W
                    for b in range(w0, w1):
                        s += xv[U(r + b)]
                z[U(ob + i * ow + j)] = s / cast_like((h1 - h0) * (w1 - w0), m)
    return OK


def adaptive_avg_pool_kernel(block):
    x = desc(block[0])
    o = desc(block[1])
    sc = scratch(block[4], 16)
    if x[1] != o[1]:
        return NOT_SUPPORTED
    if o[1] == ST_F32:
        return _adaptive_typed(x, o, block[2], block[3], sc, np.float32(0))
    if o[1] == ST_F64:
        return _adaptive_typed(x, o, block[2], block[3], sc, np.float64(0))
    return NOT_SUPPORTED


@register_fast("aten::_adaptive_avg_pool2d.out")
def bind_adaptive_avg_pool2d(ctx, self, output_size, out):
    if not _pool_input_ok(self, out) or out.dtype != self.dtype:
        return None
    osz = _pair(output_size)
    if osz is None or min(osz) < 0:
        return None
    return ctx.bind(lazy(adaptive_avg_pool_kernel),
                    [ctx.desc(self), ctx.desc(out), osz[0], osz[1], ctx.buffer(16 * 8)])
