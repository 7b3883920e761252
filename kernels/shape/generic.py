"""Compiled copies, casts, views, flips, rolls, pads, triangles, joins and splits of every
dtype: binders of ``kernels/shape/reference_copy.py`` and ``shape.py`` ops onto ``move_kernel``.
"""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np

from pyruntime.cython_ext import from_numpy_dtype
from pyruntime.kernels.args import wrap_dim
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.shape.generic_move import move_kernel
from pyruntime.kernels.fast.move_copy import (OP_BCAST, OP_CAT, OP_COPY, OP_COPY_INTO, OP_CPAD,
                                            OP_DIAG, OP_EXPAND, OP_FLIP, OP_NARROW, OP_PERMUTE,
                                            OP_PSHUF, OP_PUNSHUF, OP_REAL, OP_REFLECT, OP_REPEAT,
                                            OP_REPLICATE, OP_ROLL, OP_ROLL_FLAT, OP_SELECT,
                                            OP_SLICE, OP_SPLIT, OP_SPLITS, OP_SQUEEZE, OP_STACK,
                                            OP_STRIDED, OP_TRIL, OP_TRIU, OP_UNBIND, OP_UNFOLD,
                                            OP_UNSQUEEZE, OP_VIEW, SCR)
from pyruntime.kernels.fast.nb import lazy
from pyruntime.kernels.promote import category, promote_types


# ---- binders --------------------------------------------------------------------------------
ANY = tuple(np.dtype(t) for t in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
                                  np.float16, ml_dtypes.bfloat16, np.float32, np.float64))
COMPONENT = {np.dtype(np.complex64): np.dtype(np.float32),
             np.dtype(np.complex128): np.dtype(np.float64)}
BIG = 1 << 62


def _st(dt) -> int:
    return int(from_numpy_dtype(np.dtype(dt)))


def ok(*ts) -> bool:
    return all(t is not None and t.dtype in ANY for t in ts)


def _dim(d, n):
    """``d`` wrapped as the reference kernel wraps it (rank 0 takes 0 and -1), or None."""
    if isinstance(d, bool) or not isinstance(d, int):
        return None
    try:
        return wrap_dim("", d, n)
    except Exception:  # noqa: BLE001 - the reference kernel reports it
        return None


def _dim_set(dims, n):
    ds = [_dim(d, n) for d in dims]
    return None if None in ds or len(set(ds)) != len(ds) else ds


def ints(xs, lo=-BIG, hi=BIG) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi for x in xs)


def _bind(ctx, op, src, out, params=()):
    if not ok(src, out):
        return None
    return ctx.bind(lazy(move_kernel), [op, ctx.desc(src), ctx.desc(out), ctx.buffer(SCR * 8)]
                    + [int(p) for p in params])


def _same_rank(ctx, op, self, out, params=()):
    return _bind(ctx, op, self, out, params) if self.ndim == out.ndim else None


def bind_dim_mask(ctx, bind, op, self, dims, out):
    """``bind`` ``op`` with ``dims`` as a bit mask (a rank-0 ``self`` is a copy); None if bad."""
    ds = _dim_set(dims, self.ndim)
    if ds is None:
        return None
    if self.ndim == 0:
        return _same_rank(ctx, OP_COPY, self, out)
    return bind(ctx, op, self, out, [sum(1 << d for d in ds)])


def fill_pattern(value, dt) -> int:
    """``value`` (a numpy scalar/array) cast to ``dt`` as numpy's unsafe copy does, as the
    signed integer with the same bytes."""
    a = np.empty((), dt)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        np.copyto(a, value, casting="unsafe")
    signed = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]
    return int(a.reshape(1).view(signed)[0])


# -- copies and casts

@register_fast("aten::alias_copy.out", "aten::detach_copy.out", "aten::lift_fresh_copy.out",
               "et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out")
def bind_alias_copy(ctx, self, out):
    return _same_rank(ctx, OP_COPY, self, out)


@register_fast("aten::_to_copy.out")
def bind_to_copy(ctx, self, non_blocking, memory_format, out):
    # memory_format only picks out's dim order (fixed at export); the copy follows out's strides
    return _same_rank(ctx, OP_COPY, self, out) if memory_format in (None, 0, 1) else None


def bind_clone_any(ctx, self, memory_format, out):
    return bind_to_copy(ctx, self, False, memory_format, out)


