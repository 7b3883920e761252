"""Compiled 1-D/2-D convolution against the reference tier (itself tested against torch): both
accumulate in ExecuTorch's order, so they agree bit for bit."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from pyruntime.cython_ext.desc import DescTable
from pyruntime.kernels.fast import get_binder
from pyruntime.kernels.fast.context import BindContext
from tests.kernels.helpers import bound_out, call, call_fast, call_split, static_out

OP = "aten::convolution.out"
RNG = np.random.default_rng(0)

# (input shape, weight shape, bias, stride, padding, dilation, groups)
CASES = [
    ((2, 3, 9, 10), (4, 3, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),          # im2col
    ((1, 4, 11, 8), (6, 2, 3, 2), True, [2, 1], [1, 0], [1, 2], 2),          # grouped, mixed
    ((2, 6, 9, 9), (6, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 6),           # depthwise 3x3
    ((1, 8, 12, 11), (8, 1, 3, 3), False, [2, 2], [1, 1], [1, 1], 8),        # depthwise s2
    ((1, 4, 13, 13), (8, 1, 3, 3), True, [1, 2], [2, 1], [2, 1], 4),         # dw x2, dilated
    ((1, 4, 10, 10), (8, 1, 5, 5), False, [2, 2], [2, 2], [1, 1], 4),        # depthwise 5x5
    ((1, 5, 7, 6), (5, 1, 3, 3), True, [1, 1], [0, 0], [1, 1], 5),           # dw unpadded
    ((2, 1, 8, 9), (3, 1, 3, 2), True, [1, 1], [1, 0], [1, 1], 1),           # 1-channel input
    ((1, 3, 12, 12), (5, 3, 3, 3), True, [1], [2], [2], 1),                  # one-element lists
    ((2, 3, 15, 15), (4, 3, 7, 7), True, [2, 2], [3, 3], [1, 1], 1),         # stem-like
    ((2, 6, 5, 5), (4, 6, 1, 1), True, [1, 1], [0, 0], [1, 1], 1),           # pointwise
    ((2, 6, 5, 4), (4, 3, 1, 1), False, [1, 1], [0, 0], [1, 1], 2),          # grouped pointwise
    ((1, 6, 7, 7), (4, 6, 1, 1), True, [2, 2], [0, 0], [1, 1], 1),           # 1x1 stride 2
    ((1, 6, 5, 5), (4, 6, 1, 1), True, [1, 1], [1, 1], [1, 1], 1),           # 1x1 padded
    ((0, 3, 6, 6), (4, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], 1),           # empty batch
    ((1, 2, 3, 3), (4, 2, 5, 5), True, [1, 1], [2, 2], [1, 1], 1),           # kernel > input
    ((2, 4, 17), (6, 2, 3), True, [2], [1], [1], 2),                         # conv1d grouped
    ((2, 3, 20), (5, 3, 4), False, [1], [0], [3], 1),                        # conv1d dilated
    ((2, 4, 16), (4, 1, 3), True, [1], [1], [1], 4),                         # conv1d depthwise
    ((1, 8, 30), (16, 8, 1), True, [1], [0], [1], 1),                        # conv1d pointwise
    # the register-blocked gemm and the depthwise loops' special cases
    ((1, 5, 9, 11), (5, 1, 3, 3), True, [1, 1], [2, 2], [2, 2], 5),          # dw s1 dilated
    ((1, 3, 5, 40), (3, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 3),          # dw s1, rows >= 32
    ((1, 2, 6, 37), (4, 1, 3, 3), False, [1, 1], [2, 1], [2, 1], 2),         # the same, x2, dilated
    ((1, 6, 13, 12), (6, 1, 3, 3), True, [2, 2], [0, 0], [1, 1], 6),         # dw s2 unpadded
    ((1, 3, 11, 14), (6, 1, 3, 3), False, [2, 2], [1, 1], [1, 2], 3),        # dw s2 dilated
    ((1, 32, 9, 9), (30, 32, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),        # k = 288 > KC
    ((1, 8, 20, 15), (40, 8, 1, 1), True, [1, 1], [0, 0], [1, 1], 1),        # n = 300 > NCB
    # the flat depthwise loop over small padded planes, in whole 16-position blocks from
    # rows 7 wide (below that, not rounded); dilated; padded along one axis only
    ((2, 7, 5, 5), (7, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 7),           # dw, Wp = 7
    ((1, 3, 4, 4), (3, 1, 3, 3), False, [1, 1], [1, 1], [1, 1], 3),          # dw, Wp = 6
    ((1, 4, 5, 5), (4, 1, 3, 3), True, [1, 1], [2, 2], [2, 2], 4),           # dw 5x5 dilated
    ((1, 4, 6, 9), (8, 1, 3, 3), True, [1, 1], [1, 0], [1, 1], 4),           # dw padded rows
    # stride 2 from the four phase planes: odd sizes, dilated, one axis padded; stride 1
    # rows >= 32 whose last 16-column block spills into the next row
    ((1, 3, 23, 37), (3, 1, 3, 3), True, [2, 2], [1, 1], [1, 1], 3),         # dw s2, odd
    ((1, 2, 9, 10), (4, 1, 3, 3), True, [2, 2], [2, 2], [2, 2], 2),          # dw s2 dilated
    ((1, 2, 12, 9), (4, 1, 3, 3), False, [2, 2], [0, 1], [1, 1], 2),         # dw s2 pad cols
    ((1, 2, 6, 66), (4, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 2),          # dw s1, 66 wide
    # small depthwise 3x3 planes go eight channels at a time: groups of eight and the
    # planes left over, two images, stride 2 and dilation, 3x3 planes
    ((2, 20, 4, 4), (20, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 20),        # dw 4x4 planes
    ((1, 16, 7, 8), (16, 1, 3, 3), False, [2, 2], [2, 1], [2, 1], 16),       # dw s2 dilated
    ((1, 24, 3, 3), (24, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 24),        # dw 3x3 planes
]
# float32 depthwise 3x3 eight channels at a time at every size (kernels.conv.typed_lanes):
# a ring of input rows (planes over 32 KB), output rows moved to the front (outputs over
# 32 KB), groups of eight and the rest, narrow planes read eight wide into their pad or one
# element at a time (and the input's last row), mixed strides and dilations
LANES_CASES = [
    ((1, 16, 40, 40), (16, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 16),      # ring, rows out
    ((2, 12, 37, 45), (12, 1, 3, 3), False, [2, 2], [1, 1], [1, 1], 12),     # ring s2, 8 + 4
    ((1, 8, 35, 33), (8, 1, 3, 3), True, [1, 1], [2, 2], [2, 2], 8),         # ring of 5 rows
    ((1, 8, 7, 7), (8, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 8),           # 7 wide + pad
    ((1, 16, 5, 6), (16, 1, 3, 3), False, [1, 1], [1, 1], [1, 1], 16),       # 6 wide
    ((1, 8, 9, 7), (8, 1, 3, 3), True, [1, 1], [1, 0], [1, 1], 8),           # rows padded
    ((1, 8, 10, 12), (8, 1, 3, 3), True, [2, 1], [1, 1], [1, 2], 8),         # mixed
    ((3, 8, 6, 9), (8, 1, 3, 3), False, [1, 2], [0, 0], [1, 1], 8),          # unpadded
]
CASES += LANES_CASES


def _args(case, dtype):
    x, w, b, s, p, d, g = case
    args = [RNG.standard_normal(x).astype(dtype), RNG.standard_normal(w).astype(dtype),
            RNG.standard_normal(w[0]).astype(dtype) if b else None, s, p, d, False, [0] * len(s),
            g]
    ref = bound_out(tuple(x[:1]) + (w[0],) + (64,) * (len(x) - 2), dtype)
    call(OP, *args, ref)
    return args, ref.numpy()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv(case, dtype):
    args, want = _args(case, dtype)
    for out in (static_out(want.shape, dtype), bound_out(tuple(s + 2 for s in want.shape), dtype)):
        status = call_fast(OP, *args, out)
        assert status == 0, f"compiled kernel returned {status}"
        np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("case", [
    ((1, 32, 4, 4), (64, 32, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),   # 16 positions < 64
    ((1, 16, 2, 2), (40, 8, 3, 3), False, [1, 1], [2, 2], [2, 2], 2),   # grouped, dilated
    ((2, 24, 6), (48, 24, 3), True, [2], [1], [1], 1),                  # conv1d
    ((2, 8, 12, 12), (30, 8, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),  # many: not transposed
    ((1, 6, 9, 9), (14, 3, 1, 1), False, [1, 1], [0, 0], [1, 1], 2),   # grouped pointwise
])
def test_constant_weight_packed_for_few_positions(case):
    """A constant weight (read-only storage) is packed at load, per group, in the orientation
    its output size picks: transposed when there are fewer output positions than channels;
    still ExecuTorch's order."""
    args, want = _args(case, np.float32)
    w = ETensor.from_array(args[1].copy())
    w.storage.flags.writeable = False
    args[1] = w
    out = static_out(want.shape, np.float32)
    assert call_fast(OP, *args, out) == 0
    np.testing.assert_array_equal(out.numpy(), want)


