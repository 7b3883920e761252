"""Compiled 2-D pooling over contiguous (N, C, H, W) or (C, H, W) float32/float64 inputs.

``max_pool2d_with_indices``: per output element the window taps are scanned
in order with the reference's (ATen's) update rule ``v > max or isnan(v)``,
starting from (-inf, tap 0): padding taps hold -inf and never win, so only
the in-bounds taps are visited and the result (values and flat per-plane
int64 indices) is the reference's, including its corner cases.
The taps are read with branch-free updates (a data-dependent branch per tap
mispredicts often and cost 2-3x), one tap at a time over a run of an output row.
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

from pyruntime.cython_ext.abi import D_NDIM, D_SIZES
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.pool import reference as pool_reference
from pyruntime.kernels.fast.spatial_io import plane_count, resize_hw
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_F64, ST_I64,
                                       cast_like, desc, descs, flat, lazy, scratch)

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
U = np.uint64  # unsigned indices: no negative-index wraparound code in inner loops


# ATen's pooling_output_shape, the reference's own (Numba's // floors, as Python's)
out_size = njit(inline="always")(pool_reference._out_size)


@njit(inline="always")
def tap_range(start, k, d, size):
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


@njit(inline="always")
def pool_resize(x, o, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode, sc):
    """(status, H, W, oh, ow): ``o`` resized to x's planes of ATen's pooling output size."""
    nd = x[D_NDIM]
    H = x[D_SIZES + nd - 2]
    W = x[D_SIZES + nd - 1]
    oh = out_size(H, kh, sh, ph, dh, ceil_mode)
    ow = out_size(W, kw, sw, pw, dw, ceil_mode)
    if oh < 1 or ow < 1:
        return INVALID_ARGUMENT, H, W, oh, ow
    return resize_hw(x, o, oh, ow, sc), H, W, oh, ow


@njit(inline="always")
def window_span(i, n_out, size, k, s, p, adaptive):
    """(start, end, in-bounds start, end) of output ``i``'s adaptive bin or avg window."""
    if adaptive:
        lo = (i * size) // n_out
        hi = ((i + 1) * size + n_out - 1) // n_out
        return lo, hi, lo, hi
    start = i * s - p
    end = min(start + k, size + p)
    return start, end, max(start, 0), min(end, size)


@njit(inline="always")
def window_divisor(divisor, cip, hs, he, h0, h1, ws, we, w0, w1):
    """avg_pool2d's divisor: the override, else the window's size with padding (cip) or not."""
    if divisor != 0:
        return divisor
    if cip:
        return (he - hs) * (we - ws)
    return (h1 - h0) * (w1 - w0)


@njit(inline="always")
def window_sum(xv, xb, W, h0, h1, w0, w1, m):
    """In-order sum (``m``'s type) of rows [h0, h1) x cols [w0, w1) of the plane at ``xb``."""
    s = cast_like(0.0, m)
    for a in range(h0, h1):
        r = xb + a * W
        for b in range(w0, w1):
            s += xv[U(r + b)]
    return s


@njit(inline="always")
def same_float(block):
    """The scalar type of x (block[0]) and out (block[1]) when they agree, else -1."""
    st = desc(block[1])[1]
    return st if desc(block[0])[1] == st else -1


