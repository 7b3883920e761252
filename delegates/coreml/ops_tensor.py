"""Layout and indexing MIL ops: reshape, transpose, slices, gathers, scatters, concat, ...

These move values without arithmetic (``upcast=False``): a float16 tensor stays
float16. Indices may be any integer type (the partitioner casts token ids to
int16/uint16 for the ANE); negative indices count from the end; an index out
of range is an error (Core ML leaves it undefined).
"""
from __future__ import annotations

import numpy as np

from pyruntime.delegates.coreml.ops import (axes_of, axis_of, blist, call_kernel, ilist, ival, mil_op,
                                  op_error)

_MAX_ELEMENTS = 1 << 28  # a shape computed at run time that asks for more is refused


def _check_numel(shape, what):
    if any(s < 0 for s in shape) or int(np.prod(shape, dtype=np.int64)) > _MAX_ELEMENTS:
        raise op_error(f"{what}: bad or too large shape {list(shape)}")


def _indices(idx, size: int, what: str) -> np.ndarray:
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise op_error(f"{what}: indices must be integers, got {idx.dtype}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise op_error(f"{what}: index out of range [{-size}, {size}) (min {idx.min()}, max "
                       f"{idx.max()})")
    return np.where(idx < 0, idx + size, idx)


@mil_op("reshape", upcast=False)
def reshape(x, shape):
    x = np.asarray(x)
    shape = ilist(shape)
    shape = [x.shape[i] if s == 0 and i < x.ndim else s for i, s in enumerate(shape)]
    try:
        return x.reshape(shape)
    except ValueError as e:
        raise op_error(f"reshape {list(x.shape)} to {shape}: {e}") from None


@mil_op("transpose", upcast=False)
def transpose(x, perm):
    x = np.asarray(x)
    perm = ilist(perm)
    if sorted(p % max(x.ndim, 1) for p in perm) != list(range(x.ndim)):
        raise op_error(f"transpose: perm {perm} is not a permutation of rank {x.ndim}")
    return np.transpose(x, [p % x.ndim for p in perm])


@mil_op("expand_dims", upcast=False)
def expand_dims(x, axes):
    x = np.asarray(x)
    out_rank = x.ndim + len(ilist(axes))
    return np.expand_dims(x, tuple(sorted(axis_of(a, out_rank) for a in ilist(axes))))


@mil_op("squeeze", upcast=False)
def squeeze(x, axes=None):
    x = np.asarray(x)
    if axes is None:
        return x.reshape([s for s in x.shape if s != 1])
    ax = axes_of(axes, x.ndim)
    if any(x.shape[a] != 1 for a in ax):
        raise op_error(f"squeeze: axes {list(ax)} of shape {list(x.shape)} are not all 1")
    return np.squeeze(x, ax)


@mil_op("flatten2d", upcast=False)
def flatten2d(x, axis=1):
    x = np.asarray(x)
    a = ival(axis)
    a = a + x.ndim if a < 0 else a
    return x.reshape(int(np.prod(x.shape[:a], dtype=np.int64)), -1)


@mil_op("concat", upcast=False)
def concat(values, axis, interleave=False):
    vals = [np.asarray(v) for v in values]
    if any(v.ndim == 0 for v in vals):  # scalars join as one-element vectors (shape building)
        vals = [v.reshape(-1) if v.ndim == 0 else v for v in vals]
    ax = axis_of(axis, vals[0].ndim)
    if bool(interleave):
        return np.stack(vals, axis=ax + 1).reshape(
            vals[0].shape[:ax] + (-1,) + vals[0].shape[ax + 1:])
    try:
        return np.concatenate(vals, axis=ax)
    except ValueError as e:
        raise op_error(f"concat: {e}") from None


@mil_op("stack", upcast=False)
def stack(values, axis):
    vals = [np.asarray(v) for v in values]
    try:
        return np.stack(vals, axis=axis_of(axis, vals[0].ndim + 1))
    except ValueError as e:
        raise op_error(f"stack: {e}") from None


@mil_op("split", upcast=False)
def split(x, axis, num_splits=None, split_sizes=None):
    x = np.asarray(x)
    ax = axis_of(axis, x.ndim)
    if split_sizes is not None:
        sizes = ilist(split_sizes)
        if sum(sizes) != x.shape[ax] or min(sizes) < 0:
            raise op_error(f"split: sizes {sizes} do not add up to {x.shape[ax]}")
        return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=ax))
    n = ival(num_splits)
    if n <= 0 or x.shape[ax] % n:
        raise op_error(f"split: {x.shape[ax]} is not divisible into {n} parts")
    return tuple(np.split(x, n, axis=ax))


