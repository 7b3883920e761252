"""Compiled pooling, resampling and distance kernels for every dtype the reference takes.

Four kernels serve every dtype and dim order: elements are addressed through
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
  sums, exactly as the reference (kernels/upsample.py) does.
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
from numba import njit

from kernels.fast import register_fast
from kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_BF16, ST_F16, ST_F32, ST_F64,
                             ST_I64, ST_U8, bits_to_f64, desc, elem_size, f32_from_bits,
                             f64_to_bf16, f64_to_half, half_to_f64, is_contiguous, is_float_st,
                             lazy, load_f64, load_i64, offset_of, ptr_like, resize_like, resize_to,
                             scratch, store_f64, store_i64)

U8 = np.dtype(np.uint8)
F64 = np.dtype(np.float64)


def _is_float(dt):
    return dt.kind == "f" or dt.name == "bfloat16"


def _lp(dt):
    """True when the reference computes in float32 (float32 and the half types)."""
    return _is_float(dt) and dt != F64


# ---- shared helpers ---------------------------------------------------------------------

# Element access through the run-time scalar type, compiled once and called (not inlined)
# from every site: inlining nb's 10-way dtype switches at each site multiplies compile time.

@njit
def _ld(addr, st, i):
    if st == ST_F16:
        return half_to_f64(np.int64(ptr_like(addr, np.uint16(0))[i]))
    return load_f64(addr, st, i)


@njit
def _ldi(addr, st, i):
    return load_i64(addr, st, i)


@njit
def _stf(addr, st, i, v):
    store_f64(addr, st, i, v)


@njit
def _sti(addr, st, i, v):
    store_i64(addr, st, i, v)


@njit(inline="always")
def _ldx(addr, st, i):
    """Floats inline (the hot cases), integers through ``_ld``."""
    if st == ST_F32:
        return np.float64(ptr_like(addr, np.float32(0))[i])
    if st == ST_F64:
        return ptr_like(addr, np.float64(0))[i]
    if st == ST_F16:
        return half_to_f64(np.int64(ptr_like(addr, np.uint16(0))[i]))
    if st == ST_BF16:
        return np.float64(f32_from_bits(np.int32(np.int64(ptr_like(addr, np.uint16(0))[i]) << 16)))
    return _ld(addr, st, i)


@njit(inline="always")
def _ldix(addr, st, i):
    """uint8 / float64 (the fixed-point resampling cases) inline, others through ``_ldi``."""
    if st == ST_U8:
        return np.int64(ptr_like(addr, np.uint8(0))[i])
    if st == ST_F64:
        return np.int64(ptr_like(addr, np.float64(0))[i])
    return _ldi(addr, st, i)


@njit(inline="always")
def _stix(addr, st, i, v):
    if st == ST_U8:
        ptr_like(addr, np.uint8(0))[i] = np.uint8(v)
    elif st == ST_F64:
        ptr_like(addr, np.float64(0))[i] = np.float64(v)
    else:
        _sti(addr, st, i, v)


@njit(inline="always")
def _stx(addr, st, i, v):
    if st == ST_F32:
        ptr_like(addr, np.float32(0))[i] = np.float32(v)
    elif st == ST_F64:
        ptr_like(addr, np.float64(0))[i] = v
    elif st == ST_F16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_half(v))
    elif st == ST_BF16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_bf16(v))
    else:
        _stf(addr, st, i, v)


@njit(inline="always")
def _r(v, lp):
    """float32 rounding of a float64 step when the op-math type is float32."""
    return np.float64(np.float32(v)) if lp else v


@njit(inline="always")
def _plane(d, p):
    """Storage offset of plane ``p`` (leading dims, row-major) of descriptor ``d``."""
    off = 0
    for i in range(d[2] - 3, -1, -1):
        sz = d[8 + i]
        off += (p % sz) * d[24 + i]
        p //= sz
    return off


@njit(inline="always")
def _planes(d):
    n = 1
    for i in range(d[2] - 2):
        n *= d[8 + i]
    return n


@njit(inline="always")
def _resize_hw(x, o, oh, ow, sc):
    """Resize ``o`` to x's leading dims + (oh, ow)."""
    nd = x[2]
    for i in range(nd - 2):
        sc[i] = x[8 + i]
    sc[nd - 2] = oh
    sc[nd - 1] = ow
    return resize_to(o, sc, nd)


