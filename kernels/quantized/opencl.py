"""The quantize/dequantize ops of PT2E int8 programs on the device, as ExecuTorch's
``quantize_val`` rounds them: ``q = clamp(float(zp) + rint(x * (1.0f / scale)))`` (a
non-finite or out-of-range value goes to quant_min), ``x = float(q - zp) * scale``;
the reciprocal and the float32 scales are computed on the host at load: bit for bit."""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.dtypes import from_numpy_dtype
from pyruntime.kernels.opencl.api import DTensor, Launch, contiguous, register_cl
from pyruntime.kernels.opencl.device import CL_TYPES

F32 = np.dtype(np.float32)
QUANT = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.uint16, np.int32))

SRC = r"""
__kernel void quantize(__global Q* out, long ooff, __global const float* x, long xoff,
                       float inv_scale, float zp, long qmin, long qmax) {
    long g = get_global_id(0);
    float scaled = inv_scale * x[xoff + g];
    float r = zp + rint(scaled);
    long q = (isfinite(r) && fabs(r) < 9.223372036854775808e18f) ? (long)r : LONG_MIN;
    q = q < qmin ? qmin : (q > qmax ? qmax : q);
    out[ooff + g] = (Q)q;
}

__kernel void dequantize(__global float* out, long ooff, __global const Q* q, long qoff,
                         __global const float* scale, __global const long* zp,
                         long C, long inner) {
    long g = get_global_id(0);
    long c = (g / inner) % C;
    long diff = (long)q[qoff + g] - zp[c];
    out[ooff + g] = (float)diff * scale[c];
}
"""


def _code_ok(code, t: DTensor) -> bool:
    return code is None or code == from_numpy_dtype(t.dtype)


@register_cl("quantized_decomposed::quantize_per_tensor.out")
def quantize_per_tensor(dev, args):
    x, scale, zp, qmin, qmax, dtype, out = args
    if not contiguous(x, out) or x.dtype != F32 or out.dtype not in QUANT \
            or not _code_ok(dtype, out) or out.sizes != x.sizes:
        return None
    info = np.iinfo(out.dtype)
    if not info.min <= qmin <= qmax <= info.max:
        return None
    inv = F32.type(1.0) / F32.type(scale)
    if x.numel == 0:
        return Launch([])
    k = dev.kernel(SRC, "quantize", {"Q": CL_TYPES[out.dtype]})
    k.set_args(out.buf, np.int64(out.off), x.buf, np.int64(x.off), inv,
               F32.type(np.int32(zp)), np.int64(qmin), np.int64(qmax))
    return Launch([(k, (x.numel,))])


def _dequant(dev, q, out, scales, zps, C, inner):
    sbuf = dev.buffer(scales.nbytes, scales)
    zbuf = dev.buffer(zps.nbytes, zps)
    if q.numel == 0:
        return Launch([], [sbuf, zbuf])
    k = dev.kernel(SRC, "dequantize", {"Q": CL_TYPES[q.dtype]})
    k.set_args(out.buf, np.int64(out.off), q.buf, np.int64(q.off), sbuf, zbuf, np.int64(C),
               np.int64(inner))
    return Launch([(k, (q.numel,))], [sbuf, zbuf])


def _dequant_ok(q, dtype, out_dtype, out) -> bool:
    return contiguous(q, out) and q.dtype in QUANT and out.dtype == F32 \
        and _code_ok(dtype, q) and _code_ok(out_dtype, out) and out.sizes == q.sizes


@register_cl("quantized_decomposed::dequantize_per_tensor.out")
def dequantize_per_tensor(dev, args):
    q, scale, zp, _qmin, _qmax, dtype, out_dtype, out = args
    if not _dequant_ok(q, dtype, out_dtype, out):
        return None
    return _dequant(dev, q, out, np.array([scale], F32), np.array([zp], np.int64), 1, 1)


@register_cl("quantized_decomposed::dequantize_per_channel.out")
def dequantize_per_channel(dev, args):
    q, scales, zps, axis, _qmin, _qmax, dtype, out_dtype, out = args
    if not _dequant_ok(q, dtype, out_dtype, out) or not q.sizes:
        return None
    if not isinstance(scales, DTensor) or not scales.const or \
            (zps is not None and not (isinstance(zps, DTensor) and zps.const)):
        return None  # parameters computed in the run: on the host
    nd = len(q.sizes)
    if not -nd <= axis < nd:
        return None
    axis %= nd
    C = q.sizes[axis]
    if scales.numel != C or (zps is not None and zps.numel != C):
        return None
    inner = 1
    for s in q.sizes[axis + 1:]:
        inner *= s
    s = scales.t.numpy().reshape(-1).astype(F32)
    z = np.zeros(C, np.int64) if zps is None else zps.t.numpy().reshape(-1).astype(np.int64)
    return _dequant(dev, q, out, s, z, C, inner)
