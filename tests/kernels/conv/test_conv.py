import time

import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np, to_torch

OP = "aten::convolution.out"
TOL = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-10, 1e-10),
       torch.float16: (1e-2, 1e-2), torch.bfloat16: (3e-2, 3e-2)}

# (input shape, weight shape, bias, stride, padding, dilation, groups)
DIRECT = [
    ((2, 3, 9, 10), (4, 3, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),
    ((1, 4, 11, 8), (6, 2, 3, 2), True, [2, 1], [1, 0], [1, 2], 2),          # grouped, mixed
    ((2, 6, 9, 9), (6, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 6),           # depthwise
    ((1, 4, 10, 10), (8, 1, 5, 5), False, [2, 2], [2, 2], [1, 1], 4),        # depthwise x2
    ((1, 3, 12, 12), (5, 3, 3, 3), True, [1], [2], [2], 1),                  # one-element lists
    ((2, 3, 15, 15), (4, 3, 7, 7), True, [2, 2], [3, 3], [1, 1], 1),         # stem-like
    ((1, 2, 5, 5), (3, 2, 1, 1), True, [1, 1], [0, 0], [1, 1], 1),           # 1x1
    ((1, 2, 12, 12), (4, 1, 9, 9), True, [1, 1], [4, 4], [1, 1], 2),         # big depthwise
    ((0, 3, 6, 6), (4, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], 1),           # empty batch
    ((2, 4, 17), (6, 2, 3), True, [2], [1], [1], 2),                         # conv1d grouped
    ((2, 3, 20), (5, 3, 4), False, [1], [0], [3], 1),                        # conv1d dilated
    ((2, 4, 16), (4, 1, 3), True, [1], [1], [1], 4),                         # conv1d depthwise
    ((1, 2, 5, 6, 7), (3, 2, 3, 2, 3), True, [1, 2, 1], [1, 0, 1], [1, 1, 2], 1),  # conv3d
]

# (input shape, weight shape, bias, stride, padding, dilation, output_padding, groups)
TRANSPOSED = [
    ((2, 4, 5, 6), (4, 3, 3, 3), True, [2, 2], [1, 1], [1, 1], [1, 1], 1),
    ((1, 4, 5, 5), (4, 2, 4, 4), True, [2, 2], [1, 1], [1, 1], [0, 0], 2),
    ((1, 3, 4, 4), (3, 2, 3, 2), False, [1, 3], [0, 1], [2, 1], [0, 2], 1),
    ((2, 6, 4, 4), (6, 1, 3, 3), True, [2, 2], [1, 1], [1, 1], [1, 1], 6),   # depthwise
    ((2, 4, 7), (4, 3, 5), True, [3], [2], [1], [1], 1),                    # 1-d
    ((1, 2, 3, 3, 3), (2, 2, 2, 2, 2), True, [2, 2, 2], [0, 0, 0], [1, 1, 1], [0, 0, 0], 1),
]


def _run(x, w, b, stride, padding, dilation, transposed, output_padding, groups, dtype):
    torch.manual_seed(0)
    xt = torch.randn(x).to(dtype)
    wt = torch.randn(w).to(dtype)
    bt = torch.randn(w[1] * groups if transposed else w[0]).to(dtype) if b else None
    want = torch.ops.aten.convolution(xt, wt, bt, stride, padding, dilation, transposed,
                                      output_padding, groups)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call(OP, to_np(xt), to_np(wt), None if bt is None else to_np(bt), stride, padding, dilation,
         transposed, output_padding, groups, out)
    rtol, atol = TOL[dtype]
    assert_close(out.numpy(), to_np(want), rtol=rtol, atol=atol * max(1.0, float(want.abs().max())
                                                                      if want.numel() else 1.0))


@pytest.mark.parametrize("case", DIRECT)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv_direct(case, dtype):
    x, w, b, s, p, d, g = case
    _run(x, w, b, s, p, d, False, [0] * (len(w) - 2), g, dtype)


@pytest.mark.parametrize("case", TRANSPOSED)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv_transposed(case, dtype):
    x, w, b, s, p, d, op, g = case
    _run(x, w, b, s, p, d, True, op, g, dtype)


@pytest.mark.parametrize("case", [DIRECT[1], DIRECT[2], DIRECT[9]])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_conv_half(case, dtype):
    x, w, b, s, p, d, g = case
    _run(x, w, b, s, p, d, False, [0] * (len(w) - 2), g, dtype)


def test_conv_dynamic_out_resizes():
    x = np.random.rand(1, 3, 8, 8).astype(np.float32)
    w = np.random.rand(2, 3, 3, 3).astype(np.float32)
    want = torch.ops.aten.convolution(to_torch(x), to_torch(w), None, [1, 1], [0, 0], [1, 1],
                                      False, [0, 0], 1)
    out = bound_out((1, 2, 8, 8), np.float32)
    call(OP, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, out)
    assert out.shape == (1, 2, 6, 6)
    assert_close(out.numpy(), to_np(want), rtol=1e-4, atol=1e-4)


def test_conv_int64_matches_float_reference():
    rng = np.random.default_rng(0)
    x = rng.integers(-5, 5, (1, 4, 6, 6)).astype(np.int64)
    for w_shape, groups in [((3, 4, 3, 3), 1), ((4, 1, 3, 3), 4)]:
        w = rng.integers(-3, 3, w_shape).astype(np.int64)
        want = torch.ops.aten.convolution(to_torch(x).double(), to_torch(w).double(), None,
                                          [1, 1], [1, 1], [1, 1], False, [0, 0], groups)
        out = static_out(tuple(want.shape), np.int64)
        call(OP, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], groups, out)
        assert_close(out.numpy(), to_np(want).astype(np.int64))


def test_conv_channels_last_input():
    from pyruntime.cython_ext import ETensor, ScalarType
    x = np.random.rand(2, 3, 7, 7).astype(np.float32)
    w = np.random.rand(4, 3, 3, 3).astype(np.float32)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    xt = ETensor(ScalarType.FLOAT, x.shape, dim_order=(0, 2, 3, 1),
                 storage=nhwc.reshape(-1).view(np.uint8))
    out = static_out((2, 4, 7, 7), np.float32)
    call(OP, xt, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, out)
    want = torch.nn.functional.conv2d(to_torch(x), to_torch(w), padding=1)
    assert_close(out.numpy(), to_np(want), rtol=1e-4, atol=1e-4)


def test_conv_unbatched_raises_like_aten():
    with pytest.raises(ExecuTorchError, match="input"):
        call(OP, np.zeros((3, 8, 8), np.float32), np.zeros((4, 3, 3, 3), np.float32), None,
             [1, 1], [1, 1], [1, 1], False, [0, 0], 1, static_out((4, 8, 8), np.float32))


def test_conv_bad_channels_raises():
    x = np.zeros((1, 3, 8, 8), np.float32)
    w = np.zeros((4, 2, 3, 3), np.float32)
    with pytest.raises(ExecuTorchError, match="weight"):
        call(OP, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
             static_out((1, 4, 6, 6), np.float32))


def test_conv_resnet_stage_is_fast():
    # A ResNet-18 stage-1 3x3 conv (64->64 at 56x56) must be BLAS speed, not a Python loop.
    x = np.random.rand(1, 64, 56, 56).astype(np.float32)
    w = np.random.rand(64, 64, 3, 3).astype(np.float32)
    out = static_out((1, 64, 56, 56), np.float32)
    t = time.perf_counter()
    call(OP, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, out)
    assert time.perf_counter() - t < 0.5
    want = torch.nn.functional.conv2d(to_torch(x), to_torch(w), padding=1)
    assert_close(out.numpy(), to_np(want), rtol=1e-4, atol=1e-3)


BACKWARD = [
    ((2, 4, 7, 6), (6, 2, 3, 3), [2, 1], [1, 1], [1, 2], False, [0, 0], 2),
    ((1, 3, 8, 8), (4, 3, 3, 3), [2, 2], [0, 0], [1, 1], False, [0, 0], 1),   # input not covered
    ((2, 4, 9), (4, 1, 3), [1], [1], [1], False, [0], 4),
    ((2, 4, 5, 5), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
    ((1, 4, 4, 5), (4, 1, 3, 2), [2, 1], [0, 1], [1, 2], True, [1, 0], 2),
]


@pytest.mark.parametrize("case", BACKWARD)
def test_convolution_backward(case):
    xs, ws, s, p, d, tr, op, g = case
    torch.manual_seed(1)
    x, w = torch.randn(xs, dtype=torch.float64), torch.randn(ws, dtype=torch.float64)
    y = torch.ops.aten.convolution(x, w, None, s, p, d, tr, op, g)
    go = torch.randn(y.shape, dtype=torch.float64)
    nb = ws[1] * g if tr else ws[0]
    want = torch.ops.aten.convolution_backward(go, x, w, [nb], s, p, d, tr, op, g,
                                               [True, True, True])
    outs = [static_out(tuple(t.shape), np.float64) for t in want]
    call("aten::convolution_backward.out", to_np(go), to_np(x), to_np(w), [nb], s, p, d, tr, op,
         g, [True, True, True], *outs)
    for o, t in zip(outs, want):
        assert_close(o.numpy(), to_np(t), rtol=1e-9, atol=1e-9)


# ---- ExecuTorch's accumulation order, bit for bit -------------------------------------

def _portable_conv2d(x, w, b, stride, padding, dilation, groups):
    """op_convolution.cpp's loop, element by element: a running sum from zero over (input
    channel, kernel row, kernel column) in the input's type, out-of-bounds taps skipped,
    then the bias."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow), x.dtype)
    for bi in range(n):
        for oc in range(o):
            c0 = (oc // og) * cg
            for y in range(oh):
                for xo in range(ow):
                    acc = x.dtype.type(0)
                    for ci in range(cg):
                        for ky in range(kh):
                            iy = y * stride[0] + ky * dilation[0] - padding[0]
                            if not 0 <= iy < h:
                                continue
                            for kx in range(kw):
                                ix = xo * stride[1] + kx * dilation[1] - padding[1]
                                if 0 <= ix < wd:
                                    acc = acc + x[bi, c0 + ci, iy, ix] * w[oc, ci, ky, kx]
                    if b is not None:
                        acc = acc + b[oc]
                    out[bi, oc, y, xo] = acc
    return out


@pytest.mark.parametrize("case", [
    ((1, 3, 7, 6), (4, 3, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),
    ((1, 4, 9, 8), (6, 2, 3, 2), True, [2, 1], [1, 0], [1, 2], 2),
    ((1, 4, 8, 8), (4, 1, 5, 5), False, [1, 1], [4, 4], [2, 2], 4),   # dilated depthwise
    ((2, 5, 4, 4), (3, 5, 1, 1), True, [1, 1], [0, 0], [1, 1], 1),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_conv_matches_executorch_loop_bit_for_bit(case, dtype):
    xs, ws, has_b, s, p, d, g = case
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype) if has_b else None
    want = _portable_conv2d(x, w, b, s, p, d, g)
    out = static_out(want.shape, dtype)
    call(OP, x, w, b, s, p, d, False, [0, 0], g, out)
    np.testing.assert_array_equal(out.numpy(), want)
