"""Matrix products that add in ExecuTorch's order: the compiled ``ordered_matmul``.

ExecuTorch's matmul and convolution kernels are plain loops: each output starts
at zero and adds its k products one at a time, first to last, every product and
partial sum rounded to float (no FMA). BLAS splits and reorders that sum, which
moves results by an ulp, and in a quantized program an ulp flips whole
quantization steps. These loops keep the order and still vectorize: a SIMD lane
is an output column, and a block of 4 rows of C (a column tile of them, in L1)
takes 4 k steps per pass, each element adding its products in order. LLVM does
not contract ``c + a * b`` into an FMA without fast-math, so each product rounds
before the add, as in the C++ (whose wheel is built without FMA contraction).

``ordered_gemm`` wants the vector dimension contiguous: B's rows (or, when C has
few columns and more rows, A's columns, by computing C^T = B^T A^T); otherwise
it packs that operand into the scratch buffer first (``gemm_scratch`` elements).
"""
from __future__ import annotations

from numba import njit

from kernels.fast.nb import ptr_like

NARROW = 32  # C with fewer columns than this (and more rows) runs transposed


@njit(inline="always")
def _tile(k):
    """Columns per tile: keep the B panel (k x tile) about L2-sized."""
    return max(64, min(512, (1 << 16) // max(k, 1) // 8 * 8))


@njit
def _rows_axpy(A, ars, acs, B, ldb, C, ldc, m, n, k, zero):
    """C[i, :n] = sum_t A[i, t] * B[t, :n], t in order, for contiguous rows of B and C.

    Blocks of 4 rows take four k steps per pass over a column tile, each element
    still summed in order (``((c + a0 * b0) + a1 * b1) + ...``): a quarter of the C
    traffic of one step at a time."""
    nb = _tile(k)
    for j0 in range(0, n, nb):
        j1 = min(n, j0 + nb)
        i = 0
        while i < m:
            r = 4 if m - i >= 4 else 1
            for rr in range(r):
                c = (i + rr) * ldc
                for j in range(j0, j1):
                    C[c + j] = zero
            c = i * ldc
            c1, c2, c3 = c + ldc, c + 2 * ldc, c + 3 * ldc
            t = 0
            if r == 4:
                while t + 4 <= k:
                    a = i * ars + t * acs
                    p0, q0, r0, s0 = A[a], A[a + ars], A[a + 2 * ars], A[a + 3 * ars]
                    a += acs
                    p1, q1, r1, s1 = A[a], A[a + ars], A[a + 2 * ars], A[a + 3 * ars]
                    a += acs
                    p2, q2, r2, s2 = A[a], A[a + ars], A[a + 2 * ars], A[a + 3 * ars]
                    a += acs
                    p3, q3, r3, s3 = A[a], A[a + ars], A[a + 2 * ars], A[a + 3 * ars]
                    b = t * ldb
                    for j in range(j0, j1):
                        b0, b1 = B[b + j], B[b + ldb + j]
                        b2, b3 = B[b + 2 * ldb + j], B[b + 3 * ldb + j]
                        C[c + j] = (((C[c + j] + p0 * b0) + p1 * b1) + p2 * b2) + p3 * b3
                        C[c1 + j] = (((C[c1 + j] + q0 * b0) + q1 * b1) + q2 * b2) + q3 * b3
                        C[c2 + j] = (((C[c2 + j] + r0 * b0) + r1 * b1) + r2 * b2) + r3 * b3
                        C[c3 + j] = (((C[c3 + j] + s0 * b0) + s1 * b1) + s2 * b2) + s3 * b3
                    t += 4
                while t < k:
                    a = i * ars + t * acs
                    p0, q0, r0, s0 = A[a], A[a + ars], A[a + 2 * ars], A[a + 3 * ars]
                    b = t * ldb
                    for j in range(j0, j1):
                        bv = B[b + j]
                        C[c + j] += p0 * bv
                        C[c1 + j] += q0 * bv
                        C[c2 + j] += r0 * bv
                        C[c3 + j] += s0 * bv
                    t += 1
            else:
                for t in range(k):
                    p0 = A[i * ars + t * acs]
                    b = t * ldb
                    for j in range(j0, j1):
                        C[c + j] += p0 * B[b + j]
            i += r


def scratch_size(m, n, k, bcs, packed=False):
    """Scratch elements ``ordered_gemm`` needs for these sizes and B's column stride
    (``packed``: A^T is given packed). Plain Python for binders (no compile at bind
    time); ``gemm_scratch`` is the same function compiled, for kernels."""
    if n >= NARROW or n >= m:
        return 0 if bcs == 1 else k * n
    return m * n if packed else k * m + m * n


gemm_scratch = njit(inline="always")(scratch_size)


@njit
def ordered_gemm(m, n, k, pa, ars, acs, pb, brs, bcs, pc, ldc, S, zero, pat=0):
    """C (m x n, row stride ldc) = A @ B, each element a running sum in k order from zero.

    ``pa``/``pb``/``pc`` are data addresses, A and B addressed by element strides;
    ``S`` is a scratch array of at least ``gemm_scratch(m, n, k, bcs)`` elements;
    ``pat``, when not 0, is A^T packed (k x m, contiguous): a constant weight packed
    once at load for the few-columns case."""
    if m == 0 or n == 0:
        return
    A = ptr_like(pa, zero)
    B = ptr_like(pb, zero)
    C = ptr_like(pc, zero)
    ps = S.ctypes.data
    P = ptr_like(ps, zero)
    if n >= NARROW or n >= m:
        if bcs == 1:
            _rows_axpy(A, ars, acs, B, brs, C, ldc, m, n, k, zero)
            return
        for t0 in range(0, k, 16):  # pack B's rows contiguous, in 16 x 16 blocks
            for j0 in range(0, n, 16):
                for j in range(j0, min(n, j0 + 16)):
                    for t in range(t0, min(k, t0 + 16)):
                        P[t * n + j] = B[t * brs + j * bcs]
        _rows_axpy(A, ars, acs, P, n, C, ldc, m, n, k, zero)
        return
    # few columns: C^T (n x m) = B^T (n x k) @ A^T (k x m), A^T packed, then transposed back
    if pat == 0:
        for i0 in range(0, m, 16):  # in 16 x 16 blocks: both sides stay in cache
            for t0 in range(0, k, 16):
                for i in range(i0, min(m, i0 + 16)):
                    for t in range(t0, min(k, t0 + 16)):
                        P[t * m + i] = A[i * ars + t * acs]
    else:
        P = ptr_like(pat, zero)
    T = ptr_like(ps + (0 if pat else k * m * S.itemsize), zero)
    _rows_axpy(B, bcs, brs, P, m, T, m, n, m, k, zero)
    for i in range(m):
        for j in range(n):
            C[i * ldc + j] = T[j * m + i]
