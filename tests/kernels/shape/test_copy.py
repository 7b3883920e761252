"""Copy kernels (kernels/shape/reference_copy.py) against torch.ops.aten."""
import ml_dtypes
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import Dynamism, ErrorCode, ETensor, ExecuTorchError, from_numpy_dtype
from tests.kernels import helpers
from tests.kernels.helpers import assert_close, bound_out, static_out, to_np

A = torch.ops.aten
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.float32, np.float64, np.float16, BF16, np.int32, np.int64, np.int8, np.uint8, np.bool_]
CL = [0, 2, 3, 1]  # channels-last dim order


def rand(shape, dtype=np.float32, seed=0, signed=False):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.asarray(rng.random(shape) > 0.5)
    if dt.kind in "iu":
        lo = -50 if signed and dt.kind == "i" else 0
        return np.asarray(rng.integers(lo, 100, shape)).astype(dt)
    return np.asarray(rng.standard_normal(shape) * 4).astype(np.float32).astype(dt)


# np.ascontiguousarray turns rank-0 arrays into shape (1,), which both helpers.to_torch and
# ETensor.from_array use; these two keep rank-0 inputs rank-0.
def to_torch(x):
    return helpers.to_torch(x).reshape(np.shape(x))


def tensor(x, dim_order=None):
    """An ETensor holding ``x`` (any rank, any dim order)."""
    t = ETensor.empty(from_numpy_dtype(x.dtype), x.shape, dim_order=dim_order)
    t.write(x)
    return t


def _et(x):
    return tensor(x) if isinstance(x, np.ndarray) and x.ndim == 0 else x


def call(name, *args):
    return helpers.call(name, *[_et(a) for a in args])


def torch_dtype(dt):
    return to_torch(np.zeros(1, dt)).dtype


def check(name, args, want, rtol=1e-5, atol=1e-5):
    """Run kernel ``name`` with a STATIC out and a DYNAMIC_BOUND out; compare to torch."""
    want = to_np(want)
    for out in (static_out(want.shape, want.dtype),
                bound_out(tuple(s + 2 for s in want.shape), want.dtype)):
        assert call(name, *args, out) is None
        assert_close(out.numpy(), want, rtol, atol)


def storage_bytes(t: ETensor) -> bytes:
    return t.storage[:t.nbytes].tobytes()


# ---- copies and conversions ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4), (2, 1, 3)])
@pytest.mark.parametrize("memory_format", [None, 0, 1])
def test_clone(dtype, shape, memory_format):
    x = rand(shape, dtype)
    check("aten::clone.out", [x, memory_format], A.clone(to_torch(x)))


@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16, BF16, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("dst", [np.float32, np.float16, BF16, np.int32, np.int64, np.int8, np.bool_])
def test_to_copy_dtypes(src, dst):
    # Floats into ints truncate toward zero; anything into bool is "!= 0".
    x = rand((3, 5), src, signed=True)
    want = A._to_copy(to_torch(x), dtype=torch_dtype(dst))
    check("aten::_to_copy.out", [x, False, None], want)


@pytest.mark.parametrize("shape", [(), (0,), (4, 1, 2)])
def test_to_copy_shapes(shape):
    x = rand(shape, np.float64, signed=True)
    check("aten::_to_copy.out", [x, False, 0], A._to_copy(to_torch(x), dtype=torch.float32))


def test_to_copy_truncates_toward_zero():
    x = np.array([-2.9, -1.5, -0.5, 0.5, 1.5, 2.9, 0.0], np.float32)
    out = static_out(x.shape, np.int32)
    call("aten::_to_copy.out", x, False, None, out)
    assert out.numpy().tolist() == [-2, -1, 0, 0, 1, 2, 0]
    assert out.numpy().tolist() == to_torch(x).to(torch.int32).tolist()


@pytest.mark.parametrize("name", ["et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"])
@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int64, np.bool_])
def test_device_copies(name, dtype):
    x = rand((3, 4), dtype)
    check(name, [x], A.clone(to_torch(x)))


@pytest.mark.parametrize("self_shape,src_shape", [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 3), (1, 3)),
                                                  ((2, 3), ()), ((4, 3, 2), (3, 1)), ((0, 3), (3,)),
                                                  ((), ())])
@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.int32, np.float32),
                                    (BF16, np.float64), (np.bool_, np.int64), (np.float16, np.uint8)])
def test_copy_out(self_shape, src_shape, dtypes):
    x, src = rand(self_shape, dtypes[0]), rand(src_shape, dtypes[1], seed=1, signed=True)
    check("aten::copy.out", [x, src, False], A.copy(to_torch(x), to_torch(src)))


