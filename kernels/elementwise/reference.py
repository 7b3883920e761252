"""Unary elementwise kernels and the helpers every elementwise family shares.

The simple ops are table rows ``(name, numpy function)``; one factory per row
kind turns a row into an out-variant kernel. Dtype rules follow ATen:

* "float" ops (``sin``, ``exp``, ``sigmoid``, ...) promote bool and integer
  inputs to float32; half and bfloat16 compute in float32 and round once;
* rounding ops (``ceil``, ``round``, ...) return integer inputs unchanged;
* predicates (``isnan``, ``logical_not``) produce bool, written into ``out``'s
  dtype (``out.write`` casts, as torch's ``out=`` does).

The value written to ``out`` is first rounded to the op's result dtype, then
cast to ``out``'s dtype, so a half op writing a float32 ``out`` matches torch.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.dtypes import cast_array
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.complex.reference import COMPLEX_HALF, complex_half_parts
from pyruntime.kernels.promote import BF16, F32, arr, category, compute_dtype
from pyruntime.kernels.registry import register

BOOL = np.dtype(np.bool_)


# ---- shared helpers ------------------------------------------------------------------

def invalid(op: str, arg: str, expected: str, got) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"{op}: {arg}: expected {expected}, got {got}")


def dtype_name(x) -> str:
    dt = x.dtype if isinstance(x, (ETensor, np.ndarray)) else np.dtype(type(x))
    return np.dtype(dt).name


def cast(x, dt: np.dtype) -> np.ndarray:
    """A tensor or Python scalar as an array of ``dt``; scalars wrap like ATen's Scalar.to<T>()."""
    a = np.asarray(arr(x))
    if a.dtype == dt:
        return a
    with np.errstate(all="ignore"):
        return cast_array(a, dt)


def fill_value(op: str, arg: str, value, dt: np.dtype) -> np.ndarray:
    """``value`` as a 0-d array of ``dt``, refusing integers that overflow it (as fill_ does)."""
    if dt.kind in "iu" and not isinstance(value, bool):
        info = np.iinfo(dt)
        if not (math.isfinite(value) and info.min <= value <= info.max):
            raise invalid(op, arg, f"a value that fits {dt.name}", value)
        value = int(value)  # truncate toward zero, like a C++ cast
    return cast(value, dt)


def check_out(op: str, result: np.dtype, out: ETensor) -> None:
    """torch's canCast: no float -> integer and no non-bool -> bool writes into ``out``."""
    if category(result) > category(out.dtype):
        raise invalid(op, "out", f"a dtype {result.name} can be cast to", out.dtype.name)


def broadcast_shape(op: str, *xs) -> tuple:
    shapes = [np.shape(arr(x)) for x in xs if x is not None]
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise invalid(op, "shapes", "broadcastable shapes", shapes) from None


def emit(out: ETensor, value, dt: np.dtype) -> None:
    """Round ``value`` to the result dtype ``dt``, then write it into ``out`` (which casts)."""
    value = np.asarray(value)
    if dt == BF16 and value.dtype != dt and value.dtype.kind == "f":
        # c10's float -> BFloat16 gives every NaN as 0x7fc0 (ml_dtypes keeps the sign)
        nan = np.isnan(value)
        value = value.astype(dt)
        if nan.any():
            value = np.where(nan, np.array(0x7FC0, np.uint16).view(BF16), value)
    elif value.dtype != dt and out.dtype != dt:
        value = value.astype(dt)
    out.write(value)


def float_result(dt: np.dtype) -> np.dtype:
    """Result dtype of an ATen "float" op: bool and integer inputs give float32."""
    return dt if category(dt) >= 2 else F32


def require_float(op: str, self) -> None:
    if category(self.dtype) < 2:
        raise invalid(op, "self", "a floating point tensor", self.dtype.name)


def float_input(op: str, self, out) -> tuple:
    """(``self`` in its compute dtype, its dtype): ``self`` floating point, ``out`` of its
    dtype, else InvalidArgument."""
    require_float(op, self)
    dt = self.dtype
    check_out(op, dt, out)
    return cast(self, compute_dtype(dt)), dt


