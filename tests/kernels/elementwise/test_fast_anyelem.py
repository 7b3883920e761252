"""The generic any-dtype compiled elementwise engine against the reference kernels.

Each case runs the reference kernel into a static out, then the compiled
kernel (``kernels/elementwise/generic.py``, bound directly, not through a specialized
binder) into a static out and into a dynamic-bound out that must shrink.
Where the reference raises, the compiled binder must decline or its kernel fail.
Exact ops must match bit for bit (half/bfloat16 within 1e-2); transcendental
float32/float64 ops within a few ulp (the engine computes in float64).
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, ExecuTorchError, from_numpy_dtype
from pyruntime.cython_ext.desc import DescTable
from pyruntime.kernels.fast.context import BindContext
from pyruntime.kernels.elementwise import generic_unary as unary
from pyruntime.kernels.fast.nb import INVALID_ARGUMENT
from tests.kernels.helpers import as_value, assert_close, call, static_out
from tests.kernels.elementwise.test_elementwise import BF16, dim_ordered, make

ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
       "float64"]
DT = {n: (BF16 if n == "bfloat16" else np.dtype(n)) for n in ALL}
HALF = (np.dtype(np.float16), BF16)
SPECIALS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.5, -2.5, 3.5]


_ELEMENTWISE = {f"pyruntime.kernels.elementwise.{m}" for m in ("generic_bind", "generic_unary", "generic_binary")}


def _binder(name):
    """The generic binder registered for ``name`` (also where a specialized one exists)."""
    import pyruntime.kernels.fast as kf
    kf.get_binder("")
    # the op may also have a binder in another family (complex _conj_physical: kernels.complex.typed)
    b = kf._BINDERS.get(name)
    found = [x for x in (b, getattr(b, "typed", None), getattr(b, "generic", None))
             if x is not None and x.__module__ in _ELEMENTWISE]
    assert found, name
    return found[0]


def _bind(name, args):
    vals = [as_value(a) for a in args]
    tensors = [v for v in vals if isinstance(v, ETensor)]
    table = DescTable(tensors, [t.storage for t in tensors])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(tensors)}, [])
    bound = _binder(name)(ctx, *vals)
    if bound is None:
        return None
    fn, block = bound
    kernel = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fn)

    def run(_keep=(ctx, table)):
        for i, t in enumerate(tensors):
            table.push(i, t, force=True)
        status = kernel(block)
        for i, t in enumerate(tensors):
            table.pull(i, t)
        return status

    return run


def _run(name, args):
    run = _bind(name, args)
    return None if run is None else run()


def _tol(dt, exact, inputs=()):
    """Tolerance for a result in ``dt`` (a float out is as precise as its float inputs)."""
    dt = np.dtype(dt)
    if dt.kind != "f" and dt != BF16:
        return dict(rtol=0, atol=0)
    floats = [np.dtype(d) for d in (dt, *inputs) if np.dtype(d).kind == "f" or d == BF16]
    if any(d in HALF for d in floats):
        return dict(rtol=1e-2, atol=1e-2)
    if exact:
        return dict(rtol=0, atol=0)
    if any(d == np.float32 for d in floats):
        return dict(rtol=1e-6, atol=1e-7)
    return dict(rtol=1e-13, atol=1e-15)


def check(name, args, out_dtype, exact=True, out_order=None):
    """Compiled vs reference into static and dynamic-bound outs; returns the result (or None
    where the reference raises, after checking the compiled kernel refuses too)."""
    args = [as_value(a) for a in args]
    arrays = [a.numpy() for a in args if isinstance(a, ETensor)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    out_dtype = np.dtype(out_dtype)
    ref = static_out(shape, out_dtype)
    try:
        call(name, *args, ref)
    except ExecuTorchError:
        out = static_out(shape, out_dtype)
        status = _run(name, args + [out])
        assert status is None or status != 0, f"{name}: reference raises, compiled returned 0"
        return None
    code = from_numpy_dtype(out_dtype)
    cap = tuple(s + 2 for s in shape)
    for out in (ETensor.empty(code, shape, out_order),
                ETensor.empty(code, cap, out_order, Dynamism.DYNAMIC_BOUND)):
        status = _run(name, args + [out])
        assert status is not None, f"{name}: compiled binder declined"
        assert status == 0, f"{name}: compiled kernel returned {status:#x}"
        assert out.shape == shape
        assert_close(out.numpy(), ref.numpy(),
                     **_tol(out_dtype, exact, [a.dtype for a in arrays]))
    return ref.numpy()


def values(shape, dtype, seed=0, low=-4, high=4, nonzero=False, specials=True):
    """Random values; floats get inf/nan/signed zeros/halves mixed in."""
    dt = DT[dtype] if isinstance(dtype, str) else np.dtype(dtype)
    a = make(shape, dt, seed=seed, low=low, high=high, nonzero=nonzero)
    if specials and dt.kind == "f" or dt == BF16 and specials:
        flat = a.reshape(-1)
        k = min(len(SPECIALS), flat.size // 2)
        flat[:k] = np.array(SPECIALS[:k]).astype(dt)
    return a


def _result_dtype(name, args, fallback):
    """The dtype torch's out would have: try the swept dtype, else bool/int64/float32."""
    for dt in (fallback, np.dtype(np.bool_), np.dtype(np.int64), np.dtype(np.float32)):
        try:
            call(name, *[as_value(a) for a in args], static_out(
                np.broadcast_shapes(*(np.shape(a) for a in args if isinstance(a, np.ndarray))),
                dt))
            return dt
        except ExecuTorchError:
            continue
    return fallback


