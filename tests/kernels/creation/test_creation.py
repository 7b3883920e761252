"""Creation kernels against torch.ops.aten (random ops: shape, dtype and statistics)."""
import ml_dtypes
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ETensor, ExecuTorchError, from_numpy_dtype
from pyruntime.kernels.creation import reference as creation
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

aten = torch.ops.aten

TORCH_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
                torch.int8, torch.uint8, torch.bool]


def np_dtype(dt):
    return to_np(torch.zeros((), dtype=dt)).dtype


def et(a):
    if isinstance(a, torch.Tensor):
        a = to_np(a)
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape)
    t.write(a)
    return t


def run_out(name, args, want, rtol=0.0):
    """Call ``name`` into a DYNAMIC_BOUND out of ``want``'s rank and compare."""
    w = to_np(want)
    out = bound_out(tuple(s + 3 for s in w.shape), w.dtype)
    call(name, *args, out)
    assert_close(out.numpy(), w, rtol=rtol, atol=rtol)


ARANGE = [(0, 5, 1), (0, 10, 3), (2, -7, -2), (0.5, 5.5, 1.5), (0, 1, 0.1), (-1.25, 3, 0.25), (3, 3, 1),
          (0, 5.5, 1.5), (10, 0, -0.7)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                                   torch.int64, torch.int8])
@pytest.mark.parametrize("start,end,step", ARANGE)
def test_arange_start(start, end, step, dtype):
    if not dtype.is_floating_point and int(step) == 0:
        return  # ATen rejects a step that truncates to zero
    if dtype == torch.int8 and max(abs(start), abs(end)) > 100:
        return
    want = aten.arange.start_out(start, end, step, out=torch.empty(0, dtype=dtype))
    run_out("aten::arange.start_out", [start, end, step], want, rtol=1e-2 if dtype.itemsize == 2 else 1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.float16])
@pytest.mark.parametrize("end", [0, 1, 7, 4.5])
def test_arange(end, dtype):
    want = aten.arange.out(end, out=torch.empty(0, dtype=dtype))
    run_out("aten::arange.out", [end], want)


def test_arange_errors():
    with pytest.raises(ExecuTorchError, match="step"):
        call("aten::arange.start_out", 0, 5, 0, bound_out((5,), np.float32))
    with pytest.raises(ExecuTorchError, match="inconsistent"):
        call("aten::arange.start_out", 0, 5, -1, bound_out((5,), np.float32))
    with pytest.raises(ExecuTorchError, match="static"):  # a static out of the wrong length
        call("aten::arange.out", 4, static_out((5,), np.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.uint8])
@pytest.mark.parametrize("start,end,steps", [(0, 1, 7), (-3, 10, 7), (0, 10, 5), (2, 2, 1), (5, -5, 11),
                                             (0, 1, 0), (1.5, 2.25, 4)])
def test_linspace(start, end, steps, dtype):
    want = aten.linspace.out(start, end, steps, out=torch.empty(0, dtype=dtype))
    r = {torch.float16: 1e-3, torch.bfloat16: 1e-2}.get(dtype, 1e-6)
    run_out("aten::linspace.out", [start, end, steps], want, rtol=r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("start,end,steps,base", [(0, 3, 4, 10.0), (-2, 2, 9, 2.0), (1, 0, 3, 3.5)])
def test_logspace(start, end, steps, base, dtype):
    want = aten.logspace.out(start, end, steps, base, out=torch.empty(0, dtype=dtype))
    run_out("aten::logspace.out", [start, end, steps, base], want, rtol=1e-6)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("size", [[2, 3], [4], [], [0, 5]])
def test_full_zeros_ones(size, dtype):
    fill = True if dtype == torch.bool else (-2.75 if dtype.is_floating_point else 7)
    w = aten.full.default(size, fill, dtype=dtype)
    out = static_out(tuple(size), np_dtype(dtype))
    call("aten::full.out", size, fill, out)
    assert_close(out.numpy(), to_np(w))
    for name, fn in [("zeros", aten.zeros.default), ("ones", aten.ones.default)]:
        out = static_out(tuple(size), np_dtype(dtype))
        call(f"aten::{name}.out", size, out)
        assert_close(out.numpy(), to_np(fn(size, dtype=dtype)))


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (5,), (), (0, 2)])
def test_full_like(shape, dtype):
    x = torch.zeros(shape, dtype=torch.float32)
    fill = False if dtype == torch.bool else (3.5 if dtype.is_floating_point else -3)
    w = aten.full_like.default(x, fill, dtype=dtype)
    out = static_out(shape, np_dtype(dtype))
    call("aten::full_like.out", et(x), fill, None, out)
    assert_close(out.numpy(), to_np(w))