# ---- erf (numpy has none) ----------------------------------------------------------------

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(x) -> np.ndarray:
    """Double-precision erf: a positive series below |x| = 2.5, erfc's continued fraction above."""
    x = np.asarray(x, np.float64)
    ax = np.abs(x)
    res = np.empty_like(x)
    with np.errstate(all="ignore"):
        small = ax < 2.5  # NaN lands in the large branch and stays NaN
        xs = x[small]
        x2 = xs * xs
        term = np.ones_like(xs)
        total = term.copy()
        for n in range(34):  # erf = 2/sqrt(pi) x e^{-x^2} sum (2x^2)^n / (2n+1)!!
            term *= (2.0 * x2) / (2 * n + 3)
            total += term
        res[small] = _TWO_OVER_SQRT_PI * xs * np.exp(-x2) * total
        xl = ax[~small]
        f = xl.copy()
        for k in range(30, 0, -1):  # erfc = e^{-x^2}/sqrt(pi) / (x + (1/2)/(x + 1/(x + ...)))
            f = xl + (k / 2.0) / f
        erfc = np.exp(-xl * xl) * (0.5 * _TWO_OVER_SQRT_PI) / f
        res[~small] = np.copysign(1.0 - erfc, x[~small])
    return res


def _erf_op(x):
    return erf(x).astype(x.dtype, copy=False)


# ---- the C library's functions, as ExecuTorch calls them (kernels/libm.py) ----------------

def _libm(name):
    """``name`` computed per element by the C library in ``x``'s type (float32 or float64),
    as ExecuTorch's kernels compute it; numpy's own loops differ in the last bit."""
    def fn(x):
        from pyruntime.kernels import libm  # imports Numba: only when a program uses the op
        return libm.ufunc(name, x.dtype)(x)
    fn.__name__ = name
    return fn


sigmoid = _libm("sigmoid")  # 1 / (1 + exp(-x)), every step in x's type


# ---- unary tables --------------------------------------------------------------------------

_FLOAT_OPS = [
    ("acos", np.arccos), ("acosh", np.arccosh), ("asin", np.arcsin), ("asinh", np.arcsinh),
    ("atan", np.arctan), ("atanh", np.arctanh), ("cos", np.cos), ("cosh", np.cosh),
    ("erf", _erf_op), ("exp", _libm("exp")), ("expm1", np.expm1), ("log", _libm("log")),
    ("log10", np.log10), ("log1p", np.log1p), ("log2", np.log2),
    ("reciprocal", np.reciprocal), ("rsqrt", lambda x: 1.0 / np.sqrt(x)),
    ("sigmoid", sigmoid), ("sin", np.sin), ("sinh", np.sinh), ("sqrt", np.sqrt),
    ("tan", np.tan), ("tanh", _libm("tanh")),
]

# Rounding ops return integer inputs as they are; bool is refused like ATen.
_ROUNDING_OPS = [("ceil", np.ceil), ("floor", np.floor), ("round", np.rint), ("trunc", np.trunc)]

# Ops that keep the input dtype; ``allow_bool`` says whether ATen accepts bool.
_SAME_DTYPE_OPS = [
    ("abs", np.abs, False),
    ("neg", np.negative, False),
    ("relu", lambda x: np.maximum(x, np.zeros((), x.dtype)), False),
    # sign(NaN) is 0 in ATen: (0 < x) - (x < 0)
    ("sign", lambda x: x if x.dtype == BOOL else
        (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype), True),
    ("bitwise_not", np.invert, True),
]

_PREDICATE_OPS = [
    ("logical_not", lambda x: x == 0),
    ("isnan", np.isnan),
    ("isinf", np.isinf),
]


def _float_unary(name, fn):
    op = f"aten::{name}.out"

    def kernel(self, out):
        dt = float_result(self.dtype)
        check_out(op, dt, out)
        x = cast(self, compute_dtype(dt))
        with np.errstate(all="ignore"):
            emit(out, fn(x), dt)
    kernel.__name__ = f"{name}_out"
    return kernel