@njit(error_model="numpy")
def _max_typed(block, m):
    x, o, oi = descs(block, 0, 3)
    kh, kw, sh, sw, ph, pw, dh, dw = (block[3], block[4], block[5], block[6], block[7],
                                      block[8], block[9], block[10])
    sc = scratch(block[12], 16)
    st, H, W, oh, ow = pool_resize(x, o, kh, kw, sh, sw, ph, pw, dh, dw, block[11] != 0, sc)
    if st != OK:
        return st
    st = resize_hw(x, oi, oh, ow, sc)
    if st != OK:
        return st
    P = plane_count(x)
    if P == 0:
        return OK
    xv = flat(x, m)
    z = flat(o, m)
    zi = flat(oi, np.int64(0))
    ninf = cast_like(-math.inf, m)
    # an output row at a time, tap by tap: each tap updates the run of the row's outputs
    # whose windows hold it in bounds (a loop over output columns, which vectorizes), so
    # every output still takes its in-bounds taps in the reference's order
    for p in range(P):
        xb = p * H * W
        for i in range(oh):
            hs = i * sh - ph
            a0, a1 = tap_range(hs, kh, dh, H)
            ob = p * oh * ow + i * ow
            for j in range(ow):
                z[U(ob + j)] = ninf
                zi[U(ob + j)] = hs * W + j * sw - pw  # tap 0, even when it lies in the padding
            for a in range(a0, a1):
                ri = (hs + a * dh) * W
                for b in range(kw):
                    off = b * dw - pw
                    lo, hi = tap_range(off, ow, sw, W)
                    if sw == 2:  # the common stride as a constant: its loads vectorize
                        _max_taps(xv, z, zi, xb + ri + off, ri + off, ob, lo, hi, 2)
                    else:
                        _max_taps(xv, z, zi, xb + ri + off, ri + off, ob, lo, hi, sw)
    return OK


@njit(inline="always")
def _max_taps(xv, z, zi, xs, ixs, ob, lo, hi, sw):
    """One tap for outputs [lo, hi) of a row: input ``xs + j * sw`` (plane index ``ixs + j *
    sw``) against output ``ob + j``, by the reference's rule, branch-free."""
    for j in range(lo, hi):
        v = xv[U(xs + j * sw)]
        best = z[U(ob + j)]
        # take = v > best or isnan(v)
        msk = -np.int64((v > best) | (v != v))
        zi[U(ob + j)] = (zi[U(ob + j)] & ~msk) | ((ixs + j * sw) & msk)
        z[U(ob + j)] = max(best, v) if v == v else v


def max_pool_kernel(block):
    st = same_float(block)
    if desc(block[2])[1] != ST_I64:
        return NOT_SUPPORTED
    if st == ST_F32:
        return _max_typed(block, np.float32(0))
    if st == ST_F64:
        return _max_typed(block, np.float64(0))
    return NOT_SUPPORTED


def pair(v, default=None):
    """A pooling size argument as two ints, or None (the reference raises)."""
    v = list(v) if v is not None else []
    if not v and default is not None:
        return list(default)
    if len(v) == 1:
        v = [v[0], v[0]]
    if len(v) != 2 or any(isinstance(e, bool) or not isinstance(e, (int, np.integer)) for e in v):
        return None
    return [int(e) for e in v]


def pool_words(kernel_size, stride, padding, dilation, ceil_mode):
    """Words (kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode), or None (the reference raises)."""
    k = pair(kernel_size)
    if k is None:
        return None
    s, p, d = pair(stride, default=k), pair(padding), pair(dilation)
    if s is None or p is None or d is None:
        return None
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        return None
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        return None
    return k + s + p + d + [int(bool(ceil_mode))]


