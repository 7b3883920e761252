"""quantized_decomposed:: kernels against ExecuTorch's own C++ kernels.

``import executorch.kernels.quantized`` registers the C++ out variants with
torch (``torch.ops.quantized_decomposed.<op>.out``): the exact kernels the
ExecuTorch runtime runs, so most tests demand bit-exact agreement. The
embedding ops have no CPU out variant there; they are compared against the
Python reference ops that ``executorch.exir.passes._quant_patterns_and_replacements``
registers.
"""
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ErrorCode, ExecuTorchError, from_numpy_dtype
from tests import parts
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

try:
    import executorch.kernels.quantized  # noqa: F401  (C++ out variants)
    import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401  (embedding refs)
    from torch.ao.quantization.fx import _decomposed  # noqa: F401
    Q = torch.ops.quantized_decomposed
    Q.add.out  # noqa: B018  (fails when the C++ library did not load)
except Exception as e:  # pragma: no cover
    parts.need("executorch", f"ExecuTorch quantized kernels unavailable: {e}")

NS = "quantized_decomposed::"
RANGES = {torch.uint8: (0, 255), torch.int8: (-128, 127), torch.int16: (-32768, 32767),
          torch.int32: (-2**31, 2**31 - 1)}
NP = {torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16, torch.int32: np.int32,
      torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}


def st(dt) -> int:
    """The ExecuTorch ScalarType code of a torch dtype."""
    return int(from_numpy_dtype(NP[dt]))


def rand_float(shape, dtype, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * scale
    if x.numel() >= 8:  # specials: exact ties, infinities, nan, huge
        flat = x.view(-1)
        flat[:8] = torch.tensor([0.25, -0.75, 1.25, float("inf"), -float("inf"), float("nan"),
                                 1e30, -1e30])
    return x.to(dtype)


def rand_int(shape, dtype, seed=0):
    lo, hi = RANGES[dtype]
    g = torch.Generator().manual_seed(seed)
    return torch.randint(max(lo, -1000), min(hi, 1000) + 1, shape, generator=g).to(dtype)


SHAPES = [(), (0,), (7,), (3, 4, 5)]


# ---- quantize / dequantize per tensor ----------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("in_dt", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("out_dt", [torch.uint8, torch.int8, torch.int16, torch.int32])
@pytest.mark.parametrize("scale,zp", [(0.1, 3), (0.5, 0), (0.0173, -7)])
def test_quantize_per_tensor(shape, in_dt, out_dt, scale, zp):
    x = rand_float(shape, in_dt)
    qmin, qmax = RANGES[out_dt]
    zp = max(zp, qmin)
    want = torch.empty(shape, dtype=out_dt)
    Q.quantize_per_tensor.out(x, scale, zp, qmin, qmax, out_dt, out=want)
    out = static_out(shape, NP[out_dt])
    call(NS + "quantize_per_tensor.out", to_np(x), scale, zp, qmin, qmax, st(out_dt), out, out)
    assert_close(out.numpy(), to_np(want))
    # Tensor-args overload: scale/zero_point as one-element tensors.
    out2 = bound_out(tuple(d + 2 for d in shape), NP[out_dt])  # must shrink to x's shape
    call(NS + "quantize_per_tensor.Tensor_out", to_np(x), np.array([scale]), np.array([zp]),
         qmin, qmax, st(out_dt), out2, out2)
    assert_close(out2.numpy(), to_np(want))


def test_quantize_matches_python_reference_on_finite_values():
    x = torch.randn(1000) * 4
    want = Q.quantize_per_tensor(x, 0.037, 5, -128, 127, torch.int8)
    out = static_out((1000,), np.int8)
    call(NS + "quantize_per_tensor.out", to_np(x), 0.037, 5, -128, 127, st(torch.int8), out)
    assert_close(out.numpy(), to_np(want))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("in_dt", [torch.uint8, torch.int8, torch.int16, torch.int32])
@pytest.mark.parametrize("out_dt", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("pass_out_dtype", [False, True])
def test_dequantize_per_tensor(shape, in_dt, out_dt, pass_out_dtype):
    x = rand_int(shape, in_dt)
    qmin, qmax = RANGES[in_dt]
    scale, zp = 0.0123, max(qmin, -4)
    out_dtype = out_dt if pass_out_dtype else None
    want = torch.empty(shape, dtype=out_dt)
    Q.dequantize_per_tensor.out(x, scale, zp, qmin, qmax, in_dt, out_dtype=out_dtype, out=want)
    code = st(out_dt) if pass_out_dtype else None
    out = static_out(shape, NP[out_dt])
    call(NS + "dequantize_per_tensor.out", to_np(x), scale, zp, qmin, qmax, st(in_dt), code, out, out)
    assert_close(out.numpy(), to_np(want), rtol=0, atol=0)
    out2 = static_out(shape, NP[out_dt])
    call(NS + "dequantize_per_tensor.Tensor_out", to_np(x), np.array([scale]), np.array([zp]),
         qmin, qmax, st(in_dt), code, out2, out2)
    assert_close(out2.numpy(), to_np(want), rtol=0, atol=0)


def test_dequantize_matches_python_reference():
    x = rand_int((4, 9), torch.int8)
    want = Q.dequantize_per_tensor(x, 0.05, 3, -128, 127, torch.int8)
    out = static_out((4, 9), np.float32)
    call(NS + "dequantize_per_tensor.out", to_np(x), 0.05, 3, -128, 127, st(torch.int8), None, out)
    assert_close(out.numpy(), to_np(want))


# ---- per channel and per token ----------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((6,), 0), ((4, 5), 0), ((4, 5), 1), ((2, 3, 4), -1),
                                        ((2, 3, 4), 1), ((3, 0), 0)])
