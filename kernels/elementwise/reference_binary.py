"""Binary arithmetic, bitwise and shift kernels: broadcasting plus ATen type promotion.

Each simple op is a table row ``(overloads, numpy function, kind)``; the kind
says which dtypes ATen accepts and how the result dtype follows from the
promoted one:

* ``any``: every dtype (``mul``, ``maximum``);
* ``float``: bool and integer results become float32 (``div``, ``atan2``);
* ``int_div``: no bool; an integer divisor of zero raises, as ATen's
  ``ZeroDivisionError`` does (numpy would silently give 0);
* ``bitwise``: bool and integers only; ``shift``: integers only.

Python-scalar operands are cast to the promoted dtype the way ATen's
``Scalar.to<T>()`` does, so ``int8_tensor + 1000`` wraps like torch.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.elementwise.reference import (
    BOOL, broadcast_shape, cast, check_out, emit, float_result, invalid)
from pyruntime.kernels.promote import category, compute_dtype, result_type
from pyruntime.kernels.registry import register


def _check_kind(op: str, kind: str, dt: np.dtype) -> np.dtype:
    """Validate the promoted dtype ``dt`` for ``kind``; return the result dtype."""
    if kind == "float":
        return float_result(dt)
    if kind == "int_div" and dt == BOOL:
        raise invalid(op, "self", "numeric (non-bool) operands", "bool")
    if kind == "bitwise" and category(dt) > 1:
        raise invalid(op, "self", "integer or bool operands", dt.name)
    if kind == "shift" and category(dt) != 1:
        raise invalid(op, "self", "integer operands", dt.name)
    return dt


def _no_zero_divisor(op: str, b: np.ndarray) -> None:
    if b.dtype.kind in "iub" and np.any(b == 0):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{op}: other: integer division by zero (ZeroDivisionError in ATen)")


def _trunc_divide(a, b):
    if a.dtype.kind in "iu":  # C division: floor, then step toward zero where signs differ
        q = np.floor_divide(a, b)
        return q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
    return np.trunc(a / b)


_SIMPLE = [
    (("mul.out", "mul.Scalar_out"), np.multiply, "any"),
    (("div.out", "div.Scalar_out"), np.true_divide, "float"),
    (("floor_divide.out",), np.floor_divide, "int_div"),
    (("fmod.Tensor_out", "fmod.Scalar_out"), np.fmod, "int_div"),
    (("remainder.Tensor_out", "remainder.Scalar_out"), np.remainder, "int_div"),
    (("atan2.out",), np.arctan2, "float"),
    (("maximum.out",), np.maximum, "any"),
    (("minimum.out",), np.minimum, "any"),
    (("bitwise_and.Tensor_out", "bitwise_and.Scalar_out"), np.bitwise_and, "bitwise"),
    (("bitwise_or.Tensor_out", "bitwise_or.Scalar_out"), np.bitwise_or, "bitwise"),
    (("bitwise_xor.Tensor_out", "bitwise_xor.Scalar_out"), np.bitwise_xor, "bitwise"),
    (("bitwise_left_shift.Tensor_out", "bitwise_left_shift.Tensor_Scalar_out"),
     np.left_shift, "shift"),
    (("bitwise_right_shift.Tensor_out", "bitwise_right_shift.Tensor_Scalar_out"),
     np.right_shift, "shift"),
]


def _simple_binary(op, fn, kind):
    def kernel(self, other, out):
        dt = _check_kind(op, kind, result_type(self, other))
        check_out(op, dt, out)
        broadcast_shape(op, self, other)
        ct = compute_dtype(dt)
        a, b = cast(self, ct), cast(other, ct)
        if kind == "int_div":
            _no_zero_divisor(op, b)
        with np.errstate(all="ignore"):
            emit(out, fn(a, b), dt)
    kernel.__name__ = op.split("::")[1].replace(".", "_")
    return kernel


for _names, _fn, _kind in _SIMPLE:
    register(*(f"aten::{n}" for n in _names))(_simple_binary(f"aten::{_names[0]}", _fn, _kind))


# ---- add / sub / rsub (alpha) --------------------------------------------------------------

def _is_bool(x) -> bool:
    return isinstance(x, bool) or getattr(x, "dtype", None) == BOOL


def _add_like(op, self, other, alpha, out, subtract):
    """``self + alpha * other`` (or minus) in the promoted dtype."""
    dt = result_type(self, other)
    if subtract and any(_is_bool(x) for x in (self, other)):  # ATen refuses any bool operand
        raise invalid(op, "self/other", "numeric operands (use logical_xor/logical_not)", "bool")
    if isinstance(alpha, bool) and dt != BOOL:
        raise invalid(op, "alpha", "a non-bool alpha for a non-bool result", alpha)
    if isinstance(alpha, float) and category(dt) < 2:
        raise invalid(op, "alpha", "an integer alpha for integral operands", alpha)
    check_out(op, dt, out)
    broadcast_shape(op, self, other)
    ct = compute_dtype(dt)
    a, b = cast(self, ct), cast(other, ct)
    with np.errstate(all="ignore"):
        if alpha != 1:
            b = b * cast(alpha, ct)
        emit(out, a - b if subtract else a + b, dt)


@register("aten::add.out", "aten::add.Scalar_out")
def add_out(self, other, alpha, out):
    _add_like("aten::add.out", self, other, alpha, out, subtract=False)


@register("aten::sub.out", "aten::sub.Scalar_out")
def sub_out(self, other, alpha, out):
    _add_like("aten::sub.out", self, other, alpha, out, subtract=True)


@register("aten::rsub.Scalar_out")
def rsub_scalar_out(self, other, alpha, out):
    _add_like("aten::rsub.Scalar_out", other, self, alpha, out, subtract=True)


# ---- div with rounding mode ----------------------------------------------------------------

_true_div = _simple_binary("aten::div.out_mode", np.true_divide, "float")


@register("aten::div.out_mode", "aten::div.Scalar_mode_out")
def div_mode_out(self, other, rounding_mode, out):
    op = "aten::div.out_mode"
    if rounding_mode is None:
        return _true_div(self, other, out)
    if rounding_mode not in ("trunc", "floor"):
        raise invalid(op, "rounding_mode", "None, 'trunc' or 'floor'", repr(rounding_mode))
    dt = _check_kind(op, "int_div", result_type(self, other))
    check_out(op, dt, out)
    broadcast_shape(op, self, other)
    ct = compute_dtype(dt)
    a, b = cast(self, ct), cast(other, ct)
    _no_zero_divisor(op, b)
    with np.errstate(all="ignore"):
        emit(out, _trunc_divide(a, b) if rounding_mode == "trunc" else np.floor_divide(a, b), dt)


# ---- pow ---------------------------------------------------------------------------------------

def _pow(op, base, exponent, out, bool_exponent_scalar=False):
    dt = result_type(base, exponent)
    if dt == BOOL and not bool_exponent_scalar:
        raise invalid(op, "self", "numeric (non-bool) operands", "bool")
    check_out(op, dt, out)
    broadcast_shape(op, base, exponent)
    ct = compute_dtype(dt)
    a, b = cast(base, ct), cast(exponent, ct)
    if dt == BOOL:  # ATen special-cases exponents 0 and 1, which is x ** e for bools
        return emit(out, a | ~b, dt)
    with np.errstate(all="ignore"):
        if category(dt) != 1:
            return emit(out, np.power(a, b), dt)
        # Integer x ** negative n is 1/x**n truncated: 1 for x == 1, +-1 for x == -1, else 0.
        neg = b < 0
        r = np.power(a, np.where(neg, np.zeros((), ct), b))
        if np.any(neg):
            odd = (b & 1) != 0
            inv = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(ct)
            r = np.where(neg, inv, r)
    emit(out, r, dt)


@register("aten::pow.Tensor_Tensor_out")
def pow_tensor_tensor_out(self, exponent, out):
    _pow("aten::pow.Tensor_Tensor_out", self, exponent, out)


@register("aten::pow.Tensor_Scalar_out")
def pow_tensor_scalar_out(self, exponent, out):
    op = "aten::pow.Tensor_Scalar_out"
    if category(self.dtype) < 2 and not isinstance(exponent, (float, bool)) and exponent < 0:
        raise invalid(op, "exponent", "a non-negative exponent for an integer tensor", exponent)
    _pow(op, self, exponent, out, bool_exponent_scalar=True)


@register("aten::pow.Scalar_out")
def pow_scalar_out(self, exponent, out):
    _pow("aten::pow.Scalar_out", self, exponent, out)
