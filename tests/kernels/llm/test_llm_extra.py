"""kernels/llm/reference_extra.py and kernels/llm/typed_extra.py: quantized SDPA, gated delta rule,
quantized MoE FFN, llama::fallback and preprocess::tile_crop.

References: ExecuTorch's C++ kernels, loaded into torch by
``executorch.extension.llm.custom_ops.custom_ops`` (``llama::fallback`` is a Python
identity there). The compiled tier is checked against the reference tier. The last
test exports a small program using three of the ops and runs it in executorch.runtime
and in pyruntime (both tiers).

The C++ MoE kernel aborts the process (ET_CHECK) on bad arguments: only valid cases
are ever passed to torch.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import Dynamism, ErrorCode, ETensor, ExecuTorchError, from_numpy_dtype
from tests import parts
from tests.kernels.helpers import (assert_close, bind_fast, bound_out, call, call_fast,
                                   check_compiled, static_out, to_np, to_torch)

try:
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    L = torch.ops.llama
    L.gated_delta_rule.default, L.quantized_moe_ffn.default, L.custom_quantized_sdpa.default  # noqa
    torch.ops.preprocess.tile_crop.out  # noqa: B018
    CPP = None
except Exception as e:  # pragma: no cover
    CPP = f"ExecuTorch's llama custom ops are unavailable: {e}"
needs_cpp = parts.skip_unless(CPP is None, "executorch", CPP)

BF16 = np.dtype(ml_dtypes.bfloat16)
SDPA = "llama::custom_quantized_sdpa.out"
GDR = "llama::gated_delta_rule.out"
MOE = "llama::quantized_moe_ffn.out"


def tt(a):
    """A kernel argument for torch: numpy arrays (bfloat16 too) become tensors."""
    return to_torch(a) if isinstance(a, np.ndarray) else a


def raises_invalid(name, *args, match):
    with pytest.raises(ExecuTorchError) as e:
        call(name, *args)
    assert e.value.code == ErrorCode.InvalidArgument
    assert name in str(e.value) and match in str(e.value), str(e.value)


def with_dim_order(x: np.ndarray, dim_order) -> ETensor:
    t = ETensor(from_numpy_dtype(x.dtype), x.shape, dim_order)
    t.storage = np.ascontiguousarray(x.transpose(dim_order)).reshape(-1).view(np.uint8).copy()
    assert np.array_equal(t.numpy(), x)
    return t


# ---- sample cases ---------------------------------------------------------------------

def gdr_args(seed, b, h, hs, t, k, v, scalar):
    rng = np.random.default_rng(seed)
    f = np.float32
    return [rng.standard_normal((b, h, t, k)).astype(f),
            (rng.standard_normal((b, hs, t, k)) * 0.3).astype(f),
            rng.standard_normal((b, hs, t, v)).astype(f),
            rng.uniform(0.05, 1, (b, hs, t) if scalar else (b, hs, t, k)).astype(f),
            (1 / (1 + np.exp(-rng.standard_normal((b, hs, t))))).astype(f),
            rng.standard_normal((b, hs, k, v)).astype(f)]


def quantize_per_token(x):
    """Asymmetric int8 per token (last dim), as choose_qparams_per_token_asymmetric."""
    lo, hi = np.minimum(x.min(-1, keepdims=True), 0), np.maximum(x.max(-1, keepdims=True), 0)
    scale = np.where(hi > lo, (hi - lo) / 255, 1).astype(np.float32)
    zp = np.clip(np.round(-128 - lo / scale), -128, 127).astype(np.int8)
    return np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8), zp, scale


def sdpa_args(seed, b, s, h, hk, d, kv_len, start, causal, mask, dim2, scale=None, dtype=np.int8):
    """custom_quantized_sdpa's arguments (without out), quantized unless ``dtype`` is float."""
    rng = np.random.default_rng(seed)
    qs, ks = ((b, h, s, d), (b, hk, kv_len, d)) if dim2 else ((b, s, h, d), (b, kv_len, hk, d))
    xs = [rng.standard_normal(sh).astype(np.float32) for sh in (qs, ks, ks)]
    m = rng.standard_normal((s, kv_len)).astype(np.float32) if mask else None
    if dtype != np.int8:
        return [x.astype(dtype) for x in xs] + [start, m, 0.0, causal, scale] + [None] * 6 + [dim2]
    (q, qz, qsc), (k, kz, ksc), (v, vz, vsc) = map(quantize_per_token, xs)
    return [q, k, v, start, m, 0.0, causal, scale, qz, qsc, kz, ksc, vz, vsc, dim2]