@pytest.mark.parametrize("out_dt", [torch.uint8, torch.int8])
@pytest.mark.parametrize("in_dt", [torch.float32, torch.float64])
def test_quantize_per_channel(shape, axis, out_dt, in_dt):
    x = rand_float(shape, in_dt, seed=1)
    n = shape[axis]
    scales = torch.rand(n, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 0.1 + 0.01
    qmin, qmax = RANGES[out_dt]
    zps = torch.arange(n, dtype=torch.int64) + (qmin + 100 if qmin >= 0 else -2)
    want = torch.empty(shape, dtype=out_dt)
    Q.quantize_per_channel.out(x, scales, zps, axis, qmin, qmax, out_dt, out=want)
    out = static_out(shape, NP[out_dt])
    call(NS + "quantize_per_channel.out", to_np(x), to_np(scales), to_np(zps), axis, qmin, qmax,
         st(out_dt), out, out)
    assert_close(out.numpy(), to_np(want))


@pytest.mark.parametrize("shape,axis", [((6,), 0), ((4, 5), 0), ((4, 5), 1), ((2, 3, 4), -1),
                                        ((2, 3, 4), 1)])
@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("scale_dt", [torch.float32, torch.float64])
@pytest.mark.parametrize("out_dt", [torch.float32, torch.float16])
def test_dequantize_per_channel(shape, axis, with_zp, scale_dt, out_dt):
    x = rand_int(shape, torch.int8, seed=3)
    n = shape[axis]
    scales = (torch.rand(n, generator=torch.Generator().manual_seed(4)) * 0.1 + 0.01).to(scale_dt)
    zps = torch.arange(n, dtype=torch.int64) - 3 if with_zp else None
    want = torch.empty(shape)  # the C++ kernel writes float32 only; half is float32 rounded
    Q.dequantize_per_channel.out(x, scales, zps, axis, -128, 127, torch.int8, out_dtype=None,
                                 out=want)
    want = want.to(out_dt)
    out = static_out(shape, NP[out_dt])
    call(NS + "dequantize_per_channel.out", to_np(x), to_np(scales),
         None if zps is None else to_np(zps), axis, -128, 127, st(torch.int8), None, out, out)
    assert_close(out.numpy(), to_np(want), rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 16), (1, 1)])
def test_quantize_dequantize_per_token(shape):
    x = rand_float(shape, torch.float32, seed=5)
    tok = shape[:-1] + (1,)
    g = torch.Generator().manual_seed(6)
    scales = torch.rand(tok, generator=g, dtype=torch.float64) * 0.05 + 0.005
    zps = torch.randint(-10, 10, tok, generator=g)
    want = torch.empty(shape, dtype=torch.int8)
    Q.quantize_per_token.out(x, scales, zps, -128, 127, torch.int8, out=want)
    out = static_out(shape, np.int8)
    call(NS + "quantize_per_token.out", to_np(x), to_np(scales), to_np(zps), -128, 127,
         st(torch.int8), out, out)
    assert_close(out.numpy(), to_np(want))

    fscales = scales.float()
    want_dq = torch.empty(shape)
    Q.dequantize_per_token.out(want, fscales, zps, -128, 127, torch.int8, torch.float32, out=want_dq)
    dq = static_out(shape, np.float32)
    call(NS + "dequantize_per_token.out", to_np(want), to_np(fscales), to_np(zps), -128, 127,
         st(torch.int8), st(torch.float32), dq, dq)
    assert_close(dq.numpy(), to_np(want_dq), rtol=0, atol=0)


# ---- choose_qparams -----------------------------------------------------------------------

