"""Shape kernels (kernels/shape/reference.py) against torch.ops.aten."""
import ml_dtypes
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ErrorCode, ETensor, ExecuTorchError, from_numpy_dtype
from tests.kernels import helpers
from tests.kernels.helpers import assert_close, bound_out, static_out, to_np

A = torch.ops.aten
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.float32, np.float64, np.float16, BF16, np.int32, np.int64, np.int8, np.uint8, np.bool_]
I64_MAX = 2 ** 63 - 1


def rand(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.asarray(rng.random(shape) > 0.5)
    if dt.kind in "iu":
        return np.asarray(rng.integers(0, 100, shape)).astype(dt)
    if dt.kind == "c":
        return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return np.asarray(rng.standard_normal(shape)).astype(np.float32).astype(dt)


# np.ascontiguousarray turns rank-0 arrays into shape (1,), which both helpers.to_torch and
# ETensor.from_array use; these two keep rank-0 inputs rank-0.
def to_torch(x):
    return helpers.to_torch(x).reshape(np.shape(x))


def _et(x):
    if isinstance(x, np.ndarray) and x.ndim == 0:
        t = ETensor.empty(from_numpy_dtype(x.dtype), ())
        t.write(x)
        return t
    if isinstance(x, list):
        return [_et(e) for e in x]
    return x


def call(name, *args):
    return helpers.call(name, *[_et(a) for a in args])


def outs(shape, dtype):
    """A STATIC out of the exact shape and a DYNAMIC_BOUND out the kernel must shrink."""
    return [static_out(shape, dtype), bound_out(tuple(s + 1 for s in shape), dtype)]


def check(name, args, want):
    """Run kernel ``name`` on ``args`` + out for both out kinds and compare to torch's ``want``."""
    want = to_np(want)
    for out in outs(want.shape, want.dtype):
        assert call(name, *args, out) is None
        assert_close(out.numpy(), want)


def check_list(name, args, wants):
    wants = [to_np(w) for w in wants]
    for kind in range(2):
        out = [outs(w.shape, w.dtype)[kind] for w in wants]
        call(name, *args, out)
        for o, w in zip(out, wants):
            assert_close(o.numpy(), w)


# ---- plain views --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,size", [((2, 3, 4), [4, -1]), ((6,), [2, 3]), ((0, 3), [3, 0]),
                                        ((), [1]), ((1,), []), ((2, 3), [-1])])
def test_view_copy(dtype, shape, size):
    x = rand(shape, dtype)
    check("aten::view_copy.out", [x, size], A.view_copy(to_torch(x), size))


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int64, np.bool_])
@pytest.mark.parametrize("shape,dims", [((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [-1, 0, 1]), ((), []),
                                        ((0, 2, 3), [1, 2, 0]), ((5,), [0])])
def test_permute_copy(dtype, shape, dims):
    x = rand(shape, dtype)
    check("aten::permute_copy.out", [x, dims], A.permute_copy(to_torch(x), dims))


@pytest.mark.parametrize("shape", [(2, 3), (3,), (), (0, 4)])
def test_t_copy(shape):
    x = rand(shape, np.float64)
    check("aten::t_copy.out", [x], A.t_copy(to_torch(x)))


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.uint8])
@pytest.mark.parametrize("shape,d0,d1", [((2, 3, 4), 0, -1), ((2, 3), 1, 0), ((), 0, -1),
                                         ((0, 3), 0, 1), ((2, 3, 4), -2, -2)])
def test_transpose_copy(dtype, shape, d0, d1):
    x = rand(shape, dtype)
    check("aten::transpose_copy.int_out", [x, d0, d1], A.transpose_copy.int(to_torch(x), d0, d1))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("shape,size", [((3, 1), [2, -1, 4]), ((1,), [0]), ((), [2, 3]),
                                        ((2, 1, 3), [-1, 5, -1]), ((0, 1), [2, 0, 3])])
def test_expand_copy(dtype, shape, size):
    x = rand(shape, dtype)
    check("aten::expand_copy.out", [x, size, False], A.expand_copy(to_torch(x), size))


