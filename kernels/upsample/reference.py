"""Resampling kernels: nearest / bilinear / antialiased upsampling, pixel (un)shuffle, grid_sample.

Index and weight arithmetic follows ATen's CPU kernels in the op-math dtype
(float32 for float32 and half types, float64 for float64), since nearest
indices depend on float32 rounding. float32 and half bilinear resampling
evaluates ExecuTorch's per-output formula (bit for bit); the other separable
interpolations are two small GEMMs with per-axis interpolation matrices.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.promote import compute_dtype
from pyruntime.kernels.registry import register

F32 = np.float32
F32_, F16 = np.dtype(np.float32), np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bad(op, arg, expected, got):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{op}: {arg}: expected {expected}, got {got}")


def _opmath(dt):
    dt = compute_dtype(dt)
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(F32)


def _finish(res, like):
    """Cast an op-math result back to ``like``; integer outputs round like ATen's uint8 path."""
    if like.kind in "iu":
        info = np.iinfo(like)
        return np.clip(np.rint(res), info.min, info.max).astype(like)
    return res


def _sizes(op, input, output_size, scale_factors):
    """Output (H, W) and the per-axis scales passed on to the kernel (ATen's vec overloads)."""
    if input.ndim != 4:
        raise _bad(op, "input", "a 4-D (N, C, H, W) tensor", input.describe())
    H, W = input.shape[-2:]
    if output_size is not None and scale_factors is not None:
        raise _bad(op, "output_size/scale_factors", "exactly one of them", "both")
    if output_size is not None:
        if len(output_size) != 2:
            raise _bad(op, "output_size", "2 values", list(output_size))
        return [int(v) for v in output_size], [None, None]
    if scale_factors is None or len(scale_factors) != 2:
        raise _bad(op, "scale_factors", "2 values (or output_size)", scale_factors)
    return [int(H * scale_factors[0]), int(W * scale_factors[1])], list(scale_factors)


def _scale(in_size, out_size, align_corners, scale, dt):
    """ATen's area_pixel_compute_scale."""
    if align_corners:  # in the op-math type, as ExecuTorch and ATen divide
        return dt.type(in_size - 1) / dt.type(out_size - 1) if out_size > 1 else dt.type(0)
    if scale is not None and scale > 0:
        return dt.type(1.0 / scale)
    return dt.type(in_size) / dt.type(out_size) if out_size else dt.type(0)


def nearest_index(in_size, out_size, scale):
    o = np.arange(out_size)
    if out_size == in_size:
        return o
    if out_size == 2 * in_size:
        return o >> 1
    s = F32(1.0 / scale) if scale is not None and scale > 0 else F32(in_size) / F32(out_size)
    return np.minimum(np.floor(o.astype(F32) * s).astype(np.int64), in_size - 1)


@register("aten::upsample_nearest2d.vec_out")
def upsample_nearest2d_vec_out(input, output_size, scale_factors, out):
    op = "aten::upsample_nearest2d.vec_out"
    (oh, ow), (sh, sw) = _sizes(op, input, output_size, scale_factors)
    H, W = input.shape[-2:]
    x = input.numpy()
    out.write(x[:, :, nearest_index(H, oh, sh)[:, None], nearest_index(W, ow, sw)[None, :]])


def _linear_matrix(in_size, out_size, align_corners, scale, dt):
    """(out, in) matrix of ATen's two-tap linear interpolation weights."""
    s = _scale(in_size, out_size, align_corners, scale, dt)
    o = np.arange(out_size, dtype=dt)
    src = s * o if align_corners else np.maximum(s * (o + dt.type(0.5)) - dt.type(0.5), 0)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0.astype(dt), 0, 1).astype(dt)
    i1 = i0 + (i0 < in_size - 1)
    m = np.zeros((out_size, in_size), dt)
    rows = np.arange(out_size)
    np.add.at(m, (rows, i0), 1 - lam)
    np.add.at(m, (rows, i1), lam)
    return m


def _separable(x, mh, mw, dt):
    """Apply (oh, H) and (ow, W) matrices to the last two axes of x."""
    return np.matmul(np.matmul(mh, x.astype(dt, copy=False)), mw.T)