@njit(inline="always")
def _off(d, k):
    return k if is_contiguous(d) else offset_of(d, k)


@njit
def _plane_offsets(d, P):
    """Storage offsets of the P planes (leading dims, row-major) of descriptor ``d``."""
    offs = np.zeros(max(P, 1), np.int64)
    for p in range(P):
        offs[p] = _plane(d, p)
    return offs


@njit(inline="always")
def _planes_outer(x):
    """Visit plane by plane unless planes interleave (channels-last): then pixel by pixel."""
    nd = x[2]
    return nd < 3 or x[24 + nd - 3] >= x[24 + nd - 1]


# ---- pooling ----------------------------------------------------------------------------
P_AVG, P_MAX, P_ADAPT, P_MAXBWD = range(4)


@njit(inline="always")
def _out_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


@njit(inline="always")
def _tap_range(start, k, d, size):
    """Taps t in [t0, t1) with 0 <= start + t*d < size."""
    t0 = (-start + d - 1) // d if start < 0 else 0
    t1 = (size - start + d - 1) // d if start + (k - 1) * d >= size else k
    return t0, max(t0, t1)


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


@njit(inline="always")
def _copy_el(sa, si, da, di, es):
    if es == 1:
        ptr_like(da, np.uint8(0))[di] = ptr_like(sa, np.uint8(0))[si]
    elif es == 2:
        ptr_like(da, np.uint16(0))[di] = ptr_like(sa, np.uint16(0))[si]
    elif es == 4:
        ptr_like(da, np.uint32(0))[di] = ptr_like(sa, np.uint32(0))[si]
    else:
        ptr_like(da, np.uint64(0))[di] = ptr_like(sa, np.uint64(0))[si]


@njit
def _nearest(x, o, H, W, oh, ow, has_sh, sh, has_sw, sw):
    es = elem_size(x[1])
    cols = np.empty(max(ow, 1), np.int64)
    for j in range(ow):
        cols[j] = _near(j, W, ow, has_sw, sw) * x[27]
    N, C = x[8], x[9]
    for n in range(N):
        for c in range(C):
            xb = n * x[24] + c * x[25]
            ob = n * o[24] + c * o[25]
            for i in range(oh):
                xr = xb + _near(i, H, oh, has_sh, sh) * x[26]
                orow = ob + i * o[26]
                for j in range(ow):
                    _copy_el(x[0], xr + cols[j], o[0], orow + j * o[27], es)
    return OK


@njit
def _axis_scale(n_in, n_out, ac, has_s, s, lp):
    """ATen's area_pixel_compute_scale (the reference's ``_scale``)."""
    if ac:
        return _r((n_in - 1) / (n_out - 1), lp) if n_out > 1 else 0.0
    if has_s and s > 0:
        return _r(1.0 / s, lp)
    if lp:
        return _r(np.float64(np.float32(n_in)) / np.float64(np.float32(n_out)), lp)
    return n_in / n_out


@njit
def _table_linear(n_in, n_out, ac, has_s, s, lp, idx, w, sz):
    """Two taps per output: (i0, 1 - lambda), (i1, lambda), in op-math precision."""
    sc = _axis_scale(n_in, n_out, ac, has_s, s, lp)
    for o in range(n_out):
        if ac:
            real = _r(sc * o, lp)
        else:
            real = max(_r(_r(sc * _r(o + 0.5, lp), lp) - 0.5, lp), 0.0)
        i0 = min(np.int64(math.floor(real)), n_in - 1)
        lam = min(max(_r(real - i0, lp), 0.0), 1.0)
        idx[2 * o] = i0
        idx[2 * o + 1] = i0 + 1 if i0 < n_in - 1 else i0
        w[2 * o] = _r(1.0 - lam, lp)
        w[2 * o + 1] = lam
        sz[o] = 2


@njit(inline="always")
def _tent(t):
    t = abs(t)
    return 1.0 - t if t < 1.0 else 0.0


