"""Prim ops against the spec table (section 4.11), which follows ExecuTorch's C++ kernels."""
import math

import numpy as np
import pytest
import torch

from pyruntime.cython_ext import Dynamism, ErrorCode, ETensor, ExecuTorchError
from tests.kernels.helpers import bound_out, call, static_out

P = "executorch_prim::"


# ---- tensor metadata -----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 5), (2, 0, 4), (7,)])
def test_sym_size_and_numel(shape):
    x = np.zeros(shape, np.float32)
    t = torch.zeros(shape)
    for d in range(-len(shape), len(shape)):
        assert call("aten::sym_size.int", x, d) == torch.ops.aten.sym_size.int(t, d)
    assert call("aten::sym_numel", x) == torch.ops.aten.sym_numel(t)


def test_sym_size_tracks_dynamic_resize():
    t = bound_out((10, 4), np.float32)
    t.resize((3, 4))
    assert call("aten::sym_size.int", t, 0) == 3 and call("aten::sym_numel", t) == 12


def test_sym_size_bad_dim():
    with pytest.raises(ExecuTorchError) as e:
        call("aten::sym_size.int", np.zeros((2, 3)), 2)
    assert e.value.code == ErrorCode.InvalidArgument


@pytest.mark.parametrize("value,dtype,kind", [(3.5, np.float32, float), (-7, np.int64, int),
                                              (200, np.uint8, int), (True, np.bool_, bool),
                                              (2.25, np.float64, float)])
def test_local_scalar_dense(value, dtype, kind):
    got = call("aten::_local_scalar_dense", np.array([value, 0], dtype))
    want = torch.ops.aten._local_scalar_dense(torch.from_numpy(np.array([value], dtype)))
    assert type(got) is kind and got == want


def test_local_scalar_dense_empty():
    with pytest.raises(ExecuTorchError) as e:
        call("aten::_local_scalar_dense", np.zeros(0, np.float32))
    assert e.value.code == ErrorCode.InvalidArgument


# ---- arithmetic ----------------------------------------------------------------------------

@pytest.mark.parametrize("name,fn", [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                                     ("mul", lambda a, b: a * b)])
@pytest.mark.parametrize("a,b", [(7, 3), (-7, 3), (2, -5), (1.5, 2), (3, 0.25), (-2.5, -1.5)])
def test_algebra(name, fn, a, b):
    got = call(f"{P}{name}.Scalar", a, b)
    want = fn(a, b)
    assert got == want and type(got) is type(want)  # int op int -> int, any double -> float


def test_int_arithmetic_wraps_like_int64():
    big = 2**62
    assert call(P + "add.Scalar", big, big) == -(2**63)
    assert call(P + "mul.Scalar", 2**40, 2**40) == 0


# (a, b, python floor division, C truncating division, C remainder)
INT_DIV = [(7, 2, 3, 3, 1), (-7, 2, -4, -3, -1), (7, -2, -4, -3, 1), (-7, -2, 3, 3, -1),
           (6, 3, 2, 2, 0), (-6, 3, -2, -2, 0), (0, -5, 0, 0, 0), (-1, 5, -1, 0, -1)]


@pytest.mark.parametrize("a,b,floor,trunc,rem", INT_DIV)
def test_integer_division(a, b, floor, trunc, rem):
    assert call(P + "floordiv.Scalar", a, b) == floor       # Python semantics
    assert call(P + "floordiv.int", a, b) == trunc          # C semantics
    assert call(P + "mod.int", a, b) == rem                 # C remainder (sign of a)
    assert call(P + "mod.Scalar", a, b) == rem
    assert math.fmod(a, b) == rem


@pytest.mark.parametrize("a,b", [(7.0, 2.0), (-7.0, 2.0), (7.5, -2.0), (-7, 2.5), (5, 0.1),
                                 (1e300, 1e-300), (-0.5, 3)])
def test_floordiv_doubles_match_python(a, b):
    got = call(P + "floordiv.Scalar", a, b)
    assert type(got) is float and got == a // b


