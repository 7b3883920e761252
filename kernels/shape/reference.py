"""Shape kernels: ExecuTorch's ``*_copy`` view ops (materialized as copies), cat/stack/split.

Every view op here is a numpy view of the input's logical values followed by
``out.write``, which resizes ``out`` and copies in the out's own dim order.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.promote import category, promote_types
from pyruntime.kernels.args import wrap_dim
from pyruntime.kernels.registry import register


def _bad(op: str, arg: str, msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"{op}: {arg}: {msg}")


_dim = wrap_dim


def _dims(op: str, dims, ndim: int, arg: str = "dims") -> list:
    ds = [_dim(op, d, ndim, arg) for d in dims]
    if len(set(ds)) != len(ds):
        raise _bad(op, arg, f"expected distinct dims, got {list(dims)}")
    return ds


def ranked_along(op: str, verb: str, self, dim) -> tuple:
    """``self``'s values and ``dim`` wrapped, for an op that ``verb``s a tensor of rank >= 1."""
    x = self.numpy()
    if x.ndim == 0:
        raise _bad(op, "self", f"cannot {verb} a rank-0 tensor")
    return x, _dim(op, dim, x.ndim)


def _along(x: np.ndarray, d: int, sl: slice) -> np.ndarray:
    idx = [slice(None)] * x.ndim
    idx[d] = sl
    return x[tuple(idx)]


def _write_list(op: str, outs, parts) -> None:
    if len(outs) != len(parts):
        raise _bad(op, "out", f"expected a list of {len(parts)} tensors, got {len(outs)}")
    for o, p in zip(outs, parts):
        o.write(p)


def _infer_size(op: str, size, numel: int) -> list:
    size = [int(s) for s in size]
    holes = [i for i, s in enumerate(size) if s == -1]
    if len(holes) > 1 or any(s < -1 for s in size):
        raise _bad(op, "size", f"expected non-negative sizes and at most one -1, got {size}")
    known = int(np.prod([s for s in size if s != -1], dtype=np.int64))
    if holes:
        if known == 0 or numel % known:
            raise _bad(op, "size", f"cannot infer -1 in {size} for {numel} elements")
        size[holes[0]] = numel // known
    if int(np.prod(size, dtype=np.int64)) != numel:
        raise _bad(op, "size", f"shape {size} is invalid for {numel} elements")
    return size


# ---- plain views --------------------------------------------------------------------

@register("aten::view_copy.out")
def view_copy_out(self, size, out):
    x = self.numpy()
    out.write(x.reshape(_infer_size("view_copy", size, x.size)))


@register("aten::alias_copy.out", "aten::detach_copy.out", "aten::lift_fresh_copy.out")
def alias_copy_out(self, out):
    out.write(self.numpy())


@register("aten::permute_copy.out")
def permute_copy_out(self, dims, out):
    x = self.numpy()
    if len(dims) != x.ndim:
        raise _bad("permute_copy", "dims", f"expected {x.ndim} dims, got {list(dims)}")
    out.write(np.transpose(x, _dims("permute_copy", dims, x.ndim)) if x.ndim else x)


@register("aten::t_copy.out")
def t_copy_out(self, out):
    x = self.numpy()
    if x.ndim > 2:
        raise _bad("t_copy", "self", f"expected a tensor of rank <= 2, got rank {x.ndim}")
    out.write(x.T)


@register("aten::transpose_copy.int_out")
def transpose_copy_int_out(self, dim0, dim1, out):
    x = self.numpy()
    d0 = _dim("transpose_copy", dim0, x.ndim, "dim0")
    d1 = _dim("transpose_copy", dim1, x.ndim, "dim1")
    out.write(np.swapaxes(x, d0, d1) if x.ndim else x)


@register("aten::expand_copy.out")
def expand_copy_out(self, size, implicit, out):
    x = self.numpy()
    size = [int(s) for s in size]
    lead = len(size) - x.ndim
    if lead < 0:
        raise _bad("expand_copy", "size", f"expected at least {x.ndim} sizes, got {size}")
    if any(s < 0 for s in size[:lead]):
        raise _bad("expand_copy", "size", f"-1 is not allowed in a new leading dim, got {size}")
    shape = size[:lead] + [x.shape[i] if s == -1 else s for i, s in enumerate(size[lead:])]
    for have, want in zip(x.shape, shape[lead:]):
        if have != 1 and have != want:
            raise _bad("expand_copy", "size",
                       f"expected size {have} at a non-singleton dim, got {size} for {list(x.shape)}")
    out.write(np.broadcast_to(x, shape))