# ---- unary ---------------------------------------------------------------------------------

FLOAT_UNARY = sorted(unary._FLOAT_UNARY)
EXACT_UNARY = ["ceil", "floor", "round", "trunc", "abs", "neg", "relu", "sign", "bitwise_not",
               "logical_not", "isnan", "isinf", "_conj_physical"]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", FLOAT_UNARY + EXACT_UNARY)
def test_unary(op, dtype):
    x = values((2, 3, 4), dtype, seed=1)
    name = f"aten::{op}.out"
    out_dt = _result_dtype(name, [x], DT[dtype])
    check(name, [x], out_dt, exact=op in EXACT_UNARY or op in ("reciprocal", "sqrt"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_unary_into_wider_out(dtype):
    # the result is rounded to its dtype before the cast into out (torch's out= semantics)
    x = values((3, 5), dtype, seed=2)
    check("aten::sin.out", [x], np.float64, exact=False)
    check("aten::neg.out", [x], np.float64)
    check("aten::isnan.out", [x], np.float32)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_activations(dtype):
    x = values((3, 4), dtype, seed=3)
    check("aten::elu.out", [x, 1.0, 1.0, 1.0], DT[dtype], exact=False)
    check("aten::elu.out", [x, 0.5, 2.0, 1.5], DT[dtype], exact=False)
    check("aten::leaky_relu.out", [x, 0.01], DT[dtype])
    check("aten::hardtanh.out", [x, -0.5, 0.5], DT[dtype])
    check("aten::gelu.out", [x, "none"], DT[dtype], exact=False)
    check("aten::gelu.out", [x, "tanh"], DT[dtype], exact=False)
    u = values((3, 4), dtype, seed=4, low=0, high=1)
    for eps in (None, 0.1, -1.0):
        check("aten::logit.out", [u, eps], DT[dtype], exact=False)
    for decimals in (-1, 0, 2):
        check("aten::round.decimals_out", [x * 7, decimals], DT[dtype])
    for dim in (0, 1, -1):
        check("aten::glu.out", [x, dim], DT[dtype], exact=False)


@pytest.mark.parametrize("dtype", ALL)
def test_clamp_and_hardtanh_any_dtype(dtype):
    x = values((2, 5), dtype, seed=5)
    for lo, hi in ((-1, 2), (None, 1), (0.5, None), (-2.5, 2.5), (float("nan"), None)):
        check("aten::clamp.out", [x, lo, hi], _result_dtype("aten::clamp.out", [x, lo, hi],
                                                          DT[dtype]))
    check("aten::hardtanh.out", [x, -1.5, 2.0], DT[dtype])
    check("aten::hardtanh.out", [x, 0, 3], DT[dtype])


def test_logit_and_glu_of_integers_and_odd_glu():
    check("aten::logit.out", [np.arange(-1, 3, dtype=np.int32), None], np.float32, exact=False)
    assert _bind("aten::glu.out", [values((3, 3), "float32"), 1, static_out((3, 1),
                                                                            np.float32)]) is None
    # a dynamic input that turns odd at run time: the kernel refuses
    x = ETensor.from_array(values((2, 4), "float32"), Dynamism.DYNAMIC_BOUND)
    out = ETensor.empty(from_numpy_dtype(np.float32), (2, 2), dynamism=Dynamism.DYNAMIC_BOUND)
    run = _bind("aten::glu.out", [x, 1, out])
    assert run() == 0
    x.resize((2, 3))
    assert run() == INVALID_ARGUMENT


# ---- binary --------------------------------------------------------------------------------

BINARY = {  # name: (overload with tensor other, overload with scalar other or None, extra args)
    "add": ("out", "Scalar_out", [2]), "sub": ("out", "Scalar_out", [2]),
    "mul": ("out", "Scalar_out", []), "div": ("out", "Scalar_out", []),
    "div_trunc": ("out_mode", "Scalar_mode_out", ["trunc"]),
    "div_floor": ("out_mode", "Scalar_mode_out", ["floor"]),
    "floor_divide": ("out", None, []), "fmod": ("Tensor_out", "Scalar_out", []),
    "remainder": ("Tensor_out", "Scalar_out", []), "atan2": ("out", None, []),
    "maximum": ("out", None, []), "minimum": ("out", None, []),
    "pow": ("Tensor_Tensor_out", "Tensor_Scalar_out", []),
    "bitwise_and": ("Tensor_out", "Scalar_out", []), "bitwise_or": ("Tensor_out", "Scalar_out", []),
    "bitwise_xor": ("Tensor_out", "Scalar_out", []),
    "bitwise_left_shift": ("Tensor_out", "Tensor_Scalar_out", []),
    "bitwise_right_shift": ("Tensor_out", "Tensor_Scalar_out", []),
    "logical_and": ("out", None, []), "logical_or": ("out", None, []),
    "logical_xor": ("out", None, []),
    **{c: ("Tensor_out", "Scalar_out", []) for c in ("eq", "ne", "lt", "le", "gt", "ge")},
}
INEXACT = {"atan2", "pow"}
DIVS = {"div_trunc", "div_floor", "floor_divide", "fmod", "remainder"}


def _op_name(op, overload):
    return f"aten::{op.split('_')[0] if op.startswith('div_') else op}.{overload}"


def _binary_args(op, a, b):
    return [a, b] + BINARY[op][2]  # alpha for add/sub, rounding mode for div


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(op, dtype):
    shift = "shift" in op
    a = values((2, 1, 4), dtype, seed=6, low=0 if shift else -4, high=9 if shift else 4)
    b = values((3, 1), dtype, seed=7, low=0 if shift else -4, high=9 if shift else 4,
               nonzero=op in DIVS)
    name = _op_name(op, BINARY[op][0])
    args = _binary_args(op, a, b)
    check(name, args, _result_dtype(name, args, DT[dtype]), exact=op not in INEXACT)


MIXED = [("int32", "float16"), ("uint8", "int8"), ("bool", "float32"), ("int64", "bfloat16"),
         ("float16", "bfloat16"), ("int8", "float64"), ("int16", "uint8"), ("bool", "int8")]


@pytest.mark.parametrize("dtypes", MIXED, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "div_floor", "remainder", "maximum",
                                "pow", "eq", "lt", "bitwise_or", "logical_xor"])
def test_binary_mixed(op, dtypes):
    a = values((4, 3), dtypes[0], seed=8, low=-3, high=3)
    b = values((3,), dtypes[1], seed=9, low=-3, high=3, nonzero=op in DIVS)
    name = _op_name(op, BINARY[op][0])
    args = _binary_args(op, a, b)
    check(name, args, _result_dtype(name, args, np.dtype(np.float32)), exact=op != "pow")


ZERO_DIM = [("float32", "float64"), ("int8", "int64"), ("uint8", "int8"), ("float16", "float64"),
            ("int32", "float64"), ("bool", "int64")]


@pytest.mark.parametrize("dtypes", ZERO_DIM, ids=str)
@pytest.mark.parametrize("op", ["add", "mul", "div", "eq", "maximum", "bitwise_and", "fmod"])
def test_zero_dim_operand_is_cast_to_the_compute_dtype(op, dtypes):
    a = values((2, 3), dtypes[0], seed=10, specials=False)
    b = np.array(300.7 if dtypes[1].startswith("float") else
                 -100 if dtypes[1] == "int8" else -300, DT[dtypes[1]])
    name = _op_name(op, BINARY[op][0])
    for x, y in ((a, b), (b, a)):
        args = _binary_args(op, x, y)
        check(name, args, _result_dtype(name, args, DT[dtypes[0]]))


SCALARS = [2, -3, 1000, 2.5, True, -0.5]


@pytest.mark.parametrize("scalar", SCALARS, ids=str)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64", "float16",
                                   "bfloat16", "float32"])
