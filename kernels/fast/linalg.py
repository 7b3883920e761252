"""Compiled matrix products: mm, bmm, addmm, linear through BLAS gemm.

float32/float64 with every operand of the out's dtype; anything else, and
any program when no BLAS library is found, stays on the reference kernel.
Inputs may be row-major or transposed (a matrix whose innermost dim is one
of its last two): the strides read at run time pick gemm's transpose flags.
Outs are contiguous. addmm/linear first write the broadcast bias (times
beta) into the out and let gemm accumulate onto it.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from kernels.fast import register_fast
from kernels.fast.blas import gemm_addr, matmul_strided
from kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_F64, bits_to_f64,
                             desc, lazy, ptr_like, resize_to)

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
OP_MM, OP_BMM, OP_ADDMM, OP_LINEAR = range(4)


@njit(inline="always")
def _fill_bias(o, s, m, n, beta, mk):
    """out (m x n, contiguous) = beta * s broadcast; s is rank <= 2. Returns a status."""
    r = s[2]
    sm, rs = (s[8], s[24]) if r == 2 else (1, 0)
    sn = s[8 + r - 1] if r >= 1 else 1
    cs = s[24 + r - 1] if r >= 1 else 0
    if r > 2 or (sm != 1 and sm != m) or (sn != 1 and sn != n):
        return INVALID_ARGUMENT
    rs = rs if sm != 1 else 0
    cs = cs if sn != 1 else 0
    if m * n == 0:
        return OK
    x = ptr_like(s[0], mk)
    z = ptr_like(o[0], mk)
    for i in range(m):
        for j in range(n):
            z[i * n + j] = beta * x[i * rs + j * cs]
    return OK


@njit
def _matmul(block, alpha, beta, one, mk, item):
    op = block[0]
    fn = block[1]
    a = desc(block[2])
    b = desc(block[3])
    o = desc(block[4])
    if op == OP_BMM:
        if a[2] != 3 or b[2] != 3 or a[8] != b[8] or a[10] != b[9]:
            return INVALID_ARGUMENT
        nb, m, k, n = a[8], a[9], a[10], b[10]
        st = resize_to(o, (nb, m, n), 3)
        if st != OK:
            return st
        for i in range(nb):
            st = matmul_strided(fn, m, n, k, alpha, a[0] + i * a[24] * item, a[25], a[26],
                                b[0] + i * b[24] * item, b[25], b[26], mk,
                                o[0] + i * m * n * item, n, mk)
            if st != OK:
                return st
        return OK
    if op == OP_LINEAR:  # input (..., k) @ weight(n, k).T + bias
        nd = a[2]
        if nd < 1 or b[2] != 2 or a[8 + nd - 1] != b[9] or o[2] != nd:
            return INVALID_ARGUMENT
        k, n = b[9], b[8]
        m = 1
        sizes = np.empty(16, np.int64)
        for i in range(nd - 1):
            sizes[i] = a[8 + i]
            m *= a[8 + i]
        sizes[nd - 1] = n
        st = resize_to(o, sizes, nd)
        if st != OK:
            return st
        # a rank-2 input may be transposed; higher ranks are contiguous (checked at bind)
        ars = a[24] if nd == 2 else k
        acs = a[24 + nd - 1]
        has_bias = block[5] != 0
        if has_bias:
            st = _fill_bias(o, desc(block[5]), m, n, one, mk)
            if st != OK:
                return st
        return matmul_strided(fn, m, n, k, alpha, a[0], ars, acs, b[0], b[25], b[24],
                              one if has_bias else mk, o[0], n, mk)
    # mm / addmm
    if a[2] != 2 or b[2] != 2 or a[9] != b[8]:
        return INVALID_ARGUMENT
    m, k, n = a[8], a[9], b[9]
    st = resize_to(o, (m, n), 2)
    if st != OK:
        return st
    acc = mk  # gemm's beta: accumulate onto the out once it holds beta * self
    if op == OP_ADDMM and beta != 0:
        st = _fill_bias(o, desc(block[5]), m, n, beta, mk)
        if st != OK:
            return st
        acc = one
    return matmul_strided(fn, m, n, k, alpha, a[0], a[24], a[25], b[0], b[24], b[25], acc,
                          o[0], n, mk)


def matmul_kernel(block):
    dt = desc(block[4])[1]
    alpha = bits_to_f64(block[6])
    beta = bits_to_f64(block[7])
    if dt == ST_F32:
        return _matmul(block, np.float32(alpha), np.float32(beta), np.float32(1), np.float32(0),
                       4)
    if dt == ST_F64:
        return _matmul(block, alpha, beta, 1.0, 0.0, 8)
    return NOT_SUPPORTED


def _matrix_ok(t, rank):
    """A tensor BLAS can address: its innermost dim is one of its last two."""
    return t.ndim == rank and t.dim_order[-1] >= rank - 2


def _bind(ctx, op, a, b, out, s=None, alpha=1, beta=0):
    ts = (a, b, out) + (() if s is None else (s,))
    fn = gemm_addr(out.dtype) if out.dtype in FLOATS else 0
    if not fn or any(t.dtype != out.dtype for t in ts) or not out.is_contiguous():
        return None
    for v in (alpha, beta):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
    return ctx.bind(lazy(matmul_kernel), [op, fn, ctx.desc(a), ctx.desc(b), ctx.desc(out),
                                          0 if s is None else ctx.desc(s), ctx.f64(alpha),
                                          ctx.f64(beta)])


@register_fast("aten::mm.out")
def bind_mm(ctx, self, mat2, out):
    if not (_matrix_ok(self, 2) and _matrix_ok(mat2, 2)):
        return None
    return _bind(ctx, OP_MM, self, mat2, out)


@register_fast("aten::bmm.out")
def bind_bmm(ctx, self, mat2, out):
    if not (_matrix_ok(self, 3) and _matrix_ok(mat2, 3)):
        return None
    return _bind(ctx, OP_BMM, self, mat2, out)


@register_fast("aten::addmm.out")
def bind_addmm(ctx, self, mat1, mat2, beta, alpha, out):
    if not (_matrix_ok(mat1, 2) and _matrix_ok(mat2, 2)) or self.ndim > 2:
        return None
    return _bind(ctx, OP_ADDMM, mat1, mat2, out, self, alpha, beta)


@register_fast("aten::linear.out")
def bind_linear(ctx, input, weight, bias, out):  # noqa: A002 - schema names
    # a rank-2 input may be transposed; other ranks are flattened to (m, k), so contiguous
    ok = _matrix_ok(input, 2) if input.ndim == 2 else input.ndim >= 1 and input.is_contiguous()
    if not ok or not _matrix_ok(weight, 2) or out.ndim != input.ndim \
            or (bias is not None and bias.ndim > 1):
        return None
    return _bind(ctx, OP_LINEAR, input, weight, out, bias, 1, 1)