@njit
def _table_aa(n_in, n_out, ac, has_s, s, lp, K, idx, w, sz):
    """The reference's antialiased weights: tent widened by the downscale, normalized."""
    sc = _axis_scale(n_in, n_out, ac, has_s, s, lp)
    support = sc if sc >= 1.0 else 1.0
    inv = _r(1.0 / sc, lp) if sc >= 1.0 else 1.0
    for o in range(n_out):
        center = _r(sc * _r(o + 0.5, lp), lp)
        lo = max(np.int64(_r(_r(center - support, lp) + 0.5, lp)), 0)
        hi = min(np.int64(_r(_r(center + support, lp) + 0.5, lp)), n_in)
        n = min(max(hi - lo, 0), K)
        total = 0.0
        for t in range(n):
            v = _tent((lo + t - center + 0.5) * inv)
            w[o * K + t] = v
            idx[o * K + t] = lo + t
            total += v
        if total != 0.0:
            for t in range(n):
                w[o * K + t] = _r(w[o * K + t] / total, lp)
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
            total = 0.0
            for t in range(n):
                v = _tent((lo + t - center + 0.5) * inv)
                w[o * K + t] = v
                idx[o * K + t] = lo + t
                total += v
            if total != 0.0:
                for t in range(n):
                    w[o * K + t] /= total
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
                                ibuf[r] += wt * _ldix(sa, st, so + r * ssr)
                        for r in range(R):
                            _stix(da, dt, do + r * dsr, min(max(ibuf[r] >> prec, 0), 255))
                    elif lp:  # float32 arithmetic: w is float32, so each step rounds once
                        for r in range(R):
                            gbuf[r] = 0.0
                        for t in range(sz[q]):
                            w32 = np.float32(w[k0 + t])
                            so = sb + idx[k0 + t] * ssq
                            for r in range(R):
                                gbuf[r] += w32 * np.float32(_ldx(sa, st, so + r * ssr))
                        for r in range(R):
                            _stx(da, dt, do + r * dsr, np.float64(gbuf[r]))
                    else:
                        for r in range(R):
                            fbuf[r] = 0.0
                        for t in range(sz[q]):
                            wt = w[k0 + t]
                            so = sb + idx[k0 + t] * ssq
                            for r in range(R):
                                fbuf[r] += wt * _ldx(sa, st, so + r * ssr)
                        for r in range(R):
                            _stx(da, dt, do + r * dsr, fbuf[r])
            else:
                for r in range(R):
                    sr = sb + r * ssr
                    dr = db + r * dsr
                    for q in range(Q):
                        k0 = q * K
                        if u8:
                            ai = np.int64(1) << (prec - 1)
                            for t in range(sz[q]):
                                ai += np.int64(w[k0 + t]) * _ldix(sa, st, sr + idx[k0 + t] * ssq)
                            _stix(da, dt, dr + q * dsq, min(max(ai >> prec, 0), 255))
                        elif lp:
                            a32 = np.float32(0.0)
                            for t in range(sz[q]):
                                a32 += np.float32(w[k0 + t]) * np.float32(
                                    _ldx(sa, st, sr + idx[k0 + t] * ssq))
                            _stx(da, dt, dr + q * dsq, np.float64(a32))
                        else:
                            acc = 0.0
                            for t in range(sz[q]):
                                acc += w[k0 + t] * _ldx(sa, st, sr + idx[k0 + t] * ssq)
                            _stx(da, dt, dr + q * dsq, acc)


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
    N, C = x[8], x[9]
    xt = x[1]
    u8 = xt == ST_U8
    lp = xt == ST_F32 or xt == ST_F16 or xt == ST_BF16
    need_w = ow != W
    need_h = oh != H
    if not need_w and not need_h:  # same size: a copy (cast to out's dtype)
        for n in range(N):
            for c in range(C):
                for i in range(H):
                    for j in range(W):
                        so = n * x[24] + c * x[25] + i * x[26] + j * x[27]
                        _stf(o[0], o[1], n * o[24] + c * o[25] + i * o[26] + j * o[27],
                                  _ld(x[0], xt, so))
        return OK
    if need_w and need_h:  # width first, into a float64 intermediate (N, C, H, ow)
        tmp = np.empty(max(N * C * H * ow, 1), np.float64)
        ta = np.int64(tmp.ctypes.data)
        idx, w, sz, K, prec = _table(op, W, ow, ac, has_sw, sw, lp, u8)
        _pass(x[0], xt, x[24], x[25], x[26], x[27], ta, ST_F64, C * H * ow, H * ow, ow, 1,
              N, C, H, ow, idx, w, sz, K, lp, u8, prec)
        idx, w, sz, K, prec = _table(op, H, oh, ac, has_sh, sh, lp, u8)
        _pass(ta, ST_F64, C * H * ow, H * ow, 1, ow, o[0], o[1], o[24], o[25], o[27], o[26],
              N, C, ow, oh, idx, w, sz, K, lp, u8, prec)
        if tmp.size == 0:  # keeps the intermediate alive through both passes
            return NOT_SUPPORTED
    elif need_w:
        idx, w, sz, K, prec = _table(op, W, ow, ac, has_sw, sw, lp, u8)
        _pass(x[0], xt, x[24], x[25], x[26], x[27], o[0], o[1], o[24], o[25], o[26], o[27],
              N, C, H, ow, idx, w, sz, K, lp, u8, prec)
    else:
        idx, w, sz, K, prec = _table(op, H, oh, ac, has_sh, sh, lp, u8)
        _pass(x[0], xt, x[24], x[25], x[27], x[26], o[0], o[1], o[24], o[25], o[27], o[26],
              N, C, W, oh, idx, w, sz, K, lp, u8, prec)
    return OK


