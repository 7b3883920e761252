"""Compiled cadence:: kernels against the reference tier (itself checked against torch and
the PT2E-converted models in tests/programs/test_cadence.py): bit for bit, into a static
out and a dynamic-bound out that must shrink."""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.cython_ext import ETensor, from_numpy_dtype
from tests.kernels.helpers import call_fast, check_compiled

RNG = np.random.default_rng(7)
C = "cadence::"
ACT = [np.int8, np.uint8]


def q(shape, dt):
    i = np.iinfo(dt)
    return RNG.integers(i.min, i.max + 1, shape).astype(dt)


def tensor(a, dim_order):
    """An ETensor holding ``a`` laid out in ``dim_order``."""
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape, dim_order)
    t.numpy()[...] = a
    return t


def zp(dt):  # a zero point inside the dtype's range, away from its middle
    return -5 if dt == np.int8 else 131


@pytest.mark.parametrize("out_dt", [np.int8, np.uint8, np.int16, np.int32])
def test_quantize(out_dt):
    x = (RNG.standard_normal((3, 17)) * 40).astype(np.float32)
    x.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, 0.5, 2.5]  # non-finite reads as 0; ties even
    i = np.iinfo(out_dt)
    lo, hi = max(i.min, -1000), min(i.max, 1000)
    for scale, z in ((0.1, 3), (1.0, 0), (0.0173, -7)):
        check_compiled(C + "quantize_per_tensor.out",
                       [x, scale, z, lo, hi, int(from_numpy_dtype(np.dtype(out_dt)))],
                       x.shape, out_dt)


@pytest.mark.parametrize("in_dt", [np.int8, np.uint8, np.int16, np.int32])
def test_dequantize(in_dt):
    x = q((4, 9), in_dt) if in_dt in ACT else RNG.integers(-3000, 3000, (4, 9)).astype(in_dt)
    check_compiled(C + "dequantize_per_tensor.out", [x, 0.0371, 7, -128, 127, None], x.shape,
                   np.float32)


@pytest.mark.parametrize("dt", ACT)
@pytest.mark.parametrize("op", ["quantized_linear.per_tensor_out",
                                "quantized_fully_connected.per_tensor_out"])
@pytest.mark.parametrize("lead,bias", [((5,), True), ((2, 3), False), ((1,), True)])
def test_linear(dt, op, lead, bias):
    x, w = q((*lead, 37), dt), q((11, 37), dt)
    b = RNG.integers(-5000, 5000, 11).astype(np.int32) if bias else None
    for mult, shift in ((1 << 30, -8), (1_518_500_250, -10), (-(1 << 29), -9)):
        check_compiled(C + op, [x, w, b, zp(dt), 3, mult, shift, zp(dt), None], (*lead, 11), dt)


@pytest.mark.parametrize("dt", ACT)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_matmul(dt, transposed, batch):
    x = q((*batch, 4, 13), dt)
    y = q((*batch, 6, 13) if transposed else (*batch, 13, 6), dt)
    check_compiled(C + "quantized_matmul.out",
                   [x, zp(dt), y, -2, None, 1_300_000_000, -9, zp(dt), transposed],
                   (*batch, 4, 6), dt)


@pytest.mark.parametrize("dt", ACT)
def test_relu(dt):
    x = q((3, 5, 7), dt)
    for mult, shift, zo in ((1 << 30, 0, zp(dt)), (1 << 30, -3, 5), (1_700_000_000, 2, 0)):
        check_compiled(C + "quantized_relu.per_tensor_out", [x, zp(dt), zo, mult, shift],
                       x.shape, dt)


@pytest.mark.parametrize("dt", ACT)
@pytest.mark.parametrize("groups,depthwise,stride,padding,dilation", [
    (1, False, 1, 1, 1), (2, False, 2, 0, 1), (4, False, 1, 2, 2),
    (8, False, 1, 1, 1),   # groups == channels with [OC, KH, KW, 1] weights
    (8, True, 1, 1, 1), (8, True, 2, 1, 1), (8, True, 1, 0, 2)])