def avg_words(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """avg_pool2d's words (kh, kw, sh, sw, ph, pw, ceil, cip, divisor or 0), or None."""
    words = pool_words(kernel_size, stride, padding, [1, 1], ceil_mode)
    if words is None or (divisor_override is not None and (
            isinstance(divisor_override, bool)
            or not isinstance(divisor_override, (int, np.integer)) or divisor_override == 0)):
        return None
    div = 0 if divisor_override is None else int(divisor_override)
    return words[:6] + [words[8], int(bool(count_include_pad)), div]


def _pool_input_ok(self, *outs):
    return (self.dtype in FLOATS and self.ndim in (3, 4) and self.is_contiguous()
            and all(o.is_contiguous() and o.ndim == self.ndim for o in outs))


def bind_max_pool2d_with_indices(ctx, self, kernel_size, stride, padding, dilation, ceil_mode,
                                 out, indices):
    if not _pool_input_ok(self, out, indices) or out.dtype != self.dtype \
            or indices.dtype != np.dtype(np.int64):
        return None
    words = pool_words(kernel_size, stride, padding, dilation, ceil_mode)
    if words is None:
        return None
    return ctx.bind(lazy(max_pool_kernel), [ctx.desc(self), ctx.desc(out), ctx.desc(indices)]
                    + words + [ctx.buffer(16 * 8)])


@njit(error_model="numpy")
def _mean_typed(x, o, oh, ow, kh, kw, sh, sw, ph, pw, cip, divisor, adaptive, m):
    """Window means of x's contiguous planes into the (oh, ow) planes of ``o`` (resized):
    avg_pool2d's windows, or _adaptive_avg_pool2d's bins when ``adaptive`` (divisor 0)."""
    P = plane_count(x)
    if P == 0 or oh == 0 or ow == 0:
        return OK
    nd = x[D_NDIM]
    H = x[D_SIZES + nd - 2]
    W = x[D_SIZES + nd - 1]
    xv = flat(x, m)
    z = flat(o, m)
    for p in range(P):
        xb = p * H * W
        ob = p * oh * ow
        for i in range(oh):
            hs, he, h0, h1 = window_span(i, oh, H, kh, sh, ph, adaptive)
            for j in range(ow):
                ws, we, w0, w1 = window_span(j, ow, W, kw, sw, pw, adaptive)
                s = window_sum(xv, xb, W, h0, h1, w0, w1, m)
                div = window_divisor(divisor, cip, hs, he, h0, h1, ws, we, w0, w1)
                z[U(ob + i * ow + j)] = s / cast_like(div, m)
    return OK


@njit(error_model="numpy")
def _mean_block(block, adaptive, m):
    """avg_pool2d over block [x, out, kh, kw, sh, sw, ph, pw, ceil, cip, divisor, sc] or,
    when ``adaptive``, _adaptive_avg_pool2d over block [x, out, oh, ow, sc]."""
    x, o = descs(block, 0, 2)
    if adaptive:
        oh, ow = block[2], block[3]
        st = resize_hw(x, o, oh, ow, scratch(block[4], 16))
        if st != OK:
            return st
        return _mean_typed(x, o, oh, ow, 0, 0, 1, 1, 0, 0, False, 0, True, m)
    kh, kw, sh, sw, ph, pw = block[2], block[3], block[4], block[5], block[6], block[7]
    st, _, _, oh, ow = pool_resize(x, o, kh, kw, sh, sw, ph, pw, 1, 1, block[8] != 0,
                                   scratch(block[11], 16))
    if st != OK:
        return st
    return _mean_typed(x, o, oh, ow, kh, kw, sh, sw, ph, pw, block[9] != 0, block[10], False, m)


@njit
def _mean_kernel(block, adaptive):
    st = same_float(block)
    if st == ST_F32:
        return _mean_block(block, adaptive, np.float32(0))
    if st == ST_F64:
        return _mean_block(block, adaptive, np.float64(0))
    return NOT_SUPPORTED


def avg_pool_kernel(block):
    return _mean_kernel(block, False)


def adaptive_avg_pool_kernel(block):
    return _mean_kernel(block, True)


def bind_avg_pool2d(ctx, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override, out):
    if not _pool_input_ok(self, out) or out.dtype != self.dtype:
        return None
    words = avg_words(kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override)
    if words is None:
        return None
    return ctx.bind(lazy(avg_pool_kernel),
                    [ctx.desc(self), ctx.desc(out)] + words + [ctx.buffer(16 * 8)])


def bind_adaptive_avg_pool2d(ctx, self, output_size, out):
    if not _pool_input_ok(self, out) or out.dtype != self.dtype:
        return None
    osz = pair(output_size)
    if osz is None or min(osz) < 0:
        return None
    return ctx.bind(lazy(adaptive_avg_pool_kernel),
                    [ctx.desc(self), ctx.desc(out), osz[0], osz[1], ctx.buffer(16 * 8)])