def pack_universal(q, scales, group_size, nbit):
    """torchao's "universal" linear packing (nr=8, kr=16, sr=2) of int8 values ``q`` [n, k]
    with per-group ``scales`` [n, k / group_size], as ``_pack_8bit_act_{4,8}bit_weight``
    (format in kernels/llm/reference_extra.py). torchao's packer is not built here."""
    n, k = q.shape
    nb, g, c = -(-n // 8), k // group_size, group_size // 16
    qp = np.zeros((nb * 8, k), np.int8)
    qp[:n] = q
    sp = np.zeros((nb * 8, g), np.float32)
    sp[:n] = scales
    v = qp.reshape(nb, 8, g, c, 2, 8).transpose(0, 2, 3, 4, 1, 5).reshape(nb, g, c, 128)
    if nbit == 4:
        u = (v.astype(np.int16) + 8).astype(np.uint8).reshape(nb, g, c, 4, 2, 16)
        vals = (u[..., 0, :] | (u[..., 1, :] << 4)).reshape(nb, g, c * 64)
    else:
        vals = v.view(np.uint8).reshape(nb, g, c * 128)
    sc = sp.reshape(nb, 8, g).transpose(0, 2, 1).copy().view(np.uint8)
    sums = qp.astype(np.int32).reshape(nb, 8, g, group_size).sum(-1).astype(np.int32)
    body = np.concatenate([vals, sc, sums.transpose(0, 2, 1).copy().view(np.uint8)], axis=-1)
    head = np.zeros(16, np.int32)
    head[:2] = 6712, 1  # magic, "linear_8bit_act_xbit_weight_universal"
    return np.concatenate([head.view(np.uint8), body.reshape(-1)])


def moe_args(seed, t, d, f, e, k, gs, nbit, score, bias, route_scale):
    rng = np.random.default_rng(seed)
    lim = 2 ** (nbit - 1)

    def weight(n, kk):
        q = rng.integers(-lim, lim, (n, kk)).astype(np.int8)
        return pack_universal(q, rng.uniform(0.01, 0.06, (n, kk // gs)).astype(np.float32),
                              gs, nbit)
    x = rng.standard_normal((t, d)).astype(np.float32)
    gate = rng.standard_normal((e, d)).astype(np.float32)
    eb = rng.standard_normal(e).astype(np.float32) if bias else np.zeros(0, np.float32)
    w13 = np.stack([weight(2 * f, d) for _ in range(e)])
    w2 = np.stack([weight(d, f) for _ in range(e)])
    return [x, gate, eb, w13, w2, k, e, f, d, gs, nbit, score, route_scale]


GDR_CASES = [(2, 3, 3, 4, 5, 6, False), (2, 4, 2, 1, 5, 6, True), (1, 4, 2, 35, 8, 3, False),
             (2, 3, 3, 40, 5, 6, True), (1, 2, 1, 0, 3, 4, False), (1, 1, 1, 1, 16, 16, False)]
SDPA_CASES = [  # b, s, h, hk, d, kv_len, start, causal, mask, dim2(, scale)
    (1, 3, 4, 4, 8, 10, 2, True, False, False), (2, 1, 4, 2, 8, 10, 5, True, False, True),
    (1, 4, 2, 1, 16, 6, 0, False, True, False), (1, 4, 4, 2, 4, 12, 3, False, False, True, 0.3),
    (1, 1, 2, 2, 32, 40, 39, True, False, False), (2, 5, 2, 2, 8, 5, 0, True, False, True)]
MOE_CASES = [  # t, d, f, e, k, group, nbit, score, bias, route_scale
    (5, 32, 32, 4, 2, 32, 4, "sigmoid", True, 2.5), (3, 64, 48, 6, 3, 16, 4, "softmax", False, 1.0),
    (4, 32, 64, 5, 2, 32, 8, "sigmoid", False, 1.0), (1, 16, 16, 3, 3, 16, 8, "sigmoid", True, 0.0),
    (7, 32, 32, 9, 4, 16, 4, "softmax", False, 1.0), (9, 48, 16, 8, 1, 16, 4, "sigmoid", True, 1.5)]


# ---- reference tier vs ExecuTorch's C++ kernels ---------------------------------------------

@needs_cpp
@pytest.mark.parametrize("case", GDR_CASES)
@pytest.mark.parametrize("name", ["gated_delta_rule", "channelwise_gated_delta_rule"])
def test_gated_delta_rule_vs_cpp(case, name):
    args = gdr_args(1, *case)
    want_o, want_s = (t.numpy() for t in getattr(L, name)(*map(tt, args)))
    o, s = static_out(want_o.shape, np.float32), static_out(want_s.shape, np.float32)
    initial = args[5].copy()
    call(f"llama::{name}.out", *args, o, s)
    # T > 1 runs the C++ chunked (WY) algorithm: equal to the recurrence up to rounding
    assert_close(o.numpy(), want_o, rtol=1e-4, atol=1e-4)
    assert_close(s.numpy(), want_s, rtol=1e-4, atol=1e-4)
    assert np.array_equal(args[5], initial)  # initial_state is read-only


def test_gated_delta_rule_bad_args():
    q, k, v, d, b, s0 = gdr_args(0, 1, 3, 2, 2, 4, 5, False)
    out, fs = static_out((1, 3, 2, 5), np.float32), static_out((1, 2, 4, 5), np.float32)
    raises_invalid(GDR, q, k, v, d, b, s0, out, fs, match="key")  # 3 heads over 2 state heads
    q, k, v, d, b, s0 = gdr_args(0, 1, 2, 1, 2, 4, 5, False)
    out, fs = static_out((1, 2, 2, 5), np.float32), static_out((1, 1, 4, 5), np.float32)
    raises_invalid(GDR, q, k, v, d[..., :3], b, s0, out, fs, match="decay")
    raises_invalid(GDR, q, k, v, d, b[:, :, :1], s0, out, fs, match="beta")
    raises_invalid(GDR, q.astype(np.float64), k, v, d, b, s0, out, fs, match="query")
    state = ETensor.from_array(s0.copy())
    raises_invalid(GDR, q, k, v, d, b, state, out, state, match="final_state_out")


@needs_cpp
@pytest.mark.parametrize("case", SDPA_CASES)
def test_quantized_sdpa_int8_vs_cpp(case):
    args = sdpa_args(2, *case)
    want = L.custom_quantized_sdpa(*map(tt, args)).numpy()
    out = static_out(want.shape, np.float32)
    call(SDPA, *args, out)
    assert_close(out.numpy(), want, rtol=2e-5, atol=2e-5)


@needs_cpp
@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float16, 1e-2), (BF16, 3e-2)])
@pytest.mark.parametrize("dim2", [False, True])
def test_quantized_sdpa_float_vs_cpp(dtype, tol, dim2):
    """Float q/k/v: plain custom_sdpa in either layout; the out keeps the query's dtype."""
    args = sdpa_args(3, 1, 3, 4, 2, 8, 7, 2, True, False, dim2, dtype=dtype)
    targs = list(map(tt, args))
    want = torch.empty(targs[0].shape, dtype=targs[0].dtype)
    L.custom_quantized_sdpa.out(*targs, out=want)
    out = static_out(args[0].shape, dtype)
    call(SDPA, *args, out)
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol)


