"""Compiled neural-net ops for every dtype: matrix products, convolution, normalization.

Generic (``fallback=True``) binders behind the float32/float64 kernels of
``linalg.py``, ``conv.py`` and ``norm.py``, plus the ops those lack (training
batch norm, convolution backward). Each op computes in the reference kernel's
compute dtype: float32 for float32/float16/bfloat16, float64 for float64,
int64 for integer types (wrapped to the integer compute dtype at the end,
which equals numpy's wrapping integer arithmetic: both are exact modulo 2**bits).

Every input is first gathered, in logical row-major order and converted to the
compute dtype, into a contiguous scratch buffer sized at bind time from the
tensor's capacity (so any dim order and any dynamic size up to the bound work);
the result is computed into scratch and scattered into the out with a cast
(half/bfloat16 round to nearest even). The float algorithms are the existing
ones where they fit (``conv._conv`` through descriptors made up for the scratch
buffers; ``norm``'s layer/group/batch-norm bodies); the rest is a direct loop.
Matrix products and convolutions add in ExecuTorch's order (each output a
running sum from zero); half types accumulate in float32 here. A single-row linear (decoding) reads its weight in place, in its own
dtype, with vectorized dot products. One cfunc per family (matrix products,
convolution, normalization), the compute dtype chosen at run time.
"""
from __future__ import annotations

import math

import numpy as np
from numba import carray, njit, types
from numba.extending import overload

from cython_ext import from_numpy_dtype, to_numpy_dtype
from kernels.fast import register_fast
from kernels.fast.blas import matmul_strided
from kernels.fast.conv import _conv, _cols_range, transposed_et
from kernels.fast.conv import _scratch as _conv_scratch
from kernels.fast.conv import scratch_elems as conv_scratch_elems
from kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_BF16, ST_F16, ST_F32,
                             ST_F64, ST_I8, ST_I16, ST_I32, ST_I64, ST_U8, bits_to_f64,
                             cast_like, desc, f32_from_bits, f32_to_half, f64_to_bf16,
                             half_to_f32, lazy, offset_of, ptr_like, resize_to, scratch,
                             set_strides, store_f64, store_i64, sum_seg)
from kernels.fast.norm import _bn_typed, _gn_typed, _ln_typed
from kernels.promote import compute_dtype, result_type

SUPPORTED = {0, 1, 2, 3, 4, 5, 6, 7, 11, 15}  # the scalar types nb's load/store handle
FAKE_WORDS = 10 * 64  # up to 8 made-up descriptors, a small int scratch, a conv block


# ---- gather / scatter: any dtype and layout <-> contiguous compute-dtype scratch -----

