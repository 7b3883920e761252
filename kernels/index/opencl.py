"""Indexing on the device: ``index.Tensor`` (integer index tensors, ``None`` for a whole
dim), ``index_put`` (assign or accumulate) and ``embedding``. An index out of range sets
the plan's error flag (``Target.check``) instead of reading or writing out of bounds.

The indexed dims go where numpy (and ATen) put them: in place when the index tensors
are adjacent, in front otherwise. ``index_put`` gives one work-item each element of the
dims not indexed and walks the indexed positions in order, so a repeated index keeps
the last value (or sums in order, with ``accumulate``), as the C++ loop does."""
from __future__ import annotations

import math

import numpy as np

from pyruntime.kernels.opencl.api import DTensor, Launch, i64, register_cl, table
from pyruntime.kernels.opencl.device import CL_TYPES
from pyruntime.kernels.elementwise.opencl import bcast_strides
from pyruntime.kernels.shape.opencl import WIDTH, copy_launch

INDEX_TYPES = {np.dtype(np.int64): "long", np.dtype(np.int32): "int"}


def _index_args(types) -> str:
    return "".join(f", __global const {t}* ix{i}, long ioff{i}" for i, t in enumerate(types))


def _load_index(k: int, wrap: bool) -> str:
    """Read index ``k`` at ``j{k}``, wrap a negative one (index.Tensor) and range-check it
    against ``n{k}``; ``s`` moves by it times the indexed dim's stride."""
    neg = "        if (iv < 0) iv += n;\n" if wrap else ""
    return (f"    {{\n        long n = meta[base + {k}], iv = (long)ix{k}[j{k}];\n{neg}"
            "        if (iv < 0 || iv >= n) { atomic_cmpxchg(flag, 0, code); return; }\n"
            f"        s += iv * meta[base + K + {k}];\n    }}\n")


def _gather_source(types, wrap: bool) -> str:
    """``out[g] = x[offset of g]``: out dims are plain dims of x (stride ``meta[rank+d]``)
    or dims of the broadcast index shape (index ``k``'s stride ``meta[(2+k)*rank+d]``)."""
    k = len(types)
    js = "".join(f"    long j{i} = ioff{i};\n" for i in range(k))
    steps = "".join(f"        j{i} += c * meta[{2 + i} * rank + d];\n" for i in range(k))
    loads = "".join(_load_index(i, wrap) for i in range(k))
    return (f"#define K {k}\n__kernel void gather(__global E* out, long ooff, "
            f"__global const E* x, long xoff{_index_args(types)}, "
            "__global const long* meta, int rank, __global int* flag, int code) {\n"
            "    long g = get_global_id(0), r = g, s = xoff;\n"
            f"{js}    for (int d = rank - 1; d >= 0; --d) {{\n"
            "        long n = meta[d], c = r % n;\n        r /= n;\n"
            f"        s += c * meta[rank + d];\n{steps}    }}\n"
            f"    long base = (2 + K) * rank;\n{loads}    out[ooff + g] = x[s];\n}}\n")


def _put_source(types, accumulate: bool) -> str:
    """One work-item per element of the plain dims (``meta[3*rank+d]`` is 1 for an
    indexed dim), walking the ``count`` indexed positions in order."""
    k = len(types)
    js = "".join(f"        long j{i} = ioff{i};\n" for i in range(k))
    steps = "".join(f"            j{i} += c * meta[{4 + i} * rank + d];\n" for i in range(k))
    loads = "".join("    " + line + "\n" for i in range(k)
                    for line in _load_index(i, True).splitlines())
    write = "out[s] = out[s] + v[t];" if accumulate else "out[s] = v[t];"
    return (f"#define K {k}\n__kernel void put(__global E* out, long ooff, "
            f"__global const E* v, long voff{_index_args(types)}, "
            "__global const long* meta, int rank, long count, __global int* flag, "
            "int code) {\n"
            "    long r = get_global_id(0), s0 = ooff, t0 = voff;\n"
            "    for (int d = rank - 1; d >= 0; --d) {\n"
            "        if (meta[3 * rank + d]) continue;\n"
            "        long n = meta[d], c = r % n;\n        r /= n;\n"
            "        s0 += c * meta[rank + d];\n        t0 += c * meta[2 * rank + d];\n    }\n"
            "    long base = (4 + K) * rank;\n"
            "    for (long p = 0; p < count; ++p) {\n"
            f"        long q = p, s = s0, t = t0;\n{js}"
            "        for (int d = rank - 1; d >= 0; --d) {\n"
            "            if (!meta[3 * rank + d]) continue;\n"
            "            long n = meta[d], c = q % n;\n            q /= n;\n"
            f"            t += c * meta[2 * rank + d];\n{steps}        }}\n"
            f"{loads}        {write}\n    }}\n}}\n")