def resample_kernel(block):
    # [op, x, out, sc, has_size, oh, ow, has_sh, sh, has_sw, sw, align_corners]
    op = block[0]
    x = desc(block[1])
    o = desc(block[2])
    sc = scratch(block[3], 16)
    if x[2] != 4:
        return INVALID_ARGUMENT
    H, W = x[10], x[11]
    has_sh, has_sw = block[7] != 0, block[9] != 0
    sh, sw = bits_to_f64(block[8]), bits_to_f64(block[10])
    if block[4] != 0:
        oh, ow = block[5], block[6]
    else:  # int(H * scale), as the reference
        oh, ow = np.int64(H * sh), np.int64(W * sw)
    if oh < 0 or ow < 0:
        return INVALID_ARGUMENT
    st = _resize_hw(x, o, oh, ow, sc)
    if st != OK:
        return st
    if o[3] == 0:
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
    elif not _is_float(x.dtype):  # other integer types: the reference kernel
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


# ---- grid_sampler_2d --------------------------------------------------------------------

@njit(inline="always")
def _unnorm(c, size, ac, lp):
    if ac:
        return _r(_r(_r(c + 1.0, lp) / 2.0, lp) * (size - 1), lp)
    return _r(_r(_r(_r(c + 1.0, lp) * size, lp) - 1.0, lp) / 2.0, lp)


@njit
def _reflect(v, twice_low, twice_high, lp):
    if twice_low == twice_high:
        return 0.0
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    v = abs(_r(v - lo, lp))
    extra = np.fmod(v, span)
    flips = np.floor(_r(v / span, lp))
    if np.fmod(flips, 2.0) == 0.0:
        return _r(extra + lo, lp)
    return _r(_r(span - extra, lp) + lo, lp)


@njit(inline="always")
def _clip(v, size):
    if v != v:
        return v
    return min(max(v, 0.0), size - 1.0)


@njit
def _pad(v, size, padding, ac, lp):
    """The reference's compute_coordinates: border (1) / reflection (2) padding."""
    if padding == 1:
        return _clip(v, size)
    if padding == 2:
        if ac:
            v = _reflect(v, 0, 2 * (size - 1), lp)
        else:
            v = _reflect(v, -1, 2 * size - 1, lp)
        return _clip(v, size)
    return v


@njit(inline="always")
def _to_int(v):
    if v != v or v == math.inf or v == -math.inf:
        return np.int64(-(1 << 30))
    return np.int64(min(max(v, -1073741824.0), 1073741824.0))


@njit(inline="always")
def _tap_off(iy, ix, H, W, sh, sw):
    """Offset of input pixel (iy, ix) in its plane, or -1 outside the image (reads as 0)."""
    if ix < 0 or ix >= W or iy < 0 or iy >= H:
        return np.int64(-1)
    return iy * sh + ix * sw