@njit(inline="always")
def _walk(d):
    """(rows, inner, inner stride): d's elements as rows along its last dim."""
    nd = d[2]
    if nd == 0:
        return 1, 1, 0
    inner = d[8 + nd - 1]
    return (d[3] // inner if inner else 0), inner, d[24 + nd - 1]


@njit(inline="always")
def _cv(v, kind):
    """A stored element as a number: kind 1 float16 bits, 2 bfloat16 bits, else as is."""
    if kind == 1:
        return half_to_f32(np.int64(v))
    if kind == 2:
        return f32_from_bits(np.int32(np.uint32(np.int64(v) << 16)))
    return v


@njit(inline="always")
def _gather_body(dst, src, d, kind, mk):
    # ``kind`` is a constant at each call site below: after inlining LLVM drops the
    # other conversions and the contiguous loop vectorizes
    rows, inner, ist = _walk(d)
    o = 0
    for r in range(rows):
        base = offset_of(d, r * inner)
        if ist == 1:
            for j in range(inner):
                dst[o + j] = cast_like(_cv(src[base + j], kind), mk)
        else:
            for j in range(inner):
                dst[o + j] = cast_like(_cv(src[base + j * ist], kind), mk)
        o += inner


@njit
def _gather_typed(dst, src, d, mk):
    _gather_body(dst, src, d, 0, mk)


@njit
def _gather_f16(dst, src, d, mk):
    _gather_body(dst, src, d, 1, mk)


@njit
def _gather_bf16(dst, src, d, mk):
    _gather_body(dst, src, d, 2, mk)


@njit
def _gather(addr, d, mk):
    """Tensor ``d`` -> contiguous compute-dtype buffer at ``addr``."""
    dst = ptr_like(addr, mk)
    st, a = d[1], d[0]
    if d[3] == 0:
        return
    if st == ST_F32:
        _gather_typed(dst, ptr_like(a, np.float32(0)), d, mk)
    elif st == ST_F64:
        _gather_typed(dst, ptr_like(a, np.float64(0)), d, mk)
    elif st == ST_F16:
        _gather_f16(dst, ptr_like(a, np.uint16(0)), d, mk)
    elif st == ST_BF16:
        _gather_bf16(dst, ptr_like(a, np.uint16(0)), d, mk)
    elif st == ST_I64:
        _gather_typed(dst, ptr_like(a, np.int64(0)), d, mk)
    elif st == ST_I32:
        _gather_typed(dst, ptr_like(a, np.int32(0)), d, mk)
    elif st == ST_I16:
        _gather_typed(dst, ptr_like(a, np.int16(0)), d, mk)
    elif st == ST_I8:
        _gather_typed(dst, ptr_like(a, np.int8(0)), d, mk)
    else:  # uint8, bool
        _gather_typed(dst, ptr_like(a, np.uint8(0)), d, mk)


def _out_cv(v, kind, marker):
    """A computed value as the stored element (numba only)."""
    raise NotImplementedError


@overload(_out_cv)
def _ov_out_cv(v, kind, marker):
    if marker == types.uint16:  # kind 1 float16, 2 bfloat16
        def half(v, kind, marker):
            if kind == 1:
                return np.uint16(f32_to_half(np.float32(v)))
            return np.uint16(f64_to_bf16(np.float64(v)))
        return half
    return lambda v, kind, marker: cast_like(v, marker)


@njit(inline="always")
def _scatter_body(dst, src, d, kind, marker):
    rows, inner, ist = _walk(d)
    o = 0
    for r in range(rows):
        base = offset_of(d, r * inner)
        if ist == 1:
            for j in range(inner):
                dst[base + j] = _out_cv(src[o + j], kind, marker)
        else:
            for j in range(inner):
                dst[base + j * ist] = _out_cv(src[o + j], kind, marker)
        o += inner


@njit
def _scatter_float(dst, src, d, marker):
    _scatter_body(dst, src, d, 0, marker)


@njit
def _scatter_f16(dst, src, d):
    _scatter_body(dst, src, d, 1, np.uint16(0))


@njit
def _scatter_bf16(dst, src, d):
    _scatter_body(dst, src, d, 2, np.uint16(0))


@njit
def _scatter_any(addr, st, src, d, isint):
    rows, inner, ist = _walk(d)
    o = 0
    for r in range(rows):
        base = offset_of(d, r * inner)
        for j in range(inner):
            if isint:
                store_i64(addr, st, base + j * ist, np.int64(src[o]))
            else:
                store_f64(addr, st, base + j * ist, np.float64(src[o]))
            o += 1


@njit
def _scatter(addr, d, mk, isint):
    """Contiguous compute-dtype buffer at ``addr`` -> out ``d`` (already resized), cast."""
    src = ptr_like(addr, mk)
    st = d[1]
    if d[3] == 0:
        return
    if st == ST_F32 and not isint:
        _scatter_float(ptr_like(d[0], np.float32(0)), src, d, np.float32(0))
    elif st == ST_F64 and not isint:
        _scatter_float(ptr_like(d[0], np.float64(0)), src, d, np.float64(0))
    elif st == ST_F16 and not isint:
        _scatter_f16(ptr_like(d[0], np.uint16(0)), src, d)
    elif st == ST_BF16 and not isint:
        _scatter_bf16(ptr_like(d[0], np.uint16(0)), src, d)
    else:
        _scatter_any(d[0], st, src, d, isint)


@njit
def _wrap(addr, n, ct):
    """Wrap int64 results in place to the integer compute dtype ``ct`` (numpy's overflow)."""
    z = ptr_like(addr, np.int64(0))
    for i in range(n):
        v = z[i]
        if ct == ST_I32:
            v = np.int64(np.int32(v))
        elif ct == ST_I16:
            v = np.int64(np.int16(v))
        elif ct == ST_I8:
            v = np.int64(np.int8(v))
        elif ct == ST_U8:
            v = v & 0xFF
        z[i] = v


@njit(inline="always")
def _fake(f, d, addr, st, cap):
    """Make ``f`` a contiguous dynamic-bound descriptor with ``d``'s sizes over ``addr``."""
    nd = d[2]
    f[0] = addr
    f[1] = st
    f[2] = nd
    f[3] = d[3]
    f[4] = cap
    f[5] = 1
    for i in range(nd):
        f[8 + i] = d[8 + i]
        f[40 + i] = i
    set_strides(f)


@njit(inline="always")
def _finish(src_addr, fake, o, mk, isint):
    """Resize out ``o`` like the computed ``fake`` and scatter into it."""
    st = resize_to(o, fake[8:24], fake[2])
    if st != OK:
        return st
    _scatter(src_addr, o, mk, isint)
    return OK


def _scal(word, mk):
    """A Scalar argument word in the compute dtype (numba only)."""
    raise NotImplementedError


@overload(_scal, inline="always")
def _ov_scal(word, mk):
    if isinstance(mk, types.Integer):
        return lambda word, mk: word
    return lambda word, mk: cast_like(bits_to_f64(word), mk)


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
                s0 += A[a + p] * _cv(W[w + p], kind)
                s1 += A[a + p + 1] * _cv(W[w + p + 1], kind)
                s2 += A[a + p + 2] * _cv(W[w + p + 2], kind)
                s3 += A[a + p + 3] * _cv(W[w + p + 3], kind)
                s4 += A[a + p + 4] * _cv(W[w + p + 4], kind)
                s5 += A[a + p + 5] * _cv(W[w + p + 5], kind)
                s6 += A[a + p + 6] * _cv(W[w + p + 6], kind)
                s7 += A[a + p + 7] * _cv(W[w + p + 7], kind)
                p += 8
            while p < k:
                s0 += A[a + p] * _cv(W[w + p], kind)
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
    st = b[1]
    if (b[2] == 2 and (b[24] != k or b[25] != 1)) or (b[2] == 1 and b[24] != 1):
        return False
    A = ptr_like(pa, mk)
    C = ptr_like(pc, mk)
    if st == ST_F32:
        _dot_typed(A, ptr_like(b[0], np.float32(0)), m, n, k, C, mk)
    elif st == ST_F64:
        _dot_typed(A, ptr_like(b[0], np.float64(0)), m, n, k, C, mk)
    elif st == ST_F16:
        _dot_f16(A, ptr_like(b[0], np.uint16(0)), m, n, k, C, mk)
    elif st == ST_BF16:
        _dot_bf16(A, ptr_like(b[0], np.uint16(0)), m, n, k, C, mk)
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
        if a[2] != 3 or b[2] != 3 or a[8] != b[8] or a[10] != b[9]:
            return INVALID_ARGUMENT
        nb, m, k, n = a[8], a[9], a[10], b[10]
        sz[0], sz[1], sz[2] = nb, m, n
        onr = 3
    elif op == OP_LINEAR:  # input (..., k) @ weight (n, k).T, or @ weight (k,)
        nd = a[2]
        k = a[8 + nd - 1]
        n = b[8] if b[2] == 2 else 1
        if b[8 + b[2] - 1] != k:
            return INVALID_ARGUMENT
        m = 1
        for i in range(nd - 1):
            sz[i] = a[8 + i]
            m *= a[8 + i]
        onr = nd - 1
        if b[2] == 2:
            sz[nd - 1] = n
            onr = nd
    else:
        if a[2] != 2 or b[2] != 2 or a[9] != b[8]:
            return INVALID_ARGUMENT
        m, k, n = a[8], a[9], b[9]
        sz[0], sz[1] = m, n
        onr = 2
    bmode = block[M_BMODE]
    sm = sn = 1
    srs = scs = 0
    if bmode:  # the bias / self broadcast over (m, n): rank <= 2, checked at bind
        s = desc(block[M_S])
        r = s[2]
        sm = s[8] if r == 2 else 1
        sn = s[8 + r - 1] if r >= 1 else 1
        if (sm != 1 and sm != m) or (sn != 1 and sn != n):
            return INVALID_ARGUMENT
        srs = sn if sm != 1 else 0
        scs = 1 if sn != 1 else 0
    st = resize_to(o, sz, onr)
    if st != OK:
        return st
    if o[3] == 0:
        return OK
    pa, pb, pc = block[M_SA], block[M_SB], block[M_SC]
    _gather(pa, a, mk)
    direct = op == OP_LINEAR and m == 1 and block[M_CT] == 0 and _dot_direct(pa, b, m, n, k,
                                                                            pc, mk)
    if not direct:
        _gather(pb, b, mk)
    brs, bcs = (1, k) if op == OP_LINEAR else (n, 1)
    for i in range(0 if direct else nb):
        st = _mm_core(block[M_FN], m, n, k, pa + i * m * k * item, pb + i * k * n * item,
                      brs, bcs, pc + i * m * n * item, mk)
        if st != OK:
            return st
    c = ptr_like(pc, mk)
    if block[M_HASAL] != 0:
        alpha = _scal(block[M_AL], mk)
        for i in range(m * n):
            c[i] = c[i] * alpha
    if bmode:
        _gather(block[M_SS], desc(block[M_S]), mk)
        sv = ptr_like(block[M_SS], mk)
        beta = _scal(block[M_BE], mk)
        for i in range(m):
            for j in range(n):
                v = sv[i * srs + j * scs]
                c[i * n + j] = c[i * n + j] + (v * beta if bmode == 2 else v)
    isint = block[M_CT] != 0
    if isint:
        _wrap(pc, nb * m * n, block[M_CT])
    _scatter(pc, o, mk, isint)
    return OK


def mm_any_kernel(block):
    mk = block[M_MK]
    if mk == ST_F32:
        return _mm_run(block, np.float32(0), 4)
    if mk == ST_F64:
        return _mm_run(block, np.float64(0), 8)
    return _mm_run(block, np.int64(0), 8)


def _compute(*ts):
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


@register_fast("aten::mm.out", fallback=True)
def bind_mm_any(ctx, self, mat2, out):
    if self.ndim != 2 or mat2.ndim != 2 or out.ndim != 2:
        return None
    return _bind_mm(ctx, OP_MM, _compute(self, mat2), self, mat2, out)


@register_fast("aten::bmm.out", fallback=True)
def bind_bmm_any(ctx, self, mat2, out):
    if self.ndim != 3 or mat2.ndim != 3 or out.ndim != 3:
        return None
    return _bind_mm(ctx, OP_BMM, _compute(self, mat2), self, mat2, out)


@register_fast("aten::addmm.out", fallback=True)
def bind_addmm_any(ctx, self, mat1, mat2, beta, alpha, out):
    if mat1.ndim != 2 or mat2.ndim != 2 or out.ndim != 2:
        return None
    if beta != 0 and self.ndim > 2:  # the reference raises: self must broadcast to (m, n)
        return None
    bmode = 0 if beta == 0 else (1 if beta == 1 else 2)  # beta == 0 ignores self's values
    return _bind_mm(ctx, OP_ADDMM, _compute(self, mat1, mat2), mat1, mat2, out,
                    self if bmode else None, alpha, beta, bmode)


@register_fast("aten::linear.out", fallback=True)
def bind_linear_any(ctx, input, weight, bias, out):  # noqa: A002 - schema names
    if input.ndim < 1 or input.ndim > 16 or weight.ndim not in (1, 2):
        return None
    if out.ndim != input.ndim - (weight.ndim == 1):
        return None
    if bias is not None and (bias.ndim > 1 or (weight.ndim == 1 and bias.ndim > 0)):
        return None  # a bias that would broadcast the result to another shape
    return _bind_mm(ctx, OP_LINEAR, _compute(input, weight, bias), input, weight, out, bias,
                    1, 1, 0 if bias is None else 1)


# ---- convolution -------------------------------------------------------------------

# block: mode (0 forward, 1 backward), gemm, x, w, bias (forward) or grad_output
# (backward), out0, out1, out2, stride[3], padding[3], dilation[3], output_padding[3],
# groups, transposed, spatial dims, output mask bits, scratch x, w, bias/go, out0, out1,
# made-up descriptors, im2col scratch + its size, mk, int compute type
C_MODE, C_FN, C_X, C_W, C_B, C_O0, C_O1, C_O2 = range(8)
C_S, C_P, C_D, C_OP = 8, 11, 14, 17
C_G, C_T, C_K, C_MASK, C_SX, C_SW, C_SB, C_SO0, C_SO1, C_FAKE, C_IM, C_IMN, C_MK, C_CT = \
    range(20, 34)
# made-up descriptors (64 words each) in the C_FAKE area, then ints, then a conv block
F_X, F_W, F_B, F_O = 0, 1, 2, 3
G_OFF, CB_OFF = 8 * 64, 9 * 64


@njit
def _corr(A, B, Wt, g3, mode, mk):
    """The one loop of convolution and its gradients. A (N, CA, *a) and B (N, CB, *b) are
    related through weight Wt (CA, CB/g, *k) by b = a * stride - pad + k * dilation:
    mode 0 adds w * B into A, mode 1 adds w * A into B, mode 2 adds sum(A * B) into Wt."""
    N, CA, CB, g = g3[0], g3[1], g3[2], g3[3]
    a0, a1, a2, b0, b1, b2 = g3[4], g3[5], g3[6], g3[7], g3[8], g3[9]
    k0, k1, k2, s0, s1, s2 = g3[10], g3[11], g3[12], g3[13], g3[14], g3[15]
    p0, p1, p2, d0, d1, d2 = g3[16], g3[17], g3[18], g3[19], g3[20], g3[21]
    cag, cbg = CA // g, CB // g
    LA, LB, K = a0 * a1 * a2, b0 * b1 * b2, k0 * k1 * k2
    z = cast_like(0, mk)
    for n in range(N):
        for gi in range(g):
            for ac in range(cag):
                ach = gi * cag + ac
                abase = (n * CA + ach) * LA
                for bc in range(cbg):
                    bbase = (n * CB + gi * cbg + bc) * LB
                    wbase = (ach * cbg + bc) * K
                    for q0 in range(k0):
                        lo0, hi0 = _cols_range(q0 * d0 - p0, s0, b0, a0)
                        for q1 in range(k1):
                            lo1, hi1 = _cols_range(q1 * d1 - p1, s1, b1, a1)
                            for q2 in range(k2):
                                lo2, hi2 = _cols_range(q2 * d2 - p2, s2, b2, a2)
                                wi = wbase + (q0 * k1 + q1) * k2 + q2
                                wv = Wt[wi]
                                acc = z
                                for i0 in range(lo0, hi0):
                                    j0 = i0 * s0 + q0 * d0 - p0
                                    for i1 in range(lo1, hi1):
                                        j1 = i1 * s1 + q1 * d1 - p1
                                        ar = abase + (i0 * a1 + i1) * a2
                                        br = bbase + (j0 * b1 + j1) * b2 + q2 * d2 - p2
                                        if mode == 0:
                                            for i2 in range(lo2, hi2):
                                                A[ar + i2] += wv * B[br + i2 * s2]
                                        elif mode == 1:
                                            for i2 in range(lo2, hi2):
                                                B[br + i2 * s2] += wv * A[ar + i2]
                                        else:
                                            for i2 in range(lo2, hi2):
                                                acc += A[ar + i2] * B[br + i2 * s2]
                                if mode == 2:
                                    Wt[wi] += acc


@njit(inline="always")
def _geom(g3, blk, N, CA, CB, da, db, w):
    """Fill the int geometry of ``_corr``: spatial sizes of A, B and the kernel, padded
    in front to three dims, and the block's stride/padding/dilation."""
    g3[0], g3[1], g3[2], g3[3] = N, CA, CB, blk[C_G]
    k = blk[C_K]
    for i in range(3):
        j = i - (3 - k)
        g3[4 + i] = da[8 + 2 + j] if j >= 0 else 1
        g3[7 + i] = db[8 + 2 + j] if j >= 0 else 1
        g3[10 + i] = w[8 + 2 + j] if j >= 0 else 1
        g3[13 + i] = blk[C_S + i]
        g3[16 + i] = blk[C_P + i]
        g3[19 + i] = blk[C_D + i]


@njit(inline="always")
def _zero(addr, n, mk):
    z = ptr_like(addr, mk)
    for i in range(n):
        z[i] = cast_like(0, mk)


def _float_conv(cb, mk, item):
    """conv.py's float convolution over block ``cb`` (numba only; floats only)."""
    raise NotImplementedError


@overload(_float_conv)
def _ov_float_conv(cb, mk, item):
    if isinstance(mk, types.Integer):
        return lambda cb, mk, item: NOT_SUPPORTED  # integer inputs take the direct loop
    return lambda cb, mk, item: _conv(cb, cast_like(0, mk), item)


@njit
def _conv_fwd(blk, mk, item):
    x = desc(blk[C_X])
    w = desc(blk[C_W])
    o = desc(blk[C_O0])
    nd = x[2]
    k = blk[C_K]
    g = blk[C_G]
    tr = blk[C_T] != 0
    if w[2] != nd or o[2] != nd:
        return INVALID_ARGUMENT
    N, C = x[8], x[9]
    if tr:
        if w[8] != C or C % g != 0:
            return INVALID_ARGUMENT
        O = w[9] * g
    else:
        if w[9] * g != C or w[8] % g != 0:
            return INVALID_ARGUMENT
        O = w[8]
    fa = blk[C_FAKE]
    sz = scratch(fa + G_OFF * 8, 16)
    sz[0], sz[1] = N, O
    for i in range(k):
        j = 3 - k + i
        sp, kk = x[10 + i], w[10 + i]
        s, p, dl = blk[C_S + j], blk[C_P + j], blk[C_D + j]
        if tr:
            v = (sp - 1) * s - 2 * p + dl * (kk - 1) + 1 + blk[C_OP + j]
        else:
            if sp + 2 * p < dl * (kk - 1) + 1:
                return INVALID_ARGUMENT
            v = (sp + 2 * p - dl * (kk - 1) - 1) // s + 1
        if v < 0:
            return INVALID_ARGUMENT
        sz[2 + i] = v
    st = resize_to(o, sz, nd)
    if st != OK:
        return st
    hasb = blk[C_B] != 0
    if hasb and desc(blk[C_B])[3] != O:
        return INVALID_ARGUMENT
    if o[3] == 0:
        return OK
    isint = blk[C_CT] != 0
    _gather(blk[C_SX], x, mk)
    _gather(blk[C_SW], w, mk)
    if isint or tr or k > 2 or blk[C_FN] == 0:
        L = o[3] // (N * O)
        ov = ptr_like(blk[C_SO0], mk)
        if hasb:
            _gather(blk[C_SB], desc(blk[C_B]), mk)
            bv = ptr_like(blk[C_SB], mk)
            for r in range(N * O):
                for i in range(L):
                    ov[r * L + i] = bv[r % O]
        else:
            _zero(blk[C_SO0], o[3], mk)
        g3 = scratch(fa + G_OFF * 8 + 16 * 8, 24)
        if tr:  # ExecuTorch's loop order, bias first (as above)
            _geom(g3, blk, N, C, O, x, o, w)
            transposed_et(ptr_like(blk[C_SX], mk), ptr_like(blk[C_SW], mk), ov, g3)
        else:
            _geom(g3, blk, N, O, C, o, x, w)
            _corr(ov, ptr_like(blk[C_SX], mk), ptr_like(blk[C_SW], mk), g3, 0, mk)
    else:  # float 1-D/2-D: conv.py's im2col + gemm over made-up descriptors
        stc = ST_F32 if item == 4 else ST_F64
        fx = desc(fa + F_X * 512)
        fw = desc(fa + F_W * 512)
        fo = desc(fa + F_O * 512)
        _fake(fx, x, blk[C_SX], stc, x[3])
        _fake(fw, w, blk[C_SW], stc, w[3])
        _fake(fo, o, blk[C_SO0], stc, o[3])
        cb = scratch(fa + CB_OFF * 8, 15)
        cb[0], cb[14] = blk[C_FN], 0  # no packed weight: it is gathered on every run
        cb[1], cb[2], cb[4] = fa + F_X * 512, fa + F_W * 512, fa + F_O * 512
        cb[3] = 0
        if hasb:
            fb = desc(fa + F_B * 512)
            bd = desc(blk[C_B])
            _fake(fb, bd, blk[C_SB], stc, bd[3])
            _gather(blk[C_SB], bd, mk)
            cb[3] = fa + F_B * 512
        # (sh, sw, ph, pw, dh, dw): the last two of the three padded spatial dims
        cb[5], cb[6] = blk[C_S + 1], blk[C_S + 2]
        cb[7], cb[8] = blk[C_P + 1], blk[C_P + 2]
        cb[9], cb[10] = blk[C_D + 1], blk[C_D + 2]
        cb[11], cb[12], cb[13] = g, blk[C_IM], blk[C_IMN]
        st = _float_conv(cb, mk, item)
        if st != OK:
            return st
    if isint:
        _wrap(blk[C_SO0], o[3], blk[C_CT])
    _scatter(blk[C_SO0], o, mk, isint)
    return OK


@njit
def _conv_bwd(blk, mk, item):
    x = desc(blk[C_X])
    w = desc(blk[C_W])
    go = desc(blk[C_B])
    nd = x[2]
    k = blk[C_K]
    g = blk[C_G]
    tr = blk[C_T] != 0
    mask = blk[C_MASK]
    if w[2] != nd or go[2] != nd:
        return INVALID_ARGUMENT
    N, C = x[8], x[9]
    if tr:
        if w[8] != C or C % g != 0:
            return INVALID_ARGUMENT
        O = w[9] * g
    else:
        if w[9] * g != C or w[8] % g != 0:
            return INVALID_ARGUMENT
        O = w[8]
    if go[8] != N or go[9] != O:
        return INVALID_ARGUMENT
    for i in range(k):  # grad_output must have the forward output's sizes
        j = 3 - k + i
        sp, kk = x[10 + i], w[10 + i]
        s, p, dl = blk[C_S + j], blk[C_P + j], blk[C_D + j]
        if tr:
            v = (sp - 1) * s - 2 * p + dl * (kk - 1) + 1 + blk[C_OP + j]
        else:
            v = (sp + 2 * p - dl * (kk - 1) - 1) // s + 1
        if go[10 + i] != v:
            return INVALID_ARGUMENT
    fa = blk[C_FAKE]
    g3 = scratch(fa + G_OFF * 8 + 16 * 8, 24)
    _gather(blk[C_SX], x, mk)
    _gather(blk[C_SW], w, mk)
    _gather(blk[C_SB], go, mk)
    xs, ws, gs = ptr_like(blk[C_SX], mk), ptr_like(blk[C_SW], mk), ptr_like(blk[C_SB], mk)
    if mask & 1:
        o = desc(blk[C_O0])
        st = resize_to(o, x[8:24], nd)
        if st != OK:
            return st
        _zero(blk[C_SO0], x[3], mk)
        gi = ptr_like(blk[C_SO0], mk)
        if tr:  # grad_input is the A side
            _geom(g3, blk, N, C, O, x, go, w)
            _corr(gi, gs, ws, g3, 0, mk)
        else:
            _geom(g3, blk, N, O, C, go, x, w)
            _corr(gs, gi, ws, g3, 1, mk)
        _scatter(blk[C_SO0], o, mk, False)
    if mask & 2:
        o = desc(blk[C_O1])
        st = resize_to(o, w[8:24], nd)
        if st != OK:
            return st
        _zero(blk[C_SO1], w[3], mk)
        gw = ptr_like(blk[C_SO1], mk)
        if tr:
            _geom(g3, blk, N, C, O, x, go, w)
            _corr(xs, gs, gw, g3, 2, mk)
        else:
            _geom(g3, blk, N, O, C, go, x, w)
            _corr(gs, xs, gw, g3, 2, mk)
        _scatter(blk[C_SO1], o, mk, False)
    if mask & 4:
        o = desc(blk[C_O2])
        sz = scratch(fa + G_OFF * 8, 16)
        sz[0] = O
        st = resize_to(o, sz, 1)
        if st != OK:
            return st
        L = go[3] // (N * O) if N * O else 0
        gb = ptr_like(blk[C_SO1], mk)  # grad_weight is already written out
        for c in range(O):
            t = 0.0
            for n in range(N):
                t += sum_seg(gs, (n * O + c) * L, L)
            gb[c] = cast_like(t, mk)
        _scatter(blk[C_SO1], o, mk, False)
    return OK


def conv_any_kernel(block):
    blk = carray(block, 34)
    mk = blk[C_MK]
    if blk[C_MODE] != 0:  # backward: floats only
        if mk == ST_F32:
            return _conv_bwd(blk, np.float32(0), 4)
        return _conv_bwd(blk, np.float64(0), 8)
    if mk == ST_F32:
        return _conv_fwd(blk, np.float32(0), 4)
    if mk == ST_F64:
        return _conv_fwd(blk, np.float64(0), 8)
    return _conv_fwd(blk, np.int64(0), 8)


def _ints(values, k, lo):
    if not isinstance(values, (list, tuple)) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in values):
        return None
    values = list(values)
    if len(values) == 1:
        values *= k
    if len(values) != k or (values and min(values) < lo):
        return None
    return values