@pytest.mark.parametrize("a,want", [(3.0, math.inf), (-3.0, -math.inf), (0.0, math.inf),
                                    (-0.0, -math.inf), (2, math.inf)])
def test_floordiv_by_zero_double(a, want):
    assert call(P + "floordiv.Scalar", a, 0.0) == want


def test_integer_division_by_zero_raises():
    for op in ("floordiv.Scalar", "floordiv.int", "mod.int", "mod.Scalar"):
        with pytest.raises(ExecuTorchError):
            call(P + op, 1, 0)


@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (1, 3.0), (2.5, -0.5), (6, 3)])
def test_truediv_always_double(a, b):
    got = call(P + "truediv.Scalar", a, b)
    assert type(got) is float and got == a / b


def test_truediv_by_zero_is_ieee():
    assert call(P + "truediv.Scalar", 1, 0) == math.inf
    assert call(P + "truediv.Scalar", -1.0, 0.0) == -math.inf
    assert math.isnan(call(P + "truediv.Scalar", 0, 0))


def test_mod_scalar_rejects_doubles():
    with pytest.raises(ExecuTorchError) as e:
        call(P + "mod.Scalar", 7.0, 2)
    assert e.value.code == ErrorCode.InvalidType


@pytest.mark.parametrize("op", ["add", "sub", "mul", "floordiv", "truediv"])
@pytest.mark.parametrize("a,b", [(True, 1), (1, False), (None, 1), (True, True)])
def test_arithmetic_rejects_other_tags(op, a, b):
    with pytest.raises(ExecuTorchError) as e:
        call(f"{P}{op}.Scalar", a, b)
    assert e.value.code == ErrorCode.InvalidType


# ---- comparisons and logic -------------------------------------------------------------------

CMP = {"eq": lambda a, b: a == b, "gt": lambda a, b: a > b, "lt": lambda a, b: a < b,
       "ge": lambda a, b: a >= b, "le": lambda a, b: a <= b}


@pytest.mark.parametrize("name", list(CMP))
@pytest.mark.parametrize("a,b", [(3, 3), (-2, 5), (2.5, 2), (1, 1.0), (True, False), (False, False)])
def test_comparisons(name, a, b):
    got = call(f"{P}{name}.Scalar", a, b)
    assert got is CMP[name](a, b)


@pytest.mark.parametrize("a,b", [(True, 1), (0, False)])
def test_comparison_bool_with_int_rejected(a, b):
    with pytest.raises(ExecuTorchError) as e:
        call(P + "eq.Scalar", a, b)
    assert e.value.code == ErrorCode.InvalidType


def test_neg_not_max_min_ite():
    assert call(P + "neg.Scalar", 5) == -5 and call(P + "neg.Scalar", -2.5) == 2.5
    assert call(P + "sym_not.Scalar", True) is False and call(P + "sym_not.Scalar", False) is True
    assert call(P + "sym_max.Scalar", -3, 2) == 2 and call(P + "sym_min.Scalar", -3, 2) == -3
    assert call(P + "sym_ite.Scalar", True, 4, 9) == 4
    assert call(P + "sym_ite.Scalar", False, 4.5, 9.5) == 9.5
    with pytest.raises(ExecuTorchError):
        call(P + "sym_max.Scalar", 1.0, 2)
    with pytest.raises(ExecuTorchError):
        call(P + "neg.Scalar", True)


# ---- conversions and rounding ----------------------------------------------------------------

@pytest.mark.parametrize("a,want", [(3, 3.0), (-2, -2.0), (2.5, 2.5), (True, 1.0)])
def test_sym_float(a, want):
    got = call(P + "sym_float.Scalar", a)
    assert type(got) is float and got == want


@pytest.mark.parametrize("a,want", [(2.7, 2), (-2.7, -2), (5, 5), (True, 1), (False, 0)])
def test_sym_int_truncates(a, want):
    got = call(P + "sym_int.Scalar", a)
    assert type(got) is int and got == want


@pytest.mark.parametrize("a", [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, -3.7, 7.0, 1e15 + 0.5])
def test_ceil_round_trunc(a):
    assert call(P + "ceil.Scalar", a) == math.ceil(a)
    assert call(P + "trunc.Scalar", a) == math.trunc(a)
    got = call(P + "round.Scalar", a)
    assert type(got) is int and got == round(a)  # half to even
    assert got == int(torch.tensor(a, dtype=torch.float64).round())


