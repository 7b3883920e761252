"""Compiled llama:: kernels against the reference tier (itself tested against ExecuTorch's C++
kernels): cache updates and the Hadamard transform bit for bit, SDPA to float32 rounding."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from tests.kernels.helpers import (assert_close, bind_fast, bound_out, call, call_fast,
                                   check_compiled, static_out)

RNG = np.random.default_rng(0)
BF16 = np.dtype(ml_dtypes.bfloat16)
ALL = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, BF16, np.float32,
       np.float64]
L = "llama::"


def rand(shape, dtype):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.asarray(RNG.random(shape) > 0.5)
    if dt.kind in "iu":
        return np.asarray(RNG.integers(0 if dt.kind == "u" else -50, 50, shape)).astype(dt)
    return np.asarray(RNG.standard_normal(shape)).astype(np.float32).astype(dt)


def tensor(a, dim_order=None, dynamism=Dynamism.STATIC):
    a = np.asarray(a)
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape, dim_order, dynamism)
    if a.size:
        t.numpy()[...] = a
    return t


def copy(t):
    return tensor(t.numpy(), t.dim_order)


TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-5}


def tol(dt):
    return TOL.get(np.dtype(dt), 2e-2)


# ---- cache updates ---------------------------------------------------------------------------

@pytest.mark.parametrize("b,s,h,d,max_s,start", [(1, 3, 2, 4, 8, 0), (2, 1, 3, 4, 6, 5),
                                                 (2, 4, 1, 8, 4, 0), (1, 0, 2, 2, 8, 3)])
@pytest.mark.parametrize("dt", ALL)
def test_update_cache(b, s, h, d, max_s, start, dt):
    value = rand((b, s, h, d), dt)
    for order in ((0, 1, 2, 3), (0, 2, 1, 3)):
        cache = tensor(rand((b, max_s, h, d), dt), order)
        want, got = copy(cache), copy(cache)
        call(L + "update_cache.out", value, want, start, static_out((1,), dt))
        assert call_fast(L + "update_cache.out", tensor(value, order), got, start,
                         static_out((1,), dt)) == 0
        assert_close(got.numpy(), want.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("start", [-1, 6, 8])
def test_update_cache_out_of_range_writes_nothing(start):
    value = np.ones((1, 3, 1, 2), np.float32)
    cache = tensor(np.zeros((1, 8, 1, 2), np.float32))
    assert call_fast(L + "update_cache.out", value, cache, start,
                     static_out((1,), np.float32)) not in (None, 0)
    assert not cache.numpy().any()


@pytest.mark.parametrize("dt", ALL)
def test_update_cache_with_indices(dt):
    value = rand((2, 3, 2, 4), dt)
    idx = np.array([[4, 0, 2], [1, 1, 5]], np.int64)  # a repeated position: the last write wins
    cache = tensor(rand((2, 6, 2, 4), dt))
    want, got = copy(cache), copy(cache)
    call(L + "update_cache_with_indices.out", value, want, 0, idx, static_out((1,), dt))
    assert call_fast(L + "update_cache_with_indices.out", value, got, 0, idx,
                     static_out((1,), dt)) == 0
    assert_close(got.numpy(), want.numpy(), rtol=0, atol=0)
    before = got.numpy().copy()
    assert call_fast(L + "update_cache_with_indices.out", value, got, 0, idx * 0 + 6,
                     static_out((1,), dt)) not in (None, 0)
    assert call_fast(L + "update_cache_with_indices.out", value, got, 0, idx.astype(np.int32),
                     static_out((1,), dt)) is None
    assert_close(got.numpy(), before, rtol=0, atol=0)


def test_update_cache_dynamic_seq_len():
    value = tensor(rand((1, 4, 2, 3), np.float32), dynamism=Dynamism.DYNAMIC_BOUND)
    cache = tensor(np.zeros((1, 8, 2, 3), np.float32))
    run = bind_fast(L + "update_cache.out", value, cache, 2, static_out((1,), np.float32))
    assert run() == 0
    value.resize((1, 1, 2, 3))
    value.numpy()[...] = 7
    assert run() == 0
    want = np.zeros((1, 8, 2, 3), np.float32)
    want[:, 2:3] = 7
    want[:, 3:6] = value.storage.view(np.float32).reshape(1, 4, 2, 3)[:, 1:4]
    assert_close(cache.numpy(), want, rtol=0, atol=0)


# ---- attention -----------------------------------------------------------------------------

SDPA_CASES = [  # b, s, hq, hk, d, kv, start
    (1, 1, 2, 2, 8, 5, 4), (2, 3, 4, 2, 4, 6, 1), (1, 4, 3, 1, 16, 4, 0), (1, 2, 2, 2, 1, 3, 0),
    (1, 0, 2, 2, 4, 3, 2), (2, 1, 6, 2, 8, 7, 5),
    # head_dim a multiple of 16 and at most 6 rows per kv head: the path without BLAS
    # (kernels.llm.typed_attention), with key counts that are not multiples of 8
    (1, 1, 8, 4, 32, 37, 36), (2, 1, 6, 1, 16, 9, 8), (1, 2, 4, 2, 64, 11, 3),
    (1, 3, 2, 2, 16, 3, 0), (1, 1, 1, 1, 48, 1, 0), (1, 1, 2, 1, 16, 70, 20)]


def _sdpa_args(case, dt, order=None):
    b, s, hq, hk, d, kv, start = case
    q = tensor(rand((b, s, hq, d), dt), order)
    k = tensor(rand((b, kv, hk, d), dt), order)
    v = tensor(rand((b, kv, hk, d), dt), order)
    return q, k, v, start


@pytest.mark.parametrize("case", SDPA_CASES)
@pytest.mark.parametrize("dt", [np.float32, np.float16, BF16, np.float64])
@pytest.mark.parametrize("is_causal,scale", [(True, None), (False, None), (True, 0.3)])
def test_custom_sdpa(case, dt, is_causal, scale):
    q, k, v, start = _sdpa_args(case, dt)
    shape = q.shape
    ref = static_out(shape, dt)
    call(L + "custom_sdpa.out", q, k, v, start, None, 0.0, is_causal, scale, ref)
    for out in (static_out(shape, dt), bound_out((shape[0], shape[1] + 2) + shape[2:], dt)):
        assert call_fast(L + "custom_sdpa.out", q, k, v, start, None, 0.0, is_causal, scale,
                         out) == 0
        assert out.shape == shape
        assert_close(out.numpy(), ref.numpy(), rtol=tol(dt), atol=tol(dt))


@pytest.mark.parametrize("mask_dt", [np.float32, np.float16])
@pytest.mark.parametrize("out_dt", [np.float32, BF16])
def test_custom_sdpa_mask_layouts_and_out_dtype(mask_dt, out_dt):
    q, k, v, start = _sdpa_args((2, 3, 4, 2, 8, 5, 1), np.float32, (0, 2, 1, 3))
    mask = np.where(RNG.random((3, 5)) < 0.3, -np.inf, RNG.standard_normal((3, 5)))
    mask[1] = -np.inf  # a fully masked row is NaN, as in C++
    mask = mask.astype(mask_dt)
    for order in (None, (0, 2, 1, 3)):
        ref = static_out(q.shape, out_dt)
        call(L + "custom_sdpa.out", q, k, v, start, mask, 0.0, False, None, ref)
        out = ETensor.empty(from_numpy_dtype(np.dtype(out_dt)), q.shape, order)
        assert call_fast(L + "custom_sdpa.out", q, k, v, start, mask, 0.0, False, None, out) == 0
        assert np.isnan(out.numpy()[:, 1].astype(np.float32)).all()
        assert_close(out.numpy(), ref.numpy(), rtol=tol(out_dt), atol=tol(out_dt))
    # a mask with is_causal, or a bad start_pos, is the reference's to reject
    assert call_fast(L + "custom_sdpa.out", q, k, v, 0, mask, 0.0, True, None,
                     static_out(q.shape, np.float32)) is None
    assert call_fast(L + "custom_sdpa.out", q, k, v, 3, None, 0.0, True, None,
                     static_out(q.shape, np.float32)) not in (None, 0)


def test_custom_sdpa_dynamic_seq_len():
    q = tensor(rand((1, 4, 2, 8), np.float32), dynamism=Dynamism.DYNAMIC_BOUND)
    k = tensor(rand((1, 6, 2, 8), np.float32), dynamism=Dynamism.DYNAMIC_BOUND)
    v = tensor(rand((1, 6, 2, 8), np.float32), dynamism=Dynamism.DYNAMIC_BOUND)
    out = bound_out((1, 4, 2, 8), np.float32)
    run = bind_fast(L + "custom_sdpa.out", q, k, v, 0, None, 0.0, True, None, out)
    for s, kv in ((4, 6), (2, 3), (1, 1), (3, 5)):
        for t in (q, k, v):
            t.resize((1, s if t is q else kv, 2, 8))
            t.numpy()[...] = rand(t.shape, np.float32)
        assert run() == 0
        ref = static_out((1, s, 2, 8), np.float32)
        call(L + "custom_sdpa.out", q, k, v, 0, None, 0.0, True, None, ref)
        assert out.shape == (1, s, 2, 8)
        assert_close(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("b,s,hq,hk,d,max_s,start", [(1, 1, 2, 2, 8, 6, 3), (2, 3, 4, 2, 4, 8, 0),
                                                     (1, 2, 2, 1, 4, 4, 2), (2, 1, 4, 2, 8, 6, 5)])
@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_sdpa_with_kv_cache(b, s, hq, hk, d, max_s, start, is_causal, dt):
    q = rand((b, s, hq, d), dt)
    key, value = rand((b, s, hk, d), dt), rand((b, s, hk, d), dt)
    kc, vc = tensor(rand((b, max_s, hk, d), dt)), tensor(rand((b, max_s, hk, d), dt))
    kc2, vc2 = copy(kc), copy(vc)
    ref = static_out(q.shape, dt)
    call(L + "sdpa_with_kv_cache.out", q, key, value, kc, vc, start, s, None, 0.0, is_causal,
         None, ref)
    out = static_out(q.shape, dt)
    assert call_fast(L + "sdpa_with_kv_cache.out", q, key, value, kc2, vc2, start, s, None, 0.0,
                     is_causal, None, out) == 0
    assert_close(kc2.numpy(), kc.numpy(), rtol=0, atol=0)
    assert_close(vc2.numpy(), vc.numpy(), rtol=0, atol=0)
    assert_close(out.numpy(), ref.numpy(), rtol=tol(dt), atol=tol(dt))
    assert call_fast(L + "sdpa_with_kv_cache.out", q, key, value, kc2, vc2, max_s, s, None, 0.0,
                     is_causal, None, out) not in (None, 0)


# ---- Hadamard transform --------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (1,), (4,), (3, 8), (2, 3, 16), (2, 0), (0, 4), (5, 1)])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, BF16])
def test_fast_hadamard_transform(shape, dt):
    x = rand(shape, dt)
    check_compiled(L + "fast_hadamard_transform.out", [x], shape, dt)


def test_fast_hadamard_transform_layouts_and_sizes():
    x = tensor(rand((4, 8), np.float32), (1, 0))
    check_compiled(L + "fast_hadamard_transform.out", [x], (4, 8), np.float32)
    check_compiled(L + "fast_hadamard_transform.out", [x], (4, 8), np.float32, dim_order=(1, 0))
    assert call_fast(L + "fast_hadamard_transform.out", rand((2, 6), np.float32),
                     static_out((2, 6), np.float32)) is None
    assert call_fast(L + "fast_hadamard_transform.out", rand((2, 8), np.float32),
                     static_out((2, 8), np.float64)) is None


def test_start_pos_computed_at_run_time():
    """An Int produced by a prim op reaches the kernel through its record (IntSlot)."""
    from pyruntime.kernels.fast.context import IntSlot
    word = np.zeros(1, np.int64)
    start = IntSlot(0, word.ctypes.data)
    q = tensor(rand((1, 1, 4, 8), np.float32))
    key, value = tensor(rand((1, 1, 2, 8), np.float32)), tensor(rand((1, 1, 2, 8), np.float32))
    kc, vc = tensor(np.zeros((1, 5, 2, 8), np.float32)), tensor(np.zeros((1, 5, 2, 8), np.float32))
    want_k, want_v = copy(kc), copy(vc)
    out = static_out((1, 1, 4, 8), np.float32)
    runs = [bind_fast(L + "update_cache.out", key, kc, start, static_out((1,), np.float32)),
            bind_fast(L + "update_cache.out", value, vc, start, static_out((1,), np.float32)),
            bind_fast(L + "custom_sdpa.out", q, kc, vc, start, None, 0.0, True, None, out)]
    for pos in range(5):
        word[0] = pos
        for t in (q, key, value):
            t.numpy()[...] = rand(t.shape, np.float32)
        assert [run() for run in runs] == [0, 0, 0]
        ref = static_out((1, 1, 4, 8), np.float32)
        call(L + "update_cache.out", key, want_k, pos, ref)
        call(L + "update_cache.out", value, want_v, pos, ref)
        call(L + "custom_sdpa.out", q, want_k, want_v, pos, None, 0.0, True, None, ref)
        assert_close(kc.numpy(), want_k.numpy(), rtol=0, atol=0)
        assert_close(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
    word[0] = 5
    assert runs[0]() not in (None, 0)