@njit(inline="always")
def _c1(t, lp):  # ((A + 2) * x - (A + 3)) * x * x + 1, A = -0.75
    return _r(_r(_r(_r(_r(1.25 * t, lp) - 2.25, lp) * t, lp) * t, lp) + 1.0, lp)


@njit(inline="always")
def _c2(t, lp):  # ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    return _r(_r(_r(_r(_r(_r(-0.75 * t, lp) + 3.75, lp) * t, lp) - 6.0, lp) * t, lp) + 3.0, lp)


@njit
def _grid(x, g, o, interp, padding, ac, lp, sc):
    if x[2] != 4 or g[2] != 4 or g[11] != 2 or g[8] != x[8]:
        return INVALID_ARGUMENT
    N, C, H, W = x[8], x[9], x[10], x[11]
    Ho, Wo = g[9], g[10]
    sc[0] = N
    sc[1] = C
    sc[2] = Ho
    sc[3] = Wo
    st = resize_to(o, sc, 4)
    if st != OK:
        return st
    xa, xt, xsh, xsw = x[0], x[1], x[26], x[27]
    wx = np.zeros(4, np.float64)
    wy = np.zeros(4, np.float64)
    offs = np.zeros(16, np.int64)  # per output point: tap offsets in a plane, -1 = outside
    for n in range(N):
        for i in range(Ho):
            for j in range(Wo):
                gb = n * g[24] + i * g[25] + j * g[26]
                gx = _unnorm(_r(_ldx(g[0], g[1], gb), lp), W, ac, lp)
                gy = _unnorm(_r(_ldx(g[0], g[1], gb + g[27]), lp), H, ac, lp)
                if interp != 2:
                    gx = _pad(gx, W, padding, ac, lp)
                    gy = _pad(gy, H, padding, ac, lp)
                x0 = np.floor(gx)
                y0 = np.floor(gy)
                tx = _r(gx - x0, lp)
                ty = _r(gy - y0, lp)
                if interp == 0:  # bilinear: the reference's weights, its tap order
                    ix = _to_int(x0)
                    iy = _to_int(y0)
                    ux = _r(1.0 - tx, lp)
                    uy = _r(1.0 - ty, lp)
                    wx[0] = _r(ux * uy, lp)
                    wx[1] = _r(tx * uy, lp)
                    wx[2] = _r(ux * ty, lp)
                    wx[3] = _r(tx * ty, lp)
                    offs[0] = _tap_off(iy, ix, H, W, xsh, xsw)
                    offs[1] = _tap_off(iy, ix + 1, H, W, xsh, xsw)
                    offs[2] = _tap_off(iy + 1, ix, H, W, xsh, xsw)
                    offs[3] = _tap_off(iy + 1, ix + 1, H, W, xsh, xsw)
                elif interp == 1:  # nearest: round half to even
                    offs[0] = _tap_off(_to_int(np.rint(gy)), _to_int(np.rint(gx)), H, W, xsh,
                                       xsw)
                else:  # bicubic: padding applies to each of the 16 taps
                    for k in range(4):
                        tk = _r(tx + 1.0, lp) if k == 0 else (tx if k == 1 else (
                            _r(1.0 - tx, lp) if k == 2 else _r(2.0 - tx, lp)))
                        wx[k] = _c1(tk, lp) if k == 1 or k == 2 else _c2(tk, lp)
                        tk = _r(ty + 1.0, lp) if k == 0 else (ty if k == 1 else (
                            _r(1.0 - ty, lp) if k == 2 else _r(2.0 - ty, lp)))
                        wy[k] = _c1(tk, lp) if k == 1 or k == 2 else _c2(tk, lp)
                    for a in range(4):
                        iy = _to_int(_pad(_r(_r(y0 - 1.0, lp) + a, lp), H, padding, ac, lp))
                        for b in range(4):
                            ix = _to_int(_pad(_r(_r(x0 - 1.0, lp) + b, lp), W, padding, ac, lp))
                            offs[4 * a + b] = _tap_off(iy, ix, H, W, xsh, xsw)
                for c in range(C):
                    xb = n * x[24] + c * x[25]
                    res = 0.0
                    if interp == 0:
                        for k in range(4):
                            v = _ldx(xa, xt, xb + offs[k]) if offs[k] >= 0 else 0.0
                            res = _r(res + _r(wx[k] * v, lp), lp)
                    elif interp == 1:
                        res = _ldx(xa, xt, xb + offs[0]) if offs[0] >= 0 else 0.0
                    else:
                        for a in range(4):
                            row = 0.0
                            for b in range(4):
                                k = 4 * a + b
                                v = _ldx(xa, xt, xb + offs[k]) if offs[k] >= 0 else 0.0
                                row = _r(row + _r(v * wx[b], lp), lp)
                            res = _r(res + _r(row * wy[a], lp), lp)
                    _stx(o[0], o[1], n * o[24] + c * o[25] + i * o[26] + j * o[27], res)
    return OK