@mil_op("tile", upcast=False)
def tile(x, reps):
    x = np.asarray(x)
    reps = ilist(reps)
    _check_numel([s * r for s, r in zip(x.shape, reps)], "tile")
    return np.tile(x, reps)


def _slices(shape, begin, end, stride, begin_mask, end_mask, squeeze_mask):
    rank = len(shape)
    begin, end = ilist(begin), ilist(end)
    stride = ilist(stride) if stride is not None else [1] * rank
    bm, em, sm = blist(begin_mask, rank), blist(end_mask, rank), blist(squeeze_mask, rank)
    if not len(begin) == len(end) == len(stride) == rank:
        raise op_error(f"slice: begin/end/stride lengths {len(begin)}/{len(end)}/{len(stride)} "
                       f"for rank {rank}")
    sl = []
    for i in range(rank):
        if stride[i] == 0:
            raise op_error("slice: stride 0")
        if sm[i]:
            b = begin[i] + shape[i] if begin[i] < 0 else begin[i]
            if not 0 <= b < shape[i]:
                raise op_error(f"slice: squeezed index {begin[i]} out of range {shape[i]}")
            sl.append(b)
        else:
            sl.append(slice(None if bm[i] else begin[i], None if em[i] else end[i], stride[i]))
    return tuple(sl)


@mil_op("slice_by_index", upcast=False)
def slice_by_index(x, begin, end, stride=None, begin_mask=None, end_mask=None,
                   squeeze_mask=None):
    x = np.asarray(x)
    return x[_slices(x.shape, begin, end, stride, begin_mask, end_mask, squeeze_mask)]


@mil_op("slice_by_size", upcast=False)
def slice_by_size(x, begin, size):
    x = np.asarray(x)
    begin, size = ilist(begin), ilist(size)
    sl = []
    for i, (b, s) in enumerate(zip(begin, size)):
        b = b + x.shape[i] if b < 0 else b
        e = x.shape[i] if s == -1 else b + s
        if not 0 <= b <= e <= x.shape[i]:
            raise op_error(f"slice_by_size: [{b}, {e}) outside dim {i} of {list(x.shape)}")
        sl.append(slice(b, e))
    return x[tuple(sl)]


@mil_op("slice_update", upcast=False)
def slice_update(x, update, begin, end, stride=None, begin_mask=None, end_mask=None,
                 squeeze_mask=None):
    y = np.array(x, copy=True)
    sl = _slices(y.shape, begin, end, stride, begin_mask, end_mask, squeeze_mask)
    target = y[sl]
    u = np.asarray(update)
    if u.size != np.size(target):
        raise op_error(f"slice_update: update {list(u.shape)} for a slice of shape "
                       f"{list(np.shape(target))}")
    y[sl] = u.reshape(np.shape(target)).astype(y.dtype, copy=False)
    return y


@mil_op("crop", upcast=False)
def crop(x, crop_height, crop_width):
    x = np.asarray(x)
    h, w = ilist(crop_height), ilist(crop_width)
    return x[..., h[0]:x.shape[-2] - h[1], w[0]:x.shape[-1] - w[1]]


