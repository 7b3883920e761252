"""Compiled elementwise kernels against the reference tier (itself tested against torch)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.kernels.helpers import (assert_close, bound_out, call, call_fast, call_split,
                                   check_compiled, static_out)

RNG = np.random.default_rng(0)
SHAPE_PAIRS = [((), ()), ((5,), (5,)), ((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (1,)),
               ((2, 1, 4), (3, 1)), ((4, 1), (1, 5)), ((0, 3), (0, 3))]
DTYPES = [np.float32, np.float64, np.int32, np.int64]


def _rand(shape, dtype):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-5, 6, shape).astype(dtype)


def _check(name, args, out_shape, dtype, tol=1e-6):
    ref = static_out(out_shape, dtype)
    call(name, *args, ref)
    for out in (static_out(out_shape, dtype), bound_out(tuple(s + 2 for s in out_shape), dtype)):
        status = call_fast(name, *args, out)
        assert status == 0, f"{name}: compiled kernel returned {status}"
        assert_close(out.numpy(), ref.numpy(), rtol=tol, atol=tol)


# true division of ints has a float result: that stays on the reference tier
BINARY_CASES = [(op, dt) for op in ("add", "sub", "mul", "maximum", "minimum", "div")
                for dt in DTYPES if op != "div" or np.dtype(dt).kind == "f"]


@pytest.mark.parametrize("shapes", SHAPE_PAIRS)
@pytest.mark.parametrize("op,dtype", BINARY_CASES)
def test_binary(op, shapes, dtype):
    a, b = _rand(shapes[0], dtype), _rand(shapes[1], dtype)
    if op == "div":
        b = np.where(b == 0, 1, b).astype(dtype)
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    args = [a, b, 2] if op in ("add", "sub") else [a, b]
    _check(f"aten::{op}.out", args, out_shape, dtype)


@pytest.mark.parametrize("a_shape,b_shape", [((1, 1, 4, 8), (1, 1, 1, 8)),
                                             ((1, 4, 1, 32), (1, 32)), ((3, 1, 5), (2, 1)),
                                             ((2, 3, 4, 5), (3, 1, 5)), ((7,), (2, 1, 7))])
def test_broadcast_into_strided_outs(a_shape, b_shape):
    """The strided path (innermost dim as a tight loop, an N-d counter over the rest) into
    contiguous and channels-last outs, from a transposed operand: the reference's values."""
    from pyruntime.cython_ext import ETensor, from_numpy_dtype

    a, b = _rand(a_shape, np.float32), _rand(b_shape, np.float32)
    shape = np.broadcast_shapes(a_shape, b_shape)
    ref = static_out(shape, np.float32)
    call("aten::mul.out", a, b, ref)
    order = tuple(range(len(shape)))
    outs = [static_out(shape, np.float32)]
    if len(shape) == 4:
        order = (0, 2, 3, 1)
        outs.append(ETensor.empty(from_numpy_dtype(np.float32), shape, order))
    at = ETensor(from_numpy_dtype(np.float32), a.shape, order if a.ndim == len(order) else
                 tuple(range(a.ndim)))
    at.storage = np.ascontiguousarray(a.transpose(at.dim_order)).reshape(-1).view(np.uint8)
    assert np.array_equal(at.numpy(), a)
    for x in (a, at):
        for out in outs:
            assert call_fast("aten::mul.out", x, b, out) == 0
            np.testing.assert_array_equal(out.numpy(), ref.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["relu", "sigmoid", "tanh", "exp", "neg", "abs", "sqrt", "rsqrt"])
def test_unary(op, dtype):
    a = _rand((3, 7), dtype)
    if op in ("sqrt", "rsqrt"):
        a = np.abs(a) + 0.1
    _check(f"aten::{op}.out", [a], a.shape, dtype, tol=1e-5)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_clamps(approximate):
    a = _rand((4, 5), np.float32)
    _check("aten::gelu.out", [a, approximate], a.shape, np.float32, tol=1e-5)
    _check("aten::hardtanh.out", [a, -0.5, 0.5], a.shape, np.float32)
    _check("aten::clamp.out", [a, -0.25, 1.0], a.shape, np.float32)


@pytest.mark.parametrize("threads", [2, 3])
def test_libm_ops_split_into_element_ranges(threads, monkeypatch):
    """Intra-op threads: gelu/sigmoid/tanh/exp split into element ranges give the one-call
    result bit for bit; a strided input runs whole in part 0."""
    from pyruntime.kernels.elementwise import typed as elementwise

    monkeypatch.setattr(elementwise, "SPLIT_ELEMS", 1)
    a = _rand((7, 13), np.float32)
    a[0, 0], a[1, 1] = np.nan, np.inf
    for name, args in (("aten::gelu.out", [a, "none"]), ("aten::gelu.out", [a, "tanh"]),
                       ("aten::sigmoid.out", [a]), ("aten::exp.out", [a]),
                       ("aten::tanh.out", [a.T])):
        shape = args[0].shape
        one = static_out(shape, np.float32)
        assert call_fast(name, *args, one) == 0
        for out in (static_out(shape, np.float32), bound_out((9, 15), np.float32)):
            assert call_split(name, *args, out, threads=threads) == (0, threads)
            np.testing.assert_array_equal(out.numpy(), one.numpy(), err_msg=name)