def test_declines_and_errors():
    x = RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 4, 3, 3)).astype(np.float32)
    out = static_out((1, 4, 4, 4), np.float32)
    common = [[1, 1], [0, 0], [1, 1]]
    assert call_fast(OP, x, w, None, *common, True, [0, 0], 1, out, typed=True) is None  # transposed
    assert call_fast(OP, x.astype(np.float16), w.astype(np.float16), None, *common, False,
                     [0, 0], 1, static_out((1, 4, 4, 4), np.float16), typed=True) is None
    assert call_fast(OP, x, w.astype(np.float64), None, *common, False, [0, 0], 1, out, typed=True) is None
    x3 = RNG.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    w3 = RNG.standard_normal((2, 2, 1, 1, 1)).astype(np.float32)
    assert call_fast(OP, x3, w3, None, [1] * 3, [0] * 3, [1] * 3, False, [0] * 3, 1,
                     static_out((1, 2, 4, 4, 4), np.float32), typed=True) is None  # 3-D
    cl = ETensor(from_numpy_dtype(np.float32), x.shape, dim_order=(0, 2, 3, 1))
    cl.storage = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1).view(np.uint8)
    assert call_fast(OP, cl, w, None, *common, False, [0, 0], 1, out, typed=True) is None  # channels last
    # channels that do not match the weight fail (the loop then reports the reference error)
    assert call_fast(OP, x, w[:, :3].copy(), None, *common, False, [0, 0], 1, out) != 0
    assert call_fast(OP, x, w, None, *common, False, [0, 0], 1,
                     static_out((1, 4, 5, 5), np.float32)) != 0