@pytest.mark.parametrize("op", [o for o in sorted(BINARY) if BINARY[o][1]] + ["rsub"])
def test_scalar_overloads(op, dtype, scalar):
    a = values((2, 3), dtype, seed=11, low=-5, high=5)
    if op == "rsub":
        name, args = "aten::rsub.Scalar_out", [a, scalar, 2]
    else:
        name = _op_name(op, BINARY[op][1])
        args = _binary_args(op, a, scalar)
    check(name, args, _result_dtype(name, args, DT[dtype]), exact=op not in INEXACT)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "bool"])
def test_pow_scalar_base(dtype):
    e = values((2, 3), dtype, seed=12, low=-2, high=4, specials=False)
    for base in (2, -1, 1, 0, 1.5, True):
        name = "aten::pow.Scalar_out"
        check(name, [base, e], _result_dtype(name, [base, e], DT[dtype]), exact=False)


def test_add_alpha_and_overflow_wrap():
    a = np.array([100, -100, 127, -128], np.int8)
    check("aten::add.out", [a, a, 3], np.int8)
    check("aten::sub.out", [a, a, -2], np.int32)
    check("aten::add.out", [a.astype(np.float32), a.astype(np.float32), 0.1], np.float32)
    check("aten::add.out", [a.astype(bool), a.astype(bool), True], np.bool_)
    check("aten::add.Scalar_out", [a, 1000, 1], np.int8)  # 1000 wraps to int8 first


