"""Attention for a few query rows (decoding): one KV head's keys and values without BLAS.

When a handful of query rows meet one KV head (decoding one token: the query heads of a
group), both products are matrix-vector sized, and an sgemm call costs more than its
arithmetic (OpenBLAS: 13 us for the two products of a 4-head layer at 140 keys, here
5 us). ``_sdpa`` in ``kernels.llm.typed`` calls, per KV head:

* ``scores`` (``Q K^T``): ``_dots8`` takes 8 keys per step; each score is a dot product
  summed in 8 lanes of ``d`` (lane ``l`` adds the products of ``d = l, l + 8, ...`` in
  order), then the lanes in a fixed pairwise tree ``((0+1)+(2+3))+((4+5)+(6+7))``. The
  vectors are LLVM IR vectors and nothing is reassociated or fused, so the order, and
  the result, is the same on every CPU; the keys past the last multiple of 8 take the
  same sum in scalar code (``_dot1``);
* its softmax, then ``weighted_values`` (``P V``): the gemm micro-kernel
  (``kernels.fast.gemm``), the probabilities packed as its A panel, V's rows read in
  place 16 columns at a time: each output a running sum over the keys, in order.

``fits``: ``d`` a multiple of 16 and at most ``MR`` (6) rows; otherwise BLAS.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from pyruntime.kernels.fast.deferred import cgutils, intrinsic, njit, types
from pyruntime.kernels.fast.gemm import MR, micro_kernel
from pyruntime.kernels.fast.nb import ptr_like

LANES = 8
COLS = 16  # the micro-kernel's columns (two 8-float vectors)


def fits(rows, d):
    """Whether ``scores`` and ``weighted_values`` take these sizes (plain Python too, for
    binders)."""
    return 0 < rows <= MR and d > 0 and d % COLS == 0


fits_nb = njit(inline="always")(fits)


@intrinsic
def _dots8(typingctx, pq, pk, ldk, d, pout):
    """out[0:8] = the dot products of q (``d`` floats) with 8 keys ``ldk`` floats apart."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        q_addr, k_addr, ldk_, d_, out_addr = args
        f32 = ir.FloatType()
        i32, i64 = ir.IntType(32), ir.IntType(64)
        vty = ir.VectorType(f32, LANES)
        fp, vp = f32.as_pointer(), vty.as_pointer()
        Q = builder.inttoptr(q_addr, fp)
        K = builder.inttoptr(k_addr, fp)
        zero = ir.Constant(vty, [ir.Constant(f32, 0.0)] * LANES)
        acc = [cgutils.alloca_once_value(builder, zero) for _ in range(LANES)]
        rows = [builder.mul(ir.Constant(i64, i), ldk_) for i in range(LANES)]
        chunks = builder.lshr(d_, ir.Constant(i64, 3))
        with cgutils.for_range(builder, chunks) as loop:
            c = builder.shl(loop.index, ir.Constant(i64, 3))
            qv = builder.load(builder.bitcast(builder.gep(Q, [c]), vp), align=4)
            for i in range(LANES):
                kv = builder.load(builder.bitcast(builder.gep(K, [builder.add(rows[i], c)]),
                                                  vp), align=4)
                builder.store(builder.fadd(builder.load(acc[i]), builder.fmul(qv, kv)), acc[i])

        def mask(idx):
            return ir.Constant(ir.VectorType(i32, LANES), [ir.Constant(i32, x) for x in idx])

        def pair_sum(a, b, lo, hi):
            return builder.fadd(builder.shuffle_vector(a, b, mask(lo)),
                                builder.shuffle_vector(a, b, mask(hi)))
        x = [builder.load(a) for a in acc]
        t = [pair_sum(x[i], x[i + 1], [0, 8, 2, 10, 4, 12, 6, 14], [1, 9, 3, 11, 5, 13, 7, 15])
             for i in range(0, LANES, 2)]
        u = [pair_sum(t[i], t[i + 1], [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15])
             for i in range(0, 4, 2)]
        r = pair_sum(u[0], u[1], [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15])
        builder.store(r, builder.inttoptr(out_addr, vp), align=4)
        return context.get_dummy_value()

    return sig, codegen


@njit(inline="always")
def _dot1(pq, pk, d):
    """One key's dot product, summed in the order ``_dots8`` sums each of its keys."""
    q = ptr_like(pq, np.float32(0))
    k = ptr_like(pk, np.float32(0))
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0)
    for c in range(0, d, LANES):
        a0 += q[c] * k[c]
        a1 += q[c + 1] * k[c + 1]
        a2 += q[c + 2] * k[c + 2]
        a3 += q[c + 3] * k[c + 3]
        a4 += q[c + 4] * k[c + 4]
        a5 += q[c + 5] * k[c + 5]
        a6 += q[c + 6] * k[c + 6]
        a7 += q[c + 7] * k[c + 7]
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@njit
def scores(rows, n, d, pq, qrs, pk, krs, psc):
    """sc[r * n + j] = q_r . k_j (float32 addresses; rows ``qrs``/``krs`` floats apart)."""
    sc = ptr_like(psc, np.float32(0))
    n8 = n - n % LANES
    for r in range(rows):
        q = pq + 4 * r * qrs
        o = psc + 4 * r * n
        for j in range(0, n8, LANES):
            _dots8(q, pk + 4 * j * krs, krs, d, o + 4 * j)
        for j in range(n8, n):
            sc[r * n + j] = _dot1(q, pk + 4 * j * krs, d)


@njit
def weighted_values(rows, n, d, psc, pa, pv, vrs, po, ors):
    """out_r = sum_j p[r, j] v_j: ``psc`` holds p (rows x n, row-major), ``pa`` scratch of
    ``n * MR`` floats for its panel; outputs ``ors`` floats apart."""
    sc = ptr_like(psc, np.float32(0))
    a = ptr_like(pa, np.float32(0))
    for j in range(n):
        for r in range(rows):
            a[j * MR + r] = sc[r * n + j]
    zero = np.float32(0)
    for c in range(0, d, COLS):
        micro_kernel(rows, pa, pv + 4 * c, vrs, po + 4 * c, ors, n, 0, zero)


def scratch_floats(rows, n):
    """Floats of scratch for ``rows`` x ``n`` scores and their panel (plain Python too)."""
    return rows * n + n * MR


scratch_nb = njit(inline="always")(scratch_floats)
