"""Compiled any-dtype pooling, resampling and distance kernels against the reference tier.

The reference kernels are themselves tested against torch (test_pool.py,
test_upsample.py, test_linalg.py); uint8 bilinear resampling is also checked
against torch directly, bit for bit.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from tests.kernels.helpers import assert_close, bind_fast, call, call_fast, static_out, to_np

RNG = np.random.default_rng(0)
BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
HALF = [F16, BF16]
INTS = [np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64)]
CL = (0, 2, 3, 1)  # channels-last dim order of a 4-D tensor

MAXP = "aten::max_pool2d_with_indices.out"
MAXB = "aten::max_pool2d_with_indices_backward.grad_input"
AVGP = "aten::avg_pool2d.out"
ADAP = "aten::_adaptive_avg_pool2d.out"
NEAR = "aten::upsample_nearest2d.vec_out"
BIL = "aten::upsample_bilinear2d.vec_out"
AA = "aten::_upsample_bilinear2d_aa.out"
GRID = "aten::grid_sampler_2d.out"
CDIST = "aten::_cdist_forward.out"
PDIST = "aten::_pdist_forward.out"


def _rand(shape, dt, lo=-5, hi=6):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return RNG.random(shape) < 0.5
    if dt.kind in "iu":
        return RNG.integers(max(lo, 0) if dt.kind == "u" else lo, hi, shape).astype(dt)
    return RNG.standard_normal(shape).astype(dt)


def _tensor(a, dim_order=None):
    """An ETensor holding ``a`` in ``dim_order`` (e.g. channels-last)."""
    if dim_order is None:
        return ETensor.from_array(a)
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape, dim_order)
    t.numpy()[...] = a
    return t


def _outs(shape, dt, dim_order=None):
    """A static out of exactly ``shape`` and a dynamic-bound one that must shrink to it."""
    cap = tuple(s + 2 for s in shape)
    return [ETensor.empty(from_numpy_dtype(dt), shape, dim_order),
            ETensor.empty(from_numpy_dtype(dt), cap, dim_order, Dynamism.DYNAMIC_BOUND)]


def _tol(dt):
    dt = np.dtype(dt)
    return {F16: 1e-2, BF16: 2e-2, F32: 1e-6, F64: 1e-12}.get(dt, 0)


def _check(name, args, shapes, dtypes, tol=None, dim_order=None):
    """Compiled (static and dynamic-bound outs, ``dim_order``) vs reference; the reference."""
    refs = [static_out(s, d) for s, d in zip(shapes, dtypes)]
    call(name, *args, *refs)
    statics, bounds = zip(*[_outs(s, d, dim_order) for s, d in zip(shapes, dtypes)])
    for outs in (statics, bounds):
        assert call_fast(name, *args, *outs) == 0
        for o, r in zip(outs, refs):
            assert o.shape == r.shape
            t = _tol(o.dtype) if tol is None else tol
            assert_close(o.numpy(), r.numpy(), rtol=t, atol=t)
    return [r.numpy() for r in refs]


def _pool_shape(shape, k, s, p, d, ceil):
    def one(n, k, s, p, d):
        num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)
        o = num // s + 1
        return o - 1 if ceil and (o - 1) * s >= n + p else o
    s = s or k
    return tuple(shape[:-2]) + (one(shape[-2], k[0], s[0], p[0], d[0]),
                                one(shape[-1], k[1], s[1], p[1], d[1]))


# ---- pooling ----------------------------------------------------------------------------

MAX_CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),
    ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], [1, 1], False),
    ((2, 10, 11), [3, 3], [], [1, 0], [2, 2], True),
    ((0, 2, 5, 5), [2, 2], [2, 2], [0, 0], [1, 1], False),
]


@pytest.mark.parametrize("case", MAX_CASES)
@pytest.mark.parametrize("dt", INTS + HALF + [np.dtype(np.bool_)])
def test_max_pool2d_any_dtype(case, dt):
    shape, k, s, p, d, ceil = case
    x = _rand(shape, dt, lo=-128, hi=127)
    oshape = _pool_shape(shape, k, s, p, d, ceil)
    _check(MAXP, [x, k, s, p, d, ceil], [oshape, oshape], [dt, np.int64], tol=0)


@pytest.mark.parametrize("dt", [F32, F64, F16])
def test_max_pool2d_channels_last_nan_inf(dt):
    x = np.round(_rand((2, 3, 9, 9), dt))
    x[0, 0, 2, 2] = np.nan
    x[1, 2, :4, :4] = -np.inf
    oshape = (2, 3, 5, 5)
    vals, idx = _check(MAXP, [_tensor(x, CL), [3, 3], [2, 2], [1, 1], [1, 1], False],
                       [oshape, oshape], [dt, np.int64], tol=0, dim_order=CL)
    assert np.isnan(vals).any() and (idx < 0).any()


AVG_CASES = [  # (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    ((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], False, True, None),
    ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], False, False, None),
    ((1, 2, 10, 7), [3, 2], [2, 2], [1, 1], True, True, None),
    ((2, 6, 6), [3, 3], [], [1, 1], True, True, -5),
]


@pytest.mark.parametrize("case", AVG_CASES)
@pytest.mark.parametrize("dt", [np.dtype(np.int64), np.dtype(np.int8), np.dtype(np.uint8)] + HALF)
def test_avg_pool2d_any_dtype(case, dt):
    shape, k, s, p, ceil, cip, div = case
    x = _rand(shape, dt, lo=-100, hi=100)
    oshape = _pool_shape(shape, k, s, p, [1, 1], ceil)
    _check(AVGP, [x, k, s, p, ceil, cip, div], [oshape], [dt])


@pytest.mark.parametrize("dt", [F32, F64])
def test_avg_and_adaptive_pool2d_channels_last(dt):
    x = _tensor(_rand((2, 5, 9, 7), dt), CL)
    _check(AVGP, [x, [3, 3], [2, 2], [1, 1], True, False, None], [(2, 5, 5, 4)], [dt],
           dim_order=CL)
    _check(ADAP, [x, [4, 3]], [(2, 5, 4, 3)], [dt], dim_order=CL)


@pytest.mark.parametrize("shape,osize", [((2, 3, 7, 7), [1, 1]), ((1, 2, 7, 9), [3, 4]),
                                         ((3, 10, 5), [4, 7]), ((1, 2, 4, 4), [0, 2])])
@pytest.mark.parametrize("dt", HALF)
def test_adaptive_avg_pool2d_half(shape, osize, dt):
    x = _rand(shape, dt)
    _check(ADAP, [x, osize], [tuple(shape[:-2]) + tuple(osize)], [dt])


@pytest.mark.parametrize("dt", [F32, F64] + HALF)
@pytest.mark.parametrize("shape", [(2, 3, 7, 6), (3, 6, 6)])
def test_max_pool2d_backward(dt, shape):
    # stride 1: overlapping windows send several gradients to one input element
    x = _rand(shape, dt)
    k, s, p, d = [3, 3], [1, 1], [1, 1], [1, 1]
    oshape = _pool_shape(shape, k, s, p, d, False)
    vals, idx = static_out(oshape, dt), static_out(oshape, np.int64)
    call(MAXP, x, k, s, p, d, False, vals, idx)
    g = _rand(oshape, dt)
    got = _check(MAXB, [g, x, k, s, p, d, False, idx.numpy()], [shape], [dt])[0]
    want = torch.ops.aten.max_pool2d_with_indices_backward(
        torch.from_numpy(g.astype(np.float64)), torch.from_numpy(x.astype(np.float64)), k, s, p,
        d, False, torch.from_numpy(idx.numpy()))
    assert_close(got.astype(np.float64), want.numpy(), rtol=2e-2, atol=2e-2)


def test_max_pool2d_backward_bad_index_and_declines():
    x = _rand((1, 2, 4, 4), np.float32)
    g = _rand((1, 2, 2, 2), np.float32)
    idx = np.zeros((1, 2, 2, 2), np.int64)
    idx[0, 1, 1, 1] = 16  # past the 4x4 plane
    assert call_fast(MAXB, g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, idx,
                     static_out((1, 2, 4, 4), np.float32)) == 0x12
    # integer gradients and integer adaptive pooling stay on the reference kernel
    assert call_fast(MAXB, g.astype(np.int32), x, [2, 2], [2, 2], [0, 0], [1, 1], False,
                     idx, static_out((1, 2, 4, 4), np.int32)) is None
    assert call_fast(ADAP, x.astype(np.int32), [2, 2], static_out((1, 2, 2, 2), np.int32)) \
        is None


def test_pool_dynamic_input():
    """Sizes are read at run time: one binding serves a resized input."""
    x = ETensor.empty(from_numpy_dtype(F16), (2, 3, 9, 9), dynamism=Dynamism.DYNAMIC_BOUND)
    out = ETensor.empty(from_numpy_dtype(F16), (2, 3, 5, 5), dynamism=Dynamism.DYNAMIC_BOUND)
    run = bind_fast(AVGP, x, [3, 3], [2, 2], [1, 1], False, True, None, out)
    for shape in ((2, 3, 9, 9), (1, 3, 6, 4)):
        x.resize(shape)
        a = _rand(shape, F16)
        x.numpy()[...] = a
        assert run() == 0
        ref = static_out(_pool_shape(shape, [3, 3], [2, 2], [1, 1], [1, 1], False), F16)
        call(AVGP, a, [3, 3], [2, 2], [1, 1], False, True, None, ref)
        assert_close(out.numpy(), ref.numpy(), rtol=1e-2, atol=1e-2)


# ---- resampling -------------------------------------------------------------------------

SIZES = [  # (input shape, output_size, scale_factors)
    ((1, 2, 4, 5), [8, 10], None), ((2, 1, 5, 3), [7, 4], None), ((1, 3, 6, 6), [3, 2], None),
    ((1, 1, 3, 4), None, [2.0, 3.0]), ((1, 2, 5, 7), None, [1.5, 0.7]),
    ((1, 1, 4, 4), [4, 4], None), ((1, 2, 7, 3), [7, 5], None), ((0, 2, 3, 3), [5, 5], None),
    ((1, 1, 1, 1), [3, 2], None), ((1, 6, 5, 4), [3, 1], None),
]


def _rsize(shape, size, scales):
    if size is not None:
        return tuple(shape[:2]) + tuple(size)
    return tuple(shape[:2]) + (int(shape[2] * scales[0]), int(shape[3] * scales[1]))


@pytest.mark.parametrize("shape,size,scales", SIZES)
@pytest.mark.parametrize("dt", [np.dtype(np.uint8), np.dtype(np.int64), np.dtype(np.bool_), F32]
                         + HALF)
def test_upsample_nearest2d(shape, size, scales, dt):
    x = _rand(shape, dt)
    _check(NEAR, [x, size, scales], [_rsize(shape, size, scales)], [dt], tol=0)


@pytest.mark.parametrize("shape,size,scales", SIZES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dt", [np.dtype(np.uint8), F32, F64] + HALF)
def test_upsample_bilinear2d(shape, size, scales, align_corners, dt):
    x = _rand(shape, dt, lo=0, hi=256)
    _check(BIL, [x, size, align_corners, scales], [_rsize(shape, size, scales)], [dt])


AA_CASES = [((1, 2, 8, 9), [3, 4], (None, None)), ((1, 2, 5, 5), [9, 12], (None, None)),
            ((2, 1, 12, 6), [5, 6], (None, None)), ((1, 1, 10, 10), [4, 3], (2.5, 3.0)),
            ((1, 5, 7, 7), [1, 1], (None, None)), ((1, 1, 31, 9), [4, 9], (None, None))]


@pytest.mark.parametrize("shape,size,scales", AA_CASES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dt", [np.dtype(np.uint8), F32, F64])
def test_upsample_bilinear2d_aa(shape, size, scales, align_corners, dt):
    x = _rand(shape, dt, lo=0, hi=256)
    _check(AA, [x, size, align_corners, *scales], [tuple(shape[:2]) + tuple(size)], [dt])


@pytest.mark.parametrize("name", [NEAR, BIL, AA])
@pytest.mark.parametrize("dt", [np.dtype(np.uint8), F32])
def test_upsample_channels_last(name, dt):
    x = _rand((2, 3, 6, 5), dt, lo=0, hi=256)
    args = {NEAR: [[9, 4], None], BIL: [[9, 4], False, None], AA: [[4, 7], True, None, None]}
    osize = (2, 3) + tuple(args[name][0])
    for dim_order in (CL, None):  # channels-last input, and channels-last out
        xin = _tensor(x, CL) if dim_order else x
        _check(name, [xin, *args[name]], [osize], [dt], dim_order=dim_order or CL)


def test_upsample_uint8_matches_torch_exactly():
    """ATen's fixed-point uint8 path, bit for bit, over random sizes, scales and layouts."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        n, c = int(rng.integers(1, 3)), int(rng.choice([1, 3, 4, 5]))
        h, w = int(rng.integers(1, 20)), int(rng.integers(1, 20))
        oh, ow = int(rng.integers(1, 30)), int(rng.integers(2, 30))
        ac, aa, cl = (bool(b) for b in rng.integers(0, 2, 3))
        x = torch.from_numpy(rng.integers(0, 256, (n, c, h, w)).astype(np.uint8))
        if cl:
            x = x.contiguous(memory_format=torch.channels_last)
        if aa:
            want, name, args = (torch.ops.aten._upsample_bilinear2d_aa(x, [oh, ow], ac), AA,
                                [[oh, ow], ac, None, None])
        else:
            want, name, args = (torch.ops.aten.upsample_bilinear2d.vec(x, [oh, ow], ac, None),
                                BIL, [[oh, ow], ac, None])
        out = static_out((n, c, oh, ow), np.uint8)
        assert call_fast(name, _tensor(to_np(x), CL if cl else None), *args, out) == 0
        np.testing.assert_array_equal(out.numpy(), want.contiguous().numpy())