def _conv_params(input, weight, stride, padding, dilation, transposed, output_padding,
                 groups):
    """Static arguments padded in front to three spatial dims, or None (reference raises)."""
    k = weight.ndim - 2
    if k < 1 or k > 3 or input.ndim != k + 2 or isinstance(groups, bool) \
            or not isinstance(groups, int) or groups < 1 or not isinstance(transposed, bool):
        return None
    s, p, d = _ints(stride, k, 1), _ints(padding, k, 0), _ints(dilation, k, 1)
    op = _ints(output_padding or [0], k, 0)
    if s is None or p is None or d is None or op is None:
        return None
    f = 3 - k
    return k, [1] * f + s, [0] * f + p, [1] * f + d, [0] * f + op


@register_fast("aten::convolution.out", fallback=True)
def bind_convolution_any(ctx, input, weight, bias, stride, padding, dilation, transposed,
                         output_padding, groups, out):  # noqa: A002 - schema names
    prm = _conv_params(input, weight, stride, padding, dilation, transposed, output_padding,
                       groups)
    comp = _compute(input)
    if prm is None or comp is None or out.ndim != input.ndim or (bias is not None and (
            bias.ndim != 1 or bias.scalar_type not in SUPPORTED)) \
            or weight.scalar_type not in SUPPORTED or out.scalar_type not in SUPPORTED:
        return None
    k, s, p, d, op = prm
    mk, ct, item = comp
    fn, im, imn = 0, 0, 0
    if mk != ST_I64 and not transposed and k <= 2:
        fn = 1  # conv.py's loops (ExecuTorch's accumulation order), not the direct _corr
        # conv.py's scratch at load-time sizes: the padded depthwise plane or im2col + gemm
        sp = ([1] + list(input.shape[2:]))[-2:]
        kern = ([1] + list(weight.shape[2:]))[-2:]
        nelem = conv_scratch_elems(weight.shape[0] // groups, weight.shape[1], kern, sp, s[1:],
                                   p[1:], d[1:])
        if nelem:
            im, nbytes = _conv_scratch(ctx, nelem * item)
            imn = nbytes // item
    return ctx.bind(lazy(conv_any_kernel), [
        0, fn, ctx.desc(input), ctx.desc(weight), 0 if bias is None else ctx.desc(bias),
        ctx.desc(out), 0, 0] + s + p + d + op + [
        groups, int(transposed), k, 0, ctx.buffer(input.capacity * item),
        ctx.buffer(weight.capacity * item),
        ctx.buffer(bias.capacity * item) if bias is not None else 0,
        ctx.buffer(out.capacity * item), 0, ctx.buffer(FAKE_WORDS * 8), im, imn, mk, ct])


