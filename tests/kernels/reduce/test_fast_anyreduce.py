"""Compiled any-dtype reductions and scans (kernels/reduce/generic*.py,
kernels/softmax/generic.py) against the reference.

The reference kernels (kernels/reduce/reference.py, kernels/softmax/reference.py; tested against torch)
are the oracle. Results must be BIT-identical (raw bytes, so -0.0 and NaN payload
classes count) except softmax/log_softmax, which computes exp in float64 (close,
not identical, to numpy's float32 exp), compared with a tolerance.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from pyruntime.kernels.fast.nb import INVALID_ARGUMENT
from tests.kernels.helpers import bind_fast, bound_out, call, call_fast, static_out

BF16 = np.dtype(ml_dtypes.bfloat16)
ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
       "float64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
CL = (0, 2, 3, 1)  # channels last


def dt_of(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def make(shape, dtype, seed=0, lo=-5, hi=6):
    dt = dt_of(dtype)
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind in "iu":
        return np.asarray(rng.integers(max(lo, 0) if dt.kind == "u" else lo, hi, shape)).astype(dt)
    return np.asarray(rng.standard_normal(shape) * 3 + 0.5).astype(dt)


def laid_out(x, order, dynamism=Dynamism.STATIC):
    """An ETensor holding ``x`` with its bytes in ``order`` (a non-default dim order)."""
    t = ETensor(from_numpy_dtype(x.dtype), x.shape, order, dynamism)
    t.storage = np.ascontiguousarray(x.transpose(order)).reshape(-1).view(np.uint8).copy()
    return t


def same(got, want, tol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    if tol:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol, equal_nan=True)
    elif got.dtype.kind == "f" or got.dtype == BF16:
        # bit for bit, except that a NaN's sign is not compared (nb's half stores write
        # NaN as +NaN; x86 makes 0/0 a -NaN)
        nan = np.isnan(got.astype(np.float64))
        assert (nan == np.isnan(want.astype(np.float64))).all(), f"NaNs differ:\n{got}\n{want}"
        assert got[~nan].tobytes() == want[~nan].tobytes(), f"not bit-identical:\n{got}\n{want}"
    else:
        assert got.tobytes() == want.tobytes(), f"not identical:\n{got}\n{want}"


def check(name, args, outs, tol=0.0):
    """Reference vs compiled into static outs and into dynamic-bound outs that must shrink.
    ``outs``: list of (shape, dtype). Returns the reference results."""
    ref = [static_out(s, d) for s, d in outs]
    call(name, *args, *ref)
    for mk in (lambda s, d: static_out(s, d), lambda s, d: bound_out(tuple(n + 2 for n in s), d)):
        got = [mk(s, d) for s, d in outs]
        status = call_fast(name, *args, *got)
        assert status == 0, f"{name}: compiled kernel returned {status}"
        for g, r in zip(got, ref):
            same(g.numpy(), r.numpy(), tol)
    return [r.numpy() for r in ref]


def red_shape(shape, dim, keepdim, empty_is_all=True):
    nd = len(shape)
    if nd == 0:
        return ()
    if dim is None or (empty_is_all and len(dim) == 0):
        axes = set(range(nd))
    else:
        axes = {d % nd for d in dim}
    return tuple(1 if i in axes else s for i, s in enumerate(shape) if keepdim or i not in axes)


def acc_dtype(dtype):
    """torch's default out dtype of sum/prod/cumsum: int64 for integers and bool."""
    dt = dt_of(dtype)
    return np.dtype(np.int64) if dt.kind in "biu" else dt


