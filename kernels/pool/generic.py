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

from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.spatial_io import (_is_float, _ld, _ldi, _ldx, _lp, _off, _plane_offsets,
                                             _planes, _planes_outer, _r, _resize_hw, _stf, _sti,
                                             _stx)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_I64, desc, is_float_st, lazy,
                             ptr_like, resize_like, scratch)
from pyruntime.kernels.pool.typed import _out_size, _tap_range


# ---- pooling ----------------------------------------------------------------------------
P_AVG, P_MAX, P_ADAPT, P_MAXBWD = range(4)


@njit
def _avg(x, o, kh, kw, sh, sw, ph, pw, ceil_mode, cip, divisor, lp, sc):
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
    xa, xt, xsh, xsw = x[0], x[1], x[24 + nd - 2], x[24 + nd - 1]
    oa, ot, osh, osw = o[0], o[1], o[24 + nd - 2], o[24 + nd - 1]
    fl = is_float_st(xt)
    P = _planes(x)
    xo = _plane_offsets(x, P)
    oo = _plane_offsets(o, P)
    po = _planes_outer(x)
    n1, n2, n3 = (P, oh, ow) if po else (oh, ow, P)
    for u in range(n1):  # no divisions: (plane, i, j) from three loops
        for v in range(n2):
            for t in range(n3):
                p, i, j = (u, v, t) if po else (t, u, v)
                hs = i * sh - ph
                he = min(hs + kh, H + ph)
                h0 = max(hs, 0)
                h1 = min(he, H)
                ws = j * sw - pw
                we = min(ws + kw, W + pw)
                w0 = max(ws, 0)
                w1 = min(we, W)
                if divisor != 0:
                    dv = divisor
                elif cip:
                    dv = (he - hs) * (we - ws)
                else:
                    dv = (h1 - h0) * (w1 - w0)
                xb = xo[p]
                at = oo[p] + i * osh + j * osw
                if fl and lp:  # float32 arithmetic (rounding float64 steps: 3x the latency)
                    s32 = np.float32(0.0)
                    for a in range(h0, h1):
                        for b in range(w0, w1):
                            s32 += np.float32(_ldx(xa, xt, xb + a * xsh + b * xsw))
                    _stx(oa, ot, at, np.float64(s32 / np.float32(dv)))
                elif fl:
                    s = 0.0
                    for a in range(h0, h1):
                        for b in range(w0, w1):
                            s += _ldx(xa, xt, xb + a * xsh + b * xsw)
                    _stx(oa, ot, at, s / dv)
                else:
                    si = np.int64(0)
                    for a in range(h0, h1):
                        for b in range(w0, w1):
                            si += _ldi(xa, xt, xb + a * xsh + b * xsw)
                    if dv == 0:
                        return INVALID_ARGUMENT
                    q = abs(si) // abs(dv)  # C division: truncates toward zero
                    _sti(oa, ot, at, -q if (si < 0) != (dv < 0) else q)
    return OK