def test_upsample_dynamic_input_and_declines():
    x = ETensor.empty(from_numpy_dtype(F32), (1, 2, 6, 6), dynamism=Dynamism.DYNAMIC_BOUND)
    out = ETensor.empty(from_numpy_dtype(F32), (1, 2, 13, 13), dynamism=Dynamism.DYNAMIC_BOUND)
    run = bind_fast(BIL, x, None, False, [2.0, 1.5], out)
    for shape in ((1, 2, 6, 6), (1, 2, 3, 5)):
        x.resize(shape)
        a = _rand(shape, F32)
        x.numpy()[...] = a
        assert run() == 0
        ref = static_out(_rsize(shape, None, [2.0, 1.5]), F32)
        call(BIL, a, None, False, [2.0, 1.5], ref)
        assert_close(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    a = _rand((1, 1, 2, 2), np.int32)
    assert call_fast(BIL, a, [4, 4], False, None, static_out((1, 1, 4, 4), np.int32)) is None
    assert call_fast(NEAR, a, [4, 4], None, static_out((1, 1, 4, 4), np.int64)) is None
    assert call_fast(NEAR, a, [4, 4], [2.0, 2.0], static_out((1, 1, 4, 4), np.int32)) is None


# ---- grid_sampler_2d --------------------------------------------------------------------

@pytest.mark.parametrize("interp", [0, 1, 2])
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dt", [F32, F64] + HALF)
def test_grid_sampler_2d(interp, padding, align_corners, dt):
    x = _rand((2, 3, 5, 6), dt)
    grid = (RNG.random((2, 4, 7, 2)) * 3.2 - 1.6)
    grid[0, 0, :3] = [[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]]
    grid = grid.astype(dt)
    tol = 0 if dt in (F32, F64) else None
    _check(GRID, [x, grid, interp, padding, align_corners], [(2, 3, 4, 7)], [dt], tol=tol)


def test_grid_sampler_2d_channels_last_and_torch():
    x = _rand((1, 4, 6, 5), F32)
    grid = (RNG.random((1, 3, 8, 2)) * 2.4 - 1.2).astype(F32)
    got = _check(GRID, [_tensor(x, CL), grid, 0, 2, False], [(1, 4, 3, 8)], [F32], tol=0,
                 dim_order=CL)[0]
    want = torch.ops.aten.grid_sampler_2d(torch.from_numpy(x), torch.from_numpy(grid), 0, 2,
                                          False)
    assert_close(got, want.numpy(), rtol=1e-5, atol=1e-5)


# ---- distances --------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, float("inf")])
@pytest.mark.parametrize("dt", [F32, F64, F16])
def test_cdist_and_pdist(p, dt):
    a = _rand((2, 3, 5), dt)
    b = _rand((4, 5), dt)
    a[0, 0, :2] = b[1, :2]  # equal coordinates: zero differences
    _check(CDIST, [a, b, p, None], [(2, 3, 4)], [dt], tol=None if dt == F16 else 1e-6)
    x = _rand((5, 3), dt)
    _check(PDIST, [x, p], [(10,)], [dt], tol=None if dt == F16 else 1e-6)


@pytest.mark.parametrize("mode", [None, 1, 2])
def test_cdist_matrix_product_path_and_broadcast(mode):
    # P > 25 takes ATen's |a|^2 + |b|^2 - 2ab path unless compute_mode is 2
    a = _rand((3, 1, 30, 4), F64)
    b = _rand((2, 7, 4), F64)
    got = _check(CDIST, [a, b, 2.0, mode], [(3, 2, 30, 7)], [F64], tol=1e-12)[0]
    want = torch.cdist(torch.from_numpy(a), torch.from_numpy(b), 2.0)
    assert_close(got, want.numpy(), rtol=1e-10, atol=1e-10)


def test_dist_empty_and_declines():
    _check(CDIST, [_rand((0, 3), F32), _rand((2, 3), F32), 2.0, None], [(0, 2)], [F32])
    _check(PDIST, [_rand((1, 3), F32), 2.0], [(0,)], [F32])
    _check(CDIST, [_rand((2, 0), F32), _rand((3, 0), F32), 1.0, None], [(2, 3)], [F32])
    a = _rand((2, 3), np.int64)
    assert call_fast(CDIST, a, a, 2.0, None, static_out((2, 2), np.float32)) is None
    assert call_fast(PDIST, _rand((3, 2), F32), -1.0, static_out((3,), F32)) is None
    # mismatched feature sizes are found at run time
    assert call_fast(CDIST, _rand((2, 3), F32), _rand((2, 4), F32), 2.0, None,
                     static_out((2, 2), F32)) == 0x12