def _bind(*vals):
    """Bind once at the upper-bound sizes (as at method load); run after inputs shrink."""
    ts = [v for v in vals if isinstance(v, ETensor)]
    table = DescTable(ts, [t.storage for t in ts])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(ts)}, [])
    fn, block = get_binder(OP)(ctx, *vals)
    cf = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fn)

    def run():
        assert ctx.blocks  # ctx owns the argument block and scratch: keep it alive
        for i, t in enumerate(ts):
            table.push(i, t)
        status = cf(block)
        for i, t in enumerate(ts):
            table.pull(i, t)
        return status
    return run


@pytest.mark.parametrize("w_shape,groups,padding", [((5, 3, 1, 3), 1, [0, 0]),
                                                    ((3, 1, 3, 3), 3, [1, 1]),
                                                    ((4, 3, 1, 1), 1, [0, 0]),
                                                    ((40, 3, 3, 3), 1, [1, 1])])
@pytest.mark.parametrize("const", [False, True])
def test_dynamic_input_sizes(w_shape, groups, padding, const):
    """Sizes are read at run time; a shape past the bind-time scratch bound still works, and
    a constant weight packed for the bind-time sizes is not used in the other orientation."""
    x = ETensor.from_array(RNG.standard_normal((2, 3, 8, 8)).astype(np.float32),
                           dynamism=Dynamism.DYNAMIC_BOUND)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    b = RNG.standard_normal(w_shape[0]).astype(np.float32)
    wt = ETensor.from_array(w)
    if const:
        wt.storage.flags.writeable = False
    args = [wt, ETensor.from_array(b), [1, 1], padding, [1, 1], False, [0, 0], groups]
    out = bound_out((2, w_shape[0], 8, 8), np.float32)
    run = _bind(x, *args, out)
    # (1, 3, 2, 32): same capacity, but a wider im2col / padded plane than at bind time
    for shape in ((2, 3, 8, 8), (1, 3, 5, 7), (1, 3, 3, 3), (1, 3, 2, 32), (0, 3, 8, 8)):
        x.resize(shape)
        assert run() == 0, shape
        ref = bound_out((2, w_shape[0], 8, 32), np.float32)
        call(OP, x, *args, ref)
        assert out.shape == ref.shape
        np.testing.assert_array_equal(out.numpy(), ref.numpy())


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("threads", [2, 3])
def test_split_into_parts_is_bit_identical(case, threads, monkeypatch):
    """Intra-op threads: a convolution split into parts (planes of the direct loop, columns
    of the gemm, each with its own scratch, odd splits included) gives the one-call result
    bit for bit, into a static out and into a bound out the prep call resizes."""
    from pyruntime.kernels.conv import typed as conv

    monkeypatch.setattr(conv, "SPLIT_MACS", 0)
    args, want = _args(case, np.float32)
    for out in (static_out(want.shape, np.float32),
                bound_out(tuple(s + 2 for s in want.shape), np.float32)):
        status, n = call_split(OP, *args, out, threads=threads)
        assert status == 0, f"split kernel returned {status}"
        assert n == threads
        np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("case", [
    ((1, 20, 4, 4), (70, 20, 1, 1), True, [1, 1], [0, 0], [1, 1], 1),    # pointwise, 16 < 70
    ((2, 8, 5, 5), (64, 8, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),      # 3x3, batch of 2
    ((1, 12, 7, 7), (40, 12, 1, 1), False, [2, 2], [0, 0], [1, 1], 1),   # 1x1 stride 2
    ((1, 9, 6), (50, 9, 3), True, [1], [1], [1], 1),                     # conv1d
])
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [2, 3])
def test_wide_weights_split_their_output_channels(case, constant, dtype, threads, monkeypatch):
    """More output channels than positions: the parts take output channels (whole panels of
    the packed weight, each part reading its own), bit for bit the one-call result."""
    from pyruntime.kernels.conv import typed as conv

    monkeypatch.setattr(conv, "SPLIT_MACS", 0)
    args, want = _args(case, dtype)
    if constant:
        w = ETensor.from_array(args[1].copy())
        w.storage.flags.writeable = False
        args[1] = w
    rows = conv.MR if not constant else None
    for out in (static_out(want.shape, dtype), bound_out(tuple(s + 2 for s in want.shape), dtype)):
        status, n = call_split(OP, *args, out, threads=threads)
        assert status == 0 and n == threads, (status, n)
        np.testing.assert_array_equal(out.numpy(), want)
    assert rows is None or rows == 6