@mil_op("gather", upcast=False)
def gather(x, indices, axis=0, batch_dims=0, validate_indices=False):
    x = np.asarray(x)
    ax, bd = axis_of(axis, x.ndim), ival(batch_dims)
    idx = _indices(indices, x.shape[ax], "gather")
    if bd == 0:
        return np.take(x, idx, axis=ax)
    bshape = x.shape[:bd]
    if idx.shape[:bd] != bshape or ax < bd:
        raise op_error(f"gather: batch_dims {bd} of {list(x.shape)} and indices "
                       f"{list(idx.shape)}")
    parts = [np.take(x[b], idx[b], axis=ax - bd) for b in np.ndindex(*bshape)]
    return np.stack(parts).reshape(bshape + parts[0].shape) if parts else \
        np.zeros(bshape + x.shape[bd:ax] + idx.shape[bd:] + x.shape[ax + 1:], x.dtype)


@mil_op("gather_along_axis", upcast=False)
def gather_along_axis(x, indices, axis=0, validate_indices=False):
    x = np.asarray(x)
    ax = axis_of(axis, x.ndim)
    idx = _indices(indices, x.shape[ax], "gather_along_axis")
    return np.take_along_axis(x, idx, axis=ax)


@mil_op("gather_nd", upcast=False)
def gather_nd(x, indices, batch_dims=0, validate_indices=False):
    x = np.asarray(x)
    idx = np.asarray(indices)
    bd = ival(batch_dims)
    if bd:
        return np.stack([gather_nd(x[b], idx[b]) for b in np.ndindex(*x.shape[:bd])]).reshape(
            idx.shape[:-1] + x.shape[bd + idx.shape[-1]:])
    k = idx.shape[-1]
    cols = tuple(_indices(idx[..., i], x.shape[i], "gather_nd") for i in range(k))
    return x[cols]


_SCATTER = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
            "max": np.maximum, "min": np.minimum}


def _scatter_at(y, index, u, mode):
    if mode == "update":
        y[index] = u
    elif mode in _SCATTER:
        _SCATTER[mode].at(y, index, u)
    else:
        raise op_error(f"scatter: unknown mode {mode!r}")


@mil_op("scatter")
def scatter(data, indices, updates, axis=0, mode="add", validate_indices=False):
    y = np.array(data, copy=True)
    ax = axis_of(axis, y.ndim)
    idx = _indices(indices, y.shape[ax], "scatter")
    u = np.asarray(updates)
    yt, ut = np.moveaxis(y, ax, 0), np.moveaxis(u.reshape(y.shape[:ax] + idx.shape +
                                                          y.shape[ax + 1:]), ax, 0)
    _scatter_at(yt, idx.reshape(-1), ut.reshape((-1,) + yt.shape[1:]).astype(y.dtype), mode)
    return y


@mil_op("scatter_along_axis")
def scatter_along_axis(data, indices, updates, axis=0, mode="add", validate_indices=False):
    y = np.array(data, copy=True)
    ax = axis_of(axis, y.ndim)
    idx = _indices(indices, y.shape[ax], "scatter_along_axis")
    full = list(np.indices(idx.shape, sparse=True))
    full[ax] = idx
    _scatter_at(y, tuple(full), np.asarray(updates).astype(y.dtype), mode)
    return y


@mil_op("scatter_nd")
def scatter_nd(data, indices, updates, mode="add", validate_indices=False):
    y = np.array(data, copy=True)
    idx = np.asarray(indices)
    k = idx.shape[-1]
    cols = tuple(_indices(idx[..., i], y.shape[i], "scatter_nd").reshape(-1) for i in range(k))
    u = np.asarray(updates).reshape((-1,) + y.shape[k:]).astype(y.dtype)
    _scatter_at(y, cols, u, mode)
    return y


@mil_op("shape", upcast=False)
def shape(x):
    return np.asarray(np.shape(x), np.int32)


@mil_op("range_1d", upcast=False)
def range_1d(end, start, step):
    e, s, st = np.asarray(end), np.asarray(start), np.asarray(step)
    if st.reshape(()) == 0:
        raise op_error("range_1d: step 0")
    n = int(np.ceil((e.reshape(()).astype(np.float64) - s.reshape(())) / st.reshape(())))
    _check_numel([max(n, 0)], "range_1d")
    return np.arange(s.reshape(()), e.reshape(()), st.reshape(()),
                     dtype=np.result_type(e, s, st))