def test_int64_beyond_2_53_stays_exact():
    big = np.array([2 ** 62 + 1, -(2 ** 62) - 3, 2 ** 53 + 1, 9007199254740993], np.int64)
    one = np.array([1, 3, -1, 7], np.int64)
    for name, args in (("aten::add.out", [big, one, 1]), ("aten::sub.out", [big, one, 5]),
                       ("aten::mul.out", [big, one]), ("aten::eq.Tensor_out", [big, big - 1]),
                       ("aten::maximum.out", [big, one]), ("aten::floor_divide.out", [big, one]),
                       ("aten::remainder.Tensor_out", [big, one]),
                       ("aten::bitwise_xor.Tensor_out", [big, one]),
                       ("aten::where.self_out", [one > 1, big, one])):
        got = check(name, args, np.bool_ if "eq" in name else np.int64)
        assert got is not None


def test_integer_division_by_zero_fails_at_run_time():
    a = np.array([3, -7, 8], np.int32)
    b = np.array([2, 0, 1], np.int32)
    for name, args in (("aten::floor_divide.out", [a, b]), ("aten::fmod.Tensor_out", [a, b]),
                       ("aten::remainder.Tensor_out", [a, b]),
                       ("aten::div.out_mode", [a, b, "trunc"])):
        assert _run(name, args + [static_out((3,), np.int32)]) == INVALID_ARGUMENT
    # float division by zero is IEEE
    check("aten::floor_divide.out", [a.astype(np.float32), b.astype(np.float32)], np.float32)
    check("aten::remainder.Tensor_out", [a.astype(np.float64), b.astype(np.float64)],
          np.float64)


def test_int_division_edge_cases():
    a = np.array([-128, -7, 7, -7, 7, 0, 127, -128], np.int8)
    b = np.array([-1, 2, -2, -2, 3, -3, -1, 1], np.int8)
    for name, args in (("aten::floor_divide.out", [a, b]), ("aten::fmod.Tensor_out", [a, b]),
                       ("aten::remainder.Tensor_out", [a, b]),
                       ("aten::div.out_mode", [a, b, "trunc"]),
                       ("aten::div.out_mode", [a, b, "floor"])):
        check(name, args, np.int8)
    big = np.array([-(2 ** 63), 5], np.int64)
    check("aten::floor_divide.out", [big, np.array([-1, -1], np.int64)], np.int64)


