"""Copies on the device: permute, view, clone, expand, squeeze/unsqueeze, select, slice,
cat, split, unfold, view_as_real, dim-order conversion, ``copy_``. One kernel moves
elements of a given byte width from one strided view to another (exact for every
dtype); each op only says which views. A copy that also converts the dtype is an
elementwise cast (``elementwise.cast``)."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import DTensor, Launch, i64, register_cl, table
from pyruntime.kernels.elementwise.opencl import bcast_strides, cast

SRC = r"""
__kernel void copy_strided(__global E* dst, long doff, __global const E* src, long soff,
                           __global const long* meta, int rank) {
    long r = get_global_id(0), s = soff, d = doff;
    for (int k = rank - 1; k >= 0; --k) {
        long n = meta[k], c = r % n;
        r /= n;
        s += c * meta[rank + k];
        d += c * meta[2 * rank + k];
    }
    dst[d] = src[s];
}
"""
WIDTH = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}


def copy_launch(dev, dst: DTensor, src: DTensor, sizes, src_strides, dst_strides,
                soff: int = 0, doff: int = 0, steps=None, keep=None):
    """Append to (or make) a Launch copying ``sizes`` elements between the two views."""
    steps = [] if steps is None else steps
    keep = [] if keep is None else keep
    n = 1
    for s in sizes:
        n *= s
    if n:
        meta = table(dev, list(sizes) + list(src_strides) + list(dst_strides))
        k = dev.kernel(SRC, "copy_strided", {"E": WIDTH[dst.dtype.itemsize]})
        k.set_args(dst.buf, *i64(dst.off + doff), src.buf, *i64(src.off + soff), meta,
                   np.int32(len(sizes)))
        steps.append((k, (n,)))
        keep.append(meta)
    return Launch(steps, keep)


def _plain(x, out) -> bool:
    return isinstance(x, DTensor) and isinstance(out, DTensor) and x.dtype == out.dtype \
        and x.dtype.itemsize in WIDTH


def _flat(dev, x, out):
    """Same elements in C order (view, squeeze, unsqueeze): both in default dim order."""
    if not (_plain(x, out) and x.contiguous() and out.contiguous() and x.numel == out.numel):
        return None
    return copy_launch(dev, out, x, [x.numel], [1], [1])


def _same_shape(dev, x, out):
    """Same logical shape, any dim orders (clone, dim-order conversion)."""
    if not (_plain(x, out) and x.sizes == out.sizes):
        return None
    return copy_launch(dev, out, x, x.sizes, x.strides(), out.strides())


@register_cl("aten::view_copy.out")
def view_copy(dev, args):
    return _flat(dev, args[0], args[-1])


@register_cl("aten::squeeze_copy.dims_out", "aten::squeeze_copy.dim_out",
             "aten::squeeze_copy.out", "aten::unsqueeze_copy.out", "aten::alias_copy.out",
             "aten::_unsafe_view.out", "aten::reshape.out")
def squeeze_like(dev, args):
    return _flat(dev, args[0], args[-1])


@register_cl("dim_order_ops::_clone_dim_order.out", "aten::clone.out",
             "dim_order_ops::_to_dim_order_copy.out", "aten::_to_copy.out")
def clone(dev, args):
    x, out = args[0], args[-1]
    if isinstance(x, DTensor) and isinstance(out, DTensor) and x.dtype != out.dtype:
        return cast(dev, x, out) if x.sizes == out.sizes else None
    return _same_shape(dev, x, out)


@register_cl("aten::copy_")
def copy_(dev, args):
    """``self`` (written in place, any dim order) takes ``src`` broadcast to its shape."""
    x, src = args[0], args[1]
    if not isinstance(x, DTensor) or not isinstance(src, DTensor) or x.const:
        return None
    if src.dtype != x.dtype:
        return cast(dev, src, x) if x.contiguous() else None
    st = bcast_strides(src, x.sizes)
    if st is None or x.dtype.itemsize not in WIDTH:
        return None
    return copy_launch(dev, x, src, x.sizes, st, x.strides())


@register_cl("aten::unfold_copy.out")
def unfold_copy(dev, args):
    """Windows of ``size`` every ``step`` along ``dimension``: a strided view, copied."""
    x, dim, size, step, out = args[0], args[1], args[2], args[3], args[-1]
    if not (_plain(x, out) and x.contiguous() and out.contiguous()) or not x.sizes \
            or step <= 0:
        return None
    nd = len(x.sizes)
    dim %= nd
    n = x.sizes[dim]
    if not 0 <= size <= n:
        return None
    sizes, st = list(x.sizes), list(x.strides())
    sizes[dim] = (n - size) // step + 1
    sizes.append(size)
    st.append(st[dim])
    st[dim] *= step
    if tuple(sizes) != out.sizes:
        return None
    return copy_launch(dev, out, x, sizes, st, out.strides())


@register_cl("aten::view_as_real_copy.out")
def view_as_real_copy(dev, args):
    """A complex tensor's bytes as (real, imaginary) pairs of its float type."""
    x, out = args[0], args[-1]
    if not isinstance(x, DTensor) or not isinstance(out, DTensor) or x.dtype.kind != "c" \
            or x.dtype.itemsize != 2 * out.dtype.itemsize or not x.contiguous() \
            or not out.contiguous() or out.sizes != tuple(x.sizes) + (2,):
        return None
    # x.off counts complex elements: twice as many of out's
    return copy_launch(dev, out, x, [out.numel], [1], [1], soff=x.off)


