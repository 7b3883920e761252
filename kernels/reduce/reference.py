"""Reductions: sum, mean, prod, amax/amin, argmax/argmin, max/min, any, var, cumsum, topk.

ATen's out= semantics decide the accumulation dtype: an explicit ``dtype``
argument wins, otherwise the out tensor's dtype (that is how an int32 input
summing into an int64 out accumulates in int64). Integers accumulate in int64
(wrap-around is the same modulo the narrower width), half floats in float32.
"""
from __future__ import annotations

import warnings

from math import prod

import numpy as np

from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.promote import category, compute_dtype
from pyruntime.kernels.args import wrap_dim
from pyruntime.kernels.registry import register

_I64 = np.dtype(np.int64)


def _bad(op, msg):
    return ExecuTorchError(ErrorCode.InvalidArgument, f"{op}: {msg}")


def _axes(op, dim, ndim, empty_is_all=True):
    """numpy ``axis`` for an ATen dim list: None/[] mean all dims (when ``empty_is_all``)."""
    if dim is None or (empty_is_all and len(dim) == 0):
        return None
    if isinstance(dim, int):
        dim = [dim]
    axes = [wrap_dim(op, d, ndim) for d in dim]
    if len(set(axes)) != len(axes):
        raise _bad(op, f"dim: expected distinct dims, got {list(dim)}")
    return tuple(axes) if ndim else ()


def _acc(target: np.dtype) -> np.dtype:
    """Accumulation dtype for a sum/prod/cumsum whose result has dtype ``target``."""
    if target.kind in "biu":
        return _I64
    return compute_dtype(target)


def _target(op, dtype, out):
    if dtype is None:
        return out.dtype
    dt = to_numpy_dtype(dtype)
    if dt != out.dtype:
        raise _bad(op, f"out: expected dtype {dt} (the dtype argument), got {out.dtype}")
    return dt


def _nonempty(op, x, axes):
    """ATen refuses min/max-style reductions over an empty extent."""
    sizes = x.shape if axes is None else [x.shape[a] for a in axes]
    if x.ndim and 0 in sizes:
        raise _bad(op, f"self: expected a non-empty extent to reduce, got shape {list(x.shape)}")


# ---- sum / mean / prod -----------------------------------------------------------

def _sequential_sum(x, axes, keepdim, acc):
    """Sum accumulated element by element in ``acc``, in the input's index order.

    ExecuTorch's portable kernels add sequentially; numpy's pairwise summation
    rounds differently, and in quantized programs a last-bit difference can
    move a value across a rounding boundary (one quantization step). A cumsum
    along the flattened reduced axes is numpy's sequential sum.
    """
    axes = tuple(range(x.ndim)) if axes is None else tuple(sorted(axes))  # memory order
    x = x.astype(acc, copy=False)
    if not axes:
        return x.copy()
    kept = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, kept + list(axes)).reshape(
        [x.shape[a] for a in kept] + [prod(x.shape[a] for a in axes)])
    if moved.shape[-1] == 0:
        res = np.zeros(moved.shape[:-1], acc)
    else:
        res = np.cumsum(moved, axis=-1, dtype=acc)[..., -1]
    if keepdim:
        res = res.reshape([1 if a in axes else x.shape[a] for a in range(x.ndim)])
    return res


@register("aten::sum.IntList_out")
def sum_intlist_out(self, dim, keepdim, dtype, out):
    x = self.numpy()
    acc = _acc(_target("sum.IntList_out", dtype, out))
    out.write(_sequential_sum(x, _axes("sum.IntList_out", dim, x.ndim), keepdim, acc))