@register_fast("aten::convolution_backward.out")
def bind_convolution_backward(ctx, grad_output, input, weight, bias_sizes, stride, padding,
                              dilation, transposed, output_padding, groups, output_mask, out0,
                              out1, out2):  # noqa: A002 - schema names
    prm = _conv_params(input, weight, stride, padding, dilation, transposed, output_padding,
                       groups)
    comp = _compute(input)
    if prm is None or comp is None or comp[0] == ST_I64 or not isinstance(
            output_mask, (list, tuple)) or len(output_mask) != 3:
        return None  # integer convolution has no gradient in ATen
    outs = (out0, out1, out2)
    mask = [bool(m) for m in output_mask]
    if any(t.scalar_type not in SUPPORTED for t in (grad_output, weight)) or any(
            mask[i] and (outs[i] is None or outs[i].scalar_type not in SUPPORTED)
            for i in range(3)):
        return None
    if (mask[0] and out0.ndim != input.ndim) or (mask[1] and out1.ndim != weight.ndim) or (
            mask[2] and out2.ndim != 1):
        return None
    k, s, p, d, op = prm
    mk, _, item = comp
    return ctx.bind(lazy(conv_any_kernel), [
        1, 0, ctx.desc(input), ctx.desc(weight), ctx.desc(grad_output),
        ctx.desc(out0) if mask[0] else 0, ctx.desc(out1) if mask[1] else 0,
        ctx.desc(out2) if mask[2] else 0] + s + p + d + op + [
        groups, int(transposed), k, mask[0] | mask[1] << 1 | mask[2] << 2,
        ctx.buffer(input.capacity * item), ctx.buffer(weight.capacity * item),
        ctx.buffer(grad_output.capacity * item), ctx.buffer(input.capacity * item),
        ctx.buffer(max(weight.capacity, grad_output.shape[1] if grad_output.ndim > 1 else 1)
                   * item),
        ctx.buffer(FAKE_WORDS * 8), 0, 0, mk, 0])