CHOOSE_INPUTS = {
    "randn": lambda: torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(7)),
    "positive": lambda: torch.rand(40, generator=torch.Generator().manual_seed(8)) + 1,
    "negative": lambda: -torch.rand(40, generator=torch.Generator().manual_seed(9)) - 0.5,
    "zeros": lambda: torch.zeros(5),
    "tiny": lambda: torch.tensor([1e-7, -3e-7, 2e-7]),
    "tiny_positive": lambda: torch.tensor([1e-6, 2e-6]),
    "tiny_negative": lambda: torch.tensor([-1e-6, -2e-6]),
}


@pytest.mark.parametrize("name", list(CHOOSE_INPUTS))
@pytest.mark.parametrize("qrange,qdt", [((-128, 127), torch.int8), ((0, 255), torch.uint8)])
def test_choose_qparams_tensor(name, qrange, qdt):
    x = CHOOSE_INPUTS[name]()
    ws, wz = torch.empty(1, dtype=torch.float64), torch.empty(1, dtype=torch.int64)
    Q.choose_qparams.Tensor_out(x, *qrange, 1e-7, qdt, scale_out=ws, zero_point_out=wz)
    s, z = static_out((1,), np.float64), static_out((1,), np.int64)
    call(NS + "choose_qparams.Tensor_out", to_np(x), *qrange, 1e-7, st(qdt), s, z, [s, z])
    assert_close(s.numpy(), to_np(ws), rtol=0, atol=0)
    assert_close(z.numpy(), to_np(wz))


@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 16), (4, 1)])
def test_choose_qparams_per_token_asymmetric(shape):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(10))
    x[0] = 0.0  # an all-zero token
    if shape[0] > 1:
        x[1] = 1e-6 * x[1]  # a tiny-range token
    tok = shape[:-1] + (1,)
    ws, wz = torch.empty(tok, dtype=torch.float64), torch.empty(tok, dtype=torch.int64)
    Q.choose_qparams_per_token_asymmetric.out(x, torch.float32, scale_out=ws, zero_point_out=wz)
    s, z = static_out(tok, np.float64), static_out(tok, np.int64)
    call(NS + "choose_qparams_per_token_asymmetric.out", to_np(x), st(torch.float32), s, z, [s, z])
    assert_close(s.numpy(), to_np(ws), rtol=0, atol=0)
    assert_close(z.numpy(), to_np(wz))


# ---- quantized add ------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (7,), (3, 4, 5)])
@pytest.mark.parametrize("params", [(0.1, 3, 0.2, 10, 0.25, 7), (0.013, 128, 0.07, 0, 0.05, 90)])
def test_quantized_add(shape, params):
    a_s, a_z, b_s, b_z, o_s, o_z = params
    g = torch.Generator().manual_seed(11)
    a = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
    b = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
    want = torch.empty(shape, dtype=torch.uint8)
    Q.add.out(a, a_s, a_z, 0, 255, b, b_s, b_z, 0, 255, o_s, o_z, 0, 255, out=want)
    out = static_out(shape, np.uint8)
    call(NS + "add.out", to_np(a), a_s, a_z, 0, 255, to_np(b), b_s, b_z, 0, 255, o_s, o_z, 0, 255,
         out, out)
    assert_close(out.numpy(), to_np(want))


# ---- embeddings ------------------------------------------------------------------------------

