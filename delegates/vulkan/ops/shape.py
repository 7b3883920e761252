"""Views, permutes, slices, concatenation, expand/repeat, padding and type copies: all one
strided-copy shader (``copy.comp``) with a conversion between storage types."""
from __future__ import annotations

from pyruntime.delegates.vulkan.commands import pack
from pyruntime.delegates.vulkan.graph import ValueList
from pyruntime.delegates.vulkan.ops import (bad, broadcast_strides, coalesce, contiguous, dims8, nargs,
                                  norm_dim, numel, op, unsupported)
from pyruntime.delegates.vulkan.ops.elementwise import fill


def copy(g, x, out, sizes, in_strides, in_off=0, out_strides=None, out_off=0, where=""):
    """One dispatch: out[out_off + c.out_strides] = x[in_off + c.in_strides] over ``sizes``."""
    n = numel(sizes)
    if out_strides is None:
        out_strides = contiguous(sizes)
    sz, (si, so) = coalesce(list(sizes), list(in_strides), list(out_strides))
    defines = (("TO_BOOL", 1),) if out.dtype.name == "bool" and x.dtype.name != "bool" else ()
    p = pack(n, len(sz), in_off, out_off, *dims8(sz, 1), *dims8(si), *dims8(so))
    return g.dispatch("copy", defines, [("X", x)], [("Y", out)], p, g.groups(n), where)


def flat_copy(g, x, out, shape_fn, where):
    """out = x reshaped to ``shape_fn()`` (same numel), converting the storage type."""
    def plan():
        shape = shape_fn()
        if numel(shape) != x.numel:
            raise bad(where, f"cannot view {list(x.shape)} as {list(shape)}")
        out.resize(shape, where)
        n = x.numel
        return [copy(g, x, out, [n], [1], where=where)] if n else []
    return plan


def view_copy(g, x, out, layout, where):
    """out = x read through a strided view: ``layout()``, run on the current shapes, gives
    out's shape, x's strides and offset, and (where the view's dims are not out's: a
    repeat, a pixel shuffle) the view's sizes."""
    def plan():
        shape, strides, off, *sizes = layout()
        out.resize(shape, where)
        if not numel(shape):
            return []
        return [copy(g, x, out, sizes[0] if sizes else shape, strides, off, where=where)]
    return plan


def view_op(*names, n_args=0):
    """Register ``layout(g, args, x, where)`` as the builder of ops that are one strided
    copy of their first argument ``x`` into the output (``view_copy``): at least ``n_args``
    arguments; the layout is read on the current shapes at every plan."""
    def deco(layout):
        def build(g, args, where):
            nargs(args, n_args, where)
            x, out = g.t(args[0], where), g.t(args[-1], where)
            return view_copy(g, x, out, lambda: layout(g, args, x, where), where)
        op(*names)(build)
        return layout
    return deco


def _view_shape(size, n, where):
    size = list(size)
    if size.count(-1) > 1:
        raise bad(where, f"view size {size} has more than one -1")
    if -1 in size:
        rest = numel([s for s in size if s != -1])
        size[size.index(-1)] = n // rest if rest else 0
    return size


@op("aten.view_copy.default", "aten._unsafe_view.default", "aten.reshape.default",
    "aten.view.default")