@register_cl("aten::permute_copy.out")
def permute_copy(dev, args):
    x, dims, out = args[0], args[1], args[-1]
    if not (_plain(x, out) and x.contiguous() and out.contiguous()):
        return None
    nd = len(x.sizes)
    dims = [d % nd if nd else 0 for d in dims]
    st = x.strides()
    sizes = [x.sizes[d] for d in dims]
    if tuple(sizes) != out.sizes:
        return None
    return copy_launch(dev, out, x, sizes, [st[d] for d in dims], out.strides())


@register_cl("aten::expand_copy.out")
def expand_copy(dev, args):
    x, out = args[0], args[-1]
    if not (_plain(x, out) and x.contiguous() and out.contiguous()):
        return None
    lead = len(out.sizes) - len(x.sizes)
    if lead < 0:
        return None
    st = [0] * lead + [0 if x.sizes[i] == 1 and out.sizes[lead + i] != 1 else s
                       for i, s in enumerate(x.strides())]
    for i, n in enumerate(x.sizes):
        if n != 1 and n != out.sizes[lead + i]:
            return None
    return copy_launch(dev, out, x, out.sizes, st, out.strides())


@register_cl("aten::select_copy.int_out")
def select_copy(dev, args):
    x, dim, index, out = args[0], args[1], args[2], args[-1]
    if not (_plain(x, out) and x.contiguous() and out.contiguous()) or not x.sizes:
        return None
    nd = len(x.sizes)
    dim %= nd
    n = x.sizes[dim]
    if not -n <= index < n:
        return None  # the host kernel names the bad index
    index %= n
    st = list(x.strides())
    sizes = list(x.sizes)
    off = index * st.pop(dim)
    sizes.pop(dim)
    if tuple(sizes) != out.sizes:
        return None
    return copy_launch(dev, out, x, sizes, st, out.strides(), soff=off)


@register_cl("aten::slice_copy.Tensor_out")
def slice_copy(dev, args):
    x, dim, start, end, step, out = args[0], args[1], args[2], args[3], args[4], args[-1]
    if not (_plain(x, out) and x.contiguous() and out.contiguous()) or not x.sizes:
        return None
    nd = len(x.sizes)
    dim %= nd
    n = x.sizes[dim]
    step = 1 if step is None else step
    start = 0 if start is None else start
    if step < 1:
        return None
    if start < 0:
        start += n
    start = min(max(start, 0), n)
    sizes = list(x.sizes)
    sizes[dim] = out.sizes[dim] if len(out.sizes) == nd else -1
    end = n if end is None else end
    if end < 0:
        end += n
    end = min(max(end, start), n)
    if sizes[dim] != (end - start + step - 1) // step or tuple(sizes) != out.sizes:
        return None
    st = list(x.strides())
    off = start * st[dim]
    st[dim] *= step
    return copy_launch(dev, out, x, sizes, st, out.strides(), soff=off)


def join_launch(dev, whole, parts, dim, split: bool):
    """Copies between contiguous ``whole`` and its ``parts`` along ``dim``: cat, or split."""
    if not isinstance(whole, DTensor) or not whole.contiguous() or not whole.sizes:
        return None
    nd = len(whole.sizes)
    dim %= nd
    steps, keep, at = [], [], 0
    wst = whole.strides()
    for p in parts:
        if not _plain(p, whole) or not p.contiguous():
            return None
        if not split and p.sizes == (0,) and nd != 1:
            continue  # the legacy empty 1-D input cat skips
        if len(p.sizes) != nd or any(p.sizes[i] != whole.sizes[i] for i in range(nd) if i != dim):
            return None
        if split:
            copy_launch(dev, p, whole, p.sizes, wst, p.strides(), soff=at * wst[dim], steps=steps,
                        keep=keep)
        else:
            copy_launch(dev, whole, p, p.sizes, p.strides(), wst, doff=at * wst[dim], steps=steps,
                        keep=keep)
        at += p.sizes[dim]
    if at != whole.sizes[dim]:
        return None
    return Launch(steps, keep)


@register_cl("aten::cat.out")
def cat(dev, args):
    return join_launch(dev, args[-1], args[0], args[1], False)


@register_cl("aten::split_with_sizes_copy.out", "aten::split_copy.Tensor_out")
def split_copy(dev, args):
    return join_launch(dev, args[0], args[-1], args[2], True)
