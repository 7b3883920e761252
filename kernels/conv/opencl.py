"""Convolutions on the device (1-D and 2-D, grouped and depthwise; transposed ones stay
on the host). One work-item per output, the products summed from zero over (input
channel, kernel row, kernel column) in that order with separate roundings, then the
bias added: the C++ loop's order and the reference tier's ``conv_nd``, bit for bit."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import Launch, contiguous, register_cl, table
from pyruntime.kernels.opencl.device import CL_TYPES

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

SRC = r"""
__kernel void conv2d(__global T* out, long ooff, __global const T* x, long xoff,
                     __global const T* w, long woff, __global const T* bias, long boff,
                     __global const long* p) {
    long C = p[0], H = p[1], W = p[2], O = p[3], OH = p[4], OW = p[5];
    long KH = p[6], KW = p[7], sh = p[8], sw = p[9], ph = p[10], pw = p[11];
    long dh = p[12], dw = p[13], G = p[14], has_bias = p[15];
    long g = get_global_id(0);
    long ox = g % OW, oy = (g / OW) % OH, o = (g / (OW * OH)) % O, nb = g / (OW * OH * O);
    long cg = C / G, og = O / G, grp = o / og;
    __global const T* xb = x + xoff + (nb * C + grp * cg) * H * W;
    __global const T* wo = w + woff + o * cg * KH * KW;
    T acc = (T)0;
    for (long c = 0; c < cg; ++c) {
        for (long ky = 0; ky < KH; ++ky) {
            long iy = oy * sh - ph + ky * dh;
            for (long kx = 0; kx < KW; ++kx) {
                long ix = ox * sw - pw + kx * dw;
                if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
                    T prod = xb[(c * H + iy) * W + ix] * wo[(c * KH + ky) * KW + kx];
                    acc = acc + prod;
                }
            }
        }
    }
    if (has_bias) acc = acc + bias[boff + o];
    out[ooff + g] = acc;
}
"""


@register_cl("aten::convolution.out")
def convolution(dev, args):
    x, w, bias, stride, padding, dilation, transposed, _opad, groups, out = args
    ts = (x, w) if bias is None else (x, w, bias)
    if transposed or not contiguous(out, *ts) or out.dtype not in FLOATS \
            or any(t.dtype != out.dtype for t in ts):
        return None
    k = len(w.sizes) - 2
    if k not in (1, 2) or len(x.sizes) != k + 2 or len(out.sizes) != k + 2:
        return None

    def two(v, fill):
        v = list(v) if v is not None else []
        v = v * k if len(v) == 1 else v
        if len(v) != k:
            return None
        return ([fill] + v) if k == 1 else v
    stride, padding, dilation = two(stride, 1), two(padding, 0), two(dilation, 1)
    if None in (stride, padding, dilation):
        return None
    N, C = x.sizes[:2]
    O = w.sizes[0]
    H, W = (1, x.sizes[2]) if k == 1 else x.sizes[2:]
    KH, KW = (1, w.sizes[2]) if k == 1 else w.sizes[2:]
    OH, OW = (1, out.sizes[2]) if k == 1 else out.sizes[2:]
    G = int(groups)
    if G < 1 or C % G or O % G or w.sizes[1] * G != C or out.sizes[:2] != (N, O):
        return None
    if (H + 2 * padding[0] - dilation[0] * (KH - 1) - 1) // stride[0] + 1 != OH or \
            (W + 2 * padding[1] - dilation[1] * (KW - 1) - 1) // stride[1] + 1 != OW:
        return None
    if bias is not None and bias.numel != O:
        return None
    n = out.numel
    if n == 0:
        return Launch([])
    p = table(dev, [C, H, W, O, OH, OW, KH, KW, stride[0], stride[1], padding[0],
                    padding[1], dilation[0], dilation[1], G, int(bias is not None)])
    kern = dev.kernel(SRC, "conv2d", {"T": CL_TYPES[out.dtype]})
    b = bias if bias is not None else w
    kern.set_args(out.buf, np.int64(out.off), x.buf, np.int64(x.off), w.buf, np.int64(w.off),
                  b.buf, np.int64(b.off), p)
    return Launch([(kern, (n,))], [p])
