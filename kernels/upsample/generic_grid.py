"""Compiled grid_sampler_2d of every float dtype (``grid_kernel``): bilinear, nearest,
bicubic; zeros, border, reflection padding; step by step in the reference's op-math type.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.spatial_io import is_float, ldx, computes_f32, r32, stx
from pyruntime.kernels.fast.nb import INVALID_ARGUMENT, OK, desc, lazy, resize_to, scratch


# ---- grid_sampler_2d --------------------------------------------------------------------

@njit(inline="always")
def _unnorm(c, size, ac, lp):
    if ac:
        return r32(r32(r32(c + 1.0, lp) / 2.0, lp) * (size - 1), lp)
    return r32(r32(r32(r32(c + 1.0, lp) * size, lp) - 1.0, lp) / 2.0, lp)


@njit
def _reflect(v, twice_low, twice_high, lp):
    if twice_low == twice_high:
        return 0.0
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    v = abs(r32(v - lo, lp))
    extra = np.fmod(v, span)
    flips = np.floor(r32(v / span, lp))
    if np.fmod(flips, 2.0) == 0.0:
        return r32(extra + lo, lp)
    return r32(r32(span - extra, lp) + lo, lp)


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
    return r32(r32(r32(r32(r32(1.25 * t, lp) - 2.25, lp) * t, lp) * t, lp) + 1.0, lp)


@njit(inline="always")
def _c2(t, lp):  # ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    c = r32(r32(r32(-0.75 * t, lp) + 3.75, lp) * t, lp)
    return r32(r32(r32(c - 6.0, lp) * t, lp) + 3.0, lp)


@njit
def _grid(x, g, o, interp, padding, ac, lp, sc):
    if x[D_NDIM] != 4 or g[D_NDIM] != 4 or g[D_SIZES + 3] != 2 or g[D_SIZES] != x[D_SIZES]:
        return INVALID_ARGUMENT
    N, C, H, W = x[D_SIZES], x[D_SIZES + 1], x[D_SIZES + 2], x[D_SIZES + 3]
    Ho, Wo = g[D_SIZES + 1], g[D_SIZES + 2]
    sc[0] = N
    sc[1] = C
    sc[2] = Ho
    sc[3] = Wo
    st = resize_to(o, sc, 4)
    if st != OK:
        return st
    xa, xt, xsh, xsw = x[D_DATA], x[D_DTYPE], x[D_STRIDES + 2], x[D_STRIDES + 3]
    wx = np.zeros(4, np.float64)
    wy = np.zeros(4, np.float64)
    offs = np.zeros(16, np.int64)  # per output point: tap offsets in a plane, -1 = outside
    for n in range(N):
        for i in range(Ho):
            for j in range(Wo):
                gb = n * g[D_STRIDES] + i * g[D_STRIDES + 1] + j * g[D_STRIDES + 2]
                gx = _unnorm(r32(ldx(g[D_DATA], g[D_DTYPE], gb), lp), W, ac, lp)
                gy = _unnorm(r32(ldx(g[D_DATA], g[D_DTYPE], gb + g[D_STRIDES + 3]), lp), H, ac, lp)
                if interp != 2:
                    gx = _pad(gx, W, padding, ac, lp)
                    gy = _pad(gy, H, padding, ac, lp)
                x0 = np.floor(gx)
                y0 = np.floor(gy)
                tx = r32(gx - x0, lp)
                ty = r32(gy - y0, lp)
                if interp == 0:  # bilinear: the reference's weights, its tap order
                    ix = _to_int(x0)
                    iy = _to_int(y0)
                    ux = r32(1.0 - tx, lp)
                    uy = r32(1.0 - ty, lp)
                    wx[0] = r32(ux * uy, lp)
                    wx[1] = r32(tx * uy, lp)
                    wx[2] = r32(ux * ty, lp)
                    wx[3] = r32(tx * ty, lp)
                    offs[0] = _tap_off(iy, ix, H, W, xsh, xsw)
                    offs[1] = _tap_off(iy, ix + 1, H, W, xsh, xsw)
                    offs[2] = _tap_off(iy + 1, ix, H, W, xsh, xsw)
                    offs[3] = _tap_off(iy + 1, ix + 1, H, W, xsh, xsw)
                elif interp == 1:  # nearest: round half to even
                    offs[0] = _tap_off(_to_int(np.rint(gy)), _to_int(np.rint(gx)), H, W, xsh,
                                       xsw)
                else:  # bicubic: padding applies to each of the 16 taps
                    for k in range(4):
                        tk = r32(tx + 1.0, lp) if k == 0 else (tx if k == 1 else (
                            r32(1.0 - tx, lp) if k == 2 else r32(2.0 - tx, lp)))
                        wx[k] = _c1(tk, lp) if k == 1 or k == 2 else _c2(tk, lp)
                        tk = r32(ty + 1.0, lp) if k == 0 else (ty if k == 1 else (
                            r32(1.0 - ty, lp) if k == 2 else r32(2.0 - ty, lp)))
                        wy[k] = _c1(tk, lp) if k == 1 or k == 2 else _c2(tk, lp)
                    for a in range(4):
                        iy = _to_int(_pad(r32(r32(y0 - 1.0, lp) + a, lp), H, padding, ac, lp))
                        for b in range(4):
                            ix = _to_int(_pad(r32(r32(x0 - 1.0, lp) + b, lp), W, padding, ac, lp))
                            offs[4 * a + b] = _tap_off(iy, ix, H, W, xsh, xsw)
                for c in range(C):
                    xb = n * x[D_STRIDES] + c * x[D_STRIDES + 1]
                    res = 0.0
                    if interp == 0:
                        for k in range(4):
                            v = ldx(xa, xt, xb + offs[k]) if offs[k] >= 0 else 0.0
                            res = r32(res + r32(wx[k] * v, lp), lp)
                    elif interp == 1:
                        res = ldx(xa, xt, xb + offs[0]) if offs[0] >= 0 else 0.0
                    else:
                        for a in range(4):
                            row = 0.0
                            for b in range(4):
                                k = 4 * a + b
                                v = ldx(xa, xt, xb + offs[k]) if offs[k] >= 0 else 0.0
                                row = r32(row + r32(v * wx[b], lp), lp)
                            res = r32(res + r32(row * wy[a], lp), lp)
                    stx(o[D_DATA], o[D_DTYPE], n * o[D_STRIDES] + c * o[D_STRIDES + 1]
                        + i * o[D_STRIDES + 2] + j * o[D_STRIDES + 3], res)
    return OK


def grid_kernel(block):
    # [input, grid, out, sc, interpolation_mode, padding_mode, align_corners, lp]
    return _grid(desc(block[0]), desc(block[1]), desc(block[2]), block[4], block[5],
                 block[6] != 0, block[7] != 0, scratch(block[3], 16))


@register_fast("aten::grid_sampler_2d.out")
def bind_grid_sampler_2d(ctx, input, grid, interpolation_mode, padding_mode, align_corners, out):
    if input.ndim != 4 or grid.ndim != 4 or out.ndim != 4 or not is_float(input.dtype) \
            or not is_float(grid.dtype):
        return None
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        return None
    return ctx.bind(lazy(grid_kernel),
                    [ctx.desc(input), ctx.desc(grid), ctx.desc(out), ctx.buffer(16 * 8),
                     int(interpolation_mode), int(padding_mode), int(bool(align_corners)),
                     int(computes_f32(input.dtype))])