# ---- normalization -----------------------------------------------------------------

N_BN, N_BNTRAIN, N_LN, N_GN = range(4)
# block: op, x, w, b, running_mean, running_var, out0, out1, out2, eps, momentum, mk,
# scratch x, w, b, rm, rv, out0, out1, out2, made-up descriptors, N, C, HxW, group, k, ns...
(B_OP, B_X, B_W, B_B, B_RM, B_RV, B_O0, B_O1, B_O2, B_EPS, B_MOM, B_MK, B_SX, B_SW, B_SB,
 B_SRM, B_SRV, B_SO0, B_SO1, B_SO2, B_FAKE, B_N, B_C, B_HXW, B_G, B_K) = range(26)
B_NS = 26


@njit(inline="always")
def _in(blk, i, fi, stc):
    """Gather optional input ``blk[i]`` (scratch ``blk[i + 11]``) under made-up descriptor
    ``fi``; the made-up descriptor's address, or 0 when absent."""
    if blk[i] == 0:
        return 0
    d = desc(blk[i])
    fa = blk[B_FAKE] + fi * 512
    _fake(desc(fa), d, blk[i + 11], stc, d[3])
    return fa


@njit
def _gather_in(blk, i, mk):
    if blk[i] != 0:
        _gather(blk[i + 11], desc(blk[i]), mk)


