"""Any-dtype compiled matrix products, convolution and normalization (the generic.py of
kernels/linalg, conv, norm) against the reference tier (itself tested against torch).

float16/bfloat16 compute in float32 and may differ from the reference in the last bit of
the rounded result (its convolution and addmm accumulate in the half type itself, as
ExecuTorch's portable loops do: a few units in the last place); integer results are exact
(wrapping like the reference); float32/float64 through the generic kernels (forced with the
``generic`` fixture, or reached when the specialized kernel declines) add in the same order
as the reference.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pyruntime.kernels.fast as fast
from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from tests.kernels.helpers import (assert_close, bind_fast, bound_out, call, call_fast,
                                   static_out)

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
INTS = [np.dtype(d) for d in (np.uint8, np.int8, np.int16, np.int32, np.int64)]
HALF = [F16, BF16]
FLOATS = [F16, BF16, F32, F64]
ALL = INTS + FLOATS
RNG = np.random.default_rng(0)
MM, BMM, ADDMM, LIN = "aten::mm.out", "aten::bmm.out", "aten::addmm.out", "aten::linear.out"
CONV, CONVB = "aten::convolution.out", "aten::convolution_backward.out"
BN, BNL = "aten::_native_batch_norm_legit_no_training.out", "aten::_native_batch_norm_legit.out"
BNS = "aten::_native_batch_norm_legit.no_stats_out"
LN, GN = "aten::native_layer_norm.out", "aten::native_group_norm.out"


@pytest.fixture
def generic(monkeypatch):
    """Bind the generic (any-dtype) binders even where a specialized one would accept."""
    fast.get_binder("")  # import every binder module
    monkeypatch.setattr(fast, "get_binder",
                        lambda n: getattr(fast._BINDERS.get(n), "generic", fast._BINDERS.get(n)))


def _rand(shape, dt, positive=False):
    dt = np.dtype(dt)
    if dt.kind in "iub":
        return RNG.integers(1 if positive else (0 if dt.kind == "u" else -5), 6,
                            shape).astype(dt)
    a = RNG.standard_normal(shape)
    return (np.abs(a) + 0.5 if positive else a).astype(dt)


def _laid_out(a, order) -> ETensor:
    """``a`` as a tensor stored in dim order ``order`` (non-contiguous logical strides)."""
    t = ETensor(from_numpy_dtype(a.dtype), a.shape, dim_order=tuple(order))
    t.storage = np.ascontiguousarray(np.transpose(a, order)).reshape(-1).view(np.uint8)
    assert np.array_equal(t.numpy().astype(np.float64), a.astype(np.float64))
    return t


def _tol(dt, ref):
    scale = max(1.0, float(np.abs(ref.astype(np.float64)).max())) if ref.size else 1.0
    return {F16: 1e-2, BF16: 2e-2, F32: 1e-5, F64: 1e-12}.get(np.dtype(dt), 0) * scale


def _check(name, args, shapes, dts, tol=None):
    """Reference into exact-shape outs; compiled into static outs and into dynamic-bound
    outs that must shrink. ``dts``: the outs' dtypes (one for all, or one per out)."""
    dts = dts if isinstance(dts, (list, tuple)) else [dts] * len(shapes)
    refs = [static_out(s, d) for s, d in zip(shapes, dts)]
    call(name, *args, *refs)
    for outs in ([static_out(s, d) for s, d in zip(shapes, dts)],
                 [bound_out(tuple(x + 2 for x in s), d) for s, d in zip(shapes, dts)]):
        status = call_fast(name, *args, *outs)
        assert status == 0, f"{name}: compiled kernel returned {status}"
        for o, r in zip(outs, refs):
            assert o.shape == r.shape
            t = _tol(o.dtype, r.numpy()) if tol is None else tol
            assert_close(o.numpy(), r.numpy(), rtol=t, atol=t)
    return [r.numpy() for r in refs]


# ---- matrix products ----------------------------------------------------------------