def test_shifts_past_the_width():
    for dt in (np.int8, np.uint8, np.int32, np.int64):
        a = np.array([5, 100, 1, 3, 7, 9], dt)
        if dt != np.uint8:
            a[1] = -100
        b = np.array([0, 3, 7, 8, 63, 70], dt) if dt != np.int8 else np.array(
            [0, 3, 7, 8, 63, -1], dt)
        check("aten::bitwise_left_shift.Tensor_out", [a, b], dt)
        check("aten::bitwise_right_shift.Tensor_out", [a, b], dt)


# ---- ternary, fills ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_where_masked_fill_clamp_tensor(dtype):
    c = values((2, 1, 4), "bool", seed=13)
    a = values((3, 1), dtype, seed=14)
    b = values((4,), dtype, seed=15)
    check("aten::where.self_out", [c, a, b], DT[dtype])
    check("aten::where.self_out", [c.astype(np.uint8), a, np.array(1.5, np.float32)],
          _result_dtype("aten::where.self_out", [c, a, np.ones((), np.float32)], DT[dtype]))
    for v in (2, -1.5, True, 300):
        check("aten::masked_fill.Scalar_out", [a, c, v], DT[dtype])
    lo = values((3, 1), dtype, seed=16, low=-3, high=0)
    hi = values((4,), dtype, seed=17, low=0, high=3)
    for bounds in ((lo, hi), (lo, None), (None, hi), (np.array(0.5, np.float32), hi)):
        name = "aten::clamp.Tensor_out"
        check(name, [b, *bounds], _result_dtype(name, [b, *bounds], DT[dtype]))


@pytest.mark.parametrize("dtype", ALL)
def test_fill(dtype):
    x = values((2, 3), dtype, seed=18)
    for v in (0, 1, -2, 2.7, True, 1e10, float("nan")):
        check("aten::fill.Scalar_out", [x, v], DT[dtype])
    for vdt in ("int64", "float32", "bool", "bfloat16", "uint8"):
        for v in (0, 3, -1.5, 1e10, 2 ** 40):
            with np.errstate(all="ignore"):
                value = np.array(v).astype(DT[vdt])
            check("aten::fill.Tensor_out", [x, value], DT[dtype])


def test_fill_tensor_checks_the_value_at_run_time():
    x = np.zeros((2, 2), np.int8)
    value = ETensor.from_array(np.array(5.0, np.float32))
    out = static_out((2, 2), np.int8)
    run = _bind("aten::fill.Tensor_out", [x, value, out])
    assert run() == 0 and out.numpy().tolist() == [[5, 5], [5, 5]]
    value.numpy()[()] = 300.0  # does not fit int8: the reference raises
    assert run() == INVALID_ARGUMENT
    value.numpy()[()] = np.nan
    assert run() == INVALID_ARGUMENT


# ---- shapes and layouts -----------------------------------------------------------------------

SHAPES = [((), ()), ((0,), (0,)), ((0, 3), (3,)), ((5,), ()), ((2, 3, 4), (2, 3, 4)),
          ((2, 1, 4), (3, 1)), ((4, 1), (1, 5)), ((1,), (2, 3)), ((3, 1, 1, 2), (1, 4, 5, 1)),
          ((1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3), (3,)), ((600,), (600,)),
          ((3, 700), (700,)), ((700, 3), (700, 1))]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int8", "float16"])
def test_shapes(shapes, dtype):
    a = values(shapes[0], dtype, seed=19)
    b = values(shapes[1], dtype, seed=20, nonzero=True)
    check("aten::add.out", [a, b, 1], DT[dtype])
    check("aten::lt.Tensor_out", [a, b], np.bool_)
    check("aten::where.self_out", [values(shapes[1], "bool", seed=21), a, b], DT[dtype])
    check("aten::sin.out", [a], DT[dtype] if dtype != "int8" else np.float32, exact=False)


