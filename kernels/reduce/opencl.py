"""Reductions on the device: ``sum``, ``mean``, ``any``, ``max``/``min`` over dims. One
work-item per output walks its reduced elements in index order, the running sum starting
from the first element (numpy's cumsum, the portable loops' order): bit for bit. The
extremes propagate NaN; of a +0 and a -0 they keep the first (numpy's SIMD reduction
picks either, depending on the length)."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import DTensor, Launch, register_cl, table
from pyruntime.kernels.opencl.device import CL_TYPES

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
INTS = (np.dtype(np.int32), np.dtype(np.int64))
BOOL = np.dtype(np.bool_)

SRC = r"""
// p: nk, nr, then kept sizes, kept strides, reduced sizes, reduced strides
__kernel void reduce(__global O* out, long ooff, __global const I* x, long xoff,
                     __global const long* p, long count) {
    long nk = p[0], nr = p[1];
    __global const long* ks = p + 2;
    __global const long* kst = ks + nk;
    __global const long* rs = kst + nk;
    __global const long* rst = rs + nr;
    long g = get_global_id(0), r = g, base = xoff;
    for (long k = nk - 1; k >= 0; --k) { long c = r % ks[k]; r /= ks[k]; base += c * kst[k]; }
    A acc = INIT;
    for (long e = 0; e < count; ++e) {
        long q = e, at = base;
        for (long k = nr - 1; k >= 0; --k) { long c = q % rs[k]; q /= rs[k]; at += c * rst[k]; }
        A v = (A)x[at];
        acc = e == 0 ? FIRST : STEP;
    }
    out[ooff + g] = (O)(FINISH);
}
"""
SUM = {"INIT": "(A)0", "FIRST": "v", "STEP": "acc + v", "FINISH": "acc"}
MEAN = dict(SUM, FINISH="acc / (A)count")
MAX = {"INIT": "(A)0", "FIRST": "v", "STEP": "(acc != acc || !(v != v || v > acc)) ? acc : v",
       "FINISH": "acc"}
MIN = dict(MAX, STEP="(acc != acc || !(v != v || v < acc)) ? acc : v")
ANY = {"INIT": "(A)0", "FIRST": "(A)(v != 0)", "STEP": "(A)(acc || v != 0)", "FINISH": "acc"}


def _reduce(dev, x, out, dims, keepdim, ops, acc_type):
    if not isinstance(x, DTensor) or not isinstance(out, DTensor) or not out.contiguous():
        return None
    nd = len(x.sizes)
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        axes = list(range(nd))
    else:
        dims = [dims] if isinstance(dims, int) else list(dims)
        if nd == 0 or any(not -nd <= d < nd for d in dims):
            return None
        axes = sorted({d % nd for d in dims})
        if len(axes) != len(dims):
            return None
    kept = [a for a in range(nd) if a not in axes]
    want = tuple(1 if a in axes else x.sizes[a] for a in range(nd)) if keepdim else \
        tuple(x.sizes[a] for a in kept)
    if out.sizes != want:
        return None
    st = x.strides()
    count = 1
    for a in axes:
        count *= x.sizes[a]
    p = table(dev, [len(kept), len(axes)] + [x.sizes[a] for a in kept] + [st[a] for a in kept]
              + [x.sizes[a] for a in axes] + [st[a] for a in axes])
    defs = dict(ops, I=CL_TYPES[x.dtype], O=CL_TYPES[out.dtype], A=acc_type)
    if out.numel == 0:
        return Launch([], [p])
    if count == 0 and (ops is MAX or ops is MIN):
        return None  # the host kernel names the empty reduction
    k = dev.kernel(SRC, "reduce", defs)
    k.set_args(out.buf, np.int64(out.off), x.buf, np.int64(x.off), p, np.int64(count))
    return Launch([(k, (out.numel,))], [p])


def _float_target(x, out, dtype) -> bool:
    return isinstance(x, DTensor) and isinstance(out, DTensor) and x.dtype in FLOATS \
        and out.dtype == x.dtype and dtype is None


def float_reduce(dev, args, op):
    """sum / mean (``op``) of a float tensor over dims into its own dtype, or None."""
    x, dims, keepdim, dtype, out = args
    if not _float_target(x, out, dtype):
        return None
    return _reduce(dev, x, out, dims, keepdim, op, CL_TYPES[x.dtype])


@register_cl("aten::sum.IntList_out")
def sum_dims(dev, args):
    return float_reduce(dev, args, SUM)


@register_cl("aten::mean.out")
def mean(dev, args):
    return float_reduce(dev, args, MEAN)


def _any_ok(x, out) -> bool:
    return isinstance(out, DTensor) and out.dtype == BOOL and isinstance(x, DTensor) \
        and x.dtype in CL_TYPES


@register_cl("aten::any.out")
def any_dim(dev, args):
    x, dim, keepdim, out = args
    if not _any_ok(x, out) or not isinstance(dim, int):
        return None
    return _reduce(dev, x, out, [dim], keepdim, ANY, "uchar")


@register_cl("aten::any.dims_out")
def any_dims(dev, args):
    x, dims, keepdim, out = args
    return _reduce(dev, x, out, dims, keepdim, ANY, "uchar") if _any_ok(x, out) else None


@register_cl("aten::any.all_out")
def any_all(dev, args):
    x, out = args
    return _reduce(dev, x, out, None, False, ANY, "uchar") if _any_ok(x, out) else None


def _extreme(ops):
    def bind(dev, args):
        x, out = args[0], args[-1]
        if not isinstance(x, DTensor) or not isinstance(out, DTensor) \
                or x.dtype not in FLOATS + INTS or out.dtype != x.dtype:
            return None
        dims, keepdim = (None, False) if len(args) == 2 else (args[1], args[2])
        return _reduce(dev, x, out, dims, keepdim, ops, CL_TYPES[x.dtype])
    return bind


register_cl("aten::max.unary_out", "aten::amax.out")(_extreme(MAX))
register_cl("aten::min.unary_out", "aten::amin.out")(_extreme(MIN))
