"""Compiled binary, comparison, logical and selection ops of every dtype (binders of
``kernels/elementwise/reference_binary.py`` and ``compare.py`` ops, where/masked_fill/clamp/fill onto
``anyelem_kernel``).
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.elementwise.reference import BOOL, fill_value, float_result
from pyruntime.kernels.elementwise.generic_bind import (F64, I64, anyelem_binder, bind_anyelem,
                                                        is_tensor, num, out_ok, register, Scalar,
                                                        scalar_operand, supported)
from pyruntime.kernels.elementwise.generic_io import (B_ADD, B_ADD_A, B_AND, B_ATAN2, B_DIV,
                                                      B_DIV_FLOOR, B_DIV_TRUNC, B_EQ, B_FILL_T,
                                                      B_FMOD, B_GE, B_GT, B_LAND, B_LE, B_LOR, B_LT,
                                                      B_LXOR, B_MAX, B_MIN, B_MUL, B_NE, B_OR,
                                                      B_POW, B_POW_BOOL, B_REM, B_SECOND, B_SHL,
                                                      B_SHR, B_SUB, B_SUB_A, B_XOR, T_CLAMP,
                                                      T_WHERE)
from pyruntime.kernels.promote import category, compute_dtype, result_type


# ---- binary -------------------------------------------------------------------------------

def _binary(ctx, op, a, b, out, dt, ct=None, fpath=None, params=()):
    ct = compute_dtype(dt) if ct is None else ct
    if not out_ok(dt, out, *(x for x in (a, b) if is_tensor(x))) \
            or not (is_tensor(a) or is_tensor(b)):
        return None
    ins = [scalar_operand(a, ct), scalar_operand(b, ct)]
    return bind_anyelem(ctx, op, out, ins, dt, fpath=fpath, ct=ct, params=params)


def _kind_dtype(kind, rt):
    """The reference's ``_check_kind``: result dtype, or None where it raises."""
    if kind == "float":
        return float_result(rt)
    if kind == "int_div" and rt == BOOL or kind == "bitwise" and category(rt) > 1 \
            or kind == "shift" and category(rt) != 1:
        return None
    return rt


def _simple_binder(op, kind):
    def bind(ctx, self, other, out):
        dt = _kind_dtype(kind, result_type(self, other))
        return None if dt is None else _binary(ctx, op, self, other, out, dt)
    return bind


_SIMPLE = [
    (("mul.out", "mul.Scalar_out"), B_MUL, "any"),
    (("div.out", "div.Scalar_out"), B_DIV, "float"),
    (("floor_divide.out",), B_DIV_FLOOR, "int_div"),
    (("fmod.Tensor_out", "fmod.Scalar_out"), B_FMOD, "int_div"),
    (("remainder.Tensor_out", "remainder.Scalar_out"), B_REM, "int_div"),
    (("atan2.out",), B_ATAN2, "float"),
    (("maximum.out",), B_MAX, "any"),
    (("minimum.out",), B_MIN, "any"),
    (("bitwise_and.Tensor_out", "bitwise_and.Scalar_out"), B_AND, "bitwise"),
    (("bitwise_or.Tensor_out", "bitwise_or.Scalar_out"), B_OR, "bitwise"),
    (("bitwise_xor.Tensor_out", "bitwise_xor.Scalar_out"), B_XOR, "bitwise"),
    (("bitwise_left_shift.Tensor_out", "bitwise_left_shift.Tensor_Scalar_out"), B_SHL, "shift"),
    (("bitwise_right_shift.Tensor_out", "bitwise_right_shift.Tensor_Scalar_out"), B_SHR,
     "shift"),
]


for _names, _op, _kind in _SIMPLE:
    register([f"aten::{n}" for n in _names], _simple_binder(_op, _kind))


def _is_bool(x):
    return isinstance(x, bool) or getattr(x, "dtype", None) == BOOL


def _add_like(ctx, a, b, alpha, out, subtract):
    dt = result_type(a, b)
    if subtract and (_is_bool(a) or _is_bool(b)) \
            or isinstance(alpha, bool) and dt != BOOL \
            or isinstance(alpha, float) and category(dt) < 2:
        return None
    ct = compute_dtype(dt)
    if alpha != 1:
        op = B_SUB_A if subtract else B_ADD_A
        return _binary(ctx, op, a, b, out, dt, params=(num(alpha, ct),))
    return _binary(ctx, B_SUB if subtract else B_ADD, a, b, out, dt)


def bind_add(ctx, self, other, alpha, out):
    return _add_like(ctx, self, other, alpha, out, False)


def bind_sub(ctx, self, other, alpha, out):
    return _add_like(ctx, self, other, alpha, out, True)


def bind_rsub(ctx, self, other, alpha, out):
    return _add_like(ctx, other, self, alpha, out, True)


register(["aten::add.out", "aten::add.Scalar_out"], bind_add)
register(["aten::sub.out", "aten::sub.Scalar_out"], bind_sub)
register(["aten::rsub.Scalar_out"], bind_rsub)


def bind_div_mode(ctx, self, other, rounding_mode, out):
    if rounding_mode is None:
        return _simple_binder(B_DIV, "float")(ctx, self, other, out)
    if rounding_mode not in ("trunc", "floor"):
        return None
    dt = _kind_dtype("int_div", result_type(self, other))
    op = B_DIV_TRUNC if rounding_mode == "trunc" else B_DIV_FLOOR
    return None if dt is None else _binary(ctx, op, self, other, out, dt)


