"""Softmax on the device, the portable kernel's steps per row: ``max`` with std::max's
rule, the running sum of ``exp(x - max)`` in order, then ``exp(x - max) / sum``. Only
``exp`` is the device's (a few ulp from the C library's: docs/NUMERICS.md)."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import Launch, contiguous, register_cl
from pyruntime.kernels.opencl.device import CL_TYPES

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

SRC = r"""
__kernel void softmax(__global T* out, long ooff, __global const T* x, long xoff,
                      long n, long inner) {
    long g = get_global_id(0);
    long base = (g / inner) * n * inner + g % inner;
    __global const T* xr = x + xoff + base;
    __global T* yr = out + ooff + base;
    T mx = xr[0];
    for (long i = 1; i < n; ++i) { T v = xr[i * inner]; mx = v < mx ? mx : v; }
    T total = (T)0;
    for (long i = 0; i < n; ++i) {
        T e = exp(xr[i * inner] - mx);
        total = i == 0 ? e : total + e;
    }
    for (long i = 0; i < n; ++i) yr[i * inner] = exp(xr[i * inner] - mx) / total;
}
"""


@register_cl("aten::_softmax.out")
def softmax(dev, args):
    x, dim, half_to_float, out = args
    if not contiguous(x, out) or x.dtype not in FLOATS or out.dtype != x.dtype \
            or half_to_float or out.sizes != x.sizes or not x.sizes or x.numel == 0:
        return None
    nd = len(x.sizes)
    if not -nd <= dim < nd:
        return None
    dim %= nd
    n = x.sizes[dim]
    inner = 1
    for s in x.sizes[dim + 1:]:
        inner *= s
    rows = x.numel // n
    k = dev.kernel(SRC, "softmax", {"T": CL_TYPES[x.dtype]})
    k.set_args(out.buf, np.int64(out.off), x.buf, np.int64(x.off), np.int64(n),
               np.int64(inner))
    return Launch([(k, (rows,))])