def bind_to_dim_order_copy_any(ctx, self, non_blocking, dim_order, out):
    if dim_order is not None and (sorted(dim_order) != list(range(self.ndim))
                                  or tuple(dim_order) != tuple(out.dim_order)):
        return None
    return _same_rank(ctx, OP_COPY, self, out)


@register_fast("aten::copy.out")
def bind_copy(ctx, self, src, non_blocking, out):
    # the value is src cast to self's dtype, then to out's: decline the one double cast
    if not ok(self) or src.ndim > self.ndim or out.ndim != self.ndim \
            or (src.dtype != self.dtype and out.dtype != self.dtype):
        return None
    return _bind(ctx, OP_BCAST, src, out, [ctx.desc(self)])


def bind_copy_any(ctx, self, src, non_blocking):
    if src.ndim > self.ndim:
        return None
    return _bind(ctx, OP_COPY_INTO, src, self)


# -- views

@register_fast("aten::narrow_copy.out")
def bind_narrow(ctx, self, dim, start, length, out):
    d = _dim(dim, self.ndim) if self.ndim else None
    if d is None or not ints([start, length]):
        return None
    return _same_rank(ctx, OP_NARROW, self, out, [d, start, length])


@register_fast("aten::diagonal_copy.out")
def bind_diagonal(ctx, self, offset, dim1, dim2, out):
    n = self.ndim
    d1, d2 = (_dim(dim1, n), _dim(dim2, n)) if n >= 2 else (None, None)
    if d1 is None or d2 is None or d1 == d2 or out.ndim != n - 1 or not ints([offset]):
        return None
    return _bind(ctx, OP_DIAG, self, out, [offset, d1, d2])


@register_fast("aten::as_strided_copy.out")
def bind_as_strided(ctx, self, size, stride, storage_offset, out):
    off = 0 if storage_offset is None else storage_offset
    if len(size) != len(stride) or len(size) != out.ndim or len(size) > 16 \
            or not ints(list(size) + list(stride) + [off], 0, 1 << 40):
        return None
    return _bind(ctx, OP_STRIDED, self, out, [len(size), off] + list(size) + list(stride))


@register_fast("aten::unfold_copy.out")
def bind_unfold(ctx, self, dimension, size, step, out):
    d = _dim(dimension, self.ndim)
    if d is None or not ints([size, step], 0) or step <= 0 or out.ndim != self.ndim + 1 \
            or self.ndim >= 16:
        return None
    return _bind(ctx, OP_UNFOLD, self, out, [d, size, step])


@register_fast("aten::view_as_real_copy.out")
def bind_view_as_real(ctx, self, out):
    comp = COMPONENT.get(self.dtype)
    if comp is None or not ok(out) or out.ndim != self.ndim + 1 or self.ndim >= 16:
        return None
    return ctx.bind(lazy(move_kernel), [OP_REAL, ctx.desc(self), ctx.desc(out),
                                        ctx.buffer(SCR * 8), _st(comp)])


# -- the plain views into an out of another dtype (same dtype: kernels.shape.typed)

def bind_permute_any(ctx, self, dims, out):
    perm = _dim_set(dims, self.ndim)
    if perm is None or len(perm) != self.ndim:
        return None
    return _same_rank(ctx, OP_PERMUTE, self, out, perm)


def bind_transpose_any(ctx, self, dim0, dim1, out):
    d0, d1 = _dim(dim0, self.ndim), _dim(dim1, self.ndim)
    if d0 is None or d1 is None:
        return None
    if self.ndim == 0:
        return _same_rank(ctx, OP_COPY, self, out)
    perm = list(range(self.ndim))
    perm[d0], perm[d1] = d1, d0
    return _same_rank(ctx, OP_PERMUTE, self, out, perm)


def bind_t_any(ctx, self, out):
    if self.ndim > 2:
        return None
    return _same_rank(ctx, OP_PERMUTE, self, out, list(range(self.ndim))[::-1])


def bind_expand_any(ctx, self, size, implicit, out):
    lead = len(size) - self.ndim
    if lead < 0 or len(size) != out.ndim or not ints(size, -1, 1 << 50) \
            or any(s < 0 for s in size[:lead]):
        return None
    return _bind(ctx, OP_EXPAND, self, out, [len(size)] + list(size))