def _mean(x, axes, keepdim, target):
    acc = compute_dtype(target) if category(target) >= 2 else np.dtype(np.float32)
    axes = tuple(range(x.ndim)) if axes is None else axes
    count = prod(x.shape[a] for a in axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _sequential_sum(x, axes, keepdim, acc) / acc.type(count)


@register("aten::mean.out")
def mean_out(self, dim, keepdim, dtype, out):
    x = self.numpy()
    out.write(_mean(x, _axes("mean.out", dim, x.ndim), keepdim,
                    _target("mean.out", dtype, out)))


@register("aten::mean.dtype_out")
def mean_dtype_out(self, dtype, out):
    x = self.numpy()
    out.write(_mean(x, None, False, _target("mean.dtype_out", dtype, out)))


@register("aten::prod.out")
def prod_out(self, dtype, out):
    acc = _acc(_target("prod.out", dtype, out))
    out.write(np.prod(self.numpy().astype(acc, copy=False)))


@register("aten::prod.int_out")
def prod_int_out(self, dim, keepdim, dtype, out):
    x = self.numpy()
    acc = _acc(_target("prod.int_out", dtype, out))
    out.write(np.prod(x.astype(acc, copy=False), axis=_axes("prod.int_out", [dim], x.ndim),
                      keepdims=keepdim))


# ---- amax / amin / max / min -----------------------------------------------------
# numpy's max/min propagate NaN exactly like ATen's; half floats go through float32
# (exact both ways).

def _extreme(op, fn, self, dim, keepdim, out):
    x = self.numpy()
    axes = _axes(op, dim, x.ndim)
    _nonempty(op, x, axes)
    out.write(fn(x.astype(compute_dtype(x.dtype), copy=False), axis=axes, keepdims=keepdim))


@register("aten::amax.out")
def amax_out(self, dim, keepdim, out):
    _extreme("amax.out", np.max, self, dim, keepdim, out)


@register("aten::amin.out")
def amin_out(self, dim, keepdim, out):
    _extreme("amin.out", np.min, self, dim, keepdim, out)


@register("aten::max.unary_out")
def max_unary_out(self, out):
    _extreme("max.unary_out", np.max, self, None, False, out)


@register("aten::min.unary_out")
def min_unary_out(self, out):
    _extreme("min.unary_out", np.min, self, None, False, out)


def _arg(op, fn, x, dim, keepdim):
    """Index of the first extreme (NaN counts as the extreme, as in ATen)."""
    x = x.astype(compute_dtype(x.dtype), copy=False)
    if dim is None:
        _nonempty(op, x, None)
        i = fn(x.reshape(-1)) if x.size else 0
        return np.full((1,) * x.ndim if keepdim else (), i, _I64)
    ax = wrap_dim(op, dim, x.ndim)
    if x.ndim == 0:
        return np.zeros((), _I64)
    _nonempty(op, x, (ax,))
    return fn(x, axis=ax, keepdims=keepdim).astype(_I64)


@register("aten::argmax.out")
def argmax_out(self, dim, keepdim, out):
    out.write(_arg("argmax.out", np.argmax, self.numpy(), dim, keepdim))


@register("aten::argmin.out")
def argmin_out(self, dim, keepdim, out):
    out.write(_arg("argmin.out", np.argmin, self.numpy(), dim, keepdim))


def _dim_extreme(op, fn, self, dim, keepdim, values, indices):
    x = self.numpy()
    idx = _arg(op, fn, x, dim, True)
    if x.ndim == 0:
        values.write(x)
        indices.write(idx)
        return
    ax = wrap_dim(op, dim, x.ndim)
    v = np.take_along_axis(x, idx, axis=ax)
    if not keepdim:
        v, idx = np.squeeze(v, ax), np.squeeze(idx, ax)
    values.write(v)
    indices.write(idx)


@register("aten::max.dim_max")
def max_dim_max(self, dim, keepdim, max, max_values):  # noqa: A002 (schema names)
    _dim_extreme("max.dim_max", np.argmax, self, dim, keepdim, max, max_values)


@register("aten::min.dim_min")
def min_dim_min(self, dim, keepdim, min, min_indices):  # noqa: A002 (schema names)
    _dim_extreme("min.dim_min", np.argmin, self, dim, keepdim, min, min_indices)


# ---- any ---------------------------------------------------------------------------

@register("aten::any.all_out")
def any_all_out(self, out):
    out.write(np.any(self.numpy() != 0))


@register("aten::any.dims_out")
def any_dims_out(self, dim, keepdim, out):
    # Unlike sum, ATen's any.dims treats an empty dim list as "reduce nothing".
    x = self.numpy()
    out.write(np.any(x != 0, axis=_axes("any.dims_out", dim, x.ndim, empty_is_all=False),
                     keepdims=keepdim))


@register("aten::any.out")
def any_out(self, dim, keepdim, out):
    x = self.numpy()
    out.write(np.any(x != 0, axis=_axes("any.out", [dim], x.ndim), keepdims=keepdim))


# ---- var / var_mean --------------------------------------------------------------

def _var(op, self, dim, correction, keepdim):
    x = self.numpy()
    if category(x.dtype) < 2:
        raise _bad(op, f"self: expected a floating point tensor, got {x.dtype}")
    axes = _axes(op, dim, x.ndim)
    xc = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
    ddof = 1 if correction is None else correction
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        n = xc.size if axes is None else int(np.prod([xc.shape[a] for a in axes]))
        mean = np.mean(xc, axis=axes, keepdims=True)
        ss = np.sum(np.square(xc - mean, dtype=np.float64), axis=axes, keepdims=keepdim)
        var = ss / max(n - ddof, 0)
        if not keepdim:
            mean = np.squeeze(mean, axis=axes) if axes is not None else mean.reshape(())
    return var, mean


@register("aten::var.correction_out")
def var_correction_out(self, dim, correction, keepdim, out):
    out.write(_var("var.correction_out", self, dim, correction, keepdim)[0])


@register("aten::var.out")
def var_out(self, dim, unbiased, keepdim, out):
    out.write(_var("var.out", self, dim, 1 if unbiased else 0, keepdim)[0])


@register("aten::var_mean.correction_out")
def var_mean_correction_out(self, dim, correction, keepdim, out0, out1):
    var, mean = _var("var_mean.correction_out", self, dim, correction, keepdim)
    out0.write(var)
    out1.write(mean)


# ---- cumsum / topk ---------------------------------------------------------------

@register("aten::cumsum.out")
def cumsum_out(self, dim, dtype, out):
    x = self.numpy()
    ax = wrap_dim("cumsum.out", dim, x.ndim)
    acc = _acc(_target("cumsum.out", dtype, out))
    out.write(np.cumsum(x.astype(acc, copy=False).reshape(x.shape or (1,)), axis=ax)
              .reshape(x.shape))


@register("aten::topk.values")
def topk_values(self, k, dim, largest, sorted, values, indices):  # noqa: A002 (schema names)
    # A stable sort gives a valid answer for sorted=False too; NaN ranks largest, as in ATen.
    x = self.numpy()
    ax = wrap_dim("topk.values", dim, x.ndim)
    xs = x.reshape(x.shape or (1,))
    n = xs.shape[ax]
    if not 0 <= k <= n:
        raise _bad("topk.values", f"k: expected a value in [0, {n}], got {k}")
    xc = xs.astype(compute_dtype(xs.dtype), copy=False)
    if xc.dtype == np.bool_:
        xc = xc.astype(np.uint8)
    if largest:
        # descending with NaN first: sort ascending on the reversed axis, then flip
        order = np.flip(np.argsort(np.flip(xc, ax), axis=ax, kind="stable"), ax)
        order = n - 1 - order
    else:
        order = np.argsort(xc, axis=ax, kind="stable")
    idx = np.take(order, np.arange(k), axis=ax)
    v = np.take_along_axis(xs, idx, axis=ax)
    values.write(v.reshape(x.shape) if x.ndim == 0 else v)
    indices.write(idx.reshape(x.shape) if x.ndim == 0 else idx)