@register("aten::upsample_bilinear2d.vec_out")
def upsample_bilinear2d_vec_out(input, output_size, align_corners, scale_factors, out):
    op = "aten::upsample_bilinear2d.vec_out"
    (oh, ow), (sh, sw) = _sizes(op, input, output_size, scale_factors)
    H, W = input.shape[-2:]
    if input.dtype == np.uint8:
        out.write(_u8_resample(input.numpy(), oh, ow, align_corners, sh, sw, False))
        return
    if input.dtype in (F16, F32_, BF16):  # float64 keeps ATen's double weights
        out.write(_bilinear_taps(input.numpy(), oh, ow, align_corners, sh, sw))
        return
    dt = _opmath(input.dtype)
    res = _separable(input.numpy(), _linear_matrix(H, oh, align_corners, sh, dt),
                     _linear_matrix(W, ow, align_corners, sw, dt), dt)
    out.write(_finish(res, input.dtype))


def axis_taps(in_size, out_size, align_corners, scale):
    """ExecuTorch's compute_source_index_and_lambda per output position: (index0, index1,
    lambda0, lambda1), the weights in float32 whatever the tensor's type."""
    o = np.arange(out_size)
    if out_size == in_size:
        return o, o, np.ones(out_size, F32), np.zeros(out_size, F32)
    s = _scale(in_size, out_size, align_corners, scale, np.dtype(F32))
    of = o.astype(F32)
    src = s * of if align_corners else np.maximum(s * (of + F32(0.5)) - F32(0.5), F32(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam1 = np.clip(src - i0.astype(F32), F32(0), F32(1)).astype(F32)
    return i0, i0 + (i0 < in_size - 1), F32(1) - lam1, lam1


def _bilinear_taps(x, oh, ow, align_corners, sh, sw):
    """float32/half bilinear resampling as ExecuTorch's portable loop evaluates it, per
    output: top = tl * w0 + tr * w1, bottom = bl * w0 + br * w1, top * h0 + bottom * h1,
    in float32, rounded once to the tensor's type. (ExecuTorch keeps float32 weights for
    double tensors too; ATen, and the float64 path here, use double weights.)"""
    ct = F32
    h0, h1, lh0, lh1 = axis_taps(x.shape[-2], oh, align_corners, sh)
    w0, w1, lw0, lw1 = axis_taps(x.shape[-1], ow, align_corners, sw)
    xc = x.astype(ct, copy=False)
    lw0, lw1 = lw0.astype(ct), lw1.astype(ct)
    top = xc[..., h0[:, None], w0] * lw0 + xc[..., h0[:, None], w1] * lw1
    bottom = xc[..., h1[:, None], w0] * lw0 + xc[..., h1[:, None], w1] * lw1
    return (top * lh0[:, None].astype(ct) + bottom * lh1[:, None].astype(ct)).astype(x.dtype)


def _aa_matrix(in_size, out_size, align_corners, scale, dt):
    """ATen's antialiased (triangle filter widened by the downscale factor) weights."""
    s = _scale(in_size, out_size, align_corners, scale, dt)
    support = s if s >= 1 else dt.type(1.0)
    invscale = 1 / s if s >= 1 else dt.type(1.0)
    o = np.arange(out_size, dtype=dt)
    center = s * (o + dt.type(0.5))
    xmin = np.maximum((center - support + dt.type(0.5)).astype(np.int64), 0)
    xmax = np.minimum((center + support + dt.type(0.5)).astype(np.int64), in_size)
    j = np.arange(in_size)
    t = (j[None, :] - center[:, None] + dt.type(0.5)) * invscale
    w = np.where((j >= xmin[:, None]) & (j < xmax[:, None]), np.maximum(0, 1 - np.abs(t)), 0)
    total = w.sum(axis=1, keepdims=True)
    return np.where(total != 0, w / np.where(total != 0, total, 1), w).astype(dt)


# ---- uint8: ATen's fixed-point separable path ---------------------------------------------
# ATen resamples uint8 images with int16 weights (HelperInterpBase::
# _compute_index_ranges_int16_weights): the double weights of each axis are scaled by
# 2**precision (the largest precision keeping the biggest weight under 2**14), rounded
# half away from zero, and each pass computes (sum(w * x) + 2**(precision-1)) >> precision
# clamped to [0, 255]; the width is resampled first, into a uint8 intermediate, then the
# height; an axis whose size does not change is skipped. (Same numbers in ATen's AVX2
# kernel and its generic fallback; ATen's fallback, used for more than 4 channels in
# contiguous layout, has a bug for output width 1 that reuses row 0's weights for every
# row; that bug is not reproduced here.)

def _u8_axis_weights(in_size, out_size, align_corners, scale, antialias):
    """(xmin (out,), weights (out, K) int64, precision) for one axis."""
    if align_corners:
        s = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    elif scale is not None and scale > 0:
        s = 1.0 / scale
    else:
        s = in_size / out_size
    o = np.arange(out_size, dtype=np.float64)

    def tent(x):
        x = np.abs(x)
        return np.where(x < 1.0, 1.0 - x, 0.0)

    if antialias:
        support = s if s >= 1.0 else 1.0
        inv = 1.0 / s if s >= 1.0 else 1.0
        k = int(np.ceil(support)) * 2 + 1
        center = s * (o + 0.5)
        xmin = np.maximum(np.trunc(center - support + 0.5), 0).astype(np.int64)
        xsize = np.clip(np.minimum(np.trunc(center + support + 0.5), in_size).astype(np.int64)
                        - xmin, 0, k)
        j = np.arange(k)
        w = tent(((j[None, :] + xmin[:, None]) - center[:, None] + 0.5) * inv)
        w = np.where(j[None, :] < xsize[:, None], w, 0.0)
        total = np.zeros(out_size)
        for c in range(k):  # in order, as ATen sums them
            total += w[:, c]
        w = np.where(total[:, None] != 0, w / np.where(total != 0, total, 1)[:, None], w)
    else:
        real = s * o if align_corners else np.maximum(s * (o + 0.5) - 0.5, 0.0)
        xmin = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
        lam = np.clip(real - xmin, 0.0, 1.0)
        w0, w1 = tent(-lam), tent(1.0 - lam)
        last = xmin >= in_size - 1  # a single tap holding both weights
        w = np.stack([np.where(last, w0 + w1, w0), np.where(last, 0.0, w1)], axis=1)
    wmax = w.max(initial=0.0)
    prec = 0
    while prec < 22 and int(0.5 + wmax * (1 << (prec + 1))) < (1 << 15):
        prec += 1
    v = w * (1 << prec)
    return xmin, np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int64), prec


def _u8_pass(x, axis, out_size, align_corners, scale, antialias):
    in_size = x.shape[axis]
    xmin, w, prec = _u8_axis_weights(in_size, out_size, align_corners, scale, antialias)
    xm = np.moveaxis(x, axis, -1).astype(np.int64)
    acc = np.full(xm.shape[:-1] + (out_size,), 1 << (prec - 1), np.int64)
    for j in range(w.shape[1]):
        acc += xm[..., np.minimum(xmin + j, in_size - 1)] * w[:, j]
    return np.moveaxis(np.clip(acc >> prec, 0, 255).astype(np.uint8), -1, axis)


def _u8_resample(x, oh, ow, align_corners, sh, sw, antialias):
    if x.size == 0 or oh == 0 or ow == 0:
        return np.zeros(x.shape[:-2] + (oh, ow), np.uint8)
    if ow != x.shape[-1]:
        x = _u8_pass(x, -1, ow, align_corners, sw, antialias)
    if oh != x.shape[-2]:
        x = _u8_pass(x, -2, oh, align_corners, sh, antialias)
    return x


@register("aten::_upsample_bilinear2d_aa.out")
def _upsample_bilinear2d_aa_out(self, output_size, align_corners, scales_h, scales_w, out):
    op = "aten::_upsample_bilinear2d_aa.out"
    (oh, ow), _ = _sizes(op, self, output_size, None)
    H, W = self.shape[-2:]
    if self.dtype == np.uint8:
        out.write(_u8_resample(self.numpy(), oh, ow, align_corners, scales_h, scales_w, True))
        return
    dt = _opmath(self.dtype)
    res = _separable(self.numpy(), _aa_matrix(H, oh, align_corners, scales_h, dt),
                     _aa_matrix(W, ow, align_corners, scales_w, dt), dt)
    out.write(_finish(res, self.dtype))


@register("aten::pixel_shuffle.out")
def pixel_shuffle_out(self, upscale_factor, out):
    op = "aten::pixel_shuffle.out"
    r = int(upscale_factor)
    if self.ndim < 3 or r < 1 or self.shape[-3] % (r * r):
        raise _bad(op, "self", f"[..., C*{r}*{r}, H, W] with upscale_factor >= 1", self.describe())
    *lead, c, h, w = self.shape
    x = self.numpy().reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    x = x.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)  # (..., C, H, r, W, r)
    out.write(x.reshape(*lead, c // (r * r), h * r, w * r))


@register("aten::pixel_unshuffle.out")
def pixel_unshuffle_out(self, downscale_factor, out):
    op = "aten::pixel_unshuffle.out"
    r = int(downscale_factor)
    if self.ndim < 3 or r < 1 or self.shape[-2] % r or self.shape[-1] % r:
        raise _bad(op, "self", f"[..., C, H, W] with H and W divisible by {r}", self.describe())
    *lead, c, h, w = self.shape
    x = self.numpy().reshape(*lead, c, h // r, r, w // r, r)
    n = len(lead)
    x = x.transpose(*range(n), n, n + 2, n + 4, n + 1, n + 3)  # (..., C, r, r, H/r, W/r)
    out.write(x.reshape(*lead, c * r * r, h // r, w // r))


# ---- grid_sampler_2d ---------------------------------------------------------------------

def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(x, twice_low, twice_high):
    if twice_low == twice_high:
        return np.zeros_like(x)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = np.abs(x - lo)
    extra = np.fmod(x, span)
    flips = np.floor(x / span)
    return np.where(flips % 2 == 0, extra + lo, span - extra + lo).astype(x.dtype)


def _pad_coord(x, size, padding_mode, align_corners):
    """ATen's compute_coordinates: apply border (1) / reflection (2) padding to a source coord."""
    if padding_mode == 1:
        return np.clip(x, 0, size - 1)
    if padding_mode == 2:
        x = (_reflect(x, 0, 2 * (size - 1)) if align_corners
             else _reflect(x, -1, 2 * size - 1))
        return np.clip(x, 0, size - 1)
    return x


def _gather(flat, W, H, ix, iy):
    """Values of flat (N, C, H*W) at integer coords (N, Ho, Wo); zero where out of bounds."""
    ok = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
    lin = np.where(ok, iy * W + ix, 0).reshape(ix.shape[0], 1, -1)
    v = np.take_along_axis(flat, lin, axis=2).reshape(flat.shape[:2] + ix.shape[1:])
    return v * ok[:, None].astype(v.dtype)


def _cubic_coeffs(t):
    A = -0.75

    def c1(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


@register("aten::grid_sampler_2d.out")
def grid_sampler_2d_out(input, grid, interpolation_mode, padding_mode, align_corners, out):
    op = "aten::grid_sampler_2d.out"
    if input.ndim != 4:
        raise _bad(op, "input", "a 4-D (N, C, H, W) tensor", input.describe())
    if grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise _bad(op, "grid", f"[{input.shape[0]}, H_out, W_out, 2]", grid.describe())
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise _bad(op, "interpolation_mode/padding_mode", "0, 1 or 2",
                   (interpolation_mode, padding_mode))
    dt = _opmath(input.dtype)
    N, C, H, W = input.shape
    flat = input.numpy().astype(dt, copy=False).reshape(N, C, H * W)
    g = grid.numpy().astype(dt, copy=False)
    gx = _unnormalize(g[..., 0], W, align_corners)
    gy = _unnormalize(g[..., 1], H, align_corners)
    with np.errstate(invalid="ignore"):
        if interpolation_mode == 2:  # bicubic: padding applies to each of the 16 taps
            x0, y0 = np.floor(gx), np.floor(gy)
            wx, wy = _cubic_coeffs(gx - x0), _cubic_coeffs(gy - y0)
            res = 0
            for j in range(4):
                yy = _pad_coord(y0 - 1 + j, H, padding_mode, align_corners)
                row = 0
                for i in range(4):
                    xx = _pad_coord(x0 - 1 + i, W, padding_mode, align_corners)
                    v = _gather(flat, W, H, _to_int(xx), _to_int(yy))
                    row = row + v * wx[i][:, None]
                res = res + row * wy[j][:, None]
        else:
            gx = _pad_coord(gx, W, padding_mode, align_corners)
            gy = _pad_coord(gy, H, padding_mode, align_corners)
            if interpolation_mode == 1:  # nearest, ties to even like nearbyint
                res = _gather(flat, W, H, _to_int(np.rint(gx)), _to_int(np.rint(gy)))
            else:
                x0, y0 = np.floor(gx), np.floor(gy)
                tx, ty = (gx - x0)[:, None], (gy - y0)[:, None]
                ix, iy = _to_int(x0), _to_int(y0)
                res = ((1 - tx) * (1 - ty) * _gather(flat, W, H, ix, iy)
                       + tx * (1 - ty) * _gather(flat, W, H, ix + 1, iy)
                       + (1 - tx) * ty * _gather(flat, W, H, ix, iy + 1)
                       + tx * ty * _gather(flat, W, H, ix + 1, iy + 1))
    out.write(np.asarray(res, dt).reshape(N, C, *grid.shape[1:3]))


def _to_int(x):
    """Float coords to int64; NaN/inf become an out-of-bounds sentinel (sampled as zero)."""
    return np.where(np.isfinite(x), np.clip(x, -2**30, 2**30), -2**30).astype(np.int64)