@mil_op("pad", upcast=False)
def pad(x, pad, mode="constant", constant_val=0.0):
    x = np.asarray(x)
    p = ilist(pad)
    n = len(p) // 2
    if len(p) % 2 or n > x.ndim or min(p, default=0) < 0:
        raise op_error(f"pad: {p} for rank {x.ndim}")
    widths = [(0, 0)] * (x.ndim - n) + [(p[2 * i], p[2 * i + 1]) for i in range(n)]
    _check_numel([s + a + b for s, (a, b) in zip(x.shape, widths)], "pad")
    if mode == "constant":
        return np.pad(x, widths, constant_values=np.asarray(constant_val).astype(x.dtype))
    if mode in ("reflect", "replicate"):
        return np.pad(x, widths, mode="reflect" if mode == "reflect" else "edge")
    raise op_error(f"pad: unknown mode {mode!r}")


@mil_op("reverse", upcast=False)
def reverse(x, axes=None):
    x = np.asarray(x)
    return np.flip(x, axes_of(axes, x.ndim)) if x.ndim else x


@mil_op("reverse_sequence", upcast=False)
def reverse_sequence(x, lengths, seq_axis=0, batch_axis=0):
    y = np.array(x, copy=True)
    sa, ba = axis_of(seq_axis, y.ndim), axis_of(batch_axis, y.ndim)
    for b, n in enumerate(ilist(lengths)):
        src = [slice(None)] * y.ndim
        src[ba], src[sa] = b, slice(0, n)
        dst = list(src)
        dst[sa] = slice(n - 1, None, -1) if n > 0 else slice(0, 0)
        y[tuple(src)] = np.asarray(x)[tuple(dst)]
    return y


@mil_op("band_part", upcast=False)
def band_part(x, lower=-1, upper=-1):
    x = np.asarray(x)
    m, n = x.shape[-2:]
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    lo, up = ival(lower), ival(upper)
    keep = ((lo < 0) | (i - j <= lo)) & ((up < 0) | (j - i <= up))
    return np.where(keep, x, np.zeros((), x.dtype))


@mil_op("cumsum")
def cumsum(x, axis=0, exclusive=False, reverse=False):
    x = np.asarray(x)
    ax = axis_of(axis, x.ndim)
    y = np.flip(x, ax) if reverse else x
    y = call_kernel("aten::cumsum.out", [np.ascontiguousarray(y), ax, None],
                    [(y.dtype, y.shape)])[0]
    if exclusive:
        y = np.concatenate([np.zeros_like(np.take(y, [0], ax)), np.take(y, range(y.shape[ax] - 1),
                                                                        ax)], ax)
    return np.flip(y, ax) if reverse else y


@mil_op("argsort", upcast=False)
def argsort(x, axis=-1, ascending=False):
    x = np.asarray(x)
    ax = axis_of(axis, x.ndim)
    key = x if bool(ascending) else -x.astype(np.float64)
    return np.argsort(key, axis=ax, kind="stable").astype(np.int32)


@mil_op("topk", upcast=False)
def topk(x, k=1, axis=-1, ascending=False, sort=True, return_indices=True,
         output_indices_dtype="int32"):
    x = np.asarray(x)
    ax = axis_of(axis, x.ndim)
    kk = ival(k)
    kk = x.shape[ax] if kk == -1 else kk
    if not 0 <= kk <= x.shape[ax]:
        raise op_error(f"topk: k={kk} for a dimension of {x.shape[ax]}")
    key = x if bool(ascending) else -x.astype(np.float64)
    idx = np.take(np.argsort(key, axis=ax, kind="stable"), range(kk), axis=ax)
    return np.take_along_axis(x, idx, ax), idx.astype(np.int32)


