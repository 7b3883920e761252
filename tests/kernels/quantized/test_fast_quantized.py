"""Compiled quantized_decomposed:: kernels against the reference tier (itself tested against
torch): bit for bit, except the sgemm-based mixed matmuls (float32 tolerance)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pyruntime.cython_ext import ETensor, from_numpy_dtype
from tests.kernels.helpers import (assert_close, bound_out, call, call_fast, check_compiled,
                                   static_out)

RNG = np.random.default_rng(0)
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.float32, np.float64, np.float16, BF16]
QTYPES = [np.uint8, np.int8, np.int16, np.uint16, np.int32]
Q = "quantized_decomposed::"


def code(dt):
    return int(from_numpy_dtype(np.dtype(dt)))


def tensor(a, dim_order=None):
    """An ETensor holding ``a`` laid out in ``dim_order`` (rank 0 kept)."""
    a = np.asarray(a)
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape, dim_order)
    if a.size:
        t.numpy()[...] = a
    return t


def floats(shape, dtype, scale=10.0, specials=True):
    a = np.asarray(RNG.standard_normal(shape) * scale).astype(np.float32)
    if specials and a.size >= 6:  # NaN / inf / huge land on quant_min / quant_max
        a.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.25]
    with np.errstate(over="ignore"):
        return a.astype(dtype)


def qvals(shape, dtype):
    i = np.iinfo(dtype)
    return np.asarray(RNG.integers(max(i.min, -300), min(i.max, 300) + 1, shape)).astype(dtype)


def qrange(dtype):
    i = np.iinfo(dtype)
    return int(max(i.min, -1000)), int(min(i.max, 1000))


SHAPES = [(), (0, 3), (7,), (3, 5), (2, 3, 4)]


# ---- quantize / dequantize per tensor --------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("in_dt", FLOATS)
@pytest.mark.parametrize("out_dt", QTYPES)
def test_quantize_per_tensor(shape, in_dt, out_dt):
    x = floats(shape, in_dt)
    lo, hi = qrange(out_dt)
    for scale, zp in ((0.1, 3), (0.0173, -7)):
        check_compiled(Q + "quantize_per_tensor.out", [x, scale, zp, lo, hi, code(out_dt)],
                       shape, out_dt)
    s, z = np.array([0.05], np.float64), np.array(2, np.int64)
    check_compiled(Q + "quantize_per_tensor.Tensor_out", [x, s, z, lo, hi, None], shape, out_dt)


def test_quantize_rounds_half_to_even_and_from_float64():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.35000000000000003, 1e-45], np.float64)
    for dt in (np.float64, np.float32):
        got = check_compiled(Q + "quantize_per_tensor.out", [x.astype(dt), 1.0, 0, -128, 127,
                                                             None], x.shape, np.int8)
        assert got[:5].tolist() == [0, 2, 2, 0, -2]
    check_compiled(Q + "quantize_per_tensor.out", [x, 0.1, 0, -128, 127, None], x.shape, np.int8)


@pytest.mark.parametrize("order", [(1, 0), (0, 2, 1)])
def test_quantize_dequantize_non_contiguous(order):
    shape = (4, 6) if len(order) == 2 else (2, 3, 5)
    x = tensor(floats(shape, np.float32), order)
    check_compiled(Q + "quantize_per_tensor.out", [x, 0.1, 3, 0, 255, None], shape, np.uint8)
    check_compiled(Q + "quantize_per_tensor.out", [x, 0.1, 3, 0, 255, None], shape, np.uint8,
                   dim_order=order)
    q = tensor(qvals(shape, np.int8), order)
    check_compiled(Q + "dequantize_per_tensor.out", [q, 0.2, -1, -128, 127, None, None], shape,
                   np.float32)
    check_compiled(Q + "quantize_per_channel.out",
                   [x, np.linspace(0.05, 0.2, shape[1]), np.arange(shape[1]), 1, -128, 127,
                    None], shape, np.int8, dim_order=order)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("in_dt", QTYPES)
@pytest.mark.parametrize("out_dt", FLOATS)
def test_dequantize_per_tensor(shape, in_dt, out_dt):
    q = qvals(shape, in_dt)
    check_compiled(Q + "dequantize_per_tensor.out", [q, 0.037, 5, 0, 0, code(in_dt),
                                                     code(out_dt)], shape, out_dt)
    s, z = np.array(0.11, np.float32), np.array([-3], np.int32)
    check_compiled(Q + "dequantize_per_tensor.Tensor_out", [q, s, z, 0, 0, None, None], shape,
                   out_dt)


def test_tensor_params_are_read_at_run_time():
    x = tensor(floats((3, 4), np.float32, specials=False))
    s, z = tensor(np.array([0.1], np.float32)), tensor(np.array([4], np.int64))
    out = static_out((3, 4), np.uint8)
    from tests.kernels.helpers import bind_fast
    run = bind_fast(Q + "quantize_per_tensor.Tensor_out", x, s, z, 0, 255, None, out)
    for scale, zp in ((0.1, 4), (0.5, 100)):
        s.numpy()[...] = scale
        z.numpy()[...] = zp
        assert run() == 0
        ref = static_out((3, 4), np.uint8)
        call(Q + "quantize_per_tensor.out", x, scale, zp, 0, 255, None, ref)
        assert_close(out.numpy(), ref.numpy(), rtol=0, atol=0)


# ---- per channel / per token -------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((4, 5), 0), ((4, 5), 1), ((2, 3, 4), -1),
                                        ((2, 3, 4), 1), ((3, 0, 2), 0)])
@pytest.mark.parametrize("in_dt", FLOATS)
def test_quantize_per_channel(shape, axis, in_dt):
    n = shape[axis]
    x = floats(shape, in_dt)
    scales = np.linspace(0.02, 0.3, n).astype(np.float64)
    zps = RNG.integers(-5, 6, n).astype(np.int64)
    for out_dt in (np.int8, np.uint8, np.int32):
        lo, hi = qrange(out_dt)
        check_compiled(Q + "quantize_per_channel.out", [x, scales, zps, axis, lo, hi, None],
                       shape, out_dt)
    check_compiled(Q + "quantize_per_channel.out",
                   [x, scales.astype(np.float32), zps.astype(np.int32), axis, -128, 127, None],
                   shape, np.int8)


@pytest.mark.parametrize("shape,axis", [((4, 5), 0), ((2, 3, 4), -1), ((2, 3, 4), 1)])
@pytest.mark.parametrize("with_zp", [True, False])
@pytest.mark.parametrize("out_dt", FLOATS)
def test_dequantize_per_channel(shape, axis, with_zp, out_dt):
    n = shape[axis]
    q = qvals(shape, np.int8)
    scales = np.linspace(0.02, 0.3, n).astype(np.float32)
    zps = RNG.integers(-5, 6, n).astype(np.int64) if with_zp else None
    check_compiled(Q + "dequantize_per_channel.out", [q, scales, zps, axis, -128, 127, None,
                                                      None], shape, out_dt)
    check_compiled(Q + "dequantize_per_channel.out", [q, scales.astype(BF16), zps, axis, -128, 127,
                                                      None, None], shape, out_dt)


@pytest.mark.parametrize("shape", [(4, 8), (2, 3, 5), (3,), (2, 0)])
@pytest.mark.parametrize("in_dt", FLOATS)
def test_quantize_dequantize_per_token(shape, in_dt):
    tok = shape[:-1] + (1,)
    x = floats(shape, in_dt)
    scales = (np.abs(RNG.standard_normal(tok)) * 0.1 + 0.01).astype(np.float32)
    zps = RNG.integers(-10, 10, tok).astype(np.int64)
    q = check_compiled(Q + "quantize_per_token.out", [x, scales, zps, -128, 127, None], shape,
                       np.int8)
    check_compiled(Q + "dequantize_per_token.out", [q, scales, zps, -128, 127, None, None], shape,
                   in_dt)


def test_per_channel_and_token_param_counts_checked_at_run_time():
    x = floats((4, 5), np.float32)
    bad = np.ones(3, np.float32)
    out = static_out((4, 5), np.int8)
    assert call_fast(Q + "quantize_per_channel.out", x, bad, np.zeros(3, np.int64), 0, -128, 127,
                     None, out) not in (None, 0)
    assert call_fast(Q + "quantize_per_token.out", x, bad, np.zeros(3, np.int64), -128, 127,
                     None, out) not in (None, 0)


def test_bad_arguments_decline():
    x = floats((2, 3), np.float32)
    out = static_out((2, 3), np.uint8)
    # dtype argument disagreeing with out, a range outside the out dtype, integer input
    assert call_fast(Q + "quantize_per_tensor.out", x, 0.1, 0, 0, 255, code(np.int8), out) is None
    assert call_fast(Q + "quantize_per_tensor.out", x, 0.1, 0, -1, 255, None, out) is None
    assert call_fast(Q + "dequantize_per_tensor.out", x, 0.1, 0, 0, 255, None, None,
                     static_out((2, 3), np.float32)) is None
    assert call_fast(Q + "quantize_per_channel.out", x, np.ones(3), None, 1, 0, 255, None,
                     out) is None
    assert call_fast(Q + "quantize_per_tensor.out", x, 0.1, 0, 0, 255, 99, out) is None
    assert call_fast(Q + "quantize_per_token.out", x, np.ones((2, 1)), None, 0, 255, None,
                     out) is None


# ---- choose_qparams ------------------------------------------------------------------------

QP_INPUTS = {
    "normal": lambda: floats((4, 6), np.float32, specials=False),
    "positive": lambda: np.abs(floats((4, 6), np.float32, specials=False)) + 1,
    "negative": lambda: -np.abs(floats((4, 6), np.float32, specials=False)) - 1,
    "zeros": lambda: np.zeros((4, 6), np.float32),
    "tiny": lambda: (floats((4, 6), np.float32, specials=False) * 1e-7),
    "tiny_positive": lambda: np.abs(floats((4, 6), np.float32, specials=False)) * 1e-8,
    "nan": lambda: np.where(np.arange(24).reshape(4, 6) == 7, np.nan, 1.0).astype(np.float32),
    "empty": lambda: np.zeros((0, 6), np.float32),
}


@pytest.mark.parametrize("kind", list(QP_INPUTS))
@pytest.mark.parametrize("qrange_", [(0, 255), (-128, 127), (-8, 7)])
def test_choose_qparams_tensor(kind, qrange_):
    x = QP_INPUTS[kind]()
    for sdt, zdt in ((np.float64, np.int64), (np.float32, np.int32)):
        refs = static_out((1,), sdt), static_out((1,), zdt)
        call(Q + "choose_qparams.Tensor_out", x, *qrange_, 1e-5, None, *refs)
        outs = static_out((1,), sdt), static_out((1,), zdt)
        assert call_fast(Q + "choose_qparams.Tensor_out", x, *qrange_, 1e-5, None, *outs) == 0
        for o, r in zip(outs, refs):
            assert_close(o.numpy(), r.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("kind", [k for k in QP_INPUTS if k != "empty"])
@pytest.mark.parametrize("out_shape", ["same", "flat", "bound"])
def test_choose_qparams_per_token(kind, out_shape):
    x = QP_INPUTS[kind]()
    x3 = x.reshape(2, 2, 6)
    for inp in (x, x3, tensor(x3, (1, 0, 2))):
        rank = len(inp.shape) if isinstance(inp, ETensor) else inp.ndim
        tok = (inp.shape[:-1] + (1,))
        shape = {"same": tok, "flat": (int(np.prod(tok)),) + (1,) * (rank - 1),
                 "bound": tuple(s + 1 for s in tok)}[out_shape]

        def outs(shape):
            if out_shape == "bound":
                return bound_out(shape, np.float64), bound_out(shape, np.int64)
            return static_out(shape, np.float64), static_out(shape, np.int64)
        refs, got = outs(shape), outs(shape)
        call(Q + "choose_qparams_per_token_asymmetric.out", inp, None, *refs)
        assert call_fast(Q + "choose_qparams_per_token_asymmetric.out", inp, None, *got) == 0
        for o, r in zip(got, refs):
            assert o.shape == r.shape
            assert_close(o.numpy(), r.numpy(), rtol=0, atol=0)


# ---- quantized add -------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (0, 2)])
@pytest.mark.parametrize("dt", [np.uint8, np.int32])
def test_add(shape, dt):
    a = np.asarray(RNG.integers(0, 256, shape)).astype(dt)
    b = np.asarray(RNG.integers(0, 256, shape)).astype(dt)
    for params in ((0.1, 3, 0.2, 7, 0.25, 10, 0, 255), (0.013, 128, 0.02, 100, 0.03, 120, 10, 200)):
        sa, za, sb, zb, so, zo, lo, hi = params
        check_compiled(Q + "add.out", [a, sa, za, 0, 255, b, sb, zb, 0, 255, so, zo, lo, hi],
                       shape, dt)


def test_add_non_contiguous_and_mismatch():
    a = tensor(RNG.integers(0, 256, (3, 4)).astype(np.uint8), (1, 0))
    b = RNG.integers(0, 256, (3, 4)).astype(np.uint8)
    args = [a, 0.1, 3, 0, 255, b, 0.2, 1, 0, 255, 0.3, 2, 0, 255]
    check_compiled(Q + "add.out", args, (3, 4), np.uint8, dim_order=(1, 0))
    args[5] = b[:2]
    assert call_fast(Q + "add.out", *args, static_out((3, 4), np.uint8)) not in (None, 0)


# ---- embeddings ----------------------------------------------------------------------------

@pytest.mark.parametrize("nbit", [8, 4, 2])
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("out_dt", [np.float32, np.float16, BF16])
def test_embedding(nbit, groups, with_zp, out_dt):
    rows, dim = 7, 8
    cols = dim * nbit // 8
    w = RNG.integers(0, 256, (rows, cols)).astype(np.uint8)
    shape = (rows,) if groups == 1 else (rows, groups)
    s = (RNG.random(shape) + 0.1).astype(out_dt)
    z = RNG.integers(-3, 4, shape).astype(np.float32) if with_zp else None
    name = {8: "byte", 4: "4bit", 2: "2bit"}[nbit]
    idxs = [np.array([3, 0, 6, 3]), np.array([[1, 2], [6, 0]], np.int32)]
    if nbit == 8:  # the reference fails to unpack zero rows of packed weights
        idxs.append(np.zeros(0, np.int64))
    for idx in idxs:
        check_compiled(f"{Q}embedding_{name}.out", [w, s, z, 0, 0, idx], idx.shape + (dim,),
                       out_dt)
        check_compiled(f"{Q}embedding_{name}.dtype_out", [w, s, z, 0, 0, idx, code(out_dt)],
                       idx.shape + (dim,), out_dt)
    if nbit == 8:
        check_compiled(f"{Q}embedding_byte.out", [w.view(np.int8), s, z, 0, 0, np.array([1, 5])],
                       (2, dim), out_dt)


def test_embedding_transposed_weight_and_bad_index():
    w = RNG.integers(0, 256, (6, 4)).astype(np.uint8)
    wt = tensor(w, (1, 0))
    s = (RNG.random(6) + 0.5).astype(np.float32)
    idx = np.array([5, 1, 1])
    check_compiled(Q + "embedding_byte.out", [wt, s, None, 0, 0, idx], (3, 4), np.float32)
    check_compiled(Q + "embedding_4bit.out", [wt, s, None, 0, 0, idx], (3, 8), np.float32)
    out = static_out((3, 4), np.float32)
    assert call_fast(Q + "embedding_byte.out", w, s, None, 0, 0, np.array([6, 0, 1]),
                     out) not in (None, 0)
    assert call_fast(Q + "embedding_byte.out", w, s, None, 0, 0, np.array([-1, 0, 1]),
                     out) not in (None, 0)


# ---- mixed matmuls -------------------------------------------------------------------------

def _check_mixed(name, args, shape, out_dt, rtol):
    ref = static_out(shape, out_dt)
    call(name, *args, ref)
    for out in (static_out(shape, out_dt), bound_out((shape[0] + 3, shape[1]), out_dt)):
        assert call_fast(name, *args, out) == 0
        assert out.shape == shape
        assert_close(out.numpy(), ref.numpy(), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("m,n,p", [(1, 16, 8), (3, 5, 7), (2, 1024, 100), (0, 4, 3)])
@pytest.mark.parametrize("dt", [np.float32, np.float16, BF16, np.float64])
def test_mixed_mm(m, n, p, dt):
    x = RNG.standard_normal((m, n)).astype(dt)
    w = RNG.integers(-128, 128, (n, p)).astype(np.int8)
    s = (RNG.random(n) * 0.1 + 0.01).astype(np.float32)
    tol = 1e-5 if dt in (np.float32, np.float64) else 2e-2
    _check_mixed(Q + "mixed_mm.out", [x, w, s, None], (m, p), dt, tol)


@pytest.mark.parametrize("m,n,p,groups", [(1, 16, 8, 1), (3, 12, 5, 3), (2, 10, 4, 4),
                                          (2, 1024, 100, 8), (4, 6, 3, 0)])
@pytest.mark.parametrize("dt", [np.float32, np.float16, BF16])
def test_mixed_linear(m, n, p, groups, dt):
    x = RNG.standard_normal((m, n)).astype(dt)
    w = RNG.integers(-128, 128, (p, n)).astype(np.int8)
    s = (RNG.random((p, groups) if groups else (p,)) * 0.1 + 0.01).astype(dt)
    tol = 1e-5 if dt == np.float32 else 2e-2
    _check_mixed(Q + "mixed_linear.out", [x, w, s, None, None], (m, p), dt, tol)
    _check_mixed(Q + "mixed_linear.out", [x, w, s, None, code(np.float32)], (m, p), np.float32,
                 tol)


def test_mixed_linear_transposed_input_and_bad_groups():
    x = tensor(RNG.standard_normal((3, 8)).astype(np.float32), (1, 0))
    w = RNG.integers(-128, 128, (5, 8)).astype(np.int8)
    s = (RNG.random((5, 2)) + 0.1).astype(np.float32)
    _check_mixed(Q + "mixed_linear.out", [x, w, s, None, None], (3, 5), np.float32, 1e-5)
    bad = (RNG.random((5, 5)) + 0.1).astype(np.float32)  # 8 columns do not split into 5 groups
    assert call_fast(Q + "mixed_linear.out", x, w, bad, None, None,
                     static_out((3, 5), np.float32)) not in (None, 0)