@pytest.mark.parametrize("self_shape,src_shape", [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 3), ()),
                                                  ((0, 3), (1, 3)), ((), ())])
@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.int64, np.float32),
                                    (BF16, np.float32), (np.bool_, np.int32)])
def test_copy_inplace(self_shape, src_shape, dtypes):
    x, src = rand(self_shape, dtypes[0]), rand(src_shape, dtypes[1], seed=1, signed=True)
    self_t = tensor(x)
    storage = self_t.storage
    want = to_torch(x).copy_(to_torch(src))
    assert call("aten::copy_", self_t, src, False) is None
    assert self_t.storage is storage and self_t.shape == tuple(self_shape)
    assert_close(self_t.numpy(), to_np(want))


def test_copy_inplace_channels_last_self():
    x, src = rand((2, 3, 2, 2)), rand((2, 3, 2, 2), seed=1)
    self_t = tensor(x, CL)
    call("aten::copy_", self_t, src, False)
    assert_close(self_t.numpy(), src)
    want = to_torch(src).contiguous(memory_format=torch.channels_last)
    assert storage_bytes(self_t) == to_np(want.permute(0, 2, 3, 1)).tobytes()


@pytest.mark.parametrize("name,args", [("aten::copy.out", [False, bound_out((8, 8), np.float32)]),
                                       ("aten::copy_", [False])])
def test_copy_bad_broadcast_raises(name, args):
    with pytest.raises(ExecuTorchError) as e:
        call(name, tensor(rand((2, 3))), rand((2, 2)), *args)
    assert e.value.code == ErrorCode.InvalidArgument


# ---- dim order ----------------------------------------------------------------------

@pytest.mark.parametrize("src_dtype,dst_dtype", [(np.float32, np.float32), (np.float32, np.float16),
                                                 (BF16, np.float32), (np.int64, np.int64)])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 8, 3, 3), (2, 0, 2, 2)])
def test_to_dim_order_copy_channels_last(src_dtype, dst_dtype, shape):
    x = rand(shape, src_dtype)
    out = ETensor.empty(from_numpy_dtype(dst_dtype), shape, dim_order=CL)
    assert call("dim_order_ops::_to_dim_order_copy.out", x, False, CL, out) is None
    tx = A._to_copy(to_torch(x), dtype=torch_dtype(dst_dtype))
    assert_close(out.numpy(), to_np(tx))
    # Storage holds torch's channels_last memory: NHWC order.
    cl = tx.contiguous(memory_format=torch.channels_last)
    assert storage_bytes(out) == to_np(cl.permute(0, 2, 3, 1)).tobytes()


@pytest.mark.parametrize("name", ["dim_order_ops::_to_dim_order_copy.out",
                                  "dim_order_ops::_clone_dim_order.out"])
def test_dim_order_copy_back_to_contiguous(name):
    x = rand((2, 3, 4, 5), np.float32)
    src = tensor(x, CL)
    out = static_out(x.shape, np.float32)
    call(name, src, False, [0, 1, 2, 3], out)
    assert_close(out.numpy(), x)
    assert storage_bytes(out) == x.tobytes()