def _layout(x: DTensor, indices):
    """The result of ``x[indices]``: (sizes, x strides, per index tensor its strides, the
    indexed-dim flags) per result dim, and per index tensor (x dim size, x dim stride).
    None for a case these kernels leave to the host (masks, non-contiguous tensors)."""
    if not isinstance(x, DTensor) or not x.contiguous():
        return None
    nd = len(x.sizes)
    if len(indices) > nd:
        return None
    xst = x.strides()
    idx, dims = [], []  # (tensor, x dim) of each index tensor
    for d, t in enumerate(indices):
        if t is None:
            continue
        if not isinstance(t, DTensor) or t.dtype not in INDEX_TYPES or not t.contiguous():
            return None
        idx.append(t)
        dims.append(d)
    if not idx:
        return None
    try:
        bshape = tuple(np.broadcast_shapes(*(t.sizes for t in idx)))
    except ValueError:
        return None
    bstrides = []
    for t in idx:
        lead = len(bshape) - len(t.sizes)
        bstrides.append([0] * lead + [0 if n == 1 else s for n, s in zip(t.sizes, t.strides())])
    plain = [d for d in range(nd) if d not in dims]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    front = [d for d in plain if d < dims[0]] if adjacent else []
    back = [d for d in plain if d not in front]
    rows = []  # (size, x stride, [index strides], indexed)
    for d in front:
        rows.append((x.sizes[d], xst[d], [0] * len(idx), 0))
    for b, n in enumerate(bshape):
        rows.append((n, 0, [bs[b] for bs in bstrides], 1))
    for d in back:
        rows.append((x.sizes[d], xst[d], [0] * len(idx), 0))
    return rows, idx, [(x.sizes[d], xst[d]) for d in dims]


def _index_table(rows, idx, dims, value_strides=None) -> list:
    """The int64 table the gather / put kernels decode (see their sources)."""
    cols = [[r[0] for r in rows], [r[1] for r in rows]]
    if value_strides is not None:
        cols += [value_strides, [r[3] for r in rows]]
    cols += [[r[2][k] for r in rows] for k in range(len(idx))]
    flat = [v for c in cols for v in c]
    return flat + [n for n, _ in dims] + [s for _, s in dims]


def _gather(dev, x, indices, out, wrap: bool, what: str):
    lay = _layout(x, indices)
    if lay is None or not isinstance(out, DTensor) or out.dtype != x.dtype \
            or not out.contiguous() or x.dtype.itemsize not in WIDTH:
        return None
    rows, idx, dims = lay
    if tuple(r[0] for r in rows) != out.sizes:
        return None
    if out.numel == 0:
        return Launch([])
    meta = table(dev, _index_table(rows, idx, dims))
    types = [INDEX_TYPES[t.dtype] for t in idx]
    k = dev.kernel(_gather_source(types, wrap), "gather", {"E": WIDTH[x.dtype.itemsize]})
    args = [out.buf, *i64(out.off), x.buf, *i64(x.off)]
    for t in idx:
        args += [t.buf, np.int64(t.off)]
    bounds = ", ".join(f"[{-n if wrap else 0}, {n})" for n, _ in dims)
    args += [meta, np.int32(len(rows))] + dev.check(f"{what}: an index is out of range "
                                                     f"(allowed: {bounds})")
    k.set_args(*args)
    return Launch([(k, (out.numel,))], [meta])


@register_cl("aten::index.Tensor_out")
def index_tensor(dev, args):
    x, indices, out = args[0], args[1], args[-1]
    return _gather(dev, x, list(indices), out, True, "indices")


@register_cl("aten::embedding.out")
def embedding(dev, args):
    w, indices, out = args[0], args[1], args[-1]
    if not isinstance(w, DTensor) or len(w.sizes) != 2:
        return None
    return _gather(dev, w, [indices], out, False, "indices")


@register_cl("aten::index_put.out")
def index_put(dev, args):
    x, indices, values, accumulate, out = args[0], list(args[1]), args[2], args[3], args[-1]
    lay = _layout(x, indices)
    if lay is None or not isinstance(values, DTensor) or not isinstance(out, DTensor) \
            or not values.contiguous() or not out.contiguous() \
            or not (x.dtype == values.dtype == out.dtype) or out.sizes != x.sizes:
        return None
    if (accumulate and (x.dtype not in CL_TYPES or x.dtype == np.bool_)) \
            or x.dtype.itemsize not in WIDTH:
        return None
    rows, idx, dims = lay
    vst = bcast_strides(values, [r[0] for r in rows])  # values broadcast to x[indices]
    if vst is None:
        return None
    launch = Launch([], [])
    if out.buf is not x.buf or out.off != x.off:
        copy_launch(dev, out, x, x.sizes, x.strides(), out.strides(), steps=launch.steps,
                    keep=launch.keep)
    count = math.prod(r[0] for r in rows if r[3])  # indexed positions, walked in order
    plain = math.prod(r[0] for r in rows if not r[3])  # work-items
    if count == 0 or plain == 0:
        return launch
    meta = table(dev, _index_table(rows, idx, dims, vst))
    types = [INDEX_TYPES[t.dtype] for t in idx]
    elem = CL_TYPES[x.dtype] if accumulate else WIDTH[x.dtype.itemsize]
    k = dev.kernel(_put_source(types, bool(accumulate)), "put", {"E": elem})
    kargs = [out.buf, *i64(out.off), values.buf, *i64(values.off)]
    for t in idx:
        kargs += [t.buf, np.int64(t.off)]
    bounds = ", ".join(f"[-{n}, {n})" for n, _ in dims)
    kargs += [meta, np.int32(len(rows)), np.int64(count)] + \
        dev.check(f"indices: an index is out of range (allowed: {bounds})")
    k.set_args(*kargs)
    launch.steps.append((k, (plain,)))
    launch.keep.append(meta)
    return launch
