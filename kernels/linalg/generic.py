"""Compiled matrix products for every dtype (``mm_any_kernel``), and the overview of the
neural-net family (convolution: ``conv.py``, normalization: ``norm.py``, gathers and
scatters: ``nn_io.py``).

Generic binders behind the float32/float64 kernels of ``linalg``, ``conv`` and
``norm`` (each family's ``choose.py`` pairs them), plus the ops those lack (training
batch norm, convolution backward). Each op computes in the reference kernel's
compute dtype: float32 for float32/float16/bfloat16, float64 for float64,
int64 for integer types (wrapped to the integer compute dtype at the end,
which equals numpy's wrapping integer arithmetic: both are exact modulo 2**bits).

Every input is first gathered, in logical row-major order and converted to the
compute dtype, into a contiguous scratch buffer sized at bind time from the
tensor's capacity (so any dim order and any dynamic size up to the bound work);
the result is computed into scratch and scattered into the out with a cast
(half/bfloat16 round to nearest even). The float algorithms are the existing
ones where they fit (``conv.typed.conv_typed`` through descriptors made up for the scratch
buffers; ``norm``'s layer/group/batch-norm bodies); the rest is a direct loop.
Matrix products and convolutions add in ExecuTorch's order (each output a
running sum from zero); half types accumulate in float32 here. A single-row linear
(decoding) reads its weight in place, in its own dtype, with vectorized dot products. One
cfunc per family (matrix products, convolution, normalization), the compute dtype chosen at
run time.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext import from_numpy_dtype, to_numpy_dtype
from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.blas import matmul_strided
from pyruntime.kernels.fast.deferred import njit, overload, types
from pyruntime.kernels.fast.nn_io import SUPPORTED, cv, gather_compute, scal, scatter_compute, wrap
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, ST_BF16, ST_F16, ST_F32, ST_F64,
                                       ST_I64, cast_like, desc, lazy, ptr_like, resize_to, scratch)
from pyruntime.kernels.promote import compute_dtype, result_type


# ---- matrix products ---------------------------------------------------------------

OP_MM, OP_BMM, OP_ADDMM, OP_LINEAR = range(4)
# block: op, gemm, a, b, out, bias, alpha, beta, alpha?, beta mode (0 ignore, 1 add,
# 2 scaled add), mk, int compute type, scratch a, b, c, bias, ints
M_OP, M_FN, M_A, M_B, M_O, M_S, M_AL, M_BE, M_HASAL, M_BMODE, M_MK, M_CT = range(12)
M_SA, M_SB, M_SC, M_SS, M_INTS = range(12, 17)


@njit
def _naive_mm(m, n, k, pa, pb, brs, bcs, pc, mk):
    A = ptr_like(pa, mk)
    B = ptr_like(pb, mk)
    C = ptr_like(pc, mk)
    z = cast_like(0, mk)
    if bcs == 1:  # B row-major: rows of C accumulate rows of B
        for i in range(m):
            for j in range(n):
                C[i * n + j] = z
            for p in range(k):
                av = A[i * k + p]
                for j in range(n):
                    C[i * n + j] += av * B[p * brs + j]
        return
    for i in range(m):  # B transposed (linear's weight): contiguous dot products
        for j in range(n):
            acc = z
            for p in range(k):
                acc += A[i * k + p] * B[p * brs + j * bcs]
            C[i * n + j] = acc


@njit(inline="always")
def _dot_body(A, W, kind, m, n, k, C, mk):
    """C = A @ W.T for row-major A (m x k, compute dtype) and W (n x k, stored dtype):
    dot products in eight compute-dtype lanes, which LLVM turns into one vector chain
    (BLAS accumulates in the compute dtype too, in its own order)."""
    z = cast_like(0, mk)
    for i in range(m):
        a = i * k
        for j in range(n):
            w = j * k
            s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
            p = 0
            while p + 8 <= k:
                s0 += A[a + p] * cv(W[w + p], kind)
                s1 += A[a + p + 1] * cv(W[w + p + 1], kind)
                s2 += A[a + p + 2] * cv(W[w + p + 2], kind)
                s3 += A[a + p + 3] * cv(W[w + p + 3], kind)
                s4 += A[a + p + 4] * cv(W[w + p + 4], kind)
                s5 += A[a + p + 5] * cv(W[w + p + 5], kind)
                s6 += A[a + p + 6] * cv(W[w + p + 6], kind)
                s7 += A[a + p + 7] * cv(W[w + p + 7], kind)
                p += 8
            while p < k:
                s0 += A[a + p] * cv(W[w + p], kind)
                p += 1
            C[i * n + j] = cast_like(((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), mk)


@njit
def _dot_typed(A, W, m, n, k, C, mk):
    _dot_body(A, W, 0, m, n, k, C, mk)


@njit
def _dot_f16(A, W, m, n, k, C, mk):
    _dot_body(A, W, 1, m, n, k, C, mk)


@njit
def _dot_bf16(A, W, m, n, k, C, mk):
    _dot_body(A, W, 2, m, n, k, C, mk)


@njit
def _dot_direct(pa, b, m, n, k, pc, mk):
    """One row times linear's weight, read in place (when contiguous and floating): where
    BLAS gemm would pack all of the weight, and a converted copy would triple the
    memory traffic. Returns False when the weight does not qualify."""
    st = b[D_DTYPE]
    if (b[D_NDIM] == 2 and (b[D_STRIDES] != k or b[D_STRIDES + 1] != 1)) or (b[D_NDIM] == 1
                                                                             and b[D_STRIDES] != 1):
        return False
    A = ptr_like(pa, mk)
    C = ptr_like(pc, mk)
    if st == ST_F32:
        _dot_typed(A, ptr_like(b[D_DATA], np.float32(0)), m, n, k, C, mk)
    elif st == ST_F64:
        _dot_typed(A, ptr_like(b[D_DATA], np.float64(0)), m, n, k, C, mk)
    elif st == ST_F16:
        _dot_f16(A, ptr_like(b[D_DATA], np.uint16(0)), m, n, k, C, mk)
    elif st == ST_BF16:
        _dot_bf16(A, ptr_like(b[D_DATA], np.uint16(0)), m, n, k, C, mk)
    else:
        return False
    return True


def _mm_core(fn, m, n, k, pa, pb, brs, bcs, pc, mk):
    """C (m x n) = A (m x k, row-major) @ B (strides brs, bcs); BLAS for floats."""
    raise NotImplementedError


@overload(_mm_core)
def _ov_mm_core(fn, m, n, k, pa, pb, brs, bcs, pc, mk):
    if isinstance(mk, types.Integer):
        def impl(fn, m, n, k, pa, pb, brs, bcs, pc, mk):
            _naive_mm(m, n, k, pa, pb, brs, bcs, pc, mk)
            return OK
        return impl

    def fimpl(fn, m, n, k, pa, pb, brs, bcs, pc, mk):
        if fn == 0:
            _naive_mm(m, n, k, pa, pb, brs, bcs, pc, mk)
            return OK
        return matmul_strided(fn, m, n, k, cast_like(1.0, mk), pa, k, 1, pb, brs, bcs,
                              cast_like(0.0, mk), pc, n, mk)
    return fimpl


@njit
def _mm_run(block, mk, item):
    op = block[M_OP]
    a = desc(block[M_A])
    b = desc(block[M_B])
    o = desc(block[M_O])
    sz = scratch(block[M_INTS], 16)
    nb = 1
    if op == OP_BMM:
        if (a[D_NDIM] != 3 or b[D_NDIM] != 3 or a[D_SIZES] != b[D_SIZES]
                or a[D_SIZES + 2] != b[D_SIZES + 1]):
            return INVALID_ARGUMENT
        nb, m, k, n = a[D_SIZES], a[D_SIZES + 1], a[D_SIZES + 2], b[D_SIZES + 2]
        sz[0], sz[1], sz[2] = nb, m, n
        onr = 3
    elif op == OP_LINEAR:  # input (..., k) @ weight (n, k).T, or @ weight (k,)
        nd = a[D_NDIM]
        k = a[D_SIZES + nd - 1]
        n = b[D_SIZES] if b[D_NDIM] == 2 else 1
        if b[D_SIZES + b[D_NDIM] - 1] != k:
            return INVALID_ARGUMENT
        m = 1
        for i in range(nd - 1):
            sz[i] = a[D_SIZES + i]
            m *= a[D_SIZES + i]
        onr = nd - 1
        if b[D_NDIM] == 2:
            sz[nd - 1] = n
            onr = nd
    else:
        if a[D_NDIM] != 2 or b[D_NDIM] != 2 or a[D_SIZES + 1] != b[D_SIZES]:
            return INVALID_ARGUMENT
        m, k, n = a[D_SIZES], a[D_SIZES + 1], b[D_SIZES + 1]
        sz[0], sz[1] = m, n
        onr = 2
    bmode = block[M_BMODE]
    sm = sn = 1
    srs = scs = 0
    if bmode:  # the bias / self broadcast over (m, n): rank <= 2, checked at bind
        s = desc(block[M_S])
        r = s[D_NDIM]
        sm = s[D_SIZES] if r == 2 else 1
        sn = s[D_SIZES + r - 1] if r >= 1 else 1
        if (sm != 1 and sm != m) or (sn != 1 and sn != n):
            return INVALID_ARGUMENT
        srs = sn if sm != 1 else 0
        scs = 1 if sn != 1 else 0
    st = resize_to(o, sz, onr)
    if st != OK:
        return st
    if o[D_NUMEL] == 0:
        return OK
    pa, pb, pc = block[M_SA], block[M_SB], block[M_SC]
    gather_compute(pa, a, mk)
    direct = op == OP_LINEAR and m == 1 and block[M_CT] == 0 and _dot_direct(pa, b, m, n, k,
                                                                            pc, mk)
    if not direct:
        gather_compute(pb, b, mk)
    brs, bcs = (1, k) if op == OP_LINEAR else (n, 1)
    for i in range(0 if direct else nb):
        st = _mm_core(block[M_FN], m, n, k, pa + i * m * k * item, pb + i * k * n * item,
                      brs, bcs, pc + i * m * n * item, mk)
        if st != OK:
            return st
    c = ptr_like(pc, mk)
    if block[M_HASAL] != 0:
        alpha = scal(block[M_AL], mk)
        for i in range(m * n):
            c[i] = c[i] * alpha
    if bmode:
        gather_compute(block[M_SS], desc(block[M_S]), mk)
        sv = ptr_like(block[M_SS], mk)
        beta = scal(block[M_BE], mk)
        for i in range(m):
            for j in range(n):
                v = sv[i * srs + j * scs]
                c[i * n + j] = c[i * n + j] + (v * beta if bmode == 2 else v)
    isint = block[M_CT] != 0
    if isint:
        wrap(pc, nb * m * n, block[M_CT])
    scatter_compute(pc, o, mk, isint)
    return OK


def mm_any_kernel(block):
    mk = block[M_MK]
    if mk == ST_F32:
        return _mm_run(block, np.float32(0), 4)
    if mk == ST_F64:
        return _mm_run(block, np.float64(0), 8)
    return _mm_run(block, np.int64(0), 8)


def compute_codes(*ts):
    """(mk code, integer compute code or 0, item size) for the reference's compute dtype."""
    if any(t is not None and t.scalar_type not in SUPPORTED for t in ts):
        return None
    ct = compute_dtype(result_type(*[t for t in ts if t is not None]))
    if ct == np.float32:
        return ST_F32, 0, 4
    if ct == np.float64:
        return ST_F64, 0, 8
    if ct.kind in "iu" and ct.itemsize <= 8 and ct != np.uint64:
        return ST_I64, int(from_numpy_dtype(ct)), 8
    return None  # bool (the reference raises), unsigned > 8 bits