def test_full_int_out_truncates_float_fill():
    out = static_out((2,), np.int64)
    call("aten::full.out", [2], 2.7, out)
    assert out.numpy().tolist() == to_np(aten.full.default([2], 2.7, dtype=torch.int64)).tolist()


def test_full_negative_size():
    with pytest.raises(ExecuTorchError, match="size"):
        call("aten::zeros.out", [-1], bound_out((2,), np.float32))


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("s", [3, -1.5, True, 0])
def test_scalar_tensor(s, dtype):
    if dtype == torch.uint8 and isinstance(s, float) and s < 0:
        return  # negative float to uint8 is undefined behaviour in C++
    w = aten.scalar_tensor.default(s, dtype=dtype)
    out = static_out((), np_dtype(dtype))
    call("aten::scalar_tensor.out", s, out)
    assert_close(out.numpy(), to_np(w))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_rand_randn(dtype):
    creation.seed(1234)
    out = static_out((200, 100), dtype)
    call("aten::rand.out", [200, 100], out)
    u = out.numpy().astype(np.float64)
    assert out.numpy().dtype == np.dtype(dtype) and u.shape == (200, 100)
    assert u.min() >= 0 and u.max() <= 1
    assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 1 / 12) < 0.01
    call("aten::randn.out", [200, 100], out)
    n = out.numpy().astype(np.float64)
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    empty = static_out((0, 3), dtype)
    call("aten::randn.out", [0, 3], empty)
    assert empty.shape == (0, 3)


def test_seed_reproducible():
    a, b = static_out((8,), np.float32), static_out((8,), np.float32)
    creation.seed(7)
    call("aten::randn.out", [8], a)
    creation.seed(7)
    call("aten::randn.out", [8], b)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("p,train", [(0.5, False), (0.0, True), (0.3, None), (0.25, True), (1.0, True)])
def test_native_dropout(p, train, dtype):
    creation.seed(0)
    x = torch.randn(100, 50, dtype=torch.float64).to(dtype)
    out0, out1 = static_out((100, 50), np_dtype(dtype)), static_out((100, 50), np.bool_)
    call("aten::native_dropout.out", et(x), p, train, out0, out1)
    y, mask = out0.numpy().astype(np.float64), out1.numpy()
    xn = to_np(x).astype(np.float64)
    if train is False or p == 0.0:
        want_y, want_m = aten.native_dropout.default(x, p, train)
        assert_close(out0.numpy(), to_np(want_y), rtol=0, atol=0)
        assert_close(mask, to_np(want_m))
        return
    keep = mask.mean()
    assert abs(keep - (1 - p)) < 0.03
    scale = 0.0 if p == 1 else 1 / (1 - p)
    r = {torch.float16: 2e-3, torch.bfloat16: 1e-2}.get(dtype, 1e-6)
    np.testing.assert_allclose(y, np.where(mask, xn * scale, 0.0), rtol=r, atol=r)


def test_native_dropout_empty_and_bad_p():
    out0, out1 = static_out((0, 2), np.float32), static_out((0, 2), np.bool_)
    call("aten::native_dropout.out", et(np.zeros((0, 2), np.float32)), 0.5, True, out0, out1)
    assert out0.shape == (0, 2) and out1.shape == (0, 2)
    with pytest.raises(ExecuTorchError, match="probability"):
        call("aten::native_dropout.out", et(np.zeros(2, np.float32)), 1.5, True,
             static_out((2,), np.float32), static_out((2,), np.bool_))