@njit
def _max(x, o, oi, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode, fill, sc):
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
    xa, xt, xsh, xsw = x[0], x[1], x[24 + nd - 2], x[24 + nd - 1]
    oa, ot, osh, osw = o[0], o[1], o[24 + nd - 2], o[24 + nd - 1]
    ia, it, ish, isw = oi[0], oi[1], oi[24 + nd - 2], oi[24 + nd - 1]
    fl = is_float_st(xt)
    P = _planes(x)
    xo = _plane_offsets(x, P)
    oo = _plane_offsets(o, P)
    io = _plane_offsets(oi, P)
    po = _planes_outer(x)
    n1, n2, n3 = (P, oh, ow) if po else (oh, ow, P)
    for u in range(n1):  # no divisions: (plane, i, j) from three loops
        for v in range(n2):
            for t in range(n3):
                p, i, j = (u, v, t) if po else (t, u, v)
                hs = i * sh - ph
                a0, a1 = _tap_range(hs, kh, dh, H)
                ws = j * sw - pw
                b0, b1 = _tap_range(ws, kw, dw, W)
                xb = xo[p]
                arg = hs * W + ws  # tap 0, even when it lies in the padding
                if fl:
                    best = -math.inf
                    for a in range(a0, a1):
                        r = hs + a * dh
                        for b in range(b0, b1):
                            c = ws + b * dw
                            val = _ldx(xa, xt, xb + r * xsh + c * xsw)
                            # take = val > best or isnan(val), without data-dependent branches
                            msk = -np.int64((val > best) | (val != val))
                            arg = (arg & ~msk) | ((r * W + c) & msk)
                            best = max(best, val) if val == val else val
                    _stx(oa, ot, oo[p] + i * osh + j * osw, best)
                else:
                    bi = fill
                    for a in range(a0, a1):
                        r = hs + a * dh
                        for b in range(b0, b1):
                            c = ws + b * dw
                            vi = _ldi(xa, xt, xb + r * xsh + c * xsw)
                            if vi > bi:
                                bi = vi
                                arg = r * W + c
                    _sti(oa, ot, oo[p] + i * osh + j * osw, bi)
                if it == ST_I64:
                    ptr_like(ia, np.int64(0))[io[p] + i * ish + j * isw] = arg
                else:
                    _sti(ia, it, io[p] + i * ish + j * isw, arg)
    return OK


@njit
def _adaptive(x, o, oh, ow, lp, sc):
    nd = x[2]
    H = x[8 + nd - 2]
    W = x[8 + nd - 1]
    st = _resize_hw(x, o, oh, ow, sc)
    if st != OK:
        return st
    if oh == 0 or ow == 0:
        return OK
    xa, xt, xsh, xsw = x[0], x[1], x[24 + nd - 2], x[24 + nd - 1]
    oa, ot, osh, osw = o[0], o[1], o[24 + nd - 2], o[24 + nd - 1]
    P = _planes(x)
    xo = _plane_offsets(x, P)
    oo = _plane_offsets(o, P)
    po = _planes_outer(x)
    n1, n2, n3 = (P, oh, ow) if po else (oh, ow, P)
    for u in range(n1):  # no divisions: (plane, i, j) from three loops
        for v in range(n2):
            for t in range(n3):
                p, i, j = (u, v, t) if po else (t, u, v)
                h0 = (i * H) // oh
                h1 = ((i + 1) * H + oh - 1) // oh
                w0 = (j * W) // ow
                w1 = ((j + 1) * W + ow - 1) // ow
                xb = xo[p]
                at = oo[p] + i * osh + j * osw
                n = (h1 - h0) * (w1 - w0)
                if lp:
                    s32 = np.float32(0.0)
                    for a in range(h0, h1):
                        for b in range(w0, w1):
                            s32 += np.float32(_ldx(xa, xt, xb + a * xsh + b * xsw))
                    _stx(oa, ot, at, np.float64(s32 / np.float32(n)))
                else:
                    s = 0.0
                    for a in range(h0, h1):
                        for b in range(w0, w1):
                            s += _ldx(xa, xt, xb + a * xsh + b * xsw)
                    _stx(oa, ot, at, s / n)
    return OK


