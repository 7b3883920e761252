"""Unary elementwise kernels and fill, against torch.ops.aten.

The helpers here (``make``, ``check``, ``dim_ordered``) are shared by the other
elementwise test files (binary, compare, activation).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ETensor, ExecuTorchError, from_numpy_dtype
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np, to_torch

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {
    "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16), "bfloat16": BF16, "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64), "bool": np.dtype(np.bool_), "uint8": np.dtype(np.uint8),
    "int8": np.dtype(np.int8),
}
FLOATS = ["float32", "float64", "float16", "bfloat16"]
SHAPES = [(), (0,), (3,), (2, 3, 4)]
A = torch.ops.aten


# ---- shared helpers ----------------------------------------------------------------------

def make(shape, dtype, seed=0, low=-4.0, high=4.0, nonzero=False) -> np.ndarray:
    """Random values of ``dtype`` in [low, high] (integers rounded, uint8 clipped at 0)."""
    dt = DTYPES[dtype] if isinstance(dtype, str) else np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        a = rng.random(shape) < 0.5
    elif dt.kind in "iu":
        lo = max(math.floor(low), np.iinfo(dt).min)
        a = rng.integers(lo, max(math.ceil(high), lo) + 1, size=shape).astype(dt)
        if nonzero:
            a[a == 0] = 1
    else:
        a = rng.uniform(low, high, size=shape)
        if nonzero:
            a[np.abs(a) < 0.1] = 0.5
        a = a.astype(dt)
    return np.asarray(a)


def tol(dt) -> dict:
    dt = np.dtype(dt)
    if dt in (np.dtype(np.float16), BF16):
        return dict(rtol=1e-2, atol=1e-2)
    if dt == np.float64:
        return dict(rtol=1e-7, atol=1e-9)
    return dict(rtol=1e-5, atol=1e-5)


def _t(a):
    return to_torch(a) if isinstance(a, np.ndarray) else a


def check(kernel, torch_fn, *args, out_dtype=None, out_factory=static_out, **tols):
    """Run ``kernel`` like the runtime and compare with ``torch_fn``; if ATen refuses, so must we."""
    try:
        want = torch_fn(*[_t(a) for a in args])
    except (RuntimeError, IndexError):  # NotImplementedError is a RuntimeError
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        shape = np.broadcast_shapes(*[a.shape for a in arrays])
        out = static_out(shape, out_dtype or arrays[0].dtype)
        with pytest.raises(ExecuTorchError):
            call(kernel, *args, out)
        return None
    want = to_np(want)
    dt = np.dtype(out_dtype or want.dtype)
    if dt != want.dtype:
        want = want.astype(dt)
    out = out_factory(want.shape, dt)
    call(kernel, *args, out)
    assert_close(out.numpy(), want, **(tols or tol(dt)))
    return want


def dim_ordered(x: np.ndarray, order) -> ETensor:
    """An ETensor holding ``x`` with a non-default dim order (bytes laid out in ``order``)."""
    phys = np.ascontiguousarray(x.transpose(order))
    return ETensor(from_numpy_dtype(x.dtype), x.shape, dim_order=order,
                   storage=phys.reshape(-1).view(np.uint8))


# ---- unary ops ---------------------------------------------------------------------------

# (name, torch function, low, high): inputs drawn from the op's domain.
UNARY = [
    ("abs", torch.abs, -4, 4), ("acos", torch.acos, -0.99, 0.99),
    ("acosh", torch.acosh, 1, 5), ("asin", torch.asin, -0.99, 0.99),
    ("asinh", torch.asinh, -4, 4), ("atan", torch.atan, -4, 4),
    ("atanh", torch.atanh, -0.99, 0.99), ("ceil", torch.ceil, -4, 4),
    ("cos", torch.cos, -4, 4), ("cosh", torch.cosh, -4, 4), ("erf", torch.erf, -4, 4),
    ("exp", torch.exp, -4, 4), ("expm1", torch.expm1, -4, 4), ("floor", torch.floor, -4, 4),
    ("log", torch.log, 0.01, 5), ("log10", torch.log10, 0.01, 5),
    ("log1p", torch.log1p, -0.99, 5), ("log2", torch.log2, 0.01, 5),
    ("neg", torch.neg, -4, 4), ("reciprocal", torch.reciprocal, -4, 4),
    ("round", torch.round, -4, 4), ("rsqrt", torch.rsqrt, 0.01, 5),
    ("sigmoid", torch.sigmoid, -8, 8), ("sign", torch.sign, -4, 4), ("sin", torch.sin, -4, 4),
    ("sinh", torch.sinh, -4, 4), ("sqrt", torch.sqrt, 0, 5), ("tan", torch.tan, -1.5, 1.5),
    ("tanh", torch.tanh, -4, 4), ("trunc", torch.trunc, -4, 4),
    ("bitwise_not", torch.bitwise_not, -4, 4), ("logical_not", torch.logical_not, -2, 2),
    ("isinf", torch.isinf, -4, 4), ("isnan", torch.isnan, -4, 4), ("relu", torch.relu, -4, 4),
]
UNARY_IDS = [u[0] for u in UNARY]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name,fn,low,high", UNARY, ids=UNARY_IDS)
def test_unary_dtypes(name, fn, low, high, dtype):
    check(f"aten::{name}.out", fn, make((2, 3, 4), dtype, low=low, high=high))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name,fn,low,high", UNARY, ids=UNARY_IDS)
def test_unary_shapes(name, fn, low, high, shape):
    check(f"aten::{name}.out", fn, make(shape, "float32", low=low, high=high))


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 1e-3, 30.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name,fn,low,high", UNARY, ids=UNARY_IDS)
def test_unary_special_values(name, fn, low, high, dtype):
    check(f"aten::{name}.out", fn, SPECIAL.astype(DTYPES[dtype]))


def test_erf_accuracy_float64():
    x = np.concatenate([np.linspace(-7, 7, 2001), [1e-300, -1e-8, 2.4999, 2.5, 2.5001]])
    check("aten::erf.out", torch.erf, x, rtol=2e-15, atol=1e-300)


def test_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3.5], np.float32)
    want = check("aten::round.out", torch.round, x)
    assert want.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 4.0]


@pytest.mark.parametrize("decimals", [-1, 0, 1, 3])
@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_round_decimals(decimals, dtype):
    x = make((2, 3, 4), dtype, low=-500, high=500)
    check("aten::round.decimals_out", lambda t, d: torch.round(t, decimals=d), x, decimals)


@pytest.mark.parametrize("name", ["sin", "sqrt", "exp", "sigmoid"])
@pytest.mark.parametrize("dtype", ["int32", "bool", "uint8"])
def test_float_op_of_integers_into_float64_out(name, dtype):
    x = make((3, 4), dtype, low=0, high=5)
    want = getattr(torch, name)(to_torch(x)).double()  # ATen computes in float32, then casts
    out = static_out((3, 4), np.float64)
    call(f"aten::{name}.out", x, out)
    assert_close(out.numpy(), to_np(want), rtol=1e-6, atol=1e-6)


def test_float_op_into_integer_out_is_refused():
    with pytest.raises(ExecuTorchError, match="out"):
        call("aten::sin.out", np.ones(3, np.float32), static_out((3,), np.int32))


def test_predicate_into_float_out():
    x = SPECIAL.astype(np.float32)
    check("aten::isnan.out", torch.isnan, x, out_dtype=np.float32)
    check("aten::logical_not.out", torch.logical_not, x, out_dtype=np.int64)


@pytest.mark.parametrize("name", ["exp", "abs", "neg", "relu", "isnan"])
def test_unary_dynamic_bound_and_dim_order(name):
    x = make((2, 3, 4), "float32")
    fn = getattr(torch, name)
    check(f"aten::{name}.out", fn, x, out_factory=lambda s, d: bound_out((4, 5, 6), d))
    out = bound_out((3, 3, 4), np.float32 if name != "isnan" else np.bool_)
    call(f"aten::{name}.out", dim_ordered(x, (0, 2, 1)), out)
    assert out.shape == (2, 3, 4)
    assert_close(out.numpy(), to_np(fn(to_torch(x))))


def test_static_out_of_wrong_shape_raises():
    with pytest.raises(ExecuTorchError):
        call("aten::exp.out", np.ones((2, 3), np.float32), static_out((3, 2), np.float32))


# ---- fill ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 3, -2, 1.75, True])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fill_scalar(shape, dtype, value):
    if DTYPES[dtype] == np.uint8 and value == -2:
        value = 2  # torch refuses the overflow; covered below
    x = make(shape, dtype)
    check("aten::fill.Scalar_out", A.fill.Scalar, x, value)


@pytest.mark.parametrize("vdtype", ["float32", "int64", "bool", "bfloat16"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bool"])
def test_fill_tensor(dtype, vdtype):
    x = make((2, 3), dtype)
    v = make((), vdtype, seed=3)
    check("aten::fill.Tensor_out", A.fill.Tensor, x, v)


def test_fill_refuses_bad_values():
    with pytest.raises(ExecuTorchError):
        call("aten::fill.Scalar_out", np.zeros(3, np.int32), 2 ** 40, static_out((3,), np.int32))
    with pytest.raises(ExecuTorchError):
        call("aten::fill.Tensor_out", np.zeros(3, np.float32), np.ones(1, np.float32),
             static_out((3,), np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex64])
def test_conj_physical(dtype):
    x = (np.arange(6).reshape(2, 3) - 2).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * x[::-1]
    want = torch.ops.aten._conj_physical(torch.from_numpy(x.copy())).numpy()
    out = static_out(x.shape, dtype)
    call("aten::_conj_physical.out", x, out)
    np.testing.assert_array_equal(out.numpy(), want)