@pytest.mark.parametrize("shape,dim", [((1, 3, 1), 0), ((1, 3, 1), -1), ((1, 3, 1), 1), ((), 0),
                                       ((), -1), ((0, 1), 1)])
def test_squeeze_copy_dim(shape, dim):
    x = rand(shape, np.int8)
    check("aten::squeeze_copy.dim_out", [x, dim], A.squeeze_copy.dim(to_torch(x), dim))


@pytest.mark.parametrize("shape,dims", [((1, 3, 1), [0, -1]), ((1, 1), [0]), ((), []), ((), [0]),
                                        ((2, 1, 1, 4), [1, 2, 3]), ((1, 3), [])])
def test_squeeze_copy_dims(shape, dims):
    x = rand(shape, BF16)
    check("aten::squeeze_copy.dims_out", [x, dims], A.squeeze_copy.dims(to_torch(x), dims))


@pytest.mark.parametrize("shape,dim", [((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((2, 3), -3),
                                       ((), 0), ((), -1), ((0,), 1)])
def test_unsqueeze_copy(shape, dim):
    x = rand(shape, np.float32)
    check("aten::unsqueeze_copy.out", [x, dim], A.unsqueeze_copy(to_torch(x), dim))


@pytest.mark.parametrize("op", ["alias_copy", "detach_copy", "lift_fresh_copy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 5)])
def test_identity_copies(op, dtype, shape):
    x = rand(shape, dtype)
    check(f"aten::{op}.out", [x], getattr(A, op)(to_torch(x)))


@pytest.mark.parametrize("shape", [(2, 3), (4,), (), (0, 2)])
def test_view_as_real_copy(shape):
    x = rand(shape, np.complex64)
    check("aten::view_as_real_copy.out", [x], A.view_as_real_copy(to_torch(x)))


# ---- indexing views -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int64, BF16, np.bool_])
@pytest.mark.parametrize("shape,dim,start,end,step", [
    ((7,), 0, None, None, 1), ((7,), 0, 2, 5, 1), ((7,), 0, -3, None, 1), ((7,), 0, 1, I64_MAX, 2),
    ((7,), 0, -100, 100, 3), ((7,), 0, 5, 2, 1), ((7,), 0, 9, 12, 1), ((3, 6), -1, 1, -1, 2),
    ((3, 6), 0, None, -1, 1), ((0, 4), 1, 1, 3, 1), ((3, 6), -2, -2, None, 5)])
def test_slice_copy(dtype, shape, dim, start, end, step):
    x = rand(shape, dtype)
    check("aten::slice_copy.Tensor_out", [x, dim, start, end, step],
          A.slice_copy.Tensor(to_torch(x), dim, start, end, step))


@pytest.mark.parametrize("dtype", [np.float16, np.int32])
@pytest.mark.parametrize("shape,dim,index", [((4,), 0, 1), ((4,), 0, -1), ((2, 3, 4), 1, 2),
                                             ((2, 3, 4), -1, -4), ((3, 0), 0, 2)])
def test_select_copy(dtype, shape, dim, index):
    x = rand(shape, dtype)
    check("aten::select_copy.int_out", [x, dim, index], A.select_copy.int(to_torch(x), dim, index))


@pytest.mark.parametrize("shape,dim,start,length", [((5,), 0, 1, 3), ((5,), 0, -2, 2), ((5,), 0, 5, 0),
                                                    ((3, 6), -1, 2, 4), ((3, 6), 0, 0, 0)])
def test_narrow_copy(shape, dim, start, length):
    x = rand(shape, np.float64)
    check("aten::narrow_copy.out", [x, dim, start, length],
          A.narrow_copy(to_torch(x), dim, start, length))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("shape,offset,d1,d2", [((3, 4), 0, 0, 1), ((3, 4), -1, 0, 1), ((3, 4), 2, 0, 1),
                                                ((3, 4), 5, 0, 1), ((2, 3, 4), 1, -1, 0),
                                                ((2, 3, 4), -1, 2, 1), ((0, 3), 0, 0, 1)])
def test_diagonal_copy(dtype, shape, offset, d1, d2):
    x = rand(shape, dtype)
    check("aten::diagonal_copy.out", [x, offset, d1, d2],
          A.diagonal_copy(to_torch(x), offset, d1, d2))


@pytest.mark.parametrize("shape,size,stride,off", [((6,), [2, 2], [1, 2], 1), ((3, 4), [2, 3], [4, 1], None),
                                                   ((3, 4), [3, 3], [1, 3], 2), ((3, 4), [0, 2], [1, 1], 0),
                                                   ((4,), [], [], 3), ((2, 3), [3, 2], [0, 1], 4)])
def test_as_strided_copy(shape, size, stride, off):
    x = rand(shape, np.int32)
    check("aten::as_strided_copy.out", [x, size, stride, off],
          A.as_strided_copy(to_torch(x), size, stride, off))


def test_as_strided_copy_reads_storage_order():
    # Strides index storage, so a channels-last input is read in its memory order.
    x = rand((2, 3, 2, 2), np.float32)
    st = from_numpy_dtype(np.float32)
    t = ETensor.empty(st, x.shape, dim_order=[0, 2, 3, 1])
    t.write(x)
    tx = to_torch(x).contiguous(memory_format=torch.channels_last)
    want = A.as_strided_copy(tx, [4, 5], [5, 1], 2)
    check("aten::as_strided_copy.out", [t, [4, 5], [5, 1], 2], want)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
@pytest.mark.parametrize("shape,dim,size,step", [((5,), 0, 2, 2), ((3, 7), -1, 3, 1), ((4, 5), 0, 4, 3),
                                                 ((5,), 0, 0, 2), ((), 0, 1, 1), ((2, 0, 3), 2, 2, 1)])
def test_unfold_copy(dtype, shape, dim, size, step):
    x = rand(shape, dtype)
    check("aten::unfold_copy.out", [x, dim, size, step], A.unfold_copy(to_torch(x), dim, size, step))


# ---- joins and splits ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes,dim", [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 0)], -1),
                                        ([(0,), (2, 3), (0,)], 1), ([(0,), (0,)], 0), ([(3,)], 0),
                                        ([(2, 0, 2), (2, 3, 2)], 1)])
def test_cat(dtype, shapes, dim):
    xs = [rand(s, dtype, seed=i) for i, s in enumerate(shapes)]
    check("aten::cat.out", [xs, dim], A.cat([to_torch(x) for x in xs], dim))


@pytest.mark.parametrize("dtypes,out_dtype", [((np.int32, np.float32), np.float32),
                                              ((np.int64, np.bool_), np.int64),
                                              ((np.float16, BF16), np.float32),
                                              ((np.int8, np.uint8), np.float64)])
def test_cat_mixed_dtypes(dtypes, out_dtype):
    xs = [rand((2, 3), dt, seed=i) for i, dt in enumerate(dtypes)]
    want = torch.empty(0, dtype=to_torch(np.zeros(1, out_dtype)).dtype)
    A.cat.out([to_torch(x) for x in xs], 1, out=want)
    check("aten::cat.out", [xs, 1], want)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int64, np.bool_])
