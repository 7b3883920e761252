"""Elementwise MIL ops: unary math, binary arithmetic and comparison, activations, cast.

Operands broadcast numpy-style (MIL's rule). Defaults and formulas follow the
MIL op definitions (coremltools ``mil/ops/defs``): ``inverse``, ``log`` and
``rsqrt`` add their ``epsilon`` first; ``round`` rounds half to even;
``mod`` takes the sign of ``y``; ``floor_div`` floors.
"""
from __future__ import annotations

import numpy as np

from pyruntime.delegates.coreml.ops import (call_kernel, cast_to, channel_bcast, dtype_of_string,
                                  mil_op, op_error)

# One numpy ufunc each: on float16 operands numpy computes in float32 and rounds once,
# which is fp16 semantics already, so these skip the widening (and the extra copies).
EXACT_UNARY = {
    "abs": np.abs, "acos": np.arccos, "asin": np.arcsin, "atan": np.arctan,
    "atanh": np.arctanh, "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh, "exp": np.exp,
    "exp2": np.exp2, "floor": np.floor, "round": np.round, "sign": np.sign, "sin": np.sin,
    "sinh": np.sinh, "sqrt": np.sqrt, "square": np.square, "tan": np.tan, "tanh": np.tanh,
    "logical_not": np.logical_not, "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.minimum(np.maximum(x, 0), 6),
}
UNARY = {  # formulas of several steps: computed in float32, rounded once
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)),
    "softsign": lambda x: x / (1 + np.abs(x)),
    "softplus": lambda x: np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0),
    "erf": lambda x: erf(x),
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


def erf(x):
    """erf with a relative error below 1.2e-7 (Numerical Recipes' erfc Chebyshev fit):
    float32-exact for our purpose and ~10x faster than the double-precision series."""
    x = np.asarray(x)
    z = np.abs(x)
    t = 1 / (1 + 0.5 * z)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    with np.errstate(over="ignore", under="ignore"):
        erfc = t * np.exp(-z * z + poly)
    return np.where(x >= 0, 1 - erfc, erfc - 1).astype(x.dtype)


def _unary(name, f, upcast=True):
    def op(x):
        with np.errstate(all="ignore"):
            return f(np.asarray(x))
    op.__name__ = name
    mil_op(name, upcast=upcast)(op)


def _binary(name, f):
    def op(x, y):
        return f(np.asarray(x), np.asarray(y))
    op.__name__ = name
    mil_op(name, upcast=False)(op)


for _n, _f in EXACT_UNARY.items():
    _unary(_n, _f, upcast=False)
for _n, _f in UNARY.items():
    _unary(_n, _f)
for _n, _f in BINARY.items():
    _binary(_n, _f)


@mil_op("real_div", upcast=False)
def real_div(x, y):
    # ints divide as reals; the result is cast (truncated) to the declared int type
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(np.asarray(x), np.asarray(y))


def _dividing(int_fn, float_fn):
    """A division-like op: on integers ``int_fn`` with a zero divisor read as 1 (MIL leaves
    the result undefined), on floats ``float_fn`` (inf or nan), without numpy warnings."""
    def op(x, y):
        x, y = np.asarray(x), np.asarray(y)
        with np.errstate(divide="ignore", invalid="ignore"):
            if x.dtype.kind in "iu" and y.dtype.kind in "iu":
                return int_fn(x, np.where(y == 0, 1, y))
            return float_fn(x, y)
    return op


floor_div = mil_op("floor_div")(_dividing(np.floor_divide, lambda x, y: np.floor(x / y)))
mod = mil_op("mod")(_dividing(np.mod, np.mod))


@mil_op("pow", upcast=False)
def pow_(x, y):
    with np.errstate(all="ignore"):
        return np.power(np.asarray(x), np.asarray(y))


@mil_op("inverse")
def inverse(x, epsilon=1e-4):
    with np.errstate(divide="ignore"):
        return 1 / (np.asarray(x) + epsilon)


