"""Upsampling on the device: ``upsample_nearest2d`` and float32 ``upsample_bilinear2d``.
The source index and weight of each output row and column are the reference kernels'
(``kernels/upsample/reference.py``: ``nearest_index``, ``axis_taps``), computed once at load; each
work-item then evaluates ExecuTorch's per-output formula (``top = tl * w0 + tr * w1``,
``bottom = bl * w0 + br * w1``, ``top * h0 + bottom * h1``, float32, no contraction):
bit for bit."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import DTensor, Launch, i64, register_cl
from pyruntime.kernels.shape.opencl import WIDTH
from pyruntime.kernels.upsample.reference import axis_taps, nearest_index

F32 = np.dtype(np.float32)

SRC = r"""
__kernel void nearest(__global E* out, long ooff, __global const E* x, long xoff,
                      __global const long* ih, __global const long* iw,
                      long H, long W, long OH, long OW) {
    long g = get_global_id(0), ow = g % OW, oh = (g / OW) % OH, nc = g / (OW * OH);
    out[ooff + g] = x[xoff + (nc * H + ih[oh]) * W + iw[ow]];
}
"""
BILINEAR = r"""
__kernel void bilinear(__global float* out, long ooff, __global const float* x, long xoff,
                       __global const long* hi, __global const float* hl,
                       __global const long* wi, __global const float* wl,
                       long H, long W, long OH, long OW) {
    long g = get_global_id(0), ow = g % OW, oh = (g / OW) % OH, nc = g / (OW * OH);
    __global const float* p = x + xoff + nc * H * W;
    long h0 = hi[oh], h1 = hi[OH + oh], w0 = wi[ow], w1 = wi[OW + ow];
    float lw0 = wl[ow], lw1 = wl[OW + ow];
    float top = p[h0 * W + w0] * lw0 + p[h0 * W + w1] * lw1;
    float bottom = p[h1 * W + w0] * lw0 + p[h1 * W + w1] * lw1;
    out[ooff + g] = top * hl[oh] + bottom * hl[OH + oh];
}
"""


def _geometry(x, out, output_size, scale_factors):
    """(H, W, OH, OW, scale_h, scale_w) when x and out are contiguous NCHW tensors whose
    sizes agree with the arguments as the reference reads them, else None."""
    if not (isinstance(x, DTensor) and isinstance(out, DTensor) and x.dtype == out.dtype
            and len(x.sizes) == 4 and len(out.sizes) == 4 and x.contiguous()
            and out.contiguous() and out.sizes[:2] == x.sizes[:2]):
        return None
    H, W = x.sizes[2:]
    OH, OW = out.sizes[2:]
    if (output_size is None) == (scale_factors is None):
        return None
    if output_size is not None:
        if list(output_size) != [OH, OW]:
            return None
        return H, W, OH, OW, None, None
    sh, sw = scale_factors
    if [int(H * sh), int(W * sw)] != [OH, OW]:
        return None
    return H, W, OH, OW, sh, sw


def _buffers(dev, *arrays):
    return [dev.buffer(a.nbytes, np.ascontiguousarray(a)) for a in arrays]


@register_cl("aten::upsample_nearest2d.vec_out")
def upsample_nearest2d(dev, args):
    x, output_size, scale_factors, out = args[0], args[1], args[2], args[-1]
    geo = _geometry(x, out, output_size, scale_factors)
    if geo is None or x.dtype.itemsize not in WIDTH:
        return None
    H, W, OH, OW, sh, sw = geo
    if out.numel == 0:
        return Launch([])
    ih, iw = _buffers(dev, nearest_index(H, OH, sh).astype(np.int64),
                      nearest_index(W, OW, sw).astype(np.int64))
    k = dev.kernel(SRC, "nearest", {"E": WIDTH[x.dtype.itemsize]})
    k.set_args(out.buf, *i64(out.off), x.buf, *i64(x.off), ih, iw, *i64(H, W, OH, OW))
    return Launch([(k, (out.numel,))], [ih, iw])


@register_cl("aten::upsample_bilinear2d.vec_out")
def upsample_bilinear2d(dev, args):
    x, output_size, align_corners, scale_factors, out = args[:4] + [args[-1]]
    geo = _geometry(x, out, output_size, scale_factors)
    if geo is None or x.dtype != F32:
        return None  # float64 and uint8 keep the reference's other formulas (host)
    H, W, OH, OW, sh, sw = geo
    if out.numel == 0:
        return Launch([])
    h0, h1, lh0, lh1 = axis_taps(H, OH, align_corners, sh)
    w0, w1, lw0, lw1 = axis_taps(W, OW, align_corners, sw)
    bufs = _buffers(dev, np.concatenate([h0, h1]).astype(np.int64),
                    np.concatenate([lh0, lh1]).astype(F32),
                    np.concatenate([w0, w1]).astype(np.int64),
                    np.concatenate([lw0, lw1]).astype(F32))
    k = dev.kernel(BILINEAR, "bilinear")
    k.set_args(out.buf, *i64(out.off), x.buf, *i64(x.off), *bufs, *i64(H, W, OH, OW))
    return Launch([(k, (out.numel,))], bufs)
