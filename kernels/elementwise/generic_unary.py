"""Compiled unary elementwise ops and activations of every dtype (binders of
``kernels/elementwise/reference.py`` and ``activation.py`` ops onto ``anyelem_kernel``).
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.elementwise.reference import BOOL, float_result
from pyruntime.kernels.elementwise.generic_bind import (F64, anyelem_binder, bind_anyelem, num,
                                                        out_ok, register, supported)
from pyruntime.kernels.elementwise.generic_io import (B_GLU, U_ABS, U_ACOS, U_ACOSH, U_ASIN,
                                                      U_ASINH, U_ATAN, U_ATANH, U_BNOT, U_BNOT_BOOL,
                                                      U_CEIL, U_CLAMP, U_COPY, U_COS, U_COSH, U_ELU,
                                                      U_ERF, U_EXP, U_EXPM1, U_FLOOR, U_GELU,
                                                      U_GELU_TANH, U_ISINF, U_ISNAN, U_LEAKY,
                                                      U_LNOT, U_LOG, U_LOG10, U_LOG1P, U_LOG2,
                                                      U_LOGIT, U_NEG, U_RECIP, U_RELU, U_ROUND,
                                                      U_ROUND_DEC, U_RSQRT, U_SIGMOID, U_SIGN,
                                                      U_SIN, U_SINH, U_SQRT, U_TAN, U_TANH, U_TRUNC,
                                                      U_ZERO)
from pyruntime.kernels.promote import category, compute_dtype, result_type


# ---- unary --------------------------------------------------------------------------------


_FLOAT_UNARY = {
    "acos": U_ACOS, "acosh": U_ACOSH, "asin": U_ASIN, "asinh": U_ASINH, "atan": U_ATAN,
    "atanh": U_ATANH, "cos": U_COS, "cosh": U_COSH, "erf": U_ERF, "exp": U_EXP,
    "expm1": U_EXPM1, "log": U_LOG, "log10": U_LOG10, "log1p": U_LOG1P, "log2": U_LOG2,
    "reciprocal": U_RECIP, "rsqrt": U_RSQRT, "sigmoid": U_SIGMOID, "sin": U_SIN,
    "sinh": U_SINH, "sqrt": U_SQRT, "tan": U_TAN, "tanh": U_TANH,
}
_ROUNDING = {"ceil": U_CEIL, "floor": U_FLOOR, "round": U_ROUND, "trunc": U_TRUNC}
_SAME = {"abs": U_ABS, "neg": U_NEG, "relu": U_RELU, "sign": U_SIGN, "bitwise_not": U_BNOT}


def _unary(ctx, op, x, out, dt, params=()):
    if not out_ok(dt, out, x):
        return None
    return bind_anyelem(ctx, op, out, [x], dt, params=params)


def _float_unary_binder(op):
    def bind(ctx, self, out):
        return _unary(ctx, op, self, out, float_result(self.dtype))
    return bind


def _rounding_binder(op):
    def bind(ctx, self, out):
        if self.dtype == BOOL:
            return None
        return _unary(ctx, U_COPY if category(self.dtype) == 1 else op, self, out, self.dtype)
    return bind


def _same_binder(name, op):
    def bind(ctx, self, out):
        dt = self.dtype
        if dt == BOOL:
            if name == "sign":
                return _unary(ctx, U_COPY, self, out, dt)
            if name == "bitwise_not":
                return _unary(ctx, U_BNOT_BOOL, self, out, dt)
            return None
        if name == "bitwise_not" and category(dt) > 1:
            return None
        return _unary(ctx, op, self, out, dt)
    return bind


def _predicate_binder(op):
    def bind(ctx, self, out):
        if not out_ok(BOOL, out, self):
            return None
        if op == U_LNOT:  # truth of any dtype: float64 holds every nonzero as nonzero
            return bind_anyelem(ctx, op, out, [self], BOOL, fpath=True, ct=F64)
        if category(self.dtype) < 2:
            return bind_anyelem(ctx, U_ZERO, out, [self], BOOL)  # integers are never NaN or inf
        return bind_anyelem(ctx, op, out, [self], BOOL, fpath=True, ct=compute_dtype(self.dtype))
    return bind




for _n, _op in _FLOAT_UNARY.items():
    register(f"aten::{_n}.out", _float_unary_binder(_op))
for _n, _op in _ROUNDING.items():
    register(f"aten::{_n}.out", _rounding_binder(_op))
for _n, _op in _SAME.items():
    register(f"aten::{_n}.out", _same_binder(_n, _op))
for _n, _op in (("logical_not", U_LNOT), ("isnan", U_ISNAN), ("isinf", U_ISINF)):
    register(f"aten::{_n}.out", _predicate_binder(_op))


@anyelem_binder("aten::round.decimals_out")
def bind_round_decimals(ctx, self, decimals, out):
    if category(self.dtype) != 2 or isinstance(decimals, bool) or not isinstance(decimals, int):
        return None
    try:
        scale = num(10.0 ** abs(decimals), compute_dtype(self.dtype))
    except OverflowError:
        return None
    return _unary(ctx, U_ROUND_DEC, self, out, self.dtype, (scale, float(decimals > 0)))


@anyelem_binder("aten::_conj_physical.out")
def bind_conj_physical(ctx, self, out):
    if not supported(self, out) or self.ndim != out.ndim:
        return None
    return bind_anyelem(ctx, U_COPY, out, [self], self.dtype)  # out.write casts: no canCast check


@anyelem_binder("aten::hardtanh.out")
def bind_hardtanh(ctx, self, min_val, max_val, out):
    dt = self.dtype
    if dt == BOOL or dt.kind == "u" and (int(min_val) < 0 or int(max_val) < 0):
        return None
    ct = compute_dtype(dt)
    return _unary(ctx, U_CLAMP, self, out, dt, (num(min_val, ct), num(max_val, ct), 3))


@anyelem_binder("aten::clamp.out")
def bind_clamp(ctx, self, min, max, out):  # noqa: A002 - schema names
    if min is None and max is None:
        return None
    dt = result_type(self, min, max)
    if dt == BOOL:
        return None
    ct = compute_dtype(dt)
    mode = (1 if min is not None else 0) + (2 if max is not None else 0)
    lo = num(min, ct) if min is not None else 0
    hi = num(max, ct) if max is not None else 0
    if category(ct) == 2:
        lo, hi = float(lo), float(hi)
    return _unary(ctx, U_CLAMP, self, out, dt, (lo, hi, mode))


def _float_param(v, ct):
    return float(np.asarray(v, ct))


@anyelem_binder("aten::gelu.out")
def bind_gelu(ctx, self, approximate, out):
    if category(self.dtype) != 2 or approximate not in ("none", "tanh"):
        return None
    return _unary(ctx, U_GELU if approximate == "none" else U_GELU_TANH, self, out, self.dtype)


@anyelem_binder("aten::elu.out")
def bind_elu(ctx, self, alpha, scale, input_scale, out):
    if category(self.dtype) != 2:
        return None
    ct = compute_dtype(self.dtype)
    return _unary(ctx, U_ELU, self, out, self.dtype,
                  (_float_param(scale, ct), _float_param(input_scale, ct),
                   _float_param(alpha * scale, ct)))


@anyelem_binder("aten::leaky_relu.out")
def bind_leaky_relu(ctx, self, negative_slope, out):
    if category(self.dtype) != 2:
        return None
    return _unary(ctx, U_LEAKY, self, out, self.dtype,
                  (_float_param(negative_slope, compute_dtype(self.dtype)),))


@anyelem_binder("aten::logit.out")
def bind_logit(ctx, self, eps, out):
    dt = float_result(self.dtype)
    ct = compute_dtype(dt)
    clip = eps is not None and eps >= 0  # ATen ignores a negative eps
    lo, hi = (_float_param(eps, ct), _float_param(1.0 - eps, ct)) if clip else (0.0, 0.0)
    return _unary(ctx, U_LOGIT, self, out, dt, (lo, hi, float(clip)))


@anyelem_binder("aten::glu.out")
def bind_glu(ctx, self, dim, out):
    n = self.ndim
    if category(self.dtype) != 2 or n == 0 or not -n <= dim < n or self.shape[dim] % 2 \
            or not out_ok(self.dtype, out, self):
        return None
    return bind_anyelem(ctx, B_GLU, out, [self], self.dtype, extra=dim % n)