@njit(error_model="numpy")
def _bn_train(x, w_addr, b_addr, rm_addr, rv_addr, o0, o1, o2, eps, mom, sc, m):
    """Training batch norm over contiguous compute-dtype descriptors (reference order of
    operations; statistics summed in float64)."""
    nd = x[2]
    if nd < 2:
        return INVALID_ARGUMENT
    N, C = x[8], x[9]
    inner = 1
    for i in range(2, nd):
        inner *= x[8 + i]
    cnt = N * inner
    if C == 0 or cnt == 0:
        return INVALID_ARGUMENT  # the reference needs a value per channel
    for a in (w_addr, b_addr, rm_addr, rv_addr):
        if a != 0 and desc(a)[3] != C:
            return INVALID_ARGUMENT
    st = resize_to(o0, x[8:24], nd)
    if st != OK:
        return st
    sc[0] = C
    st = resize_to(o1, sc, 1)
    if st != OK:
        return st
    st = resize_to(o2, sc, 1)
    if st != OK:
        return st
    xv = ptr_like(x[0], m)
    z = ptr_like(o0[0], m)
    mv = ptr_like(o1[0], m)
    iv = ptr_like(o2[0], m)
    wv = ptr_like(desc(w_addr)[0] if w_addr else x[0], m)
    bv = ptr_like(desc(b_addr)[0] if b_addr else x[0], m)
    rm = ptr_like(desc(rm_addr)[0] if rm_addr else x[0], m)
    rv = ptr_like(desc(rv_addr)[0] if rv_addr else x[0], m)
    xa = carray(xv, max(x[3], 1))
    e = cast_like(eps, m)
    one = cast_like(1.0, m)
    mo = cast_like(mom, m)
    keep = cast_like(1.0 - mom, m)
    corr = cast_like(cnt / (cnt - 1), m) if cnt > 1 else cast_like(math.nan, m)
    for c in range(C):
        s = 0.0
        for n in range(N):
            s += sum_seg(xa, (n * C + c) * inner, inner)
        mean = cast_like(s / cnt, m)
        v = 0.0
        for n in range(N):
            b = (n * C + c) * inner
            for i in range(inner):
                dv = xv[b + i] - mean
                v += dv * dv
        var = cast_like(v / cnt, m)
        inv = one / math.sqrt(var + e)
        mv[c] = mean
        iv[c] = inv
        for n in range(N):
            b = (n * C + c) * inner
            for i in range(inner):
                y = (xv[b + i] - mean) * inv
                if w_addr:
                    y = y * wv[c]
                if b_addr:
                    y = y + bv[c]
                z[b + i] = y
        if rm_addr:
            rm[c] = keep * rm[c] + mo * mean
        if rv_addr:
            rv[c] = keep * rv[c] + mo * (var * corr)
    return OK