@register("aten::squeeze_copy.dim_out")
def squeeze_copy_dim_out(self, dim, out):
    squeeze_copy_dims_out(self, [dim], out)


@register("aten::squeeze_copy.dims_out")
def squeeze_copy_dims_out(self, dim, out):
    x = self.numpy()
    ds = _dims("squeeze_copy", dim, x.ndim, "dim")
    if x.ndim == 0:
        out.write(x)
        return
    out.write(np.squeeze(x, axis=tuple(d for d in ds if x.shape[d] == 1)))


@register("aten::unsqueeze_copy.out")
def unsqueeze_copy_out(self, dim, out):
    x = self.numpy()
    out.write(np.expand_dims(x, _dim("unsqueeze_copy", dim, x.ndim + 1)))


# ---- indexing views -----------------------------------------------------------------

@register("aten::slice_copy.Tensor_out")
def slice_copy_tensor_out(self, dim, start, end, step, out):
    x = self.numpy()
    if x.ndim == 0:
        raise _bad("slice_copy", "self", "cannot slice a rank-0 tensor")
    if step <= 0:
        raise _bad("slice_copy", "step", f"expected a positive step, got {step}")
    d = _dim("slice_copy", dim, x.ndim)
    # Python slices with a positive step clamp exactly like ATen's slice.
    out.write(_along(x, d, slice(start, end, step)))


@register("aten::select_copy.int_out")
def select_copy_int_out(self, dim, index, out):
    x, d = ranked_along("select_copy", "select from", self, dim)
    n = x.shape[d]
    if not -n <= index < n:
        raise _bad("select_copy", "index", f"expected an index in [{-n}, {n - 1}], got {index}")
    out.write(np.take(x, index % n, axis=d))


@register("aten::narrow_copy.out")
def narrow_copy_out(self, dim, start, length, out):
    x, d = ranked_along("narrow_copy", "narrow", self, dim)
    n = x.shape[d]
    if not -n <= start <= n:
        raise _bad("narrow_copy", "start", f"expected a start in [{-n}, {n}], got {start}")
    start = start + n if start < 0 else start
    if length < 0 or start + length > n:
        raise _bad("narrow_copy", "length",
                   f"expected 0 <= length <= {n - start}, got {length}")
    out.write(_along(x, d, slice(start, start + length)))


@register("aten::diagonal_copy.out")
def diagonal_copy_out(self, offset, dim1, dim2, out):
    x = self.numpy()
    if x.ndim < 2:
        raise _bad("diagonal_copy", "self", f"expected a tensor of rank >= 2, got rank {x.ndim}")
    d1, d2 = _dim("diagonal_copy", dim1, x.ndim, "dim1"), _dim("diagonal_copy", dim2, x.ndim, "dim2")
    if d1 == d2:
        raise _bad("diagonal_copy", "dim2", f"expected a dim other than dim1 ({dim1}), got {dim2}")
    out.write(np.diagonal(x, offset, d1, d2))


@register("aten::as_strided_copy.out")
def as_strided_copy_out(self, size, stride, storage_offset, out):
    x = self.numpy()
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    off = 0 if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise _bad("as_strided_copy", "stride", f"expected {len(size)} strides, got {stride}")
    if off < 0 or any(s < 0 for s in stride) or any(s < 0 for s in size):
        raise _bad("as_strided_copy", "stride",
                   f"expected non-negative sizes, strides and offset, got {size}, {stride}, {off}")
    # Strides index the input's storage, i.e. its elements in memory (dim) order.
    flat = np.transpose(x, self.dim_order).reshape(-1) if x.ndim else x.reshape(-1)
    if 0 not in size:
        last = off + sum(st * (sz - 1) for sz, st in zip(size, stride))
        if last >= flat.size:
            raise _bad("as_strided_copy", "size",
                       f"element {last} is out of bounds for storage of {flat.size} elements")
        flat = np.ascontiguousarray(flat[off:])
    res = np.lib.stride_tricks.as_strided(flat, shape=size,
                                          strides=[s * flat.itemsize for s in stride])
    out.write(res)