def test_split_parts_report_errors(monkeypatch):
    from pyruntime.kernels.conv import typed as conv

    monkeypatch.setattr(conv, "SPLIT_MACS", 0)
    x = RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 4, 3, 3)).astype(np.float32)
    common = [[1, 1], [0, 0], [1, 1], False, [0, 0], 1]
    out = static_out((1, 4, 4, 4), np.float32)
    assert call_split(OP, x, w, None, *common, out, threads=2) == (0, 2)
    # an out too small for the result: the prep call fails, no part runs
    status, n = call_split(OP, x, w, None, *common, static_out((1, 4, 3, 3), np.float32),
                           threads=2)
    assert status != 0 and n == 2


def _fused(x_shape, w_shape, stride, pad, groups, act, dtype=np.float32, threads=1,
           math="exact"):
    """A convolution (with bias) fused with a batch norm and ``act`` by ``bind_fused``, run as
    the fast loop runs it (split into up to ``threads`` parts): (its out, the unfused
    operations' result: the compiled convolution in the same math, then each epilogue
    operation rounded in turn, as the separate kernels compute it). NaN, infinities and
    -0.0 in the input."""
    from pyruntime.cython_ext._loop import Loop
    from pyruntime.kernels.conv import typed as conv_mod

    rng = np.random.default_rng(5)
    x = (rng.standard_normal(x_shape) * 2).astype(dtype)
    flat = x.reshape(-1)
    flat[[7, 50, -1, -20]] = np.nan, np.inf, -0.0, -np.inf

    def const(a):
        a = np.ascontiguousarray(a, dtype)
        a.flags.writeable = False
        return ETensor.from_array(a)
    c = w_shape[0]
    w = rng.standard_normal(w_shape).astype(dtype)
    cb, mu, bw, bb = (rng.standard_normal(c).astype(dtype) for _ in range(4))
    var = (rng.random(c) + 0.1).astype(dtype)
    eps = 1e-5
    osz = [(x_shape[2 + i] + 2 * pad - w_shape[2 + i]) // stride + 1 for i in range(2)]
    xt, out = ETensor.from_array(x), static_out((x_shape[0], c, *osz), dtype)
    conv = (xt, const(w), const(cb), [stride, stride], [pad, pad], [1, 1], False, [0, 0],
            groups)
    bn = (const(bw), const(bb), const(mu), const(var), eps)
    ts = [xt, conv[1], conv[2], out, *bn[:4]]
    table = DescTable(ts, [t.storage for t in ts])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(ts)}, [], threads, math)
    r = conv_mod.bind_fused(ctx, conv, bn, act, out)
    loop = Loop(1)
    loop.set_kernel(0, *r)
    for i, t in enumerate(ts):
        table.push(i, t, force=True)
    assert loop.run(None, 10) == 0
    table.pull(3, out)
    y = static_out(out.shape, dtype)
    status, _ = call_split(OP, x, w, None, [stride, stride], [pad, pad], [1, 1], False, [0, 0],
                           groups, y, threads=1, math=math)
    assert status == 0
    inv = (1.0 / np.sqrt(var.astype(np.float64) + eps)).astype(dtype)
    k = (None, slice(None), None, None)
    v = ((y.numpy() + cb[k]) - mu[k]) * inv[k] * bw[k] + bb[k]
    if act[0] == "relu":
        want = np.where((v > 0) | np.isnan(v), v, dtype(0))
    else:
        lo, hi = dtype(act[1]), dtype(act[2])
        want = np.where(v < lo, lo, v)
        want = np.where(want > hi, hi, want)
    return out.numpy(), want