def test_scalar_ops():
    a = _rand((3, 4), np.float32)
    _check("aten::add.Scalar_out", [a, 1.5, 2], a.shape, np.float32)
    _check("aten::mul.Scalar_out", [a, -3.0], a.shape, np.float32)


def test_static_out_of_wrong_shape_fails_and_mixed_dtypes_go_generic():
    a = _rand((2, 3), np.float32)
    assert call_fast("aten::add.out", a, a, 1, static_out((3, 2), np.float32)) != 0
    # the f32/f64 kernel declines mixed dtypes; the any-dtype fallback takes them
    check_compiled("aten::add.out", [a, a.astype(np.float64), 1], (2, 3), np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape,b_shape", [((), ()), ((1,), ()), ((3, 4), (3, 4)),
                                             ((3, 4), (1, 1)), ((40,), (40,)), ((2, 20), ()),
                                             ((0, 3), (0, 3))])
def test_fixed_shape_kernel_matches_the_general_one_bit_for_bit(a_shape, b_shape, dtype):
    """STATIC operands whose shapes the first path of binary_kernel accepts bind the
    fixed-shape kernel (no run-time shape work); it writes the same bits as binary_kernel
    (the same operands with a DYNAMIC_BOUND out) and the reference, NaN, inf and -0.0
    included, for one element, short rows and vectorized rows (16+ floats)."""
    from pyruntime.cython_ext.desc import DescTable
    from pyruntime.kernels.elementwise import typed as ew
    from pyruntime.kernels.fast.context import BindContext
    from pyruntime.kernels.fast.jit import lazy
    from tests.kernels.helpers import as_value

    a, b = _rand(a_shape, dtype), _rand(b_shape, dtype)
    if np.dtype(dtype).kind == "f" and a.size >= 4:
        a.flat[:4] = [np.nan, np.inf, -0.0, 0.0]
    for op in ("add", "sub", "mul", "maximum", "minimum", "div"):
        if op == "div" and np.dtype(dtype).kind != "f":
            continue
        args = [a, b, 3] if op in ("add", "sub") else [a, b]
        ref = static_out(a_shape, dtype)
        call(f"aten::{op}.out", *args, ref)
        fixed, general = static_out(a_shape, dtype), bound_out(a_shape, dtype)
        assert call_fast(f"aten::{op}.out", *args, fixed) == 0
        assert call_fast(f"aten::{op}.out", *args, general) == 0
        for got in (fixed, general):
            np.testing.assert_array_equal(got.numpy().reshape(-1).view(np.uint8),
                                          ref.numpy().reshape(-1).view(np.uint8))
    # which kernel each binds: the fixed one for a STATIC out, binary_kernel for a bound one
    for out, kernel in ((static_out(a_shape, dtype), ew.fixed_binary_kernel),
                        (bound_out(a_shape, dtype), ew.binary_kernel)):
        ts = [as_value(a), as_value(b), out]
        ctx = BindContext(DescTable(ts, [t.storage for t in ts]),
                          {id(t): i for i, t in enumerate(ts)}, [])
        assert ew._bind_binary(ctx, ew.B_MUL, *ts)[0] == lazy(kernel).address


def test_float_division_by_zero_gives_inf_and_nan():
    a = np.array([1.0, 0.0, -1.0], np.float32)
    b = np.zeros(3, np.float32)
    out = static_out((3,), np.float32)
    assert call_fast("aten::div.out", a, b, out) == 0
    np.testing.assert_array_equal(out.numpy(), [np.inf, np.nan, -np.inf])


def test_empty_tensors_with_a_zero_inner_dim():
    a = np.zeros((3, 0), np.float32)
    out = static_out((3, 0), np.float32)
    assert call_fast("aten::add.out", a, a, 1, out) == 0
    assert out.shape == (3, 0)


def test_split_kernel_runs_whole_when_the_run_is_small():
    """A kernel split at its bind-time (upper-bound) sizes does the whole call in its prep
    call when the run's sizes are below the split threshold (a decode step of a model bound
    for a long prompt), and splits again when they grow back: same values either way."""
    from pyruntime.cython_ext import Dynamism, ETensor
    from pyruntime.cython_ext._loop import Loop
    from pyruntime.cython_ext.desc import DescTable
    from pyruntime.kernels.fast import get_binder
    from pyruntime.kernels.fast.context import BindContext

    x = ETensor.from_array(_rand((200, 100), np.float32), dynamism=Dynamism.DYNAMIC_BOUND)
    out = bound_out((200, 100), np.float32)
    table = DescTable([x, out], [x.storage, out.storage])
    ctx = BindContext(table, {id(x): 0, id(out): 1}, [], 2)
    r = get_binder("aten::gelu.out")(ctx, x, "none", out)
    assert len(r) == 6 and r[4] == 2  # split at 20,000 elements
    loop = Loop(1)
    loop.set_kernel(0, *r)
    for rows in (200, 1, 3, 200):
        x.resize((rows, 100))
        for i, t in enumerate((x, out)):
            table.push(i, t, force=True)
        assert loop.run(None, 10) == 0
        table.pull(1, out)
        ref = static_out((rows, 100), np.float32)
        call("aten::gelu.out", x, "none", ref)
        assert out.shape == (rows, 100)
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
