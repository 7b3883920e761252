"""Compiled matrix products: mm, bmm, addmm, linear, in ExecuTorch's accumulation order.

float32/float64 with every operand of the out's dtype; anything else stays on
the reference kernel. Each output is a running sum of its k products in order
(``kernels.fast.ordered``), as ExecuTorch's plain loops compute it, bit for bit;
BLAS would reorder the sum. Inputs may be row-major or transposed (a matrix
whose innermost dim is one of its last two): the strides are read at run time.
Outs are contiguous. addmm then computes ``sum * alpha + self * beta`` (self
broadcast; ignored when beta is 0, as ATen) and linear ``sum + bias``. With
``math="fast"`` each multiply-add is fused (FMA): the same order, one rounding a step.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_NDIM, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, SPLIT_WHOLE, ST_F32,
                             ST_F64, bits_to_f64, desc, lazy, ptr_like, resize_to)
from pyruntime.kernels.fast.gemm import has_fma, nr_of
from pyruntime.kernels.fast.ordered import (PK_B_COLS, gemm_scratch, ordered_gemm, pack_weight,
                                  scratch_size)

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
OP_MM, OP_BMM, OP_ADDMM, OP_LINEAR = range(4)
# block: op, a, b, out, self/bias (0 if none), alpha bits, beta bits, scratch, scratch elems,
# B (a constant weight) packed at load for ``ordered_gemm`` else 0, and how (``ordered.PK_*``),
# this block's part and the number of parts (intra-op threads, ``BindContext.bind_split``:
# part -1 resizes the out, part k computes rows [m * k // n, m * (k + 1) // n) of every
# product, or with K_BYCOL its k-th share of the columns, in whole panels of ``nr_of``
# columns: a matrix-vector product has one row; 0 parts: the whole call) and, in the prep
# block, the multiply-adds below which the prep call does the whole call at the run's sizes
# (returning SPLIT_WHOLE); K_FMA: 1 fuses each multiply-add (math="fast")
K_OP, K_A, K_B, K_O, K_S, K_AL, K_BE, K_SCR, K_SCRN, K_BP, K_BK, K_PART, K_NPART, \
    K_MIN, K_BYCOL, K_FMA = range(16)
SPLIT_MACS = 1 << 19  # multiply-adds below which a product is not split


@njit(inline="always")
def _add_bias(o, s, m, n, alpha, beta, scaled, mk, r0, r1, c0, c1):
    """Rows [r0, r1), columns [c0, c1) of out (m x n, contiguous) = out * alpha + s * beta
    (just out + s unless ``scaled``), ``s`` rank <= 2 broadcast. Returns a status."""
    r = s[D_NDIM]
    sm, rs = (s[D_SIZES], s[D_STRIDES]) if r == 2 else (1, 0)
    sn = s[D_SIZES + r - 1] if r >= 1 else 1
    cs = s[D_STRIDES + r - 1] if r >= 1 else 0
    if r > 2 or (sm != 1 and sm != m) or (sn != 1 and sn != n):
        return INVALID_ARGUMENT
    rs = rs if sm != 1 else 0
    cs = cs if sn != 1 else 0
    x = ptr_like(s[D_DATA], mk)
    z = ptr_like(o[D_DATA], mk)
    for i in range(r0, r1):
        for j in range(c0, c1):
            if scaled:
                z[i * n + j] = z[i * n + j] * alpha + x[i * rs + j * cs] * beta
            else:
                z[i * n + j] = z[i * n + j] + x[i * rs + j * cs]
    return OK


@njit
def _matmul(block, alpha, beta, mk, item):
    op = block[K_OP]
    a = desc(block[K_A])
    b = desc(block[K_B])
    o = desc(block[K_O])
    nb = 1
    if op == OP_BMM:
        if (a[D_NDIM] != 3 or b[D_NDIM] != 3 or a[D_SIZES] != b[D_SIZES]
                or a[D_SIZES + 2] != b[D_SIZES + 1]):
            return INVALID_ARGUMENT
        nb, m, k, n = a[D_SIZES], a[D_SIZES + 1], a[D_SIZES + 2], b[D_SIZES + 2]
        st = resize_to(o, (nb, m, n), 3)
        ars, acs, brs, bcs = a[D_STRIDES + 1], a[D_STRIDES + 2], b[D_STRIDES + 1], b[D_STRIDES + 2]
    elif op == OP_LINEAR:  # input (..., k) @ weight(n, k).T + bias
        nd = a[D_NDIM]
        if nd < 1 or b[D_NDIM] != 2 or a[D_SIZES + nd - 1] != b[D_SIZES + 1] or o[D_NDIM] != nd:
            return INVALID_ARGUMENT
        k, n = b[D_SIZES + 1], b[D_SIZES]
        m = 1
        sizes = np.empty(16, np.int64)
        for i in range(nd - 1):
            sizes[i] = a[D_SIZES + i]
            m *= a[D_SIZES + i]
        sizes[nd - 1] = n
        st = resize_to(o, sizes, nd)
        # a rank-2 input may be transposed; higher ranks are contiguous (checked at bind)
        ars, acs = (a[D_STRIDES] if nd == 2 else k), a[D_STRIDES + nd - 1]
        brs, bcs = b[D_STRIDES + 1], b[D_STRIDES]
    else:  # mm / addmm
        if a[D_NDIM] != 2 or b[D_NDIM] != 2 or a[D_SIZES + 1] != b[D_SIZES]:
            return INVALID_ARGUMENT
        m, k, n = a[D_SIZES], a[D_SIZES + 1], b[D_SIZES + 1]
        st = resize_to(o, (m, n), 2)
        ars, acs, brs, bcs = a[D_STRIDES], a[D_STRIDES + 1], b[D_STRIDES], b[D_STRIDES + 1]
    npart, part = block[K_NPART], block[K_PART]
    if st != OK:
        return st
    done = OK
    if part < 0:  # the prep call: resized; the whole call too when it is small
        if nb * m * n * k >= block[K_MIN]:
            return OK
        npart, done = 0, SPLIT_WHOLE
    r0, r1, c0, c1 = 0, m, 0, n
    pw, pwk = block[K_BP], block[K_BK]
    if npart and block[K_BYCOL]:  # whole panels of columns (a packed B is cut at panels)
        nr = 64 // item
        panels = (n + nr - 1) // nr
        c0 = min(n, panels * part // npart * nr)
        c1 = min(n, panels * (part + 1) // npart * nr)
        if pw != 0 and pwk == PK_B_COLS:
            pw += c0 * k * item
        else:
            pw, pwk = 0, 0
    elif npart:
        r0, r1 = m * part // npart, m * (part + 1) // npart
    if r0 >= r1 or c0 >= c1:
        return OK
    need = gemm_scratch(r1 - r0, c1 - c0, k)
    if need <= block[K_SCRN]:
        scr = carray(ptr_like(block[K_SCR] if block[K_SCR] else o[D_DATA], mk), max(need, 1))
    else:  # sizes over the bind-time bound: allocate
        scr = np.empty(need, type(mk))
    for i in range(nb):  # (a packed B is never batched)
        ordered_gemm(r1 - r0, c1 - c0, k,
                     a[D_DATA] + (i * a[D_STRIDES] + r0 * ars) * item, ars, acs,
                     b[D_DATA] + (i * b[D_STRIDES] + c0 * bcs) * item, brs, bcs,
                     o[D_DATA] + ((i * m + r0) * n + c0) * item, n, scr, mk, item, pw, pwk,
                     block[K_FMA])
    if op == OP_LINEAR and block[K_S] != 0:
        st = _add_bias(o, desc(block[K_S]), m, n, alpha, beta, False, mk, r0, r1, c0, c1)
    elif op == OP_ADDMM and beta != 0:  # beta == 0 ignores self (NaN/inf do not propagate)
        st = _add_bias(o, desc(block[K_S]), m, n, alpha, beta, True, mk, r0, r1, c0, c1)
    elif op == OP_ADDMM and alpha != 1:
        z = ptr_like(o[D_DATA], mk)
        for i in range(r0, r1):
            for j in range(c0, c1):
                z[i * n + j] = z[i * n + j] * alpha
    return st if st != OK else done


def matmul_kernel(block):
    dt = desc(block[K_O])[1]
    alpha = bits_to_f64(block[K_AL])
    beta = bits_to_f64(block[K_BE])
    if dt == ST_F32:
        return _matmul(block, np.float32(alpha), np.float32(beta), np.float32(0), 4)
    if dt == ST_F64:
        return _matmul(block, alpha, beta, 0.0, 8)
    return NOT_SUPPORTED


def _matrix_ok(t, rank):
    """A strided matrix: its innermost dim is one of its last two."""
    return t.ndim == rank and t.dim_order[-1] >= rank - 2


def _bind(ctx, op, a, b, out, s=None, alpha=1, beta=0):
    ts = (a, b, out) + (() if s is None else (s,))
    if out.dtype not in FLOATS or any(t.dtype != out.dtype for t in ts) \
            or not out.is_contiguous():
        return None
    for v in (alpha, beta):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
    if op == OP_LINEAR:
        m, k, n = a.numel // max(a.shape[-1], 1), b.shape[1], b.shape[0]
    else:
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    nb = a.shape[0] if op == OP_BMM else 1
    parts = min(ctx.threads, m) if nb * m * n * k >= SPLIT_MACS else 1
    panels = -(-n // nr_of(out.dtype.itemsize))
    # fewer rows than threads (a matrix-vector product): the parts split the columns
    bycol = op != OP_BMM and m < ctx.threads and nb * m * n * k >= SPLIT_MACS and panels > 1
    if bycol:
        parts = min(ctx.threads, panels)
    mp = m if bycol else -(-m // parts)  # rows of a part (of the whole when not split)
    np_ = -(-panels // parts) * nr_of(out.dtype.itemsize) if bycol else n  # its columns
    packed, kind = 0, 0
    if op != OP_BMM and b.storage is not None and not b.storage.flags.writeable and m * n * k:
        # a constant (a linear layer's weight): packed once, here, for the load-time sizes
        # (a part's: rows of A only select rows of C, the packed B serves every part; a
        # part of the columns reads its own panels of it)
        bm = b.numpy()
        bp, kind = pack_weight(bm.T if op == OP_LINEAR else bm, mp, min(n, np_), False)
        ctx.scratch.append(bp)
        packed = bp.ctypes.data
    words = [op, ctx.desc(a), ctx.desc(b), ctx.desc(out), 0 if s is None else ctx.desc(s),
             ctx.f64(alpha), ctx.f64(beta), 0, 0, packed, kind, 0, 0, 0, int(bycol),
             ctx.pick_fast() if has_fma() else 0]
    blocks = []
    for p in range(parts):  # the gemm's scratch at load-time (upper-bound) sizes, per part
        nelem = scratch_size(m if p == 0 else mp, n, k)  # (part 0's serves the whole call)
        w = list(words)
        w[K_SCR], w[K_SCRN] = ctx.buffer(nelem * out.dtype.itemsize) if nelem else 0, nelem
        w[K_PART], w[K_NPART] = (p, parts) if parts > 1 else (0, 0)
        blocks.append(w)
    whole = blocks[0][:K_PART] + [0, 0, 0, 0, words[K_FMA]]
    if parts == 1:
        return ctx.bind(lazy(matmul_kernel), whole)
    return ctx.bind_split(lazy(matmul_kernel), whole, blocks,
                          whole[:K_PART] + [-1, parts, SPLIT_MACS, int(bycol), words[K_FMA]])


def bind_mm(ctx, self, mat2, out):
    if not (_matrix_ok(self, 2) and _matrix_ok(mat2, 2)):
        return None
    return _bind(ctx, OP_MM, self, mat2, out)


def bind_bmm(ctx, self, mat2, out):
    if not (_matrix_ok(self, 3) and _matrix_ok(mat2, 3)):
        return None
    return _bind(ctx, OP_BMM, self, mat2, out)


def bind_addmm(ctx, self, mat1, mat2, beta, alpha, out):
    if not (_matrix_ok(mat1, 2) and _matrix_ok(mat2, 2)) or self.ndim > 2:
        return None
    return _bind(ctx, OP_ADDMM, mat1, mat2, out, self, alpha, beta)


def bind_linear(ctx, input, weight, bias, out):  # noqa: A002 - schema names
    # a rank-2 input may be transposed; other ranks are flattened to (m, k), so contiguous
    ok = _matrix_ok(input, 2) if input.ndim == 2 else input.ndim >= 1 and input.is_contiguous()
    if not ok or not _matrix_ok(weight, 2) or out.ndim != input.ndim \
            or (bias is not None and bias.ndim > 1):
        return None
    return _bind(ctx, OP_LINEAR, input, weight, out, bias, 1, 1)