def _scalar_word(ctx, v, mk, ct):
    """A Scalar cast to the compute dtype as the reference does (None if that raises)."""
    if not isinstance(v, (bool, int, float)):
        return None
    try:
        if mk == ST_I64:
            return int(to_numpy_dtype(ct).type(v))
        return ctx.f64(float(np.dtype(np.float32 if mk == ST_F32 else np.float64).type(v)))
    except (OverflowError, ValueError):
        return None


def _bind_mm(ctx, op, comp, a, b, out, s=None, alpha=1, beta=0, bmode=0):
    if comp is None or out.scalar_type not in SUPPORTED:
        return None
    mk, ct, item = comp
    al, be = _scalar_word(ctx, alpha, mk, ct), _scalar_word(ctx, beta, mk, ct)
    if al is None or be is None:
        return None
    return ctx.bind(lazy(mm_any_kernel), [
        op, 0,  # no BLAS: _naive_mm adds in ExecuTorch's order (k first to last, from zero)
        ctx.desc(a), ctx.desc(b), ctx.desc(out), ctx.desc(s) if bmode else 0, al, be,
        int(alpha != 1), bmode, mk, ct, ctx.buffer(a.capacity * item),
        ctx.buffer(b.capacity * item), ctx.buffer(out.capacity * item),
        ctx.buffer(s.capacity * item) if bmode else 0, ctx.buffer(16 * 8)])