def _view(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    return flat_copy(g, x, out, lambda: _view_shape(g.ints(args[1], where), x.numel, where), where)


@op("aten.clone.default", "aten._to_copy.default", "aten.alias_copy.default",
    "aten.detach_copy.default", "aten.lift_fresh_copy.default", "aten.contiguous.default",
    "dim_order_ops._to_dim_order_copy.default", "aten._to_dim_order_copy.default",
    "et_vk.prepack.default", "aten.alias.default", "dim_order_ops._clone_dim_order.default")
def _clone(g, args, where):
    nargs(args, 2, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    return flat_copy(g, x, out, lambda: x.shape, where)


@op("aten.unsqueeze_copy.default")
def _unsqueeze(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)

    def shape():
        s = list(x.shape)
        s.insert(norm_dim(g.ival(args[1], where), len(s) + 1, where), 1)
        return s
    return flat_copy(g, x, out, shape, where)


@op("aten.squeeze_copy.dims", "aten.squeeze_copy.dim", "aten.squeeze_copy.default")
def _squeeze(g, args, where):
    x, out = g.t(args[0], where), g.t(args[-1], where)

    def shape():
        s = list(x.shape)
        dims = range(len(s)) if len(args) < 3 else \
            {norm_dim(d, len(s), where) for d in g.ints(args[1], where)}
        return [v for i, v in enumerate(s) if not (i in dims and v == 1)]
    return flat_copy(g, x, out, shape, where)


@view_op("aten.permute_copy.default", "aten.permute.default", n_args=3)
def _permute(g, args, x, where):
    nd = len(x.shape)
    perm = [norm_dim(d, nd, where) for d in g.ints(args[1], where)]
    if sorted(perm) != list(range(nd)):
        raise bad(where, f"permutation {perm} of rank {nd}")
    st = contiguous(x.shape)
    return [x.shape[d] for d in perm], [st[d] for d in perm], 0


@view_op("aten.transpose_copy.int", "aten.transpose.int", "aten.t_copy.default")
def _transpose(g, args, x, where):
    nd = len(x.shape)
    if len(args) >= 4:
        d0, d1 = norm_dim(g.ival(args[1], where), nd, where), \
            norm_dim(g.ival(args[2], where), nd, where)
    else:
        d0, d1 = 0, max(nd - 1, 0)
    perm = list(range(nd))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    st = contiguous(x.shape)
    return [x.shape[d] for d in perm], [st[d] for d in perm], 0


@view_op("aten.select_copy.int", "aten.select.int", n_args=4)
def _select(g, args, x, where):
    nd = len(x.shape)
    d = norm_dim(g.ival(args[1], where), nd, where)
    i = g.ival(args[2], where)
    if not -x.shape[d] <= i < x.shape[d]:
        raise bad(where, f"index {i} out of range for size {x.shape[d]}")
    i %= x.shape[d]
    st = contiguous(x.shape)
    return ([s for k, s in enumerate(x.shape) if k != d],
            [s for k, s in enumerate(st) if k != d], i * st[d])


def _slice_bounds(size, start, end, step):
    start = 0 if start is None else start
    end = size if end is None else end
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start, end = min(max(start, 0), size), min(max(end, 0), size)
    return start, max(0, -(-(end - start) // step))


@view_op("aten.slice_copy.Tensor", "aten.slice.Tensor", n_args=2)
def _slice(g, args, x, where):
    nd = len(x.shape)
    d = norm_dim(g.ival(args[1], where, 0) if len(args) > 2 else 0, nd, where)
    start = g.ival(args[2], where) if len(args) > 3 and g.val(args[2]) is not None else None
    end = g.ival(args[3], where) if len(args) > 4 and g.val(args[3]) is not None else None
    step = g.ival(args[4], where, 1) if len(args) > 5 else 1
    if step < 1:
        raise bad(where, f"slice step {step}")
    start, n = _slice_bounds(x.shape[d], start, end, step)
    st = contiguous(x.shape)
    shape = list(x.shape)
    shape[d] = n
    sst = list(st)
    sst[d] *= step
    return shape, sst, start * st[d]


@op("aten.cat.default", "aten.concat.default")
def _cat(g, args, where):
    nargs(args, 2, where)
    lst = g.val(args[0])
    if not isinstance(lst, ValueList):
        raise bad(where, "the tensors argument is not a value list")
    xs = [g.t(v, where) for v in lst]
    out = g.t(args[-1], where)

    def plan():
        parts = [x for x in xs if not (len(x.shape) == 1 and x.shape[0] == 0)]
        if not parts:
            out.resize([0], where)
            return []
        nd = len(parts[0].shape)
        d = norm_dim(g.ival(args[1], where, 0) if len(args) > 2 else 0, nd, where)
        shape = list(parts[0].shape)
        shape[d] = sum(x.shape[d] for x in parts)
        for x in parts:
            if len(x.shape) != nd or any(x.shape[k] != shape[k] for k in range(nd) if k != d):
                raise bad(where, f"cannot concatenate {[list(p.shape) for p in parts]} on dim {d}")
        out.resize(shape, where)
        ost = contiguous(shape)
        res, off = [], 0
        for x in parts:
            if x.numel:
                res.append(copy(g, x, out, x.shape, contiguous(x.shape), 0, ost, off * ost[d],
                                where))
            off += x.shape[d]
        return res
    return plan


@op("aten.split_with_sizes_copy.default", "aten.split_copy.Tensor", "aten.unbind_copy.int")
def _split(g, args, where):
    nargs(args, 3, where)
    x = g.t(args[0], where)
    outs = g.val(args[-1])
    if not isinstance(outs, ValueList):
        raise bad(where, "the output is not a value list")
    outs = [g.t(v, where) for v in outs]
    unbind = "unbind" in where

    def plan():
        nd = len(x.shape)
        d = norm_dim(g.ival(args[1] if unbind else args[2], where, 0) if len(args) > 2 else 0,
                     nd, where)
        if unbind:
            sizes = [1] * x.shape[d]
        elif "split_copy" in where:
            step = g.ival(args[1], where)
            sizes = [min(step, x.shape[d] - s) for s in range(0, x.shape[d], step)]
        else:
            sizes = g.ints(args[1], where)
        if len(sizes) != len(outs) or sum(sizes) != x.shape[d]:
            raise bad(where, f"split sizes {sizes} of dim {d} (size {x.shape[d]}) into "
                             f"{len(outs)} outputs")
        st = contiguous(x.shape)
        res, off = [], 0
        for o, s in zip(outs, sizes):
            shape = list(x.shape)
            shape[d] = s
            if unbind:
                del shape[d]
            o.resize(shape, where)
            if numel(shape):
                sst = [v for k, v in enumerate(st) if not (unbind and k == d)]
                res.append(copy(g, x, o, shape, sst, off * st[d], where=where))
            off += s
        return res
    return plan


@view_op("aten.expand_copy.default", "aten.expand.default", n_args=3)
def _expand(g, args, x, where):
    size = g.ints(args[1], where)
    pad = len(size) - len(x.shape)
    shape = [x.shape[d - pad] if s == -1 else s for d, s in enumerate(size)]
    if pad < 0 or any(x.shape[d - pad] not in (1, shape[d]) for d in range(pad, len(size))):
        raise bad(where, f"cannot expand {list(x.shape)} to {size}")
    return shape, broadcast_strides(x.shape, shape), 0


@view_op("aten.repeat.default", n_args=3)
def _repeat(g, args, x, where):
    reps = g.ints(args[1], where)
    xs = [1] * (len(reps) - len(x.shape)) + list(x.shape)
    if len(reps) < len(x.shape) or len(reps) > 4:
        raise unsupported(where, f"repeat {reps} of rank {len(x.shape)}")
    st = contiguous(xs)
    shape = [r * s for r, s in zip(reps, xs)]
    sizes = [v for r, s in zip(reps, xs) for v in (r, s)]
    return shape, [v for s in st for v in (0, s)], 0, sizes


@view_op("aten.flip.default", n_args=3)
def _flip(g, args, x, where):
    nd = len(x.shape)
    dims = {norm_dim(d, nd, where) for d in g.ints(args[1], where)}
    st = contiguous(x.shape)
    off = sum((x.shape[d] - 1) * st[d] for d in dims)
    return x.shape, [-s if d in dims else s for d, s in enumerate(st)], off


@op("aten.constant_pad_nd.default")
def _pad(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    value = g.val(args[2]) if len(args) > 3 and g.val(args[2]) is not None else 0

    def shape():
        pads = g.ints(args[1], where)
        s = list(x.shape)
        for i in range(len(pads) // 2):
            d = len(s) - 1 - i
            s[d] += pads[2 * i] + pads[2 * i + 1]
        return s
    filler = fill(g, out, value, shape, where)

    def plan():
        res = filler()
        pads = g.ints(args[1], where)
        if any(p < 0 for p in pads):
            raise unsupported(where, f"negative padding {pads}")
        ost = contiguous(out.shape)
        off = sum(pads[2 * i] * ost[len(ost) - 1 - i] for i in range(len(pads) // 2))
        if x.numel:
            res.append(copy(g, x, out, x.shape, contiguous(x.shape), 0, ost, off, where))
        return res
    return plan

