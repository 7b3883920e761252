import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ETensor, ExecuTorchError
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 2e-2, torch.bfloat16: 5e-2}


def _rand(shape, dtype, seed=0, positive=False):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(shape, generator=g) + 0.5 if positive else torch.randn(shape, generator=g)
    return t.to(dtype)


def _outs(want):
    return [static_out(tuple(t.shape), to_np(t).dtype) for t in want]


def _check(outs, want, dtype, only_first=False):
    tol = TOL[dtype]
    for o, t in list(zip(outs, want))[:1 if only_first else None]:
        assert_close(o.numpy(), to_np(t), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3), (2, 3, 6), (1, 2, 2, 3, 2), (0, 3, 2)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_no_training(shape, affine, dtype):
    C = shape[1]
    x = _rand(shape, dtype)
    w, b = (_rand(C, dtype, 1), _rand(C, dtype, 2)) if affine else (None, None)
    rm, rv = _rand(C, dtype, 3), _rand(C, dtype, 4, positive=True)
    want = torch.ops.aten._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5)
    outs = _outs(want)
    call("aten::_native_batch_norm_legit_no_training.out", to_np(x),
         None if w is None else to_np(w), None if b is None else to_np(b), to_np(rm), to_np(rv),
         0.1, 1e-5, *outs)
    _check(outs, want, dtype)
    assert outs[1].shape == (0,) and outs[2].shape == (0,)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_batch_norm_legit(training, dtype):
    x = _rand((3, 4, 5, 2), dtype)
    w, b = _rand(4, dtype, 1), _rand(4, dtype, 2)
    rm, rv = _rand(4, dtype, 3), _rand(4, dtype, 4, positive=True)
    rm_np, rv_np = to_np(rm).copy(), to_np(rv).copy()
    want = torch.ops.aten._native_batch_norm_legit(x, w, b, rm, rv, training, 0.1, 1e-5)
    outs = _outs(want)
    rm_t, rv_t = ETensor.from_array(rm_np), ETensor.from_array(rv_np)
    call("aten::_native_batch_norm_legit.out", to_np(x), to_np(w), to_np(b), rm_t, rv_t,
         training, 0.1, 1e-5, *outs)
    _check(outs, want, dtype)
    # torch updated rm/rv in place (training) or left them (inference): so must we.
    _check([rm_t, rv_t], [rm, rv], dtype)


@pytest.mark.parametrize("shape", [(3, 4, 5), (5, 2), (2, 3, 2, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_batch_norm_no_stats(shape, dtype):
    C = shape[1]
    x = _rand(shape, dtype)
    w, b = _rand(C, dtype, 1), _rand(C, dtype, 2)
    want = torch.ops.aten._native_batch_norm_legit(x, w, b, True, 0.1, 1e-5)
    outs = _outs(want)
    call("aten::_native_batch_norm_legit.no_stats_out", to_np(x), to_np(w), to_np(b), True, 0.1,
         1e-5, *outs)
    _check(outs, want, dtype)


def test_batch_norm_no_stats_inference_raises():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ExecuTorchError, match="training"):
        call("aten::_native_batch_norm_legit.no_stats_out", x, None, None, False, 0.1, 1e-5,
             static_out((2, 3), np.float32), static_out((3,), np.float32),
             static_out((3,), np.float32))


@pytest.mark.parametrize("shape,ns", [
    ((2, 3, 8), [8]), ((2, 3, 4, 5), [4, 5]), ((7,), [7]), ((2, 5), [5]), ((0, 4), [4]),
    ((2, 0), [0]),
])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm(shape, ns, affine, dtype):
    x = _rand(shape, dtype)
    w, b = (_rand(ns, dtype, 1), _rand(ns, dtype, 2)) if affine else (None, None)
    want = torch.ops.aten.native_layer_norm(x, ns, w, b, 1e-5)
    outs = _outs(want)
    call("aten::native_layer_norm.out", to_np(x), ns, None if w is None else to_np(w),
         None if b is None else to_np(b), 1e-5, *outs)
    _check(outs, want, dtype)


def test_layer_norm_dynamic_outs():
    x = _rand((3, 6), torch.float32)
    want = torch.ops.aten.native_layer_norm(x, [6], None, None, 1e-6)
    outs = [bound_out((8, 6), np.float32), bound_out((8, 1), np.float32),
            bound_out((8, 1), np.float32)]
    call("aten::native_layer_norm.out", to_np(x), [6], None, None, 1e-6, *outs)
    _check(outs, want, torch.float32)


def test_layer_norm_bad_shape_raises():
    with pytest.raises(ExecuTorchError, match="normalized_shape"):
        call("aten::native_layer_norm.out", np.zeros((2, 3), np.float32), [4], None, None, 1e-5,
             static_out((2, 3), np.float32), static_out((2, 1), np.float32),
             static_out((2, 1), np.float32))


@pytest.mark.parametrize("shape,group", [((2, 6, 4, 3), 3), ((2, 4, 5), 2), ((3, 4), 4),
                                         ((1, 8, 2, 2, 2), 1), ((2, 6, 3), 6)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_group_norm(shape, group, affine, dtype):
    N, C = shape[:2]
    hxw = int(np.prod(shape[2:]))
    x = _rand(shape, dtype)
    w, b = (_rand(C, dtype, 1), _rand(C, dtype, 2)) if affine else (None, None)
    want = torch.ops.aten.native_group_norm(x, w, b, N, C, hxw, group, 1e-5)
    outs = _outs(want)
    call("aten::native_group_norm.out", to_np(x), None if w is None else to_np(w),
         None if b is None else to_np(b), N, C, hxw, group, 1e-5, *outs)
    _check(outs, want, dtype)