def test_quantized_sdpa_bad_args():
    args = sdpa_args(0, 1, 2, 2, 2, 4, 6, 1, True, False, False)
    out = static_out(args[0].shape, np.float32)
    raises_invalid(SDPA, *args[:8], None, *args[9:], out, match="q_zero_points")
    raises_invalid(SDPA, *args, static_out(args[0].shape, np.float16), match="out")
    bad = list(args)
    bad[11] = args[11][:, :3]  # k_scales of 3 positions for 6 keys
    raises_invalid(SDPA, *bad, out, match="k_scales")
    bad = list(args)
    bad[4] = np.zeros((2, 6), np.float32)  # a mask with is_causal
    raises_invalid(SDPA, *bad, out, match="attn_mask")
    bad = list(args)
    bad[3] = 5  # start_pos + 2 > 6 keys
    raises_invalid(SDPA, *bad, out, match="start_pos")


@needs_cpp
@pytest.mark.parametrize("case", MOE_CASES)
def test_moe_vs_cpp(case):
    args = moe_args(4, *case)
    want = L.quantized_moe_ffn(*map(tt, args)).numpy()
    out = static_out(want.shape, np.float32)
    call(MOE, *args, out)
    assert_close(out.numpy(), want, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(want).max())))


@needs_cpp
def test_moe_routing_edges_vs_cpp():
    """Tied router scores (lower expert index wins), a NaN token, and sigmoid scores whose
    sum is below FLT_MIN (the C++ clamps the denominator to FLT_MIN, not + eps)."""
    for score, col in (("sigmoid", [1, 1, 1, 1]), ("softmax", [1, 1, 1, 1]),
                       ("sigmoid", [-90, -89, -88.5, -95])):
        args = moe_args(5, 2, 32, 32, 4, 2, 32, 4, score, False, 2.0)
        args[0] = np.zeros((3, 32), np.float32)
        args[0][:, 0] = [1, np.nan, 0.5]
        args[1] = np.zeros((4, 32), np.float32)
        args[1][:, 0] = col
        want = L.quantized_moe_ffn(*map(tt, args)).numpy()
        out = static_out(want.shape, np.float32)
        call(MOE, *args, out)
        assert np.isnan(want[1]).all() and np.isnan(out.numpy()[1]).all()
        assert_close(out.numpy()[[0, 2]], want[[0, 2]], rtol=1e-5, atol=1e-6)
        assert np.abs(want[[0, 2]]).max() > 0