CASES = [((2, 3, 4), None), ((2, 3, 4), []), ((2, 3, 4), [0]), ((2, 3, 4), [1]),
         ((2, 3, 4), [-1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [2, 0, 1]), ((), []), ((), [0]),
         ((3, 1, 2), [1]), ((5, 37), [1]), ((2, 5, 3, 4), [1, 3])]
EMPTY_CASES = [((0, 3), [0]), ((0, 3), [1]), ((2, 0), None)]


# ---- sum / mean / prod -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum(dtype, keepdim):
    for shape, dim in CASES + EMPTY_CASES:
        x = make(shape, dtype)
        check("aten::sum.IntList_out", [x, dim, keepdim, None],
              [(red_shape(shape, dim, keepdim), acc_dtype(dtype))])


@pytest.mark.parametrize("dtype", ALL)
def test_sum_into_other_dtypes(dtype):
    x = make((3, 50), dtype)
    for tgt in ("int8", "int32", "float16", "bfloat16", "float32", "float64", "bool"):
        t = dt_of(tgt)
        check("aten::sum.IntList_out", [x, [1], False, int(from_numpy_dtype(t))], [((3,), t)])
        check("aten::sum.IntList_out", [x, [0], True, None], [((1, 50), t)])


def test_sum_is_sequential_and_wraps():
    # float32 over 4096 elements: sequential and pairwise summation round differently
    x = make((4096,), "float16")
    (r,) = check("aten::sum.IntList_out", [x, None, False, None], [((), np.float16)])
    (r32,) = check("aten::sum.IntList_out", [x.astype(np.float32), None, False, None],
                   [((), np.float32)])
    assert r == r32.astype(np.float16)
    big = np.full((4,), 2 ** 62, np.int64)
    (w,) = check("aten::sum.IntList_out", [big, None, False, None], [((), np.int64)])
    assert w == 0  # int64 wraps, as in C++
    (w8,) = check("aten::sum.IntList_out", [np.full((3,), 100, np.int8), None, False, None],
                  [((), np.int8)])
    assert w8 == np.int8(44)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean(dtype, keepdim):
    for shape, dim in CASES + EMPTY_CASES:
        x = make(shape, dtype)
        check("aten::mean.out", [x, dim, keepdim, None],
              [(red_shape(shape, dim, keepdim), dt_of(dtype))])


@pytest.mark.parametrize("dtype", ALL)
def test_mean_dtype(dtype):
    x = make((4, 33), dtype)
    for tgt in ("float32", "float64", "float16", "bfloat16"):
        t = dt_of(tgt)
        code = int(from_numpy_dtype(t))
        check("aten::mean.out", [x, [1], False, code], [((4,), t)])
        check("aten::mean.dtype_out", [x, code], [((), t)])
    if dt_of(dtype).kind == "f" or dtype == "bfloat16":
        check("aten::mean.dtype_out", [x, None], [((), dt_of(dtype))])


@pytest.mark.parametrize("dtype", ALL)
def test_prod(dtype):
    for shape, dim in [((2, 3, 4), 0), ((2, 3, 4), -1), ((), 0), ((0, 3), 0), ((3, 1), 1),
                       ((4, 40), 1)]:
        x = make(shape, dtype, lo=-2, hi=3)
        if dt_of(dtype).kind == "f" or dtype == "bfloat16":
            x = np.asarray(1 + 0.05 * make(shape, "float64")).astype(x.dtype)
        acc = acc_dtype(dtype)
        check("aten::prod.out", [x, None], [((), acc)])
        for keepdim in (False, True):
            check("aten::prod.int_out", [x, dim, keepdim, None],
                  [(red_shape(shape, [dim], keepdim), acc)])
    x = make((3, 4), dtype, lo=1, hi=4)
    check("aten::prod.out", [x, int(from_numpy_dtype(np.float64))], [((), np.float64)])
    check("aten::prod.int_out", [x, 0, False, int(from_numpy_dtype(np.int32))],
          [((4,), np.int32)])


def test_prod_all_multiplies_in_memory_order():
    x = (1 + 0.01 * make((6, 7, 8, 9), "float64")).astype(np.float32)
    (r,) = check("aten::prod.out", [laid_out(x, CL), None], [((), np.float32)])
    assert r.tobytes() == np.prod(np.ascontiguousarray(x.transpose(CL))).tobytes()


# ---- amax / amin / max / min / argmax / argmin ---------------------------------------------

def with_nans(x):
    x = x.copy()
    if x.dtype.kind == "f" or x.dtype == BF16:
        flat = x.reshape(-1)
        flat[::7] = np.nan
    return x


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("keepdim", [False, True])
def test_amax_amin(dtype, keepdim):
    for shape, dim in CASES + [((0, 3), [1])]:
        for x in (make(shape, dtype, hi=3), with_nans(make(shape, dtype))):
            for op in ("amax", "amin"):
                check(f"aten::{op}.out", [x, dim, keepdim],
                      [(red_shape(shape, dim, keepdim), dt_of(dtype))])


@pytest.mark.parametrize("dtype", ALL)
def test_max_min_unary(dtype):
    for shape in [(), (7,), (2, 3, 4)]:
        for x in (make(shape, dtype), with_nans(make(shape, dtype))):
            for op in ("max", "min"):
                check(f"aten::{op}.unary_out", [x], [((), dt_of(dtype))])


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(dtype, keepdim):
    for shape, dim in [((2, 3, 4), None), ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1),
                       ((), None), ((), 0), ((5,), 0), ((0, 3), 1), ((3, 1, 2), 1)]:
        # a narrow range makes ties, NaN every 7th element
        for x in (make(shape, dtype, lo=-1, hi=2), with_nans(make(shape, dtype))):
            for op in ("argmax", "argmin"):
                check(f"aten::{op}.out", [x, dim, keepdim],
                      [(red_shape(shape, None if dim is None else [dim], keepdim), np.int64)])


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim(dtype, keepdim):
    for shape, dim in [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((), 0), ((0, 3), 1),
                       ((4, 9), 1)]:
        for x in (make(shape, dtype, lo=-1, hi=2), with_nans(make(shape, dtype))):
            rs = red_shape(shape, [dim], keepdim)
            for op, ov in (("max", "dim_max"), ("min", "dim_min")):
                check(f"aten::{op}.{ov}", [x, dim, keepdim],
                      [(rs, dt_of(dtype)), (rs, np.int64)])