@pytest.mark.parametrize("shape,n,dim", [((2, 3), 2, 0), ((2, 3), 3, -1), ((2, 3), 2, 1), ((), 4, 0),
                                         ((0, 2), 2, 1), ((4,), 1, -2)])
def test_stack(dtype, shape, n, dim):
    xs = [rand(shape, dtype, seed=i) for i in range(n)]
    check("aten::stack.out", [xs, dim], A.stack([to_torch(x) for x in xs], dim))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("shape,split,dim", [((5, 2), 2, 0), ((4, 6), 3, -1), ((0, 2), 0, 0),
                                             ((5, 2), 7, 0), ((3, 4), 1, 0)])
def test_split_copy(dtype, shape, split, dim):
    x = rand(shape, dtype)
    check_list("aten::split_copy.Tensor_out", [x, split, dim],
               A.split_copy.Tensor(to_torch(x), split, dim))


@pytest.mark.parametrize("shape,sizes,dim", [((5, 2), [2, 3], 0), ((5, 2), [0, 5], 0),
                                             ((3, 4), [1, 1, 2], -1), ((3, 0), [2, 1], 0)])
def test_split_with_sizes_copy(shape, sizes, dim):
    x = rand(shape, np.float16)
    check_list("aten::split_with_sizes_copy.out", [x, sizes, dim],
               A.split_with_sizes_copy(to_torch(x), sizes, dim))