@pytest.mark.parametrize("name", ["dim_order_ops::_to_dim_order_copy.out",
                                  "dim_order_ops::_clone_dim_order.out"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
@pytest.mark.parametrize("shape,dim_order", [((2, 3), None), ((2, 3), [0, 1]), ((), None), ((), []),
                                             ((0, 3), [0, 1])])
def test_dim_order_copy_contiguous(name, dtype, shape, dim_order):
    x = rand(shape, dtype)
    check(name, [x, False, dim_order], A.clone(to_torch(x)))


def test_clone_dim_order_channels_last():
    x = rand((2, 3, 4, 5), BF16)
    out = ETensor.empty(from_numpy_dtype(BF16), x.shape, dim_order=CL)
    call("dim_order_ops::_clone_dim_order.out", x, False, CL, out)
    assert_close(out.numpy(), x)
    assert storage_bytes(out) == np.ascontiguousarray(x.transpose(0, 2, 3, 1)).tobytes()


@pytest.mark.parametrize("dim_order", [[0, 2, 3, 1], [0, 1, 2], [0, 0, 1, 2]])
def test_to_dim_order_copy_mismatched_dim_order_raises(dim_order):
    out = static_out((2, 3, 4, 5), np.float32)  # contiguous out
    with pytest.raises(ExecuTorchError) as e:
        call("dim_order_ops::_to_dim_order_copy.out", rand((2, 3, 4, 5)), False, dim_order, out)
    assert e.value.code == ErrorCode.InvalidArgument


@pytest.mark.parametrize("name,extra", [("aten::empty.out", None),
                                        ("dim_order_ops::_empty_dim_order.out", None),
                                        ("dim_order_ops::_empty_dim_order.out", [0, 1, 2])])
@pytest.mark.parametrize("size", [[2, 3, 4], [1, 0, 5], [4, 4, 4]])
def test_empty(name, extra, size):
    out = bound_out((4, 4, 4), np.float32)
    assert call(name, size, extra, out) is None
    assert out.shape == tuple(size)
    static = static_out(size, np.int64)
    call(name, size, extra, static)
    assert static.shape == tuple(size)
    assert tuple(A.empty(size).shape) == out.shape


def test_empty_dim_order_channels_last():
    out = ETensor.empty(from_numpy_dtype(np.float32), (2, 4, 4, 4), dim_order=CL,
                        dynamism=Dynamism.DYNAMIC_BOUND)
    call("dim_order_ops::_empty_dim_order.out", [1, 3, 4, 4], CL, out)
    assert out.shape == (1, 3, 4, 4) and out.dim_order == tuple(CL)
    with pytest.raises(ExecuTorchError):
        call("dim_order_ops::_empty_dim_order.out", [1, 3, 4, 4], [0, 1, 2, 3], out)


@pytest.mark.parametrize("name,args", [("aten::clone.out", [2]), ("aten::_to_copy.out", [False, 2]),
                                       ("aten::empty.out", None)])
def test_bad_memory_format_raises(name, args):
    first = [[2, 3], 3] if args is None else [rand((2, 3))] + args
    with pytest.raises(ExecuTorchError) as e:
        call(name, *first, static_out((2, 3), np.float32))
    assert e.value.code == ErrorCode.InvalidArgument


# ---- pads ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,value", [(np.float32, 0), (np.float32, -1.5), (np.float64, 2.0),
                                         (np.float16, 3.25), (BF16, 1.0), (np.int32, 7),
                                         (np.int64, 2.7), (np.uint8, -1), (np.bool_, True)])
@pytest.mark.parametrize("shape,pad", [((2, 3), [1, 2]), ((2, 3), [1, 0, 0, 2]), ((2, 3, 4), [2, 1, 1, 1, 1, 0]),
                                       ((5,), [-1, 2]), ((3, 6), [-2, -1, 1, -1]), ((0, 3), [1, 1]),
                                       ((2, 3), []), ((4,), [-4, 1])])
def test_constant_pad_nd(dtype, value, shape, pad):
    x = rand(shape, dtype)
    check("aten::constant_pad_nd.out", [x, pad, value], A.constant_pad_nd(to_torch(x), pad, value))


PAD_CASES = {
    1: [((2, 3, 5), [1, 2]), ((3, 5), [4, 0]), ((1, 2, 6), [-1, 2]), ((2, 4), [0, 0]), ((2, 2, 5), [2, -3])],
    2: [((1, 2, 4, 5), [1, 2, 3, 0]), ((2, 3, 4), [3, 3, 1, 1]), ((1, 1, 4, 4), [-1, 2, 2, -2])],
    3: [((1, 2, 3, 4, 5), [1, 2, 0, 3, 2, 1]), ((2, 3, 3, 4), [1, 1, 1, 1, 1, 1]),
        ((1, 1, 3, 3, 3), [-1, 1, 2, 0, 0, -1])],
}


@pytest.mark.parametrize("kind", ["reflection", "replication"])
@pytest.mark.parametrize("k,shape,padding", [(k, s, p) for k, cases in PAD_CASES.items() for s, p in cases])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_reflection_replication_pad(kind, k, shape, padding, dtype):
    x = rand(shape, dtype)
    ref = getattr(A, f"{kind}_pad{k}d")
    check(f"aten::{kind}_pad{k}d.out", [x, padding], ref(to_torch(x), padding))


@pytest.mark.parametrize("name,shape,padding", [
    ("aten::reflection_pad1d.out", (2, 3, 4), [4, 0]),   # reflection needs pad < size
    ("aten::reflection_pad2d.out", (2, 3, 4), [1, 1, 0, 3]),
    ("aten::reflection_pad1d.out", (4,), [1, 1]),        # rank too small
    ("aten::replication_pad2d.out", (2, 3, 4), [1, 1]),  # wrong padding length
    ("aten::replication_pad1d.out", (2, 3, 0), [1, 1]),  # nothing to replicate
    ("aten::constant_pad_nd.out", (2, 3), [1, 1, 1]),
    ("aten::constant_pad_nd.out", (2, 3), [-2, -2]),
])
def test_bad_padding_raises(name, shape, padding):
    args = [rand(shape), padding] + ([0] if "constant" in name else [])
    with pytest.raises(ExecuTorchError) as e:
        call(name, *args, bound_out((8, 8, 8), np.float32))
    assert e.value.code == ErrorCode.InvalidArgument