def test_first_nan_and_first_tie_win():
    x = np.array([1.0, 3.0, np.nan, 3.0, np.nan, -1.0], np.float32)
    (i,) = check("aten::argmax.out", [x, None, False], [((), np.int64)])
    (j,) = check("aten::argmin.out", [x, 0, False], [((), np.int64)])
    assert i == 2 and j == 2
    y = np.array([1, 3, 0, 3, 0], np.int16)
    (i,) = check("aten::argmax.out", [y, None, False], [((), np.int64)])
    (j,) = check("aten::argmin.out", [y, None, False], [((), np.int64)])
    assert i == 1 and j == 2


def test_empty_extents_are_errors():
    x = np.zeros((0, 3), np.float32)
    for name, args, out in [("aten::amax.out", [x, [0], False], ((3,), np.float32)),
                            ("aten::max.unary_out", [x], ((), np.float32)),
                            ("aten::argmax.out", [x, None, False], ((), np.int64)),
                            ("aten::argmin.out", [x, 0, False], ((3,), np.int64))]:
        with pytest.raises(Exception):
            call(name, *args, static_out(*out))
        assert call_fast(name, *args, static_out(*out)) is None  # the reference raises
    # shrunk to empty at run time: the kernel reports InvalidArgument
    t = ETensor.empty(from_numpy_dtype(np.float32), (2, 3), None, Dynamism.DYNAMIC_BOUND)
    out = bound_out((3,), np.float32)
    run = bind_fast("aten::amax.out", t, [0], False, out)
    assert run() == 0
    t.resize((0, 3))
    assert run() == INVALID_ARGUMENT


# ---- any ---------------------------------------------------------------------------------

def with_zeros(x):
    x = x.copy()
    x.reshape(-1)[::2] = 0
    return x


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("keepdim", [False, True])
def test_any(dtype, keepdim):
    for shape, dim in CASES + EMPTY_CASES:
        for x in (with_zeros(make(shape, dtype)), np.zeros(shape, dt_of(dtype))):
            check("aten::any.dims_out", [x, dim, keepdim],
                  [(red_shape(shape, dim, keepdim, empty_is_all=False), np.bool_)])
            if dim and len(dim) == 1:
                check("aten::any.out", [x, dim[0], keepdim],
                      [(red_shape(shape, dim, keepdim), np.bool_)])
    x = with_nans(with_zeros(make((3, 4), dtype)))
    check("aten::any.all_out", [x], [((), np.bool_)])
    check("aten::any.all_out", [np.zeros((3, 4), dt_of(dtype))], [((), np.bool_)])
    check("aten::any.all_out", [x], [((), np.uint8)])


# ---- var / var_mean -------------------------------------------------------------------------

VAR_CASES = CASES + [((3, 300), [1]), ((2000,), None), ((300, 3), [0]), ((4, 1, 150), [1, 2]),
                     ((0, 3), [1]), ((0, 3), [0])]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_var(dtype, keepdim):
    for shape, dim in VAR_CASES:
        x = make(shape, dtype)
        rs = red_shape(shape, dim, keepdim)
        for corr in (None, 0, 1, 2.5):
            check("aten::var.correction_out", [x, dim, corr, keepdim], [(rs, dt_of(dtype))])
        check("aten::var_mean.correction_out", [x, dim, 1, keepdim],
              [(rs, dt_of(dtype)), (rs, dt_of(dtype))])
        for unbiased in (False, True):
            check("aten::var.out", [x, dim, unbiased, keepdim], [(rs, dt_of(dtype))])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_var_channels_last(dtype):
    # numpy reduces in memory order: the compiled kernel follows the layout too
    x = make((2, 5, 4, 40), dtype)
    for dim in ([1], [2, 3], [1, 2, 3], [0, 1], None, [3]):
        rs = red_shape(x.shape, dim, True)
        check("aten::var_mean.correction_out", [laid_out(x, CL), dim, 1, True],
              [(rs, dt_of(dtype)), (rs, dt_of(dtype))])