def _emb_case(nbit, groups, with_zp, scale_dt, seed=12):
    g = torch.Generator().manual_seed(seed)
    rows, dim = 10, 16
    per_byte = 8 // nbit
    if nbit == 8:
        w = torch.randint(-128, 128, (rows, dim), generator=g, dtype=torch.int8)
    else:
        w = torch.randint(0, 256, (rows, dim // per_byte), generator=g, dtype=torch.uint8)
    sshape = (rows,) if groups == 0 else (rows, groups)
    scales = (torch.rand(sshape, generator=g) * 0.1 + 0.01).to(scale_dt)
    zps = torch.randint(-3, 4, sshape, generator=g).to(scale_dt) if with_zp else None
    idx = torch.tensor([[0, 9, 3], [3, 5, 0]])
    return w, scales, zps, idx, dim


QRANGE = {8: (-128, 127), 4: (-8, 7), 2: (-2, 1)}
NAME = {8: "byte", 4: "4bit", 2: "2bit"}


@pytest.mark.parametrize("nbit", [8, 4, 2])
@pytest.mark.parametrize("groups", [0, 1, 4])
@pytest.mark.parametrize("with_zp", [False, True])
def test_embedding_out(nbit, groups, with_zp):
    w, scales, zps, idx, dim = _emb_case(nbit, groups, with_zp, torch.float32)
    qmin, qmax = QRANGE[nbit]
    op = getattr(Q, f"embedding_{NAME[nbit]}")
    want = op.default(w, scales, zps, qmin, qmax, idx)
    out = bound_out((4, 4, dim), np.float32)
    call(f"{NS}embedding_{NAME[nbit]}.out", to_np(w), to_np(scales),
         None if zps is None else to_np(zps), qmin, qmax, to_np(idx), out, out)
    assert_close(out.numpy(), to_np(want), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("nbit", [8, 4, 2])
@pytest.mark.parametrize("scale_dt,out_dt", [(torch.float32, torch.float16),
                                             (torch.float16, torch.float32),
                                             (torch.float16, torch.float16)])
def test_embedding_dtype_out(nbit, scale_dt, out_dt):
    w, scales, zps, idx, dim = _emb_case(nbit, 2, True, scale_dt, seed=13)
    qmin, qmax = QRANGE[nbit]
    op = getattr(Q, f"embedding_{NAME[nbit]}")
    want = op.dtype(w, scales, zps, qmin, qmax, idx, dtype=out_dt)
    out = static_out((2, 3, dim), NP[out_dt])
    call(f"{NS}embedding_{NAME[nbit]}.dtype_out", to_np(w), to_np(scales), to_np(zps), qmin, qmax,
         to_np(idx), st(out_dt), out, out)
    assert_close(out.numpy(), to_np(want), rtol=2e-3, atol=1e-3)


def test_embedding_index_out_of_range():
    w, scales, _, _, dim = _emb_case(8, 0, False, torch.float32)
    out = bound_out((4, dim), np.float32)
    with pytest.raises(ExecuTorchError) as e:
        call(NS + "embedding_byte.out", to_np(w), to_np(scales), None, -128, 127,
             np.array([0, 10]), out)
    assert e.value.code == ErrorCode.InvalidArgument


# ---- mixed-precision matmuls -------------------------------------------------------------------

@pytest.mark.parametrize("m,n,p", [(1, 8, 5), (4, 16, 3), (0, 4, 2)])
@pytest.mark.parametrize("dt", [torch.float32, torch.float16])
def test_mixed_mm(m, n, p, dt):
    g = torch.Generator().manual_seed(14)
    x = torch.randn(m, n, generator=g).to(dt)
    w = torch.randint(-128, 128, (n, p), generator=g, dtype=torch.int8)
    s = (torch.rand(n, generator=g) * 0.1).to(dt)
    want = torch.empty(m, p, dtype=dt)
    Q.mixed_mm.out(x, w, s, None, out=want)
    out = static_out((m, p), NP[dt])
    call(NS + "mixed_mm.out", to_np(x), to_np(w), to_np(s), None, out, out)
    tol = 1e-5 if dt == torch.float32 else 2e-2
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("m,n,p,groups", [(1, 8, 5, 0), (4, 16, 3, 1), (3, 16, 4, 4), (2, 12, 3, 3)])
@pytest.mark.parametrize("dt", [torch.float32, torch.float16])
@pytest.mark.parametrize("pass_dtype", [False, True])
def test_mixed_linear(m, n, p, groups, dt, pass_dtype):
    g = torch.Generator().manual_seed(15)
    x = torch.randn(m, n, generator=g).to(dt)
    w = torch.randint(-128, 128, (p, n), generator=g, dtype=torch.int8)
    s = (torch.rand((p,) if groups == 0 else (p, groups), generator=g) * 0.1).to(dt)
    want = torch.empty(m, p, dtype=dt)
    Q.mixed_linear.out(x, w, s, None, dt if pass_dtype else None, out=want)
    out = static_out((m, p), NP[dt])
    call(NS + "mixed_linear.out", to_np(x), to_np(w), to_np(s), None,
         st(dt) if pass_dtype else None, out, out)
    tol = 1e-5 if dt == torch.float32 else 2e-2
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol)


# ---- argument errors -----------------------------------------------------------------------------

def test_quantize_dtype_mismatch_raises():
    out = static_out((3,), np.int8)
    with pytest.raises(ExecuTorchError) as e:
        call(NS + "quantize_per_tensor.out", np.zeros(3, np.float32), 0.1, 0, 0, 255,
             st(torch.uint8), out)
    assert e.value.code == ErrorCode.InvalidArgument and "dtype" in str(e.value)


def test_dequantize_integer_input_required():
    out = static_out((3,), np.float32)
    with pytest.raises(ExecuTorchError) as e:
        call(NS + "dequantize_per_tensor.out", np.zeros(3, np.float32), 0.1, 0, 0, 255,
             st(torch.uint8), None, out)
    assert e.value.code == ErrorCode.InvalidArgument


def test_per_channel_scale_count_checked():
    out = static_out((2, 3), np.int8)
    with pytest.raises(ExecuTorchError, match="scales"):
        call(NS + "quantize_per_channel.out", np.zeros((2, 3), np.float32), np.ones(2),
             np.zeros(2, np.int64), 1, -128, 127, st(torch.int8), out)
