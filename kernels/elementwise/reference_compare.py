"""Comparison, logical, selection and clamping kernels.

Comparisons promote both operands (torch's rules, Python scalars included)
and compare in that dtype; logical ops read any dtype as ``!= 0``. Both
produce bool and write it into ``out``'s dtype, as torch's ``out=`` does.
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.elementwise.reference import (
    BOOL, broadcast_shape, cast, check_out, emit, fill_value, invalid)
from pyruntime.kernels.promote import compute_dtype, result_type
from pyruntime.kernels.registry import register

_COMPARISONS = [
    ("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
    ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
]

_LOGICAL = [("logical_and", np.logical_and), ("logical_or", np.logical_or),
            ("logical_xor", np.logical_xor)]


def _comparison(name, fn):
    op = f"aten::{name}.Tensor_out"

    def kernel(self, other, out):
        broadcast_shape(op, self, other)
        ct = compute_dtype(result_type(self, other))
        emit(out, fn(cast(self, ct), cast(other, ct)), BOOL)
    kernel.__name__ = f"{name}_out"
    return kernel


def _truth(x) -> np.ndarray:
    a = np.asarray(x.numpy())
    return cast(a, compute_dtype(a.dtype)) != 0


def _logical(name, fn):
    op = f"aten::{name}.out"

    def kernel(self, other, out):
        broadcast_shape(op, self, other)
        emit(out, fn(_truth(self), _truth(other)), BOOL)
    kernel.__name__ = f"{name}_out"
    return kernel


for _name, _fn in _COMPARISONS:
    register(f"aten::{_name}.Scalar_out", f"aten::{_name}.Tensor_out")(_comparison(_name, _fn))
for _name, _fn in _LOGICAL:
    register(f"aten::{_name}.out")(_logical(_name, _fn))


# ---- selection -------------------------------------------------------------------------------

@register("aten::where.self_out")
def where_self_out(condition, self, other, out):
    op = "aten::where.self_out"
    if condition.dtype not in (BOOL, np.dtype(np.uint8)):  # ATen still accepts uint8 (deprecated)
        raise invalid(op, "condition", "a bool tensor", condition.dtype.name)
    dt = result_type(self, other)
    check_out(op, dt, out)
    broadcast_shape(op, condition, self, other)
    ct = compute_dtype(dt)
    emit(out, np.where(condition.numpy() != 0, cast(self, ct), cast(other, ct)), dt)


@register("aten::masked_fill.Scalar_out")
def masked_fill_scalar_out(self, mask, value, out):
    op = "aten::masked_fill.Scalar_out"
    if mask.dtype != BOOL:
        raise invalid(op, "mask", "a bool tensor", mask.dtype.name)
    dt = self.dtype
    check_out(op, dt, out)
    broadcast_shape(op, self, mask)
    emit(out, np.where(mask.numpy(), fill_value(op, "value", value, dt), self.numpy()), dt)


# ---- clamp -------------------------------------------------------------------------------------

def _clamp(op, self, lo, hi, out):
    if lo is None and hi is None:
        raise invalid(op, "min/max", "at least one of min and max", "None for both")
    dt = result_type(self, lo, hi)
    if dt == BOOL:
        raise invalid(op, "self", "numeric (non-bool) operands", "bool")
    check_out(op, dt, out)
    broadcast_shape(op, self, lo, hi)
    ct = compute_dtype(dt)
    r = cast(self, ct)
    # max then min: min > max gives max, and NaN in any operand propagates, as in ATen.
    if lo is not None:
        r = np.maximum(r, cast(lo, ct))
    if hi is not None:
        r = np.minimum(r, cast(hi, ct))
    emit(out, r, dt)


@register("aten::clamp.out")
def clamp_out(self, min, max, out):  # noqa: A002  (schema names)
    _clamp("aten::clamp.out", self, min, max, out)


@register("aten::clamp.Tensor_out")
def clamp_tensor_out(self, min, max, out):  # noqa: A002
    op = "aten::clamp.Tensor_out"
    if (min is None) != (max is None) and result_type(self, min, max) == BOOL:
        # ATen's clamp_min / clamp_max take bool (maximum / minimum: logical or / and);
        # only clamp with both bounds refuses it.
        check_out(op, BOOL, out)
        broadcast_shape(op, self, min, max)
        fn = np.maximum if max is None else np.minimum
        emit(out, fn(self.numpy(), (max if min is None else min).numpy()), BOOL)
        return
    _clamp(op, self, min, max, out)