def bind_mm_any(ctx, self, mat2, out):
    if self.ndim != 2 or mat2.ndim != 2 or out.ndim != 2:
        return None
    return _bind_mm(ctx, OP_MM, compute_codes(self, mat2), self, mat2, out)


def bind_bmm_any(ctx, self, mat2, out):
    if self.ndim != 3 or mat2.ndim != 3 or out.ndim != 3:
        return None
    return _bind_mm(ctx, OP_BMM, compute_codes(self, mat2), self, mat2, out)


def bind_addmm_any(ctx, self, mat1, mat2, beta, alpha, out):
    if mat1.ndim != 2 or mat2.ndim != 2 or out.ndim != 2:
        return None
    if beta != 0 and self.ndim > 2:  # the reference raises: self must broadcast to (m, n)
        return None
    bmode = 0 if beta == 0 else (1 if beta == 1 else 2)  # beta == 0 ignores self's values
    return _bind_mm(ctx, OP_ADDMM, compute_codes(self, mat1, mat2), mat1, mat2, out,
                    self if bmode else None, alpha, beta, bmode)


def bind_linear_any(ctx, input, weight, bias, out):  # noqa: A002 - schema names
    if input.ndim < 1 or input.ndim > 16 or weight.ndim not in (1, 2):
        return None
    if out.ndim != input.ndim - (weight.ndim == 1):
        return None
    if bias is not None and (bias.ndim > 1 or (weight.ndim == 1 and bias.ndim > 0)):
        return None  # a bias that would broadcast the result to another shape
    return _bind_mm(ctx, OP_LINEAR, compute_codes(input, weight, bias), input, weight, out, bias,
                    1, 1, 0 if bias is None else 1)