def _same_bits(got, want):
    u = np.uint32 if got.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(got.view(u), want.view(u))


ACTS = [("relu",), ("clamp", -0.5, 0.5)]


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shape,stride", [((2, 20, 4, 4), 1), ((1, 16, 7, 7), 2),
                                          ((1, 16, 40, 40), 1), ((2, 16, 37, 37), 2)])
def test_fused_depthwise_eight_channels_at_a_time(act, shape, stride):
    """A depthwise 3x3 convolution (eight channels per vector, the planes left over one at
    a time; small planes held whole, large ones through the ring of rows) fused with a
    batch norm and relu or clamp: the unfused operations' bits."""
    _same_bits(*_fused(shape, (shape[1], 1, 3, 3), stride, 1, shape[1], act))


# (input shape, weight shape, stride, padding, groups) of convolutions run by the ordered
# gemm, which runs the epilogue on its sums before it stores them (unless it computes the
# product swapped: then on the stored block)
GEMM_FUSED = [
    ((1, 300, 9, 11), (40, 300, 1, 1), 1, 0, 1),    # k = 300 > KC: the last k block only;
    #                                                 edge rows (40) and columns (99)
    ((1, 16, 40, 40), (24, 16, 1, 1), 1, 0, 1),     # 1600 columns: > NCB, > 2 * EP_CHUNK
    ((1, 24, 3, 3), (70, 24, 1, 1), 1, 0, 1),       # 9 positions, 70 channels: swapped
    ((1, 32, 8, 8), (108, 32, 1, 1), 1, 0, 1),      # 108 channels > 64 positions: split by
    #                                                 rows (each part's epilogue from its row)
    ((2, 8, 10, 9), (20, 8, 3, 3), 1, 1, 1),        # im2col, two images
    ((1, 8, 12, 12), (12, 4, 3, 3), 2, 1, 2),       # im2col, grouped, stride 2
    ((1, 3, 40, 40), (32, 3, 3, 3), 2, 1, 1),       # a stem: 400 columns in COL_CHUNKs
]


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("case", GEMM_FUSED)
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("math", ["exact", "fast"])
def test_fused_gemm_convolution(case, act, threads, math):
    """A gemm convolution fused with a batch norm and relu or clamp, in the gemm's micro
    kernels before the store (or after, when swapped): the unfused operations' bits, in
    both math modes (fast: the same FMA sums, then the same epilogue), split or whole."""
    _same_bits(*_fused(*case, act, threads=threads, math=math))


@pytest.mark.parametrize("case", GEMM_FUSED[:2] + GEMM_FUSED[4:5])
def test_fused_gemm_convolution_float64(case):
    _same_bits(*_fused(*case, ACTS[1], dtype=np.float64, threads=2))


@pytest.mark.parametrize("case", LANES_CASES)
def test_depthwise_fast_math_is_close_and_the_same_at_every_split(case, monkeypatch):
    """math="fast": a float32 depthwise 3x3 convolution takes its nine taps by fused
    multiply-adds (where the target has FMA), within 1e-4 x max(1, |ref|) of the exact
    result; its parts hold whole groups of eight channels, so a channel is computed the
    same way at every thread count (the same bits at 1, 2 and 3)."""
    from pyruntime.kernels.conv import typed as conv
    from pyruntime.kernels.fast.gemm import has_fma

    monkeypatch.setattr(conv, "SPLIT_MACS", 0)
    args, want = _args(case, np.float32)
    outs = []
    for threads in (1, 2, 3):
        out = static_out(want.shape, np.float32)
        status, _ = call_split(OP, *args, out, threads=threads, math="fast")
        assert status == 0
        outs.append(out.numpy().copy())
    for o in outs[1:]:
        np.testing.assert_array_equal(o.view(np.uint32), outs[0].view(np.uint32))
    assert np.all(np.abs(outs[0] - want) <= 1e-4 * np.maximum(1, np.abs(want)))
    assert has_fma() != np.array_equal(outs[0], want)  # fused where the target has FMA