def test_var_declines_integers():
    x = make((3, 4), "int32")
    assert call_fast("aten::var.correction_out", x, [1], 1, False, static_out((3,), np.float32)) \
        is None


# ---- cumsum ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_cumsum(dtype):
    for shape, dim in [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((), 0), ((0, 3), 1),
                       ((3, 200), 1)]:
        x = make(shape, dtype)
        check("aten::cumsum.out", [x, dim, None], [(shape, acc_dtype(dtype))])
    x = make((3, 20), dtype)
    for tgt in ("int8", "float16", "float32", "float64"):
        t = dt_of(tgt)
        check("aten::cumsum.out", [x, 1, int(from_numpy_dtype(t))], [((3, 20), t)])


# ---- softmax / log_softmax (fallback cases) ---------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["_softmax", "_log_softmax"])
def test_softmax(op, dtype):
    tol = 1e-2 if dtype in ("float16", "bfloat16") else 1e-6
    for shape, dim in [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((), 0), ((5,), 0),
                       ((0, 3), 1), ((3, 70), 1)]:
        x = make(shape, dtype)
        check(f"aten::{op}.out", [x, dim, False], [(shape, dt_of(dtype))], tol)
    x = with_nans(make((2, 8), dtype))
    x[1] = -np.inf
    check(f"aten::{op}.out", [x, 1, False], [((2, 8), dt_of(dtype))], tol)
    x = make((2, 3, 4, 5), dtype)
    check(f"aten::{op}.out", [laid_out(x, CL), 1, False], [(x.shape, dt_of(dtype))], tol)


def test_softmax_declines_integers():
    assert call_fast("aten::_softmax.out", make((2, 3), "int32"), 1, False,
                     static_out((2, 3), np.int32)) is None


# ---- layouts and dynamic shapes -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int8", "float16", "float32"])
def test_channels_last_inputs_and_outs(dtype):
    x = make((2, 3, 4, 5), dtype)
    t = laid_out(x, CL)
    acc = acc_dtype(dtype)
    check("aten::sum.IntList_out", [t, [2, 3], True, None], [((2, 3, 1, 1), acc)])
    check("aten::sum.IntList_out", [t, [1], False, None], [((2, 4, 5), acc)])
    check("aten::amax.out", [t, [1], True], [((2, 1, 4, 5), dt_of(dtype))])
    check("aten::argmin.out", [t, 3, False], [((2, 3, 4), np.int64)])
    check("aten::cumsum.out", [t, 1, None], [(x.shape, acc)])
    # a channels-last out
    ref = static_out((2, 3, 4, 5), acc)
    call("aten::cumsum.out", x, 2, None, ref)
    out = ETensor.empty(from_numpy_dtype(acc), x.shape, CL)
    assert call_fast("aten::cumsum.out", t, 2, None, out) == 0
    same(out.numpy(), ref.numpy())
    ref = static_out((2, 1, 4, 5), acc)
    call("aten::sum.IntList_out", x, [1], True, None, ref)
    out = ETensor.empty(from_numpy_dtype(acc), (2, 1, 4, 5), CL)
    assert call_fast("aten::sum.IntList_out", t, [1], True, None, out) == 0
    same(out.numpy(), ref.numpy())


def test_dynamic_input_resized_between_runs():
    x = ETensor.empty(from_numpy_dtype(np.int16), (4, 6), None, Dynamism.DYNAMIC_BOUND)
    out = bound_out((4,), np.int64)
    vals = bound_out((4,), np.int16)
    idx = bound_out((4,), np.int64)
    runs = [bind_fast("aten::sum.IntList_out", x, [1], False, None, out),
            bind_fast("aten::max.dim_max", x, 1, False, vals, idx)]
    for shape in [(4, 6), (2, 3), (3, 1), (0, 5)]:
        a = make(shape, "int16", seed=sum(shape))
        x.resize(shape)
        if a.size:
            x.numpy()[...] = a
        assert runs[0]() == 0
        np.testing.assert_array_equal(out.numpy(), a.sum(axis=1, dtype=np.int64))
        if a.size:
            assert runs[1]() == 0
            np.testing.assert_array_equal(vals.numpy(), a.max(axis=1))
            np.testing.assert_array_equal(idx.numpy(), a.argmax(axis=1))


def test_static_out_of_wrong_shape_fails():
    x = make((3, 4), "int32")
    assert call_fast("aten::amax.out", x, [1], False, static_out((4,), np.int32)) != 0
    assert call_fast("aten::sum.IntList_out", x, [1], False, None, static_out((2, 3), np.int64)) \
        is None  # wrong rank: declined at bind