@pytest.mark.parametrize("dtype", ["float32", "int16", "bfloat16", "bool"])
def test_non_contiguous_inputs_and_outs(dtype):
    x = values((2, 3, 4, 5), dtype, seed=22)
    y = values((2, 3, 4, 5), dtype, seed=23)
    cl = dim_ordered(x, (0, 2, 3, 1))  # channels last
    tr = dim_ordered(y, (3, 2, 1, 0))
    rt = DT[dtype]
    check("aten::maximum.out", [cl, tr], rt)
    check("aten::maximum.out", [cl, y], rt, out_order=(0, 2, 3, 1))
    check("aten::mul.out", [cl, values((5,), dtype, seed=24)], rt, out_order=(0, 2, 3, 1))
    check("aten::eq.Tensor_out", [tr, cl], np.bool_, out_order=(1, 0, 2, 3))
    check("aten::where.self_out", [dim_ordered(values((2, 3, 4, 5), "bool"), (0, 2, 3, 1)),
                                   cl, tr], rt)
    check("aten::logical_not.out", [tr], np.bool_, out_order=(0, 2, 3, 1))
    if dtype != "bool":
        check("aten::neg.out", [cl], rt)
        check("aten::clamp.Tensor_out", [cl, tr, None], rt)
    if dtype in ("float32", "bfloat16"):
        check("aten::glu.out", [cl, 1], rt, exact=False)
        check("aten::glu.out", [tr, 3], rt, exact=False)


def test_dynamic_inputs_rebroadcast_at_run_time():
    a = ETensor.from_array(values((4, 3), "int16", seed=25), Dynamism.DYNAMIC_BOUND)
    b = ETensor.from_array(values((3,), "int16", seed=26), Dynamism.DYNAMIC_BOUND)
    out = ETensor.empty(from_numpy_dtype(np.int32), (4, 3), dynamism=Dynamism.DYNAMIC_BOUND)
    run = _bind("aten::mul.out", [a, b, out])
    for sa, sb in (((4, 3), (3,)), ((2, 3), (1,)), ((1, 2), (2,)), ((0, 3), (3,))):
        a.resize(sa)
        b.resize(sb)
        assert run() == 0
        want = (a.numpy().astype(np.int16) * b.numpy()).astype(np.int32)
        assert out.shape == want.shape and np.array_equal(out.numpy(), want)
    a.resize((4, 3))
    b.resize((2,))  # no longer broadcastable
    assert run() == INVALID_ARGUMENT


def test_declines_what_the_reference_refuses():
    f = values((2, 3), "float32")
    i = values((2, 3), "int32")
    assert _bind("aten::bitwise_and.Tensor_out", [f, f, static_out((2, 3), np.float32)]) is None
    assert _bind("aten::sub.out", [f.astype(bool), f.astype(bool), 1,
                                   static_out((2, 3), np.bool_)]) is None
    assert _bind("aten::add.out", [i, i, 1.5, static_out((2, 3), np.int32)]) is None
    assert _bind("aten::sin.out", [f, static_out((2, 3), np.int32)]) is None  # no float -> int
    assert _bind("aten::pow.Tensor_Scalar_out", [i, -1, static_out((2, 3), np.int32)]) is None
    assert _bind("aten::masked_fill.Scalar_out", [i.astype(np.int8), i > 0, 1000,
                                                  static_out((2, 3), np.int8)]) is None
    assert _bind("aten::add.out", [f, values((4,), "float32"), 1,
                                   static_out((2, 4), np.float32)]) is None


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", ["exp", "sin", "cos", "tanh", "sigmoid", "log", "log2", "log10"])
def test_call_free_math_far_arguments(op, dtype):
    # float32-and-narrower results use call-free exp/sin/cos/tanh/log; NaN, inf, huge and
    # subnormal arguments go back to libm
    x = np.array([1e5, -1e5, 1.5e5, 1e6, -3e7, 88.7, 89.0, 100.0, 709.0, 710.0, -745.0, -104.0,
                  1e-40, 1e-300, 3.4e38, 0.625, 0.6249, -0.625, 20.0, -20.0, 0.0, -0.0, np.inf,
                  -np.inf, np.nan, 1.0, 2.0, 8.0, 1000.0, 1e-7, -1e-30, 12345.678], np.float64)
    with np.errstate(over="ignore"):
        x = x.astype(DT[dtype])
    check(f"aten::{op}.out", [x], DT[dtype], exact=False)