def test_rounding_rejects_ints_and_nonfinite():
    with pytest.raises(ExecuTorchError) as e:
        call(P + "ceil.Scalar", 3)
    assert e.value.code == ErrorCode.InvalidType
    with pytest.raises(ExecuTorchError):
        call(P + "round.Scalar", math.inf)


# ---- et_copy_index ----------------------------------------------------------------------------

def test_et_copy_index_grows_a_bound_result():
    dst = bound_out((4, 2, 3), np.float32)
    slices = [np.full((2, 3), i + 1, np.float32) for i in range(4)]
    for i, src in enumerate(slices):
        assert call(P + "et_copy_index.tensor", dst, src, i) is None
        assert dst.shape == (i + 1, 2, 3)
    np.testing.assert_array_equal(dst.numpy(), np.stack(slices))
    # A second run of the loop starts from index 0 again.
    call(P + "et_copy_index.tensor", dst, slices[3], 0)
    assert dst.shape == (1, 2, 3) and (dst.numpy() == 4).all()


def test_et_copy_index_static_result_is_written_in_place():
    dst = static_out((3, 2), np.int64)
    call(P + "et_copy_index.tensor", dst, np.array([5, 6]), 1)
    assert dst.shape == (3, 2)
    np.testing.assert_array_equal(dst.numpy(), [[0, 0], [5, 6], [0, 0]])


@pytest.mark.parametrize("src,index", [(np.zeros((2, 3), np.float32), -1),
                                       (np.zeros((3,), np.float32), 0),
                                       (np.zeros((2, 4), np.float32), 1)])
def test_et_copy_index_bad_arguments(src, index):
    dst = bound_out((4, 2, 3), np.float32)
    dst.resize((1, 2, 3))
    with pytest.raises(ExecuTorchError):
        call(P + "et_copy_index.tensor", dst, src, index)


def test_et_copy_index_capacity_exceeded():
    dst = bound_out((2, 3), np.float32)
    with pytest.raises(ExecuTorchError):
        call(P + "et_copy_index.tensor", dst, np.ones(3, np.float32), 2)


# ---- et_view ------------------------------------------------------------------------------------

@pytest.mark.parametrize("src_shape,size,want", [((2, 6), [3, 4], (3, 4)), ((2, 6), [-1, 3], (4, 3)),
                                                 ((12,), [2, -1, 2], (2, 3, 2)), ((0, 4), [-1, 0], None)])
def test_et_view_aliases(src_shape, size, want):
    src = ETensor.from_array(np.arange(int(np.prod(src_shape)), dtype=np.float32).reshape(src_shape))
    out = ETensor.empty(src.scalar_type, [max(abs(s), 1) * 4 for s in size],
                        dynamism=Dynamism.DYNAMIC_BOUND)
    if want is None:  # -1 next to a zero dim cannot be inferred
        with pytest.raises(ExecuTorchError):
            call(P + "et_view.default", src, size, out)
        return
    assert call(P + "et_view.default", src, size, out, out) is None
    assert out.shape == want
    assert out.storage is src.storage  # no copy: out reads self's bytes
    np.testing.assert_array_equal(out.numpy(), torch.arange(src.numel).view(*size).numpy())
    src.numpy()[...] = -1  # a later write to self shows through out
    assert (out.numpy() == -1).all()


def test_et_view_rejects_mismatches():
    src = ETensor.from_array(np.zeros((2, 3), np.float32))
    with pytest.raises(ExecuTorchError):  # numel mismatch
        call(P + "et_view.default", src, [4, 2], bound_out((8, 8), np.float32))
    with pytest.raises(ExecuTorchError):  # dtype mismatch
        call(P + "et_view.default", src, [3, 2], bound_out((3, 2), np.int32))
    with pytest.raises(ExecuTorchError):  # two -1
        call(P + "et_view.default", src, [-1, -1], bound_out((6, 6), np.float32))