@mil_op("log")
def log(x, epsilon=1e-45):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.asarray(x) + epsilon)


@mil_op("rsqrt")
def rsqrt(x, epsilon=1e-12):
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 / np.sqrt(np.asarray(x) + epsilon)


@mil_op("threshold", upcast=False)
def threshold(x, alpha):
    return np.maximum(x, alpha)


@mil_op("clip", upcast=False)
def clip(x, alpha, beta):
    return np.minimum(np.maximum(x, alpha), beta)


@mil_op("select", upcast=False)
def select(cond, a, b):
    return np.where(np.asarray(cond).astype(bool), a, b)


@mil_op("cast", upcast=False)
def cast(x, dtype):
    return cast_to(x, dtype_of_string(dtype))


# ---- activations --------------------------------------------------------------------------
@mil_op("gelu")
def gelu(x, mode="EXACT"):
    x = np.asarray(x)
    if mode == "SIGMOID_APPROXIMATION":
        with np.errstate(over="ignore"):
            return x / (1 + np.exp(-1.702 * x))
    if mode not in ("EXACT", "TANH_APPROXIMATION"):
        raise op_error(f"gelu: unknown mode {mode!r}")
    if mode == "EXACT":
        return 0.5 * x * (1 + erf(x * np.float32(0.7071067811865476)))
    return call_kernel("aten::gelu.out", [np.ascontiguousarray(x), "tanh"],
                       [(x.dtype, x.shape)])[0]


@mil_op("elu")
def elu(x, alpha):
    x = np.asarray(x)
    with np.errstate(over="ignore"):
        return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


@mil_op("leaky_relu", upcast=False)
def leaky_relu(x, alpha):
    return np.where(x >= 0, x, alpha * x)


@mil_op("linear_activation")
def linear_activation(x, alpha, beta):
    return alpha * x + beta


@mil_op("scaled_tanh")
def scaled_tanh(x, alpha, beta):
    return alpha * np.tanh(beta * x)


@mil_op("sigmoid_hard")
def sigmoid_hard(x, alpha, beta):
    return np.clip(alpha * x + beta, 0, 1)


@mil_op("clamped_relu")
def clamped_relu(x, alpha, beta):
    return np.minimum(np.maximum(x, 0), beta) + np.minimum(np.minimum(x, 0) * alpha, beta)


@mil_op("thresholded_relu")
def thresholded_relu(x, alpha):
    return np.where(x >= alpha, x, 0).astype(np.asarray(x).dtype)


@mil_op("prelu")
def prelu(x, alpha):
    x = np.asarray(x)
    return np.maximum(x, 0) + np.minimum(x, 0) * channel_bcast(alpha, x.ndim)


@mil_op("softplus_parametric")
def softplus_parametric(x, alpha, beta):
    x = np.asarray(x)
    a, b = channel_bcast(alpha, x.ndim), channel_bcast(beta, x.ndim)
    with np.errstate(over="ignore"):
        return a * np.log1p(np.exp(x * b))


@mil_op("softmax")
def softmax(x, axis=-1):
    x = np.asarray(x)
    if x.ndim == 0:
        return np.ones_like(x)
    ax = int(np.asarray(axis).reshape(()))
    return call_kernel("aten::_softmax.out", [np.ascontiguousarray(x), ax, False],
                       [(x.dtype, x.shape)])[0]


@mil_op("identity", upcast=False)
def identity(x):
    return x


@mil_op("fill", upcast=False)
def fill(shape, value=0.0):
    shape = [int(s) for s in np.asarray(shape).reshape(-1)]
    if any(s < 0 for s in shape) or int(np.prod(shape, dtype=np.int64)) > 1 << 28:
        raise op_error(f"fill: bad shape {shape}")
    v = np.asarray(value)
    return np.full(shape, v, v.dtype)


@mil_op("fill_like", upcast=False)
def fill_like(ref_tensor, value=0.0):
    v = np.asarray(value)
    return np.full(np.shape(ref_tensor), v, v.dtype)