def bind_slice_any(ctx, self, dim, start, end, step, out):
    d = _dim(dim, self.ndim) if self.ndim else None
    start = 0 if start is None else start
    end = BIG if end is None else end
    if d is None or not ints([step], 1) or not ints([start, end], -(1 << 200), 1 << 200):
        return None
    start, end = (max(-BIG, min(BIG, v)) for v in (start, end))
    return _same_rank(ctx, OP_SLICE, self, out, [d, start, end, step])


def bind_select_any(ctx, self, dim, index, out):
    d = _dim(dim, self.ndim) if self.ndim else None
    if d is None or not ints([index]) or out.ndim != self.ndim - 1:
        return None
    return _bind(ctx, OP_SELECT, self, out, [d, index])


def bind_squeeze_dims_any(ctx, self, dim, out):
    return bind_dim_mask(ctx, _bind, OP_SQUEEZE, self, dim, out)


def bind_squeeze_dim_any(ctx, self, dim, out):
    return bind_squeeze_dims_any(ctx, self, [dim], out)


def bind_unsqueeze_any(ctx, self, dim, out):
    d = _dim(dim, self.ndim + 1)
    if d is None or out.ndim != self.ndim + 1:
        return None
    return _bind(ctx, OP_UNSQUEEZE, self, out, [d])


def bind_view_any(ctx, self, size, out):
    if len(size) != out.ndim or not ints(size, -1, 1 << 50) or list(size).count(-1) > 1 \
            or not (self.is_contiguous() or out.is_contiguous()):
        return None
    return _bind(ctx, OP_VIEW, self, out, [len(size)] + list(size))


# -- rearrangements

@register_fast("aten::flip.out")
def bind_flip(ctx, self, dims, out):
    return bind_dim_mask(ctx, _same_rank, OP_FLIP, self, dims, out)


@register_fast("aten::roll.out")
def bind_roll(ctx, self, shifts, dims, out):
    if not ints(shifts):
        return None
    if not dims:
        if len(shifts) != 1:
            return None
        return _same_rank(ctx, OP_ROLL_FLAT, self, out, [shifts[0]])
    ds = [_dim(d, self.ndim) for d in dims]
    if len(shifts) != len(dims) or None in ds:
        return None
    if self.ndim == 0:
        return _same_rank(ctx, OP_COPY, self, out)
    total = {}
    for d, s in zip(ds, shifts):  # rolling a dim twice rolls it by the sum
        total[d] = total.get(d, 0) + s
    if not ints(total.values()):
        return None
    params = [len(total)]
    for d, s in total.items():
        params += [d, s]
    return _same_rank(ctx, OP_ROLL, self, out, params)


@register_fast("aten::repeat.out")
def bind_repeat(ctx, self, repeats, out):
    lead = len(repeats) - self.ndim
    if lead < 0 or not ints(repeats, 0, 1 << 40) or out.ndim != len(repeats) \
            or len(repeats) + sum(r != 1 for r in repeats[lead:]) > 16:
        return None
    return _bind(ctx, OP_REPEAT, self, out, [len(repeats)] + list(repeats))


def _bind_shuffle(ctx, op, self, r, out):
    if not ints([r], 1, 1 << 20) or not 3 <= self.ndim <= 14:
        return None
    return _same_rank(ctx, op, self, out, [r])


@register_fast("aten::pixel_shuffle.out")
def bind_pixel_shuffle(ctx, self, upscale_factor, out):
    return _bind_shuffle(ctx, OP_PSHUF, self, upscale_factor, out)


@register_fast("aten::pixel_unshuffle.out")
def bind_pixel_unshuffle(ctx, self, downscale_factor, out):
    return _bind_shuffle(ctx, OP_PUNSHUF, self, downscale_factor, out)


@register_fast("aten::tril.out")
def bind_tril(ctx, self, diagonal, out):
    if self.ndim < 2 or not ints([diagonal]):
        return None
    return _same_rank(ctx, OP_TRIL, self, out, [diagonal])


@register_fast("aten::triu.out")
def bind_triu(ctx, self, diagonal, out):
    if self.ndim < 2 or not ints([diagonal]):
        return None
    return _same_rank(ctx, OP_TRIU, self, out, [diagonal])


# -- pads