def test_moe_bad_args():
    args = moe_args(0, 2, 32, 32, 4, 2, 32, 4, "sigmoid", True, 1.0)
    out = static_out((2, 32), np.float32)
    raises_invalid(MOE, *args[:11], "softmax", 1.0, out, match="expert_bias")
    raises_invalid(MOE, *args[:11], "relu", 1.0, out, match="score_func")
    raises_invalid(MOE, *args[:9], 8, *args[10:], out, match="group_size")  # not a multiple of 16
    raises_invalid(MOE, *args[:3], args[3][:, :-1], *args[4:], out, match="packed_w13")
    raises_invalid(MOE, *args[:5], 5, *args[6:], out, match="num_activated_experts")
    raises_invalid(MOE, *args[:10], 3, *args[11:], out, match="weight_nbit")
    raises_invalid(MOE, *args, static_out((2, 32), np.float64), match="out")


def test_unpack_roundtrip():
    from pyruntime.kernels.llm.reference_extra import unpack_weight
    rng = np.random.default_rng(0)
    for nbit, (n, k, gs) in ((4, (13, 64, 32)), (8, (8, 32, 16)), (4, (3, 16, 16))):
        q = rng.integers(-2 ** (nbit - 1), 2 ** (nbit - 1), (n, k)).astype(np.int8)
        s = rng.uniform(0.5, 2, (n, k // gs)).astype(np.float32)
        w = unpack_weight(pack_universal(q, s, gs, nbit), n, k, gs, nbit)
        assert np.array_equal(w, q * np.repeat(s, gs, axis=1))


DTYPES = [np.float32, np.float64, np.float16, BF16, np.int64, np.int32, np.int16, np.int8,
          np.uint8, np.bool_]


def rand(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return np.asarray(rng.standard_normal(shape) * 5).astype(np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fallback(dtype):
    x = rand((2, 3, 4), dtype)
    want = to_np(L.fallback(tt(x))) if CPP is None else x  # the torch op is the identity
    out = bound_out((3, 3, 4), dtype)
    call("llama::fallback.out", x, out)
    assert_close(out.numpy(), want, rtol=0, atol=0)
    check_compiled("llama::fallback.out", [x], x.shape, dtype)
    check_compiled("llama::fallback.out", [rand((), dtype)], (), dtype)
    other = np.int32 if dtype == np.float32 else np.float32
    raises_invalid("llama::fallback.out", x, static_out((2, 3, 4), other), match="output")


@needs_cpp
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,tile", [((3, 4, 6), 2), ((1, 6, 3), 3), ((2, 4, 4), 4),
                                        ((3, 0, 4), 2)])
def test_tile_crop_vs_cpp(dtype, shape, tile):
    x = rand(shape, dtype, seed=sum(shape))
    c, h, w = shape
    xt = tt(x)
    want = torch.empty(h // tile * (w // tile), c, tile, tile, dtype=xt.dtype)
    torch.ops.preprocess.tile_crop.out(xt, tile, out=want)
    ref = check_compiled("preprocess::tile_crop.out", [x, tile], tuple(want.shape), dtype)
    assert_close(ref, to_np(want), rtol=0, atol=0)


def test_tile_crop_layouts_and_errors():
    x = rand((3, 4, 6), np.float32)
    ref = static_out((6, 3, 2, 2), np.float32)
    call("preprocess::tile_crop.out", x, 2, ref)
    for order in ((1, 2, 0), (2, 1, 0)):  # a channels-last / transposed input
        check_compiled("preprocess::tile_crop.out", [with_dim_order(x, order), 2], (6, 3, 2, 2),
                       np.float32)
    out = ETensor.empty(from_numpy_dtype(np.float32), (6, 3, 2, 2), (0, 2, 3, 1))
    assert call_fast("preprocess::tile_crop.out", x, 2, out) == 0
    assert_close(out.numpy(), ref.numpy(), rtol=0, atol=0)
    raises_invalid("preprocess::tile_crop.out", x, 4, static_out((1, 3, 4, 4), np.float32),
                   match="tile_size")
    raises_invalid("preprocess::tile_crop.out", x, 2, static_out((6, 3, 2, 2), np.int32),
                   match="out")
    assert call_fast("preprocess::tile_crop.out", x, 4, static_out((1, 3, 4, 4), np.float32)) \
        is None


# ---- compiled tier vs reference tier ------------------------------------------------------

@pytest.mark.parametrize("case", GDR_CASES)
def test_fast_gated_delta_rule(case):
    args = gdr_args(6, *case)
    b, h, hs, t, k, v, _ = case
    ref_o, ref_s = static_out((b, h, t, v), np.float32), static_out((b, hs, k, v), np.float32)
    call(GDR, *args, ref_o, ref_s)
    for o, s in ((static_out((b, h, t, v), np.float32), static_out((b, hs, k, v), np.float32)),
                 (bound_out((b, h, t + 3, v), np.float32), bound_out((b, hs, k, v), np.float32))):
        assert call_fast(GDR, *args, o, s) == 0
        assert o.shape == ref_o.shape and s.shape == ref_s.shape
        assert_close(o.numpy(), ref_o.numpy(), rtol=1e-5, atol=1e-5)
        assert_close(s.numpy(), ref_s.numpy(), rtol=1e-5, atol=1e-5)


def test_fast_gated_delta_rule_dynamic_and_declines():
    """Bound once, run at two sequence lengths (sizes are read at run time)."""
    full = gdr_args(7, 1, 2, 1, 6, 4, 3, False)
    ts = [ETensor.empty(from_numpy_dtype(np.float32), a.shape,
                        dynamism=Dynamism.DYNAMIC_BOUND) for a in full[:5]]
    s0 = ETensor.from_array(full[5])
    o, fs = bound_out((1, 2, 6, 3), np.float32), static_out((1, 1, 4, 3), np.float32)
    run = bind_fast(GDR, *ts, s0, o, fs)
    for t in (6, 2):
        part = [a[:, :, :t] for a in full[:5]]
        for e, a in zip(ts, part):
            e.write(a)
        assert run() == 0
        ro, rs = static_out((1, 2, t, 3), np.float32), static_out((1, 1, 4, 3), np.float32)
        call(GDR, *part, full[5], ro, rs)
        assert_close(o.numpy(), ro.numpy(), rtol=1e-5, atol=1e-5)
        assert_close(fs.numpy(), rs.numpy(), rtol=1e-5, atol=1e-5)
    q, k, v, d, b, s0 = gdr_args(0, 1, 3, 2, 2, 4, 5, False)
    assert call_fast(GDR, q, k, v, d, b, s0, static_out((1, 3, 2, 5), np.float32),
                     static_out((1, 2, 4, 5), np.float32)) is None  # 3 heads over 2


@pytest.mark.parametrize("case", SDPA_CASES)
@pytest.mark.parametrize("dtype", [np.int8, np.float32])
def test_fast_quantized_sdpa(case, dtype):
    args = sdpa_args(8, *case, dtype=dtype)
    ref = static_out(args[0].shape, np.float32)
    call(SDPA, *args, ref)
    for out in (static_out(args[0].shape, np.float32),
                bound_out(tuple(s + 1 for s in args[0].shape), np.float32)):
        assert call_fast(SDPA, *args, out) == 0
        assert_close(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (BF16, 1e-2)])
def test_fast_quantized_sdpa_half_and_layouts(dtype, tol):
    args = sdpa_args(9, 2, 3, 4, 2, 8, 7, 2, True, False, True, dtype=dtype)
    ref = static_out(args[0].shape, dtype)
    call(SDPA, *args, ref)
    out = static_out(args[0].shape, dtype)
    assert call_fast(SDPA, *args, out) == 0
    assert_close(out.numpy(), ref.numpy(), rtol=tol, atol=tol)
    # int8 q/k/v/qparams laid out in another dim order: the kernel follows the strides
    args = sdpa_args(10, 1, 3, 2, 2, 8, 5, 0, False, True, False)
    ref = static_out(args[0].shape, np.float32)
    call(SDPA, *args, ref)
    moved = [with_dim_order(a, (0, 2, 1, 3)) if isinstance(a, np.ndarray) and a.ndim == 4 else a
             for a in args]
    out = ETensor.empty(from_numpy_dtype(np.float32), args[0].shape, (0, 2, 1, 3))
    assert call_fast(SDPA, *moved, out) == 0
    assert_close(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


def test_fast_quantized_sdpa_declines():
    args = sdpa_args(0, 1, 2, 2, 2, 4, 6, 1, True, False, False)
    assert call_fast(SDPA, *args[:8], None, *args[9:], static_out((1, 2, 2, 4), np.float32)) \
        is None
    assert call_fast(SDPA, *args, static_out((1, 2, 2, 4), np.float16)) is None
    bad = list(args)
    bad[3] = 5
    assert call_fast(SDPA, *bad, static_out((1, 2, 2, 4), np.float32)) is None


@pytest.mark.parametrize("case", MOE_CASES)
def test_fast_moe(case):
    args = moe_args(11, *case)
    t, d = case[0], case[1]
    ref = static_out((t, d), np.float32)
    call(MOE, *args, ref)
    scale = max(1.0, float(np.abs(ref.numpy()).max()))
    for out in (static_out((t, d), np.float32), bound_out((t + 2, d), np.float32)):
        assert call_fast(MOE, *args, out) == 0
        assert_close(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5 * scale)


def test_fast_moe_dynamic_tokens_and_declines():
    args = moe_args(12, 6, 32, 32, 4, 2, 32, 4, "sigmoid", True, 2.5)
    x = ETensor.empty(from_numpy_dtype(np.float32), (6, 32), dynamism=Dynamism.DYNAMIC_BOUND)
    out = bound_out((6, 32), np.float32)
    run = bind_fast(MOE, x, *args[1:], out)
    for t in (6, 1, 4):
        x.write(args[0][:t])
        assert run() == 0
        ref = static_out((t, 32), np.float32)
        call(MOE, args[0][:t], *args[1:], ref)
        assert_close(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
    assert call_fast(MOE, *args[:11], "softmax", 1.0, static_out((6, 32), np.float32)) is None
    assert call_fast(MOE, *args[:9], 8, *args[10:], static_out((6, 32), np.float32)) is None


# ---- a program: exported with ExecuTorch, run in executorch.runtime and in pyruntime -------

FIXTURES = Path(os.environ.get("PYRUNTIME_FIXTURES") or Path(__file__).parents[2] / ".fixtures")
PROGRAM_VERSION = "1"


class _LlmExtra(torch.nn.Module):
    """gated delta rule + quantized MoE FFN + quantized SDPA in one graph."""

    def __init__(self):
        super().__init__()
        x, gate, eb, w13, w2, *self.moe_params = moe_args(20, 3, 32, 32, 4, 2, 32, 4, "sigmoid",
                                                          True, 2.5)
        for name, a in (("gate", gate), ("eb", eb), ("w13", w13), ("w2", w2)):
            self.register_buffer(name, torch.from_numpy(a))

    def forward(self, q, k, v, decay, beta, s0, x, qi, ki, vi, qz, qs, kz, ks, vz, vs):
        o, s = torch.ops.llama.gated_delta_rule(q, k, v, decay, beta, s0)
        y = torch.ops.llama.quantized_moe_ffn(x, self.gate, self.eb, self.w13, self.w2,
                                              *self.moe_params)
        a = torch.ops.llama.custom_quantized_sdpa(qi, ki, vi, 1, None, 0.0, True, None,
                                                  qz, qs, kz, ks, vz, vs, False)
        return o + 1, s, y * 2, a


def _program_inputs():
    s = sdpa_args(21, 1, 3, 4, 2, 8, 6, 1, True, False, False)
    return (gdr_args(22, 1, 4, 2, 3, 8, 4, False) + [moe_args(23, 3, 32, 32, 4, 2, 32, 4,
                                                                "sigmoid", True, 2.5)[0]]
            + s[:3] + s[8:14])


def _program_path() -> Path:
    """The exported .pte, cached under tests/.fixtures (rebuilt when versions change)."""
    import importlib.metadata as md
    key = hashlib.sha256(" ".join([PROGRAM_VERSION, torch.__version__, md.version("executorch")])
                         .encode()).hexdigest()[:16]
    path = FIXTURES / f"llm_extra_{key}.pte"
    if not path.exists():
        from executorch.exir import EdgeCompileConfig, to_edge
        ep = torch.export.export(_LlmExtra(), tuple(map(tt, _program_inputs())))
        pte = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False)) \
            .to_executorch().buffer
        FIXTURES.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(pte)
        tmp.replace(path)
    return path


@needs_cpp
def test_program_vs_executorch_runtime():
    import pyruntime
    from executorch.runtime import Runtime
    path = _program_path()
    inputs = _program_inputs()
    want = [t.numpy() for t in Runtime.get().load_program(path).load_method("forward")
            .execute(list(map(tt, inputs)))]
    program = pyruntime.Runtime.get().load_program(path)
    for tier in ("reference", "fast"):
        method = program.load_method("forward", tier=tier)
        if tier == "fast":  # every instruction, the three custom ops included, runs compiled
            names = [ins.name for ins in method._fast.flat]
            assert {GDR, MOE, SDPA} <= set(names) and method._fast.compiled == len(names)
        got = method.execute(inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(np.asarray(g), w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(w).max())))