@register("aten::unfold_copy.out")
def unfold_copy_out(self, dimension, size, step, out):
    x = self.numpy()
    d = _dim("unfold_copy", dimension, x.ndim, "dimension")
    n = x.shape[d] if x.ndim else 1
    if not 0 <= size <= n:
        raise _bad("unfold_copy", "size", f"expected 0 <= size <= {n}, got {size}")
    if step <= 0:
        raise _bad("unfold_copy", "step", f"expected a positive step, got {step}")
    if x.ndim == 0:
        out.write(x.reshape(1)[:size])
        return
    win = np.lib.stride_tricks.sliding_window_view(x, size, axis=d)
    out.write(_along(win, d, slice(None, None, step)))


# ---- joins and splits ---------------------------------------------------------------

def join_arrays(op: str, tensors, out) -> tuple:
    """The values of a non-empty tensor list and the dtype they join in (castable to out's)."""
    if not tensors:
        raise _bad(op, "tensors", "expected a non-empty list")
    arrays = [t.numpy() for t in tensors]
    dt = arrays[0].dtype
    for a in arrays[1:]:
        dt = promote_types(dt, a.dtype)
    if category(dt) > category(out.dtype):
        raise _bad(op, "out", f"cannot cast the result type {dt} to the out dtype {out.dtype}")
    return arrays, dt


@register("aten::cat.out")
def cat_out(tensors, dim, out):
    arrays, dt = join_arrays("cat", tensors, out)
    # ATen skips legacy empty tensors of shape [0] whatever the other ranks are.
    parts = [a for a in arrays if not (a.ndim == 1 and a.size == 0)]
    if not parts:
        out.write(np.zeros((0,), dt))
        return
    ndim = parts[0].ndim
    if ndim == 0:
        raise _bad("cat", "tensors", "zero-dimensional tensors cannot be concatenated")
    d = _dim("cat", dim, ndim)
    for i, a in enumerate(parts):
        if a.ndim != ndim or any(a.shape[k] != parts[0].shape[k] for k in range(ndim) if k != d):
            raise _bad("cat", "tensors", f"expected sizes matching {list(parts[0].shape)} except "
                                         f"in dim {d}, got {list(a.shape)}")
    out.write(np.concatenate([a.astype(dt, copy=False) for a in parts], axis=d))


@register("aten::stack.out")
def stack_out(tensors, dim, out):
    arrays, dt = join_arrays("stack", tensors, out)
    if any(a.shape != arrays[0].shape for a in arrays):
        raise _bad("stack", "tensors",
                   f"expected equal sizes, got {[list(a.shape) for a in arrays]}")
    d = _dim("stack", dim, arrays[0].ndim + 1)
    out.write(np.stack([a.astype(dt, copy=False) for a in arrays], axis=d))


@register("aten::split_copy.Tensor_out")
def split_copy_tensor_out(self, split_size, dim, out):
    x, d = ranked_along("split_copy", "split", self, dim)
    n = x.shape[d]
    if split_size < 0 or (split_size == 0 and n != 0):
        raise _bad("split_copy", "split_size", f"expected a positive split size, got {split_size}")
    cuts = list(range(split_size, n, split_size)) if split_size else []
    _write_list("split_copy", out, np.split(x, cuts, axis=d))


@register("aten::split_with_sizes_copy.out")
def split_with_sizes_copy_out(self, split_sizes, dim, out):
    x, d = ranked_along("split_with_sizes_copy", "split", self, dim)
    if any(s < 0 for s in split_sizes) or sum(split_sizes) != x.shape[d]:
        raise _bad("split_with_sizes_copy", "split_sizes",
                   f"expected non-negative sizes summing to {x.shape[d]}, got {list(split_sizes)}")
    _write_list("split_with_sizes_copy", out, np.split(x, np.cumsum(split_sizes)[:-1], axis=d))


@register("aten::unbind_copy.int_out")
def unbind_copy_int_out(self, dim, out):
    x, d = ranked_along("unbind_copy", "unbind", self, dim)
    _write_list("unbind_copy", out, [np.take(x, i, axis=d) for i in range(x.shape[d])])
