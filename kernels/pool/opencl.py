"""2-D max pooling with indices on the device: the taps in order with ATen's update
rule (``v > best || isnan(v)``, padding as -inf), the flat index of the winner in its
plane: exact."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import Launch, contiguous, register_cl, table
from pyruntime.kernels.opencl.device import CL_TYPES

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

SRC = r"""
__kernel void max_pool2d(__global T* out, long ooff, __global long* idx, long ioff,
                         __global const T* x, long xoff, __global const long* p) {
    long H = p[0], W = p[1], OH = p[2], OW = p[3], KH = p[4], KW = p[5];
    long sh = p[6], sw = p[7], ph = p[8], pw = p[9], dh = p[10], dw = p[11];
    long g = get_global_id(0);
    long ox = g % OW, oy = (g / OW) % OH, plane = g / (OW * OH);
    __global const T* xp = x + xoff + plane * H * W;
    T best = (T)0;
    long arg = 0;
    for (long t = 0; t < KH * KW; ++t) {
        long iy = oy * sh - ph + (t / KW) * dh, ix = ox * sw - pw + (t % KW) * dw;
        T v = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? xp[iy * W + ix] : -INFINITY;
        if (t == 0 || v > best || isnan(v)) { best = v; arg = t; }
    }
    out[ooff + g] = best;
    idx[ioff + g] = (oy * sh - ph + (arg / KW) * dh) * W + (ox * sw - pw + (arg % KW) * dw);
}
"""


def _pair(v, default):
    v = list(v) if v else list(default)
    return v * 2 if len(v) == 1 else v


@register_cl("aten::max_pool2d_with_indices.out")
def max_pool2d_with_indices(dev, args):
    x, kernel, stride, padding, dilation, _ceil, out, indices = args
    if not contiguous(x, out, indices) or x.dtype not in FLOATS or out.dtype != x.dtype \
            or indices.dtype != np.int64 or len(x.sizes) not in (3, 4):
        return None
    k = _pair(kernel, ())
    s, p, d = _pair(stride, k), _pair(padding, (0,)), _pair(dilation, (1,))
    if len(k) != 2 or min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0 \
            or p[0] > k[0] // 2 or p[1] > k[1] // 2:
        return None  # the host kernel names what is wrong
    H, W = x.sizes[-2:]
    OH, OW = out.sizes[-2:]
    if out.sizes[:-2] != x.sizes[:-2] or indices.sizes != out.sizes:
        return None
    n = out.numel
    if n == 0:
        return Launch([])
    t = table(dev, [H, W, OH, OW, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1]])
    kern = dev.kernel(SRC, "max_pool2d", {"T": CL_TYPES[x.dtype]})
    kern.set_args(out.buf, np.int64(out.off), indices.buf, np.int64(indices.off), x.buf,
                  np.int64(x.off), t)
    return Launch([(kern, (n,))], [t])