@njit
def _norm_run(blk, mk, item):
    op = blk[B_OP]
    stc = ST_F32 if item == 4 else ST_F64
    x = desc(blk[B_X])
    fa = blk[B_FAKE]
    sc = scratch(fa + G_OFF * 8, 16)
    eps = bits_to_f64(blk[B_EPS])
    for i in (B_X, B_W, B_B, B_RM, B_RV):
        _gather_in(blk, i, mk)
    fx = _in(blk, B_X, 0, stc)
    fw = _in(blk, B_W, 1, stc)
    fb = _in(blk, B_B, 2, stc)
    frm = _in(blk, B_RM, 3, stc)
    frv = _in(blk, B_RV, 4, stc)
    fo = (desc(fa + 5 * 512), desc(fa + 6 * 512), desc(fa + 7 * 512))
    for j in range(3):
        if blk[B_O0 + j] != 0:
            od = desc(blk[B_O0 + j])
            _fake(fo[j], od, blk[B_SO0 + j], stc, od[4])
    if op == N_BN:
        st = _bn_typed(desc(fx), fw, fb, desc(frm), desc(frv), eps, fo[0], fo[1], fo[2], sc, mk)
    elif op == N_BNTRAIN:
        st = _bn_train(desc(fx), fw, fb, frm, frv, fo[0], fo[1], fo[2], eps,
                       bits_to_f64(blk[B_MOM]), sc, mk)
    elif op == N_LN:
        kk = blk[B_K]
        ns = blk[B_NS:B_NS + kk]
        st = _ln_typed(desc(fx), fw, fb, eps, fo[0], fo[1], fo[2], kk, ns, sc, mk)
    else:
        if x[3] != blk[B_N] * blk[B_C] * blk[B_HXW]:
            return INVALID_ARGUMENT
        st = _gn_typed(desc(fx), fw, fb, blk[B_N], blk[B_C], blk[B_HXW], blk[B_G], eps,
                       fo[0], fo[1], fo[2], sc, mk)
    if st != OK:
        return st
    for j in range(3):
        st = _finish(blk[B_SO0 + j], fo[j], desc(blk[B_O0 + j]), mk, False)
        if st != OK:
            return st
    if op == N_BNTRAIN:  # running statistics are updated in place
        for i in (B_RM, B_RV):
            if blk[i] != 0:
                _scatter(blk[i + 11], desc(blk[i]), mk, False)
    return OK