# ---- rearrangements -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int64, np.bool_])
@pytest.mark.parametrize("shape,dims", [((2, 3, 4), [0]), ((2, 3, 4), [-1, 0]), ((2, 3), []), ((), [0]),
                                        ((0, 3), [0, 1]), ((5,), [-1])])
def test_flip(dtype, shape, dims):
    x = rand(shape, dtype)
    check("aten::flip.out", [x, dims], A.flip(to_torch(x), dims))


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.bool_])
@pytest.mark.parametrize("shape,shifts,dims", [((2, 3), [1], []), ((2, 3), [-4], []), ((2, 3, 4), [1, -2], [0, -1]),
                                               ((5,), [7], [0]), ((0, 3), [1], [0]), ((), [3], []),
                                               ((3, 4), [2], [-1])])
def test_roll(dtype, shape, shifts, dims):
    x = rand(shape, dtype)
    check("aten::roll.out", [x, shifts, dims], A.roll(to_torch(x), shifts, dims))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_])
@pytest.mark.parametrize("shape,repeats", [((2, 3), [2, 1]), ((2, 3), [2, 1, 3]), ((), [2, 2]), ((), []),
                                           ((3,), [0]), ((0, 2), [2, 2]), ((2, 1, 2), [1, 3, 1])])
def test_repeat(dtype, shape, repeats):
    x = rand(shape, dtype)
    check("aten::repeat.out", [x, repeats], A.repeat(to_torch(x), repeats))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("repeats,output_size", [([1, 2, 0, 3], None), ([1, 2, 0, 3], 6), ([], None),
                                                 ([0, 0], None), ([4], 4)])
def test_repeat_interleave(dtype, repeats, output_size):
    r = np.array(repeats, dtype)
    want = A.repeat_interleave.Tensor(to_torch(r), output_size=output_size)
    check("aten::repeat_interleave.Tensor_out", [r, output_size], want)


@pytest.mark.parametrize("repeats,output_size", [([1, -1], None), ([1, 2], 4)])
def test_repeat_interleave_bad_raises(repeats, output_size):
    with pytest.raises(ExecuTorchError):
        call("aten::repeat_interleave.Tensor_out", np.array(repeats, np.int64), output_size,
             bound_out((8,), np.int64))


@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("shape,diagonal", [((3, 4), 0), ((4, 3), -1), ((3, 4), 2), ((2, 3, 3), 1),
                                            ((2, 3, 3), -5), ((0, 3), 0), ((3, 3), 10)])
def test_tril_triu(op, dtype, shape, diagonal):
    x = rand(shape, dtype)
    check(f"aten::{op}.out", [x, diagonal], getattr(A, op)(to_torch(x), diagonal))


@pytest.mark.parametrize("name,args", [("aten::tril.out", [rand((3,)), 0]),
                                       ("aten::triu.out", [rand(()), 0]),
                                       ("aten::flip.out", [rand((2, 3)), [0, -2]]),
                                       ("aten::flip.out", [rand((2, 3)), [2]]),
                                       ("aten::roll.out", [rand((2, 3)), [1, 2], []]),
                                       ("aten::roll.out", [rand((2, 3)), [1], [0, 1]]),
                                       ("aten::repeat.out", [rand((2, 3)), [2]]),
                                       ("aten::repeat.out", [rand((2, 3)), [2, -1]])])
def test_bad_arguments_raise(name, args):
    with pytest.raises(ExecuTorchError) as e:
        call(name, *args, bound_out((8, 8), np.float32))
    assert e.value.code == ErrorCode.InvalidArgument


# ---- static outs --------------------------------------------------------------------

@pytest.mark.parametrize("name,args", [("aten::clone.out", [None]), ("aten::_to_copy.out", [False, None]),
                                       ("aten::constant_pad_nd.out", [[1, 1], 0.0]),
                                       ("aten::repeat.out", [[2, 1]]),
                                       ("dim_order_ops::_to_dim_order_copy.out", [False, None])])
def test_static_out_wrong_shape_raises(name, args):
    with pytest.raises(ExecuTorchError):
        call(name, rand((2, 3)), *args, static_out((3, 2), np.float32))


def test_empty_static_out_wrong_shape_raises():
    with pytest.raises(ExecuTorchError):
        call("aten::empty.out", [2, 3], None, static_out((3, 2), np.float32))
