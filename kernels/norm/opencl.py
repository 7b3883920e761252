"""Normalizations on the device. Batch norm (inference) is the portable loop's
``(x - mean) * invstd * weight + bias`` in the input's type, left to right, with invstd
``1 / sqrt(var + eps)`` in double (correctly rounded in OpenCL; devices without
``cl_khr_fp64`` run it on the host): bit for bit. Layer norm sums each row in order (the reference tier's numpy
mean sums pairwise: within a few ulp)."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import DTensor, Launch, contiguous, register_cl
from pyruntime.kernels.opencl.device import CL_TYPES

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

SRC = r"""
__kernel void batch_norm(__global T* out, long ooff, __global const T* x, long xoff,
                         __global const T* mean, long moff, __global const T* var, long voff,
                         __global const T* w, long woff, __global const T* b, long boff,
                         long C, long inner, long has_w, long has_b, double eps) {
    long g = get_global_id(0);
    long c = (g / inner) % C;
    T invstd = (T)(1.0 / sqrt((double)var[voff + c] + eps));
    T y = (x[xoff + g] - mean[moff + c]) * invstd;
    y = y * (has_w ? w[woff + c] : (T)1);
    y = y + (has_b ? b[boff + c] : (T)0);
    out[ooff + g] = y;
}

__kernel void layer_norm(__global T* out, long ooff, __global T* mean_out, long mo,
                         __global T* rstd_out, long ro, __global const T* x, long xoff,
                         __global const T* w, long woff, __global const T* b, long boff,
                         long n, T eps, long has_w, long has_b) {
    long r = get_global_id(0);
    __global const T* xr = x + xoff + r * n;
    __global T* yr = out + ooff + r * n;
    T s = (T)0;
    for (long i = 0; i < n; ++i) s = s + xr[i];
    T mean = s / (T)n;
    T v = (T)0;
    for (long i = 0; i < n; ++i) { T d = xr[i] - mean; T d2 = d * d; v = v + d2; }
    T var = v / (T)n;
    T rstd = (T)1 / sqrt(var + eps);
    for (long i = 0; i < n; ++i) {
        T y = (xr[i] - mean) * rstd;
        if (has_w) y = y * w[woff + i];
        if (has_b) y = y + b[boff + i];
        yr[i] = y;
    }
    mean_out[mo + r] = mean;
    rstd_out[ro + r] = rstd;
}
"""


def buffer_args(*ts) -> list:
    """Each tensor's (buffer, int64 offset) kernel arguments, in order."""
    return [a for t in ts for a in (t.buf, np.int64(t.off))]


def _vec_ok(t, C, dt) -> bool:
    return t is None or (isinstance(t, DTensor) and t.dtype == dt and t.numel == C
                         and t.contiguous())


@register_cl("aten::_native_batch_norm_legit_no_training.out")
def batch_norm(dev, args):
    x, w, b, mean, var, _momentum, eps, out0, out1, out2 = args
    if not contiguous(x, out0) or x.dtype not in FLOATS or out0.dtype != x.dtype \
            or len(x.sizes) < 2 or out0.sizes != x.sizes:
        return None
    dt = x.dtype
    C = x.sizes[1]
    if not all(_vec_ok(t, C, dt) for t in (w, b, mean, var)) or mean is None or var is None:
        return None
    if not dev.info.fp64:
        return None  # invstd is computed in double (as the portable kernel does)
    if any(isinstance(o, DTensor) and o.numel for o in (out1, out2)):
        return None  # the empty save_mean / save_invstd, as ExecuTorch returns them
    inner = x.numel // (x.sizes[0] * C) if x.numel else 1
    if x.numel == 0:
        return Launch([])
    k = dev.kernel(SRC, "batch_norm", {"T": CL_TYPES[dt]})
    k.set_args(*buffer_args(out0, x, mean, var, x if w is None else w, x if b is None else b),
               np.int64(C), np.int64(inner), np.int64(w is not None), np.int64(b is not None),
               np.float64(eps))
    return Launch([(k, (x.numel,))])


@register_cl("aten::native_layer_norm.out")
def layer_norm(dev, args):
    x, shape, w, b, eps, out0, out1, out2 = args
    if not contiguous(x, out0, out1, out2) or x.dtype not in FLOATS:
        return None
    dt = x.dtype
    ns = tuple(int(s) for s in shape)
    k = len(ns)
    if k == 0 or len(x.sizes) < k or x.sizes[len(x.sizes) - k:] != ns or out0.sizes != x.sizes:
        return None
    n = int(np.prod(ns))
    rows = x.numel // n if n else 0
    if n == 0 or any(o.dtype != dt for o in (out0, out1, out2)) \
            or out1.numel != rows or out2.numel != rows:
        return None
    if not (_vec_ok(w, n, dt) and _vec_ok(b, n, dt)):
        return None
    kern = dev.kernel(SRC, "layer_norm", {"T": CL_TYPES[dt]})
    kern.set_args(*buffer_args(out0, out1, out2, x, x if w is None else w, x if b is None else b),
                  np.int64(n), dt.type(eps), np.int64(w is not None), np.int64(b is not None))
    return Launch([(kern, (rows,))])