def norm_any_kernel(block):
    blk = carray(block, B_NS + 16)
    if blk[B_MK] == ST_F32:
        return _norm_run(blk, np.float32(0), 4)
    if blk[B_MK] == ST_F64:
        return _norm_run(blk, np.float64(0), 8)
    return NOT_SUPPORTED


def _bind_norm(ctx, op, x, w, b, rm, rv, outs, eps, momentum=0.0, ints=()):
    comp = _compute(x)
    if comp is None or comp[0] == ST_I64 or x.ndim > 16:
        return None  # normalization of integer tensors: torch rejects them
    if any(t is not None and t.scalar_type not in SUPPORTED for t in (w, b, rm, rv) + outs):
        return None
    if not isinstance(eps, (int, float)) or not isinstance(momentum, (int, float)):
        return None
    mk, _, item = comp
    ins = (x, w, b, rm, rv)
    return ctx.bind(lazy(norm_any_kernel), [
        op] + [0 if t is None else ctx.desc(t) for t in ins + outs] + [
        ctx.f64(eps), ctx.f64(momentum), mk] + [
        0 if t is None else ctx.buffer(t.capacity * item) for t in ins + outs] + [
        ctx.buffer(FAKE_WORDS * 8)] + list(ints) + [0] * (16 + 5 - len(ints)))


def _bind_bn_inference(ctx, input, weight, bias, running_mean, running_var, eps, outs):
    from kernels.fast.norm import bind_batch_norm_no_training
    r = bind_batch_norm_no_training(ctx, input, weight, bias, running_mean, running_var, 0.0,
                                    eps, *outs)
    if r is not None:
        return r
    if input.ndim < 2 or running_mean is None or running_var is None \
            or outs[1].ndim != 1 or outs[2].ndim != 1:
        return None
    return _bind_norm(ctx, N_BN, input, weight, bias, running_mean, running_var, outs, eps)


@register_fast("aten::_native_batch_norm_legit_no_training.out", fallback=True)
def bind_batch_norm_no_training_any(ctx, input, weight, bias, running_mean, running_var,
                                    momentum, eps, out0, out1, out2):  # noqa: A002
    if input.ndim < 2 or out1.ndim != 1 or out2.ndim != 1 or running_mean is None \
            or running_var is None:
        return None
    return _bind_norm(ctx, N_BN, input, weight, bias, running_mean, running_var,
                      (out0, out1, out2), eps)


def _bind_bn_train(ctx, input, weight, bias, running_mean, running_var, momentum, eps, outs):
    if input.ndim < 2 or outs[0].ndim != input.ndim or outs[1].ndim != 1 or outs[2].ndim != 1:
        return None
    for t in (running_mean, running_var):  # written back in place, with their own sizes
        if t is not None and t.ndim != 1:
            return None
    return _bind_norm(ctx, N_BNTRAIN, input, weight, bias, running_mean, running_var, outs,
                      eps, momentum)


@register_fast("aten::_native_batch_norm_legit.out")
def bind_batch_norm_legit(ctx, input, weight, bias, running_mean, running_var, training,
                          momentum, eps, out, save_mean, save_invstd):  # noqa: A002
    outs = (out, save_mean, save_invstd)
    if not isinstance(training, bool):
        return None
    if not training:
        return _bind_bn_inference(ctx, input, weight, bias, running_mean, running_var, eps,
                                  outs)
    return _bind_bn_train(ctx, input, weight, bias, running_mean, running_var, momentum, eps,
                          outs)


@register_fast("aten::_native_batch_norm_legit.no_stats_out")
def bind_batch_norm_legit_no_stats(ctx, input, weight, bias, training, momentum, eps, out,
                                   save_mean, save_invstd):  # noqa: A002
    if training is not True:
        return None  # the reference raises: inference needs running statistics
    return _bind_bn_train(ctx, input, weight, bias, None, None, momentum, eps,
                          (out, save_mean, save_invstd))


@register_fast("aten::native_layer_norm.out", fallback=True)
def bind_layer_norm_any(ctx, input, normalized_shape, weight, bias, eps, out0, out1,
                        out2):  # noqa: A002
    ns = [int(s) for s in normalized_shape]
    k = len(ns)
    if k == 0 or k > 16 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != tuple(ns):
        return None
    if out0.ndim != input.ndim or out1.ndim != input.ndim or out2.ndim != input.ndim:
        return None
    return _bind_norm(ctx, N_LN, input, weight, bias, None, None, (out0, out1, out2), eps,
                      ints=[0, 0, 0, 0, k] + ns)


@register_fast("aten::native_group_norm.out", fallback=True)
def bind_group_norm_any(ctx, input, weight, bias, N, C, HxW, group, eps, out0, out1,
                        out2):  # noqa: A002
    N, C, HxW, group = int(N), int(C), int(HxW), int(group)
    if group < 1 or C % group or min(N, C, HxW) < 0:
        return None
    if out0.ndim != input.ndim or out1.ndim != 2 or out2.ndim != 2:
        return None
    return _bind_norm(ctx, N_GN, input, weight, bias, None, None, (out0, out1, out2), eps,
                      ints=[N, C, HxW, group])
