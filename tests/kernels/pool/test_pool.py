import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 1e-3, torch.bfloat16: 1e-2}


def _input(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


# (shape, kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [
    ((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),
    ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], [1, 1], False),    # ResNet stem pool
    ((1, 2, 9, 7), [3, 2], [2, 3], [1, 1], [1, 1], True),     # ceil_mode
    ((2, 10, 11), [3, 3], [], [1, 0], [2, 2], False),         # unbatched, dilated, default stride
    ((1, 1, 6, 6), [2], [1], [0], [1], True),                  # one-element lists
    ((0, 2, 5, 5), [2, 2], [2, 2], [0, 0], [1, 1], False),     # empty batch
]


@pytest.mark.parametrize("case", MAX_CASES)
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.uint8])
def test_max_pool2d_with_indices(case, dtype):
    shape, k, s, p, d, ceil = case
    if dtype == torch.uint8:
        x = torch.randint(0, 255, shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    else:
        x = _input(shape, dtype)
    want, want_idx = torch.ops.aten.max_pool2d_with_indices(x, k, s, p, d, ceil)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    idx = static_out(tuple(want.shape), np.int64)
    call("aten::max_pool2d_with_indices.out", to_np(x), k, s, p, d, ceil, out, idx)
    assert_close(out.numpy(), to_np(want), rtol=0, atol=0)
    if dtype.is_floating_point:  # integer ties may pick any of the equal maxima
        assert_close(idx.numpy(), to_np(want_idx))
    else:
        flat = to_np(x).reshape(x.shape[:-2] + (x.shape[-2] * x.shape[-1],))
        n_out = want.shape[-2] * want.shape[-1]
        picked = np.take_along_axis(flat, idx.numpy().reshape(flat.shape[:-1] + (n_out,)), -1)
        assert_close(picked.reshape(want.shape), to_np(want))


def test_max_pool2d_nan_propagates():
    x = torch.randn(1, 1, 4, 4)
    x[0, 0, 1, 1] = float("nan")
    x[0, 0, 0, 1] = float("nan")
    want, want_idx = torch.ops.aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
    out, idx = static_out((1, 1, 2, 2), np.float32), static_out((1, 1, 2, 2), np.int64)
    call("aten::max_pool2d_with_indices.out", to_np(x), [2, 2], [2, 2], [0, 0], [1, 1], False,
         out, idx)
    assert_close(out.numpy(), to_np(want))
    assert_close(idx.numpy(), to_np(want_idx))


def test_max_pool2d_bad_padding_raises():
    with pytest.raises(ExecuTorchError, match="padding"):
        call("aten::max_pool2d_with_indices.out", np.zeros((1, 1, 4, 4), np.float32), [2, 2],
             [2, 2], [2, 2], [1, 1], False, static_out((1, 1, 4, 4), np.float32),
             static_out((1, 1, 4, 4), np.int64))


@pytest.mark.parametrize("case", MAX_CASES[:5])
def test_max_pool2d_backward(case):
    shape, k, s, p, d, ceil = case
    x = _input(shape, torch.float64)
    y, idx = torch.ops.aten.max_pool2d_with_indices(x, k, s, p, d, ceil)
    go = torch.randn(y.shape, dtype=torch.float64)
    want = torch.ops.aten.max_pool2d_with_indices_backward(go, x, k, s, p, d, ceil, idx)
    out = static_out(tuple(want.shape), np.float64)
    call("aten::max_pool2d_with_indices_backward.grad_input", to_np(go), to_np(x), k, s, p, d,
         ceil, to_np(idx), out)
    assert_close(out.numpy(), to_np(want), rtol=1e-12, atol=1e-12)


# (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [
    ((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], False, True, None),
    ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], False, True, None),
    ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], False, False, None),
    ((1, 2, 10, 7), [3, 2], [2, 2], [1, 1], True, True, None),
    ((1, 2, 10, 7), [3, 2], [2, 2], [1, 1], True, False, None),
    ((2, 6, 6), [3, 3], [], [1, 1], True, True, 5),            # unbatched, divisor_override
    ((1, 1, 5, 5), [2], [1], [1], False, False, None),
]


@pytest.mark.parametrize("case", AVG_CASES)
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_avg_pool2d(case, dtype):
    shape, k, s, p, ceil, cip, div = case
    x = _input(shape, dtype)
    want = torch.ops.aten.avg_pool2d(x, k, s, p, ceil, cip, div)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::avg_pool2d.out", to_np(x), k, s, p, ceil, cip, div, out)
    tol = TOL.get(dtype, 0)
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape,osize", [
    ((2, 3, 7, 7), [1, 1]), ((1, 4, 8, 6), [4, 3]), ((1, 2, 7, 9), [3, 4]),
    ((3, 10, 5), [4, 7]), ((1, 2, 3, 3), [6, 5]),
])
@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_avg_pool2d(shape, osize, dtype):
    x = _input(shape, dtype)
    want = torch.ops.aten._adaptive_avg_pool2d(x, osize)
    out = bound_out(tuple(want.shape), to_np(want).dtype)
    call("aten::_adaptive_avg_pool2d.out", to_np(x), osize, out)
    tol = TOL[dtype]
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol)