def test_conv2d_nhwc(dt, groups, depthwise, stride, padding, dilation):
    x = q((2, 9, 8, 8), dt)
    w = q((3, 3, 8), dt) if depthwise else q((8, 3, 3, 8 // groups), dt)
    bias = RNG.integers(-3000, 3000, 8).astype(np.int32)
    oh = (9 + 2 * padding - dilation * 2 - 1) // stride + 1
    ow = (8 + 2 * padding - dilation * 2 - 1) // stride + 1
    # the flow's weights are [OC, C / groups, KH, KW] in memory, [OC, KH, KW, C / groups] seen
    wt = tensor(w, (0, 3, 1, 2)) if w.ndim == 4 else w
    for b, bscale, oscale, ws in ((bias, 1.3e-3, 0.045, w), (None, 0.02, 1.0, wt)):
        check_compiled(C + "quantized_conv2d_nhwc.per_tensor_out",
                       [x, ws, b, [stride] * 2, [padding] * 2, [dilation] * 2, groups, zp(dt), 2,
                        bscale, oscale, zp(dt), 0, 0, None], (2, oh, ow, 8), dt)


@pytest.mark.parametrize("dt", ACT)
@pytest.mark.parametrize("k,s,p,d,ceil", [(3, 2, 1, 1, False), (3, 2, 1, 1, True),
                                          (2, 2, 0, 1, False), (3, 1, 1, 2, True)])
def test_max_pool2d_nhwc(dt, k, s, p, d, ceil):
    x = q((2, 7, 8, 5), dt)

    def size(n):
        num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)
        o = num // s + 1
        return o - 1 if ceil and (o - 1) * s >= n + p else o
    check_compiled(C + "quantized_max_pool2d_nhwc.out", [x, [k, k], [s, s], [p, p], [d, d], ceil],
                   (2, size(7), size(8), 5), dt)


def test_what_the_compiled_tier_leaves_to_the_reference():
    x = q((2, 4), np.int8)
    w16 = q((3, 4), np.int16)  # weights of another dtype than the activations
    out = np.zeros((2, 3), np.int8)
    assert call_fast(C + "quantized_linear.per_tensor_out", x, w16, None, 0, 0, 1 << 30, 0, 0,
                     None, out) is None
    # batch dims that broadcast
    assert call_fast(C + "quantized_matmul.out", q((2, 3, 4), np.int8), 0,
                     q((1, 4, 5), np.int8), 0, None, 1 << 30, 0, 0, False,
                     np.zeros((2, 3, 5), np.int8)) is None
    # a zero multiplier has no scale: the reference kernel raises it
    assert call_fast(C + "quantized_relu.per_tensor_out", x, 0, 0, 0, 0, np.zeros_like(x)) is None


def test_matmul_checks_its_bias_is_zeros_at_run_time():
    x, y = q((2, 4, 5), np.int8), q((2, 5, 3), np.int8)
    args = [x, 1, y, 2, np.zeros(3, np.int32), 1 << 30, -6, 0, False]
    check_compiled(C + "quantized_matmul.out", args, (2, 4, 3), np.int8)
    args[4] = np.array([0, 1, 0], np.int32)  # the loop re-runs it on the reference: its error
    assert call_fast(C + "quantized_matmul.out", *args, np.zeros((2, 4, 3), np.int8)) != 0


@pytest.mark.parametrize("dt", ACT)
@pytest.mark.parametrize("shape,ns", [((4, 16), [16]), ((2, 3, 7), [7]), ((2, 6, 24), [6, 24]),
                                       ((3, 200), [200]), ((2, 768), [768]), ((1, 5), [5]),
                                       ((2, 4100), [4100])])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(dt, shape, ns, affine):
    # numpy's pairwise float32 mean, mirrored: runs of 8 partial sums, halves above 128
    x = q(shape, dt)
    n = int(np.prod(ns))
    w = (RNG.standard_normal(n) * 2).astype(np.float32).reshape(ns) if affine else None
    b = RNG.standard_normal(n).astype(np.float32).reshape(ns) if affine else None
    check_compiled(C + "quantized_layer_norm.per_tensor_out",
                   [x, 0.031, zp(dt), ns, w, b, 1e-5, 0.0125, zp(dt)], shape, dt)