register(["aten::div.out_mode", "aten::div.Scalar_mode_out"], bind_div_mode)


def _bind_pow(ctx, base, exponent, out, bool_exponent_scalar=False):
    dt = result_type(base, exponent)
    if dt == BOOL:
        if not bool_exponent_scalar:
            return None
        return _binary(ctx, B_POW_BOOL, base, exponent, out, dt)
    return _binary(ctx, B_POW, base, exponent, out, dt)


@anyelem_binder("aten::pow.Tensor_Tensor_out")
def bind_pow_tt(ctx, self, exponent, out):
    return _bind_pow(ctx, self, exponent, out)


@anyelem_binder("aten::pow.Tensor_Scalar_out")
def bind_pow_ts(ctx, self, exponent, out):
    if category(self.dtype) < 2 and not isinstance(exponent, (float, bool)) and exponent < 0:
        return None
    return _bind_pow(ctx, self, exponent, out, bool_exponent_scalar=True)


@anyelem_binder("aten::pow.Scalar_out")
def bind_pow_s(ctx, self, exponent, out):
    return _bind_pow(ctx, self, exponent, out)


def _comparison_binder(op):
    def bind(ctx, self, other, out):
        ct = compute_dtype(result_type(self, other))
        return _binary(ctx, op, self, other, out, BOOL, ct=ct, fpath=category(ct) == 2)
    return bind


for _n, _op in (("eq", B_EQ), ("ne", B_NE), ("lt", B_LT), ("le", B_LE), ("gt", B_GT),
                ("ge", B_GE)):
    register([f"aten::{_n}.Tensor_out", f"aten::{_n}.Scalar_out"], _comparison_binder(_op))


def _logical_binder(op):
    def bind(ctx, self, other, out):
        return _binary(ctx, op, self, other, out, BOOL, ct=F64, fpath=True)
    return bind


for _n, _op in (("logical_and", B_LAND), ("logical_or", B_LOR), ("logical_xor", B_LXOR)):
    register(f"aten::{_n}.out", _logical_binder(_op))


# ---- selection, clamp with tensor bounds, fills ---------------------------------------------

@anyelem_binder("aten::where.self_out")
def bind_where(ctx, condition, self, other, out):
    if condition.dtype not in (BOOL, np.dtype(np.uint8)):
        return None
    dt = result_type(self, other)
    if not out_ok(dt, out, condition, self, other):
        return None
    return bind_anyelem(ctx, T_WHERE, out, [condition, self, other], dt, casts=(-1, None, None))


@anyelem_binder("aten::masked_fill.Scalar_out")
def bind_masked_fill(ctx, self, mask, value, out):
    dt = self.dtype
    if mask.dtype != BOOL or not out_ok(dt, out, self, mask):
        return None
    try:
        v = fill_value("aten::masked_fill.Scalar_out", "value", value, dt)
    except Exception:  # noqa: BLE001 - the reference raises: let it
        return None
    v = float(v) if category(dt) == 2 else int(v)
    return bind_anyelem(ctx, T_WHERE, out, [mask, Scalar(v), self], dt, casts=(-1, -1, None))


@anyelem_binder("aten::clamp.Tensor_out")
def bind_clamp_tensor(ctx, self, min, max, out):  # noqa: A002 - schema names
    if min is None and max is None:
        return None
    dt = result_type(self, min, max)
    if dt == BOOL and min is not None and max is not None:
        return None
    if not out_ok(dt, out, self, min, max):
        return None
    if min is not None and max is not None:
        return bind_anyelem(ctx, T_CLAMP, out, [self, min, max], dt)
    return bind_anyelem(ctx, B_MAX if max is None else B_MIN, out,
                 [self, min if max is None else max], dt)


@anyelem_binder("aten::fill.Scalar_out")
def bind_fill_scalar(ctx, self, value, out):
    dt = self.dtype
    if not supported(self, out) or out.ndim != self.ndim:  # out.write casts: no canCast
        return None
    try:
        v = fill_value("aten::fill.Scalar_out", "value", value, dt)
    except Exception:  # noqa: BLE001 - the reference raises: let it
        return None
    fpath = category(dt) == 2
    v = float(v) if fpath else int(v)
    return bind_anyelem(ctx, B_SECOND, out, [self, Scalar(v)], dt, fpath=fpath, ct=dt,
                 casts=(-1, -1, None), skip=1)


@anyelem_binder("aten::fill.Tensor_out")
def bind_fill_tensor(ctx, self, value, out):
    dt = self.dtype
    if value.ndim != 0 or not supported(self, value, out) or out.ndim != self.ndim:
        return None
    params = ()
    fpath = category(dt) == 2 or dt == BOOL  # bool: value != 0, whatever value's dtype
    if not fpath:
        info = np.iinfo(dt)
        hi = float(np.nextafter(2.0 ** 63, 0)) if dt == I64 else float(info.max)
        params = (int(info.min), int(info.max), float(info.min), hi, 1)
    return bind_anyelem(ctx, B_FILL_T, out, [self, value], dt, fpath=fpath, ct=dt,
                 casts=(-1, -1, None), skip=1, params=params)