def _rounding_unary(name, fn):
    op = f"aten::{name}.out"

    def kernel(self, out):
        dt = self.dtype
        if dt == BOOL:
            raise invalid(op, "self", "a numeric (non-bool) tensor", "bool")
        check_out(op, dt, out)
        x = self.numpy()
        emit(out, x if category(dt) == 1 else fn(cast(x, compute_dtype(dt))), dt)
    kernel.__name__ = f"{name}_out"
    return kernel


def _same_dtype_unary(name, fn, allow_bool):
    op = f"aten::{name}.out"
    int_only = name == "bitwise_not"

    def kernel(self, out):
        dt = self.dtype
        if name == "abs" and (dt.kind == "c" or self.scalar_type == COMPLEX_HALF):
            _complex_abs(self, out)
            return
        if dt == BOOL and not allow_bool:
            raise invalid(op, "self", "a numeric (non-bool) tensor", "bool")
        if int_only and category(dt) > 1:
            raise invalid(op, "self", "an integer or bool tensor", dt.name)
        check_out(op, dt, out)
        with np.errstate(all="ignore"):
            emit(out, fn(cast(self, compute_dtype(dt))), dt)
    kernel.__name__ = f"{name}_out"
    return kernel


def _complex_abs(self, out):
    """|z| of a complex tensor into a real out, as ExecuTorch's abs computes it:
    sqrt(re * re + im * im) in the component type (not hypot)."""
    if self.scalar_type == COMPLEX_HALF:
        z = complex_half_parts(self)
        re, im = z[..., 0], z[..., 1]
    else:
        x = self.numpy()
        re, im = x.real, x.imag
    with np.errstate(all="ignore"):
        out.write(np.sqrt(re * re + im * im))


def _predicate_unary(name, fn):
    def kernel(self, out):
        x = cast(self, compute_dtype(self.dtype))
        if category(x.dtype) < 2 and name != "logical_not":
            out.write(np.zeros(x.shape, BOOL))  # integers are never NaN or inf
            return
        emit(out, fn(x), BOOL)
    kernel.__name__ = f"{name}_out"
    return kernel


for _name, _fn in _FLOAT_OPS:
    register(f"aten::{_name}.out")(_float_unary(_name, _fn))
for _name, _fn in _ROUNDING_OPS:
    register(f"aten::{_name}.out")(_rounding_unary(_name, _fn))
for _name, _fn, _bool in _SAME_DTYPE_OPS:
    register(f"aten::{_name}.out")(_same_dtype_unary(_name, _fn, _bool))
for _name, _fn in _PREDICATE_OPS:
    register(f"aten::{_name}.out")(_predicate_unary(_name, _fn))


@register("aten::round.decimals_out")
def round_decimals_out(self, decimals, out):
    x, dt = float_input("aten::round.decimals_out", self, out)
    # ATen: positive decimals scale up, round, scale down; otherwise divide first.
    scale = np.asarray(10.0 ** abs(decimals), x.dtype)
    with np.errstate(all="ignore"):
        r = np.rint(x * scale) / scale if decimals > 0 else np.rint(x / scale) * scale
    emit(out, r, dt)


# ---- fill ------------------------------------------------------------------------------------

@register("aten::fill.Scalar_out")
def fill_scalar_out(self, value, out):
    v = fill_value("aten::fill.Scalar_out", "value", value, self.dtype)
    out.write(np.broadcast_to(v, self.shape))


@register("aten::fill.Tensor_out")
def fill_tensor_out(self, value, out):
    op = "aten::fill.Tensor_out"
    if value.ndim != 0:
        raise invalid(op, "value", "a 0-dim tensor", f"{value.ndim} dimensions")
    v = value.numpy()
    v = fill_value(op, "value", float(v) if v.dtype == BF16 else v.item(), self.dtype)
    out.write(np.broadcast_to(v, self.shape))