@pytest.mark.parametrize("shape,dim", [((3, 2), 0), ((3, 2), -1), ((2, 0), 0), ((4,), 0)])
def test_unbind_copy(shape, dim):
    x = rand(shape, np.int64)
    check_list("aten::unbind_copy.int_out", [x, dim], A.unbind_copy.int(to_torch(x), dim))


# ---- errors -------------------------------------------------------------------------

def test_static_out_wrong_shape_raises():
    x = rand((2, 3), np.float32)
    with pytest.raises(ExecuTorchError):
        call("aten::permute_copy.out", x, [1, 0], static_out((2, 3), np.float32))
    with pytest.raises(ExecuTorchError):
        call("aten::cat.out", [x, x], 0, static_out((4, 4), np.float32))
    with pytest.raises(ExecuTorchError):
        call("aten::split_copy.Tensor_out", x, 1, 0,
             [static_out((1, 3), np.float32), static_out((2, 3), np.float32)])


def test_bound_out_over_capacity_raises():
    with pytest.raises(ExecuTorchError):
        call("aten::expand_copy.out", rand((1,)), [5], False, bound_out((4,), np.float32))


@pytest.mark.parametrize("name,args", [
    ("aten::permute_copy.out", [rand((2, 3)), [0, 0]]),
    ("aten::permute_copy.out", [rand((2, 3)), [0]]),
    ("aten::transpose_copy.int_out", [rand((2, 3)), 0, 2]),
    ("aten::view_copy.out", [rand((2, 3)), [4, -1]]),
    ("aten::view_copy.out", [rand((2, 3)), [-1, -1]]),
    ("aten::expand_copy.out", [rand((2, 3)), [3, 3], False]),
    ("aten::expand_copy.out", [rand((2, 3)), [3], False]),
    ("aten::unsqueeze_copy.out", [rand((2, 3)), 3]),
    ("aten::select_copy.int_out", [rand((2, 3)), 1, 3]),
    ("aten::slice_copy.Tensor_out", [rand((2, 3)), 0, None, None, 0]),
    ("aten::narrow_copy.out", [rand((5,)), 0, 3, 3]),
    ("aten::diagonal_copy.out", [rand((2, 3)), 0, 1, -1]),
    ("aten::as_strided_copy.out", [rand((2, 3)), [2, 3], [3, 2], 0]),
    ("aten::unfold_copy.out", [rand((4,)), 0, 5, 1]),
    ("aten::view_as_real_copy.out", [rand((2,))]),
    ("aten::cat.out", [[rand((2, 3)), rand((2, 4))], 0]),
    ("aten::cat.out", [[rand((2, 3)), rand((2,))], 0]),
    ("aten::stack.out", [[rand((2, 3)), rand((3, 2))], 0]),
])
def test_bad_arguments_raise(name, args):
    with pytest.raises(ExecuTorchError) as e:
        call(name, *args, bound_out((8, 8, 8), np.float32))
    assert e.value.code == ErrorCode.InvalidArgument


def test_cat_float_into_int_out_raises():
    with pytest.raises(ExecuTorchError) as e:
        call("aten::cat.out", [rand((2,)), rand((2,))], 0, static_out((4,), np.int32))
    assert e.value.code == ErrorCode.InvalidArgument


@pytest.mark.parametrize("name,args,n", [
    ("aten::split_copy.Tensor_out", [rand((5, 2)), 2, 0], 2),
    ("aten::split_with_sizes_copy.out", [rand((5, 2)), [2, 2], 0], 2),
    ("aten::unbind_copy.int_out", [rand((3, 2)), 0], 2),
])
def test_bad_list_arguments_raise(name, args, n):
    with pytest.raises(ExecuTorchError) as e:
        call(name, *args, [bound_out((8, 8), np.float32) for _ in range(n)])
    assert e.value.code == ErrorCode.InvalidArgument