@mil_op("one_hot", upcast=False)
def one_hot(indices, one_hot_vector_size, axis=-1, on_value=1, off_value=0):
    idx = np.asarray(indices).astype(np.int64)
    n = ival(one_hot_vector_size)
    _check_numel([idx.size, n], "one_hot")
    on, off = np.asarray(on_value), np.asarray(off_value)
    y = np.where(idx[..., None] == np.arange(n), on, off).astype(np.result_type(on, off))
    ax = axis_of(axis, idx.ndim + 1)
    return np.moveaxis(y, -1, ax)


@mil_op("non_zero", upcast=False)
def non_zero(x):
    return np.argwhere(np.asarray(x)).astype(np.int32)


@mil_op("depth_to_space", upcast=False)
def depth_to_space(x, block_size):
    x = np.asarray(x)
    b = ival(block_size)
    n, c, h, w = x.shape
    return x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2).reshape(
        n, c // (b * b), h * b, w * b)


@mil_op("space_to_depth", upcast=False)
def space_to_depth(x, block_size):
    x = np.asarray(x)
    b = ival(block_size)
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4).reshape(
        n, c * b * b, h // b, w // b)


@mil_op("pixel_shuffle", upcast=False)
def pixel_shuffle(x, upscale_factor):
    return _shuffled("aten::pixel_shuffle.out", x, ival(upscale_factor), up=True)


@mil_op("pixel_unshuffle", upcast=False)
def pixel_unshuffle(x, downscale_factor):
    return _shuffled("aten::pixel_unshuffle.out", x, ival(downscale_factor), up=False)


def _shuffled(kernel, x, r, up):
    """ATen's pixel shuffle by ``r`` (channels into r x r pixel blocks) or, not ``up``, its
    inverse."""
    x = np.ascontiguousarray(x)
    n, c, h, w = x.shape
    shape = (n, c // (r * r), h * r, w * r) if up else (n, c * r * r, h // r, w // r)
    return call_kernel(kernel, [x, r], [(x.dtype, shape)])[0]


@mil_op("space_to_batch", upcast=False)
def space_to_batch(x, block_shape, paddings):
    x = np.asarray(x)
    bh, bw = ilist(block_shape)
    p = np.asarray(paddings).reshape(2, 2)
    x = np.pad(x, [(0, 0), (0, 0), tuple(p[0]), tuple(p[1])])
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // bh, bh, w // bw, bw).transpose(3, 5, 0, 1, 2, 4)
    return y.reshape(bh * bw * n, c, h // bh, w // bw)


@mil_op("batch_to_space", upcast=False)
def batch_to_space(x, block_shape, crops):
    x = np.asarray(x)
    bh, bw = ilist(block_shape)
    cr = np.asarray(crops).reshape(2, 2)
    nb, c, h, w = x.shape
    n = nb // (bh * bw)
    y = x.reshape(bh, bw, n, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(n, c, h * bh, w * bw)
    return y[:, :, cr[0, 0]:h * bh - cr[0, 1], cr[1, 0]:w * bw - cr[1, 1]]


@mil_op("sliding_windows", upcast=False)
def sliding_windows(x, axis, size, stride=1):
    x = np.asarray(x)
    ax, sz, st = axis_of(axis, x.ndim), ival(size), ival(stride)
    n = (x.shape[ax] - sz) // st + 1
    if sz < 1 or st < 1 or n < 1:
        raise op_error(f"sliding_windows: size {sz}, stride {st} on a dimension of "
                       f"{x.shape[ax]}")
    wins = [np.take(x, range(i * st, i * st + sz), axis=ax) for i in range(n)]
    return np.stack(wins, axis=ax)


@mil_op("reshape_like", upcast=False)
def reshape_like(x, ref_tensors, begins, ends, end_masks):
    shape = []
    for t, b, e, m in zip(ref_tensors, ilist(begins), ilist(ends), blist(end_masks,
                                                                          len(ilist(begins)))):
        s = np.shape(t)
        shape += list(s[b:] if m else s[b:e])
    return reshape(x, shape)
