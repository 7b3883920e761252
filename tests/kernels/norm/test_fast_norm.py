"""Compiled batch norm (inference), layer norm and group norm against the reference tier."""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.cython_ext import ETensor, from_numpy_dtype
from tests.kernels.helpers import assert_close, bound_out, call, call_fast, static_out

RNG = np.random.default_rng(0)
FLOATS = [np.float32, np.float64]
TOL = {np.float32: 2e-5, np.float64: 1e-12}
BN = "aten::_native_batch_norm_legit_no_training.out"
LN = "aten::native_layer_norm.out"
GN = "aten::native_group_norm.out"


def _rand(shape, dtype, positive=False, scale=1.0, shift=0.0):
    a = RNG.standard_normal(shape) * scale + shift
    return np.asarray(np.abs(a) + 0.5 if positive else a).astype(dtype)


def _bigger(shape, extra=1):
    return tuple(s + extra for s in shape)


def _run(name, args, shapes, dtype, exact=False, tol=None):
    """Reference with exact-shape outs vs compiled with static and with dynamic-bound outs."""
    refs = [static_out(s, dtype) for s in shapes]
    call(name, *args, *refs)
    for outs in ([static_out(s, dtype) for s in shapes],
                 [bound_out(_bigger(s, 2), dtype) for s in shapes]):
        assert call_fast(name, *args, *outs) == 0
        for o, r in zip(outs, refs):
            assert o.shape == r.shape
            if exact:
                assert o.numpy().tobytes() == r.numpy().tobytes()
            else:
                t = tol or TOL[dtype]
                assert_close(o.numpy(), r.numpy(), rtol=t, atol=t)
    return [r.numpy() for r in refs]


# ---- batch norm ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3), (2, 3, 6), (1, 2, 2, 3, 2), (0, 3, 2),
                                   (1, 32, 12, 12)])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_bit_identical(shape, affine, dtype):
    C = shape[1]
    x = _rand(shape, dtype)
    w = _rand(C, dtype) if affine in ("both", "weight") else None
    b = _rand(C, dtype) if affine in ("both", "bias") else None
    rm, rv = _rand(C, dtype), _rand(C, dtype, positive=True)
    # same per-channel fold and per-element arithmetic as the reference: identical bits,
    # and save_mean / save_invstd resized to size 0 exactly like the reference
    refs = _run(BN, [x, w, b, rm, rv, 0.1, 1e-5], [shape, (0,), (0,)], dtype, exact=True)
    assert refs[1].shape == (0,) and refs[2].shape == (0,)


def test_batch_norm_failures_and_declines():
    x = _rand((2, 3, 4), np.float32)
    rm, rv = _rand(3, np.float32), _rand(3, np.float32, positive=True)
    outs = lambda: [static_out((2, 3, 4), np.float32), static_out((0,), np.float32),  # noqa: E731
                    static_out((0,), np.float32)]
    # wrong-length running stats: an error status (the loop reruns the reference for the message)
    assert call_fast(BN, x, None, None, _rand(4, np.float32), rv, 0.1, 1e-5, *outs()) \
        not in (None, 0)
    # save_mean that cannot become size 0 (static, size 3): fails like the reference
    bad = outs()
    bad[1] = static_out((3,), np.float32)
    assert call_fast(BN, x, None, None, rm, rv, 0.1, 1e-5, *bad) not in (None, 0)
    # mixed dtypes, half floats, channels-last input: the typed kernel declines (kernels/norm/generic.py takes them)
    assert call_fast(BN, x, None, None, rm.astype(np.float64), rv, 0.1, 1e-5, *outs(), typed=True) is None
    assert call_fast(BN, x.astype(np.float16), None, None, rm.astype(np.float16),
                     rv.astype(np.float16), 0.1, 1e-5, static_out((2, 3, 4), np.float16),
                     static_out((0,), np.float16), static_out((0,), np.float16), typed=True) is None
    t = ETensor.empty(from_numpy_dtype(np.float32), (2, 3, 4, 4), dim_order=(0, 2, 3, 1))
    assert call_fast(BN, t, None, None, rm, rv, 0.1, 1e-5, static_out((2, 3, 4, 4), np.float32),
                     static_out((0,), np.float32), static_out((0,), np.float32), typed=True) is None


# ---- layer norm ---------------------------------------------------------------------

@pytest.mark.parametrize("shape,ns", [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5,), (5,)),
                                      ((3, 0), (0,)), ((2, 0, 4), (4,)), ((1, 50, 192), (192,)),
                                      ((4, 1000), (1000,))])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm(shape, ns, affine, dtype):
    x = _rand(shape, dtype, scale=3.0, shift=1.0)
    w = _rand(ns, dtype) if affine in ("both", "weight") else None
    b = _rand(ns, dtype) if affine in ("both", "bias") else None
    stat = shape[:len(shape) - len(ns)] + (1,) * len(ns)
    _run(LN, [x, list(ns), w, b, 1e-5], [shape, stat, stat], dtype)


def test_layer_norm_constant_rows_and_declines():
    x = np.ones((3, 8), np.float32) * 7
    mean, rstd = _run(LN, [x, [8], None, None, 1e-5], [(3, 8), (3, 1), (3, 1)], np.float32)[1:]
    assert np.all(mean == 7) and np.allclose(rstd, 1 / np.sqrt(1e-5), rtol=1e-5)
    # normalized_shape not the trailing dims / weight of the wrong dtype: reference kernel
    assert call_fast(LN, x, [3], None, None, 1e-5, static_out((3, 8), np.float32),
                     static_out((3, 1), np.float32), static_out((3, 1), np.float32)) is None
    assert call_fast(LN, x, [8], np.ones(8), None, 1e-5, static_out((3, 8), np.float32),
                     static_out((3, 1), np.float32), static_out((3, 1), np.float32), typed=True) is None
    # a weight with the wrong number of elements fails at run time
    assert call_fast(LN, x, [8], np.ones(5, np.float32), None, 1e-5,
                     static_out((3, 8), np.float32), static_out((3, 1), np.float32),
                     static_out((3, 1), np.float32)) not in (None, 0)


# ---- group norm ---------------------------------------------------------------------

@pytest.mark.parametrize("shape,G", [((2, 6, 4, 5), 3), ((2, 6), 2), ((3, 4, 7), 1),
                                     ((1, 8, 3, 3), 8), ((2, 4, 0), 2), ((1, 32, 16, 16), 8)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_group_norm(shape, G, affine, dtype):
    N, C = shape[:2]
    HxW = int(np.prod(shape[2:]))
    x = _rand(shape, dtype, scale=2.0, shift=1.0)
    w = _rand(C, dtype) if affine in ("both", "weight") else None
    b = _rand(C, dtype) if affine == "both" else None
    _run(GN, [x, w, b, N, C, HxW, G, 1e-5], [shape, (N, G), (N, G)], dtype)


def test_group_norm_declines():
    x = _rand((2, 6, 3), np.float32)
    outs = [static_out((2, 6, 3), np.float32), static_out((2, 4), np.float32),
            static_out((2, 4), np.float32)]
    assert call_fast(GN, x, None, None, 2, 6, 3, 4, 1e-5, *outs) is None  # 4 does not divide 6
