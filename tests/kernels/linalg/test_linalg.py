import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8]
TOL = {torch.float32: 1e-4, torch.float64: 1e-10, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def _rand(shape, dtype, seed=0):
    shape = (shape,) if isinstance(shape, int) else shape
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    lo = 0 if dtype == torch.uint8 else -9
    return torch.randint(lo, 10, shape, generator=g).to(dtype)


def _check(out, want, dtype):
    tol = TOL.get(dtype, 0)
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol * 4)


@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 7, 1), (0, 3, 2), (4, 0, 3), (16, 33, 9)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_mm(m, k, n, dtype):
    a, b = _rand((m, k), dtype), _rand((k, n), dtype, 1)
    want = torch.mm(a, b)
    out = static_out((m, n), to_np(want).dtype)
    call("aten::mm.out", to_np(a), to_np(b), out)
    _check(out, want, dtype)


@pytest.mark.parametrize("bs,m,k,n", [(2, 3, 4, 5), (1, 1, 6, 2), (0, 2, 2, 2), (3, 5, 1, 4)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm(bs, m, k, n, dtype):
    a, b = _rand((bs, m, k), dtype), _rand((bs, k, n), dtype, 1)
    want = torch.bmm(a, b)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::bmm.out", to_np(a), to_np(b), out)
    _check(out, want, dtype)


@pytest.mark.parametrize("self_shape", [(3, 5), (5,), (1, 5), (3, 1), ()])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1.5)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_addmm(self_shape, beta, alpha, dtype):
    s = _rand(self_shape, dtype, 2)
    a, b = _rand((3, 4), dtype), _rand((4, 5), dtype, 1)
    want = torch.addmm(s, a, b, beta=beta, alpha=alpha)
    out = static_out((3, 5), to_np(want).dtype)
    call("aten::addmm.out", to_np(s), to_np(a), to_np(b), beta, alpha, out)
    _check(out, want, dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_addmm_int(dtype):
    s, a, b = _rand((5,), dtype, 2), _rand((3, 4), dtype), _rand((4, 5), dtype, 1)
    want = torch.addmm(s, a, b, beta=2, alpha=3)
    out = static_out((3, 5), to_np(want).dtype)
    call("aten::addmm.out", to_np(s), to_np(a), to_np(b), 2, 3, out)
    _check(out, want, dtype)


def test_addmm_beta_zero_ignores_nan():
    s = np.full((2, 2), np.nan, np.float32)
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    out = static_out((2, 2), np.float32)
    call("aten::addmm.out", s, a, b, 0, 1, out)
    assert_close(out.numpy(), np.full((2, 2), 3, np.float32))


def test_mm_shape_mismatch_raises():
    with pytest.raises(ExecuTorchError, match="mat2"):
        call("aten::mm.out", np.zeros((2, 3), np.float32), np.zeros((4, 2), np.float32),
             static_out((2, 2), np.float32))


def test_mm_dynamic_out():
    a, b = np.random.rand(3, 4).astype(np.float32), np.random.rand(4, 2).astype(np.float32)
    out = bound_out((8, 2), np.float32)
    call("aten::mm.out", a, b, out)
    assert out.shape == (3, 2)
    assert_close(out.numpy(), a @ b, rtol=1e-5)


@pytest.mark.parametrize("in_shape,w_shape,bias", [
    ((3, 4), (5, 4), True), ((2, 3, 4), (5, 4), False), ((4,), (5, 4), True),
    ((0, 4), (2, 4), True),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int64])
def test_linear(in_shape, w_shape, bias, dtype):
    x, w = _rand(in_shape, dtype), _rand(w_shape, dtype, 1)
    b = _rand(w_shape[0], dtype, 2) if bias else None
    want = torch.ops.aten.linear(x, w, b)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::linear.out", to_np(x), to_np(w), None if b is None else to_np(b), out)
    _check(out, want, dtype)


@pytest.mark.parametrize("s1,s2", [((4, 3), (5, 3)), ((2, 4, 3), (2, 6, 3)),
                                   ((2, 1, 4, 3), (3, 5, 3)), ((30, 4), (7, 4)),
                                   ((3, 0), (2, 0))])
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, float("inf")])
@pytest.mark.parametrize("compute_mode", [None, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist(s1, s2, p, compute_mode, dtype):
    a, b = _rand(s1, dtype), _rand(s2, dtype, 1)
    want = torch.ops.aten._cdist_forward(a, b, p, compute_mode)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::_cdist_forward.out", to_np(a), to_np(b), p, compute_mode, out)
    tol = TOL[dtype] * (10 if dtype == torch.float32 else 1)
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(5, 3), (2, 4), (1, 3), (6, 1)])
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 1.5, float("inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pdist(shape, p, dtype):
    x = _rand(shape, dtype)
    want = torch.ops.aten._pdist_forward(x, p)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::_pdist_forward.out", to_np(x), p, out)
    tol = TOL[dtype]
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol)


# ---- ExecuTorch's accumulation order, bit for bit -------------------------------------

def _running_sum_matmul(a, b, acc_dtype):
    """vec_matmul's loop: each output a running sum from zero, in order, in ``acc_dtype``."""
    out = np.zeros((a.shape[0], b.shape[1]), acc_dtype)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = acc_dtype(0)
            for t in range(a.shape[1]):
                acc = acc + acc_dtype(a[i, t]) * acc_dtype(b[t, j])
            out[i, j] = acc
    return out


@pytest.mark.parametrize("m,k,n", [(3, 70, 5), (1, 300, 2), (40, 9, 1)])
def test_products_match_executorch_loops_bit_for_bit(m, k, n):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    s = rng.standard_normal((n,)).astype(np.float32)
    want = _running_sum_matmul(a, b, np.float32)
    out = static_out((m, n), np.float32)
    call("aten::mm.out", a, b, out)
    np.testing.assert_array_equal(out.numpy(), want)
    call("aten::addmm.out", s, a, b, 1, 1, out)  # sum, then + self
    np.testing.assert_array_equal(out.numpy(), want + s)
    call("aten::addmm.out", s, a, b, 0.5, 2.0, out)  # sum * alpha + self * beta
    np.testing.assert_array_equal(out.numpy(),
                                  want * np.float32(2.0) + s * np.float32(0.5))
    call("aten::linear.out", a, np.ascontiguousarray(b.T), s, out)
    np.testing.assert_array_equal(out.numpy(), want + s)
    # half types: addmm sums in the type itself (portable loop), mm in float32 (optimized gemm)
    a16, b16, s16 = a.astype(np.float16), b.astype(np.float16), s.astype(np.float16)
    call("aten::addmm.out", s16, a16, b16, 1, 1, out16 := static_out((m, n), np.float16))
    np.testing.assert_array_equal(out16.numpy(), _running_sum_matmul(a16, b16, np.float16) + s16)
    call("aten::mm.out", a16, b16, out16)
    np.testing.assert_array_equal(out16.numpy(),
                                  _running_sum_matmul(a16, b16, np.float32).astype(np.float16))