@register_fast("aten::constant_pad_nd.out")
def bind_constant_pad(ctx, self, pad, value, out):
    if len(pad) % 2 or len(pad) // 2 > self.ndim or not ints(pad, -(1 << 40), 1 << 40) \
            or not isinstance(value, (bool, int, float)) or not ok(self, out):
        return None
    # as the reference: the value in self's dtype, then cast to out's
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        v = np.array(value).astype(self.dtype)
    words = [fill_pattern(v, out.dtype), len(pad) // 2] + list(pad)
    return _same_rank(ctx, OP_CPAD, self, out, words)


def _pad_binder(k, op):
    def bind(ctx, self, padding, out):
        if len(padding) != 2 * k or self.ndim not in (k + 1, k + 2) \
                or not ints(padding, -(1 << 40), 1 << 40):
            return None
        return _same_rank(ctx, op, self, out, [k] + list(padding))
    return bind


for _k in (1, 2, 3):
    register_fast(f"aten::reflection_pad{_k}d.out")(_pad_binder(_k, OP_REFLECT))
    register_fast(f"aten::replication_pad{_k}d.out")(_pad_binder(_k, OP_REPLICATE))


# -- joins and splits

MANTISSA = {np.dtype(np.float16): 11, np.dtype(ml_dtypes.bfloat16): 8,
            np.dtype(np.float32): 24, np.dtype(np.float64): 53}


def _exact(src, dt) -> bool:
    """Whether casting ``src`` to its promoted type ``dt`` keeps every value."""
    if src == dt or src == np.bool_ or category(src) == category(dt):
        return True
    info = np.iinfo(src)  # an integer into a float: exact while it fits the mantissa
    return max(info.max, -int(info.min)) <= 2 ** MANTISSA[dt]


def _join_ok(tensors, out) -> bool:
    """The reference casts every input to the promoted dtype, then to out's: accept the
    cases where that equals one cast."""
    if not tensors or any(t is None for t in tensors) or not ok(out, *tensors):
        return False
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = promote_types(dt, t.dtype)
    if category(dt) > category(out.dtype):
        return False
    return out.dtype == dt or all(_exact(t.dtype, dt) for t in tensors)


def _bind_list(ctx, op, src, out, d, tensors, extra=()):
    return ctx.bind(lazy(move_kernel), [op, 0 if src is None else ctx.desc(src),
                                        0 if out is None else ctx.desc(out), ctx.buffer(SCR * 8),
                                        d, len(tensors)] + [ctx.desc(t) for t in tensors]
                    + [int(e) for e in extra])


@register_fast("aten::stack.out")
def bind_stack(ctx, tensors, dim, out):
    if not _join_ok(tensors, out) or any(t.ndim != out.ndim - 1 for t in tensors):
        return None
    d = _dim(dim, out.ndim)
    return None if d is None else _bind_list(ctx, OP_STACK, None, out, d, tensors)


def bind_cat_any(ctx, tensors, dim, out):
    if not _join_ok(tensors, out) or out.ndim == 0:
        return None
    d = _dim(dim, out.ndim)
    return None if d is None else _bind_list(ctx, OP_CAT, None, out, d, tensors)


def _split_ok(self, out, rank):
    return self.ndim > 0 and out and not any(o is None for o in out) and ok(self, *out) \
        and all(o.ndim == rank for o in out)


@register_fast("aten::split_copy.Tensor_out")
def bind_split(ctx, self, split_size, dim, out):
    d = _dim(dim, self.ndim)
    if d is None or not _split_ok(self, out, self.ndim) or not ints([split_size], 0):
        return None
    return _bind_list(ctx, OP_SPLIT, self, None, d, out, [split_size])


def bind_split_with_sizes_any(ctx, self, split_sizes, dim, out):
    d = _dim(dim, self.ndim)
    if d is None or not _split_ok(self, out, self.ndim) or len(split_sizes) != len(out) \
            or not ints(split_sizes, 0):
        return None
    return _bind_list(ctx, OP_SPLITS, self, None, d, out, split_sizes)


@register_fast("aten::unbind_copy.int_out")
def bind_unbind(ctx, self, dim, out):
    d = _dim(dim, self.ndim)
    if d is None or not _split_ok(self, out, self.ndim - 1):
        return None
    return _bind_list(ctx, OP_UNBIND, self, None, d, out)


# -- creation