@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 7, 1), (0, 3, 2), (4, 0, 3), (9, 17, 6)])
@pytest.mark.parametrize("dt", ALL)
def test_mm(m, k, n, dt, generic):
    a, b = _rand((m, k), dt), _rand((k, n), dt)
    _check(MM, [a, b], [(m, n)], dt)
    _check(MM, [_laid_out(a, (1, 0)), _laid_out(b, (1, 0))], [(m, n)], dt)


@pytest.mark.parametrize("dt", ALL)
def test_bmm(dt, generic):
    for bs, m, k, n in [(2, 3, 4, 5), (1, 1, 6, 2), (0, 2, 2, 2), (3, 5, 1, 4)]:
        a, b = _rand((bs, m, k), dt), _rand((bs, k, n), dt)
        _check(BMM, [a, b], [(bs, m, n)], dt)
        _check(BMM, [_laid_out(a, (2, 0, 1)), _laid_out(b, (0, 2, 1))], [(bs, m, n)], dt)


@pytest.mark.parametrize("dt", ALL)
def test_addmm(dt, generic):
    a, b = _rand((4, 6), dt), _rand((6, 5), dt)
    for bias_shape in [(5,), (1, 5), (4, 1), (4, 5), (), (1,)]:
        for beta, alpha in [(1, 1), (2, 3), (0, 1)] + ([(0.5, 2.0)] if dt.kind == "f" else []):
            s = _rand(bias_shape, dt)
            if beta == 0 and dt.kind == "f":
                s[...] = np.nan  # beta == 0 ignores self, NaN included
            _check(ADDMM, [s, a, b, beta, alpha], [(4, 5)], dt)
    _check(ADDMM, [_laid_out(_rand((4, 5), dt), (1, 0)), a, b, 1, 1], [(4, 5)], dt)


@pytest.mark.parametrize("dt", ALL)
def test_linear(dt, generic):
    w = _rand((4, 7), dt)
    for in_shape in [(7,), (3, 7), (2, 3, 7), (0, 7)]:
        for bias in (None, _rand((4,), dt), _rand((1,), dt)):
            x = _rand(in_shape, dt)
            _check(LIN, [x, w, bias], [in_shape[:-1] + (4,)], dt)
    _check(LIN, [_laid_out(_rand((2, 3, 7), dt), (2, 0, 1)), _laid_out(w, (1, 0)), None],
           [(2, 3, 4)], dt)
    _check(LIN, [_rand((3, 7), dt), _rand((7,), dt), None], [(3,)], dt)  # 1-D weight
    _check(LIN, [_rand((7,), dt), _rand((7,), dt), _rand((), dt)], [()], dt)


def test_matmul_integer_wraps_and_mixed_dtypes():
    a = np.full((2, 40), 100, np.int8)
    ref = _check(MM, [a, a.T.copy()], [(2, 2)], np.int8)[0]
    assert ref[0, 0] == np.array(40 * 100 * 100).astype(np.int8)  # wrapped, like numpy
    _check(MM, [a, a.T.copy()], [(2, 2)], np.int64)  # int8 result, cast to an int64 out
    _check(ADDMM, [np.full(2, 7, np.int64), a[:, :3], a[:, :3].T.copy(), 3, 5], [(2, 2)],
           np.int64)
    f = _rand((3, 4), F32)
    # mixed float32 / float16 / int operands: the specialized BLAS kernel declines
    _check(MM, [f, _rand((4, 2), F16)], [(3, 2)], F32)
    _check(MM, [_rand((3, 4), np.int32), _rand((4, 2), BF16)], [(3, 2)], BF16)
    _check(LIN, [f, _rand((5, 4), F64), _rand((5,), F16)], [(3, 5)], F64)
    _check(MM, [f, _rand((4, 2), F32)], [(3, 2)], F64)  # float32 product, float64 out
    # an int addmm with a float alpha: cast to the integer compute type like the reference
    i = _rand((3, 3), np.int16)
    _check(ADDMM, [i, i, i, 2, 2.7], [(3, 3)], np.int16)