@njit
def _max_backward(g, x, ix, gi, acc_addr, lp):
    """grad_input[plane, indices[k]] += grad_output[k], in order, then cast to grad_input."""
    st = resize_like(gi, x)
    if st != OK:
        return st
    nd = x[2]
    P = _planes(x)
    HW = x[8 + nd - 2] * x[8 + nd - 1]
    n = P * HW
    acc = ptr_like(acc_addr, np.float64(0))
    for q in range(n):
        acc[q] = 0.0
    ng = g[3]
    if ix[3] != ng or (P == 0 and ng != 0) or (P != 0 and ng % P != 0):
        return INVALID_ARGUMENT
    K = ng // P if P else 0
    for k in range(ng):
        idx = _ldi(ix[0], ix[1], _off(ix, k))
        if idx < 0 or idx >= HW:
            return INVALID_ARGUMENT
        q = (k // K) * HW + idx
        acc[q] = _r(acc[q] + _ld(g[0], g[1], _off(g, k)), lp)
    for q in range(n):
        _stf(gi[0], gi[1], _off(gi, q), acc[q])
    return OK


def pool_kernel(block):
    op = block[0]
    if op == P_MAXBWD:  # [op, grad_output, self, indices, grad_input, acc, lp]
        return _max_backward(desc(block[1]), desc(block[2]), desc(block[3]), desc(block[4]),
                             block[5], block[6] != 0)
    x = desc(block[1])
    o = desc(block[2])
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


def _pair(v, default=None):
    v = list(v) if v is not None else []
    if not v and default is not None:
        return list(default)
    if len(v) == 1:
        v = [v[0], v[0]]
    if len(v) != 2 or any(isinstance(e, bool) or not isinstance(e, (int, np.integer)) for e in v):
        return None
    return [int(e) for e in v]


def _pool_params(kernel_size, stride, padding, dilation):
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


def _pool_ok(self, *outs):
    return self.ndim in (3, 4) and all(o.ndim == self.ndim for o in outs)


@register_fast("aten::avg_pool2d.out", fallback=True)
def bind_avg_pool2d_any(ctx, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override, out):
    if not _pool_ok(self, out):
        return None
    prm = _pool_params(kernel_size, stride, padding, [1, 1])
    if prm is None:
        return None
    k, s, p, _ = prm
    if divisor_override is not None and (isinstance(divisor_override, bool) or not isinstance(
            divisor_override, (int, np.integer)) or divisor_override == 0):
        return None
    div = 0 if divisor_override is None else int(divisor_override)
    return ctx.bind(lazy(pool_kernel),
                    [P_AVG, ctx.desc(self), ctx.desc(out), ctx.buffer(16 * 8), k[0], k[1], s[0],
                     s[1], p[0], p[1], int(bool(ceil_mode)), int(bool(count_include_pad)), div,
                     int(_lp(self.dtype))])


@register_fast("aten::max_pool2d_with_indices.out", fallback=True)
def bind_max_pool2d_with_indices_any(ctx, self, kernel_size, stride, padding, dilation, ceil_mode,
                                     out, indices):
    if not _pool_ok(self, out, indices):
        return None
    prm = _pool_params(kernel_size, stride, padding, dilation)
    if prm is None:
        return None
    k, s, p, d = prm
    dt = self.dtype
    fill = 0 if _is_float(dt) or dt == np.bool_ else int(np.iinfo(dt).min)
    return ctx.bind(lazy(pool_kernel),
                    [P_MAX, ctx.desc(self), ctx.desc(out), ctx.buffer(16 * 8), k[0], k[1], s[0],
                     s[1], p[0], p[1], d[0], d[1], int(bool(ceil_mode)), fill,
                     ctx.desc(indices)])


@register_fast("aten::_adaptive_avg_pool2d.out", fallback=True)
def bind_adaptive_avg_pool2d_any(ctx, self, output_size, out):
    # integer inputs (torch rejects them) stay on the reference kernel
    if not _pool_ok(self, out) or not _is_float(self.dtype):
        return None
    osz = _pair(output_size)
    if osz is None or min(osz) < 0:
        return None
    return ctx.bind(lazy(pool_kernel),
                    [P_ADAPT, ctx.desc(self), ctx.desc(out), ctx.buffer(16 * 8), osz[0], osz[1],
                     int(_lp(self.dtype))])


@register_fast("aten::max_pool2d_with_indices_backward.grad_input")
def bind_max_pool2d_with_indices_backward(ctx, grad_output, self, kernel_size, stride, padding,
                                          dilation, ceil_mode, indices, grad_input):
    # integer gradients (torch rejects them) stay on the reference kernel
    if self.ndim not in (3, 4) or grad_input.ndim != self.ndim \
            or not _is_float(grad_output.dtype) or indices.dtype.kind not in "iu":
        return None
    return ctx.bind(lazy(pool_kernel),
                    [P_MAXBWD, ctx.desc(grad_output), ctx.desc(self), ctx.desc(indices),
                     ctx.desc(grad_input), ctx.buffer(grad_input.capacity * 8),
                     int(_lp(grad_output.dtype))])