def grid_kernel(block):
    # [input, grid, out, sc, interpolation_mode, padding_mode, align_corners, lp]
    return _grid(desc(block[0]), desc(block[1]), desc(block[2]), block[4], block[5],
                 block[6] != 0, block[7] != 0, scratch(block[3], 16))


@register_fast("aten::grid_sampler_2d.out")
def bind_grid_sampler_2d(ctx, input, grid, interpolation_mode, padding_mode, align_corners, out):
    if input.ndim != 4 or grid.ndim != 4 or out.ndim != 4 or not _is_float(input.dtype) \
            or not _is_float(grid.dtype):
        return None
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        return None
    return ctx.bind(lazy(grid_kernel),
                    [ctx.desc(input), ctx.desc(grid), ctx.desc(out), ctx.buffer(16 * 8),
                     int(interpolation_mode), int(padding_mode), int(bool(align_corners)),
                     int(_lp(input.dtype))])


# ---- pairwise distances -----------------------------------------------------------------
D_CDIST, D_PDIST = 0, 1


@njit
def _pnorm(a, ab, at, b, bb, bt, M, p):
    """p-norm of row a[ab + k*at] - b[bb + k*bt] over k < M, with ATen's special cases."""
    s = 0.0
    for k in range(M):
        d = abs(_ldx(a[0], a[1], ab + k * at) - _ldx(b[0], b[1], bb + k * bt))
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
        v = _ldx(a[0], a[1], ab + k * at)
        s += v * v
    return s


@njit
def _cdist(a, b, o, p, mode, sc):
    na, nb, no = a[2], b[2], o[2]
    P, M = a[8 + na - 2], a[8 + na - 1]
    R = b[8 + nb - 2]
    if b[8 + nb - 1] != M or no != max(na, nb):
        return INVALID_ARGUMENT
    nbt = no - 2
    nbatch = 1
    for i in range(nbt):  # broadcast batch dims, aligned right
        ia = i - (nbt - (na - 2))
        ib = i - (nbt - (nb - 2))
        da = a[8 + ia] if ia >= 0 else 1
        db = b[8 + ib] if ib >= 0 else 1
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
    ap, am = a[24 + na - 2], a[24 + na - 1]
    bp, bm = b[24 + nb - 2], b[24 + nb - 1]
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
            if ia >= 0 and a[8 + ia] != 1:
                ao += idx * a[24 + ia]
            if ib >= 0 and b[8 + ib] != 1:
                bo += idx * b[24 + ib]
            oo += idx * o[24 + i]
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
                        dot += _ldx(a[0], a[1], ao + i * ap + m * am) * _ldx(
                            b[0], b[1], bo + j * bp + m * bm)
                    v = math.sqrt(max(an[i] + bn[j] - 2 * dot, 0.0))
                else:
                    v = _pnorm(a, ao + i * ap, am, b, bo + j * bp, bm, M, p)
                _stx(o[0], o[1], oo + i * o[24 + nbt] + j * o[24 + nbt + 1], v)
    return OK


@njit
def _pdist(x, o, p, sc):
    if x[2] != 2 or o[2] != 1:
        return INVALID_ARGUMENT
    N, M = x[8], x[9]
    sc[0] = N * (N - 1) // 2
    st = resize_to(o, sc, 1)
    if st != OK:
        return st
    q = 0
    for i in range(N):
        for j in range(i + 1, N):
            _stx(o[0], o[1], q * o[24],
                      _pnorm(x, i * x[24], x[25], x, j * x[24], x[25], M, p))
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