def test_matmul_declines_and_dynamic_sizes():
    b = np.ones((2, 2), np.bool_)
    assert call_fast(MM, b, b, static_out((2, 2), np.bool_)) is None  # the reference raises
    assert call_fast(ADDMM, _rand((2, 2, 2), F16), _rand((2, 2), F16), _rand((2, 2), F16), 1, 1,
                     static_out((2, 2), F16)) is None  # self of rank 3
    # one binding, inputs resized at run time (sizes are read from the descriptors)
    a = ETensor.empty(from_numpy_dtype(F16), (6, 5), dynamism=Dynamism.DYNAMIC_BOUND)
    w = ETensor.from_array(_rand((3, 5), F16))
    out = bound_out((6, 3), F16)
    run = bind_fast(LIN, a, w, None, out)
    for rows in (6, 2, 0, 4):
        a.resize((rows, 5))
        if rows:
            a.numpy()[...] = _rand((rows, 5), F16)
        assert run() == 0
        ref = static_out((rows, 3), F16)
        call(LIN, a, w, None, ref)
        assert out.shape == (rows, 3)
        assert_close(out.numpy(), ref.numpy(), rtol=1e-2, atol=1e-2)


# ---- convolution ----------------------------------------------------------------------

# (input shape, weight shape, bias, stride, padding, dilation, transposed, output_padding,
#  groups)
CONV_CASES = [
    ((2, 3, 7, 6), (4, 3, 3, 3), True, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    ((1, 4, 9, 8), (6, 2, 3, 2), True, [2, 1], [1, 0], [1, 2], False, [0, 0], 2),
    ((2, 6, 7, 7), (6, 1, 3, 3), False, [1, 2], [1, 1], [1, 1], False, [0, 0], 6),
    ((2, 4, 11), (6, 2, 3), True, [2], [1], [1], False, [0], 2),
    ((1, 2, 4, 5, 4), (3, 2, 2, 3, 2), True, [1, 2, 1], [1, 0, 1], [1, 1, 2], False,
     [0, 0, 0], 1),
    ((2, 4, 5, 4), (4, 3, 3, 2), True, [2, 1], [1, 0], [1, 2], True, [1, 0], 2),
    ((1, 3, 6), (3, 2, 4), False, [3], [2], [1], True, [2], 1),
    ((1, 2, 3, 3, 2), (2, 2, 2, 2, 3), True, [2, 1, 2], [0, 1, 1], [1, 1, 1], True,
     [1, 0, 0], 1),
    ((0, 3, 5, 5), (2, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
]


def _conv_args(case, dt):
    xs, ws, b, s, p, d, tr, op, g = case
    bias_n = ws[1] * g if tr else ws[0]
    return [_rand(xs, dt), _rand(ws, dt), _rand((bias_n,), dt) if b else None, s, p, d, tr,
            op, g]


def _conv_out_shape(args):
    ref = bound_out(args[0].shape[:1] + (64,) * (args[0].ndim - 1), args[0].dtype)
    call(CONV, *args, ref)
    return ref.shape


@pytest.mark.parametrize("dt", ALL)
def test_convolution(dt, generic):
    for case in CONV_CASES:
        args = _conv_args(case, dt)
        _check(CONV, args, [_conv_out_shape(args)], dt)


def test_convolution_layouts_and_mixed():
    x, w = _rand((2, 3, 6, 5), F16), _rand((4, 3, 3, 3), F16)
    common = [[1, 1], [1, 1], [1, 1], False, [0, 0], 1]
    # the reference adds in float16 like ExecuTorch's loop, this kernel in float32
    _check(CONV, [_laid_out(x, (0, 2, 3, 1)), w, None] + common, [(2, 4, 6, 5)], F16, tol=0.05)
    x32 = x.astype(F32)  # float32 cases the specialized kernel declines
    _check(CONV, [_laid_out(x32, (0, 2, 3, 1)), w.astype(F32), None] + common,
           [(2, 4, 6, 5)], F32)
    _check(CONV, [x32, w, _rand((4,), F64)] + common, [(2, 4, 6, 5)], F32)
    out = ETensor.empty(from_numpy_dtype(BF16), (2, 4, 6, 5), dim_order=(0, 2, 3, 1))
    ref = static_out((2, 4, 6, 5), BF16)
    call(CONV, x.astype(BF16), w.astype(BF16), None, *common, ref)
    assert call_fast(CONV, x.astype(BF16), w.astype(BF16), None, *common, out) == 0
    # bfloat16: the reference rounds every partial sum to 8 bits, this kernel sums in float32
    assert_close(out.numpy(), ref.numpy(), rtol=2e-2, atol=0.2)
    i = np.full((1, 4, 5, 5), 100, np.int8)  # integer accumulation wraps like the reference
    _check(CONV, [i, i[:2, :, :3, :3].copy().reshape(1, 4, 3, 3).repeat(2, 0), None] + common,
           [(1, 2, 5, 5)], np.int8)


@pytest.mark.parametrize("dt", FLOATS)
def test_convolution_backward(dt):
    for case in CONV_CASES:
        xs, ws, b, s, p, d, tr, op, g = case
        x, w = _rand(xs, dt), _rand(ws, dt)
        oshape = _conv_out_shape([x, w, None, s, p, d, tr, op, g])
        go = _rand(oshape, dt)
        nb = oshape[1]
        for mask in ([True, True, True], [False, True, False], [True, False, True]):
            args = [go, x, w, [nb], s, p, d, tr, op, g, mask]
            shapes = [xs if mask[0] else (0,), ws if mask[1] else (0,),
                      (nb,) if mask[2] else (0,)]
            refs = [static_out(sh, dt) for sh in shapes]
            call(CONVB, *args, *refs)
            outs = [bound_out(tuple(v + 1 for v in sh), dt) for sh in shapes]
            assert call_fast(CONVB, *args, *outs) == 0
            for m, o, r in zip(mask, outs, refs):
                if m:
                    assert o.shape == r.shape
                    t = _tol(dt, r.numpy()) * (4 if dt in HALF else 10)
                    assert_close(o.numpy(), r.numpy(), rtol=t, atol=t)
    i = _rand((1, 2, 4, 4), np.int32)
    assert call_fast(CONVB, i, i, _rand((3, 2, 1, 1), np.int32), [3], [1, 1], [0, 0], [1, 1],
                     False, [0, 0], 1, [True, True, True], static_out((1, 2, 4, 4), np.int32),
                     static_out((3, 2, 1, 1), np.int32), static_out((3,), np.int32)) is None


# ---- normalization ----------------------------------------------------------------------

@pytest.mark.parametrize("dt", FLOATS)
def test_batch_norm_inference(dt, generic):
    for shape in [(2, 3, 4, 5), (4, 3), (0, 3, 2)]:
        C = shape[1]
        x, w, b = _rand(shape, dt), _rand((C,), dt), _rand((C,), dt)
        rm, rv = _rand((C,), dt), _rand((C,), dt, positive=True)
        for ww, bb in ((w, b), (None, b), (None, None)):
            _check(BN, [x, ww, bb, rm, rv, 0.1, 1e-5], [shape, (0,), (0,)], dt)
            _check(BNL, [x, ww, bb, rm, rv, False, 0.1, 1e-5], [shape, (0,), (0,)], dt)
    if dt != F32:
        return
    x = _rand((2, 3, 4, 4), F32)  # channels-last, mixed-dtype stats: the specialized declines
    rm, rv = _rand((3,), F64), _rand((3,), F16, positive=True)
    _check(BN, [_laid_out(x, (0, 2, 3, 1)), None, None, rm, rv, 0.1, 1e-5],
           [(2, 3, 4, 4), (0,), (0,)], F32)


@pytest.mark.parametrize("dt", FLOATS)
def test_batch_norm_training(dt):
    for shape in [(2, 3, 4, 5), (4, 3), (1, 3, 1), (2, 3, 2, 2, 3)]:
        C = shape[1]
        x, w, b = _rand(shape, dt), _rand((C,), dt), _rand((C,), dt)
        for ww, bb in ((w, b), (w, None), (None, None)):
            rms, rvs = [], []
            for _ in range(2):  # running stats are updated in place: one copy per tier
                rms.append(ETensor.from_array(_rand((C,), dt)))
                rvs.append(ETensor.from_array(rms[0].numpy().copy() + 1))
            rms[1].numpy()[...] = rms[0].numpy()
            shapes = [shape, (C,), (C,)]
            refs = [static_out(s, dt) for s in shapes]
            call(BNL, x, ww, bb, rms[0], rvs[0], True, 0.1, 1e-5, *refs)
            outs = [bound_out(tuple(v + 2 for v in s), dt) for s in shapes]
            assert call_fast(BNL, x, ww, bb, rms[1], rvs[1], True, 0.1, 1e-5, *outs) == 0
            for o, r in zip(outs + [rms[1], rvs[1]], refs + [rms[0], rvs[0]]):
                assert o.shape == r.shape
                t = _tol(dt, r.numpy()) * 4
                assert_close(o.numpy(), r.numpy(), rtol=t, atol=t)
            _check(BNS, [x, ww, bb, True, 0.2, 1e-3], shapes, dt,
                   tol=_tol(dt, x) * 4)
    assert call_fast(BNS, x, None, None, False, 0.1, 1e-5, static_out(x.shape, dt),
                     static_out((3,), dt), static_out((3,), dt)) is None
    # no value per channel: the reference raises, the compiled kernel fails
    e = _rand((0, 3, 2), dt)
    assert call_fast(BNS, e, None, None, True, 0.1, 1e-5, static_out((0, 3, 2), dt),
                     static_out((3,), dt), static_out((3,), dt)) not in (None, 0)


@pytest.mark.parametrize("dt", FLOATS)
def test_layer_norm(dt, generic):
    for shape, ns in [((2, 3, 8), [8]), ((4, 3, 5), [3, 5]), ((7,), [7]), ((0, 4), [4]),
                      ((3, 0), [0])]:
        stat = shape[:len(shape) - len(ns)] + (1,) * len(ns)
        x = _rand(shape, dt)
        w, b = _rand(tuple(ns), dt), _rand(tuple(ns), dt)
        for ww, bb in ((w, b), (None, b), (w, None), (None, None)):
            _check(LN, [x, ns, ww, bb, 1e-5], [shape, stat, stat], dt)
    if dt == F32:  # float32 statistics into a float64 out: float32 rounding
        x = _rand((2, 3, 4), F32)
        _check(LN, [_laid_out(x, (2, 0, 1)), [4], _rand((4,), F16), None, 1e-5],
               [(2, 3, 4), (2, 3, 1), (2, 3, 1)], [F32, F64, F32], tol=1e-5)


@pytest.mark.parametrize("dt", FLOATS)
def test_group_norm(dt, generic):
    for shape, G in [((2, 6, 3, 4), 3), ((1, 4, 5), 2), ((3, 4), 4), ((2, 4, 0), 2)]:
        N, C = shape[0], shape[1]
        hxw = int(np.prod(shape[2:]))
        x, w, b = _rand(shape, dt), _rand((C,), dt), _rand((C,), dt)
        for ww, bb in ((w, b), (None, None)):
            _check(GN, [x, ww, bb, N, C, hxw, G, 1e-5], [shape, (N, G), (N, G)], dt)
    if dt != F32:
        return
    x = _rand((2, 4, 3, 3), F32)
    _check(GN, [_laid_out(x, (0, 2, 3, 1)), None, None, 2, 4, 9, 2, 1e-5],
           [(2, 4, 3, 3), (2, 2), (2, 2)], F32)


def test_norm_dynamic_sizes():
    x = ETensor.empty(from_numpy_dtype(BF16), (5, 8), dynamism=Dynamism.DYNAMIC_BOUND)
    outs = [bound_out((5, 8), BF16), bound_out((5, 1), BF16), bound_out((5, 1), BF16)]
    run = bind_fast(LN, x, [8], None, None, 1e-5, *outs)
    for rows in (5, 2, 0, 3):
        x.resize((rows, 8))
        if rows:
            x.numpy()[...] = _rand((rows, 8), BF16)
        assert run() == 0
        refs = [static_out((rows, 8), BF16), static_out((rows, 1), BF16),
                static_out((rows, 1), BF16)]
        call(LN, x, [8], None, None, 1e-5, *refs)
        for o, r in zip(outs, refs):
            assert o.shape == r.shape
            assert_close(o.numpy(), r.numpy(), rtol=2e-2, atol=2e-2)
