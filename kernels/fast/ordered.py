"""Matrix products that add in ExecuTorch's order: the compiled ``ordered_gemm``.

ExecuTorch's matmul and convolution kernels are plain loops: each output starts
at zero and adds its k products one at a time, first to last, every product and
partial sum rounded to float (no FMA). BLAS splits and reorders that sum, which
moves results by an ulp, and in a quantized program an ulp flips whole
quantization steps. ``kernels.fast.gemm`` keeps the order and still runs near the
machine's peak: a register tile of C (6 rows x 2 vectors) walks k in order, so
every accumulator is the C++ loop's running sum; only which outputs are computed
together is chosen for speed.

``ordered_gemm`` takes A and B by address and element strides (any layout), and
optionally one operand packed at load (a constant weight: ``pack_weight``), in the
orientation ``swapped`` picks for the sizes: C, or C^T = B^T A^T when C has fewer
columns than rows, so that the vector lanes run along the longer side.
"""
from __future__ import annotations


from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.gemm import (MR, NCB, blocked, nr_of, pack_cols_np, pack_rows_np,
                               swapped, swapped_nb)

# what a weight packed at load holds (``pack_weight``), by the operand it is
PK_NONE, PK_A_ROWS, PK_AT_COLS, PK_B_COLS, PK_BT_ROWS = range(5)


def scratch_size(m, n, k, bcs=1, packed=False):
    """Scratch elements ``ordered_gemm`` needs for these sizes, in either orientation and
    dtype (plain Python for binders: no compile at bind time; ``gemm_scratch`` is the same
    function compiled, for kernels)."""
    a = max(-(-m // MR) * MR, -(-n // MR) * MR) * k
    b = k * min(NCB, max(-(-n // 16) * 16, -(-m // 16) * 16))
    return a + b + MR * 16


gemm_scratch = njit(inline="always")(scratch_size)


def pack_weight(w, m, n, as_a):
    """A constant operand packed for ``ordered_gemm`` at the load-time sizes (m, n) of the
    product: ``w`` is A (m x k) when ``as_a``, else B (k x n), a 2-D numpy array. Returns
    (packed flat array, PK_* kind)."""
    nr = nr_of(w.dtype.itemsize)
    swap = swapped(m, n, nr)
    if as_a:
        return (pack_cols_np(w.T, nr), PK_AT_COLS) if swap else (pack_rows_np(w), PK_A_ROWS)
    return (pack_rows_np(w.T), PK_BT_ROWS) if swap else (pack_cols_np(w, nr), PK_B_COLS)


@njit
def ordered_gemm(m, n, k, pa, ars, acs, pb, brs, bcs, pc, ldc, S, zero, item, pw=0, pwk=0,
                 fma=0, pe=0, eo=0, relu=0):
    """C (m x n, row stride ldc) = A @ B, each element a running sum in k order from zero.

    ``pa``/``pb``/``pc`` are data addresses, A and B addressed by element strides;
    ``S`` is a scratch array of at least ``gemm_scratch(m, n, k)`` elements; ``pw``, when
    not 0, is A or B packed by ``pack_weight`` (kind ``pwk``), used when the sizes pick
    the orientation it was packed for. ``fma`` (math="fast") fuses each multiply-add:
    the same order, one rounding per step instead of two. ``pe`` (not 0): a per-row
    epilogue to run on the sums in registers before they are stored (``blocked``), done
    only where C is computed row by row (not swapped) and k > 0. Returns 1 if it ran the
    epilogue, else 0 (the caller then runs it on the stored C)."""
    if m == 0 or n == 0:
        return 0
    if swapped_nb(m, n, 64 // item):  # C^T (n x m) = B^T (n x k) @ A^T (k x m)
        pap = pw if pwk == PK_BT_ROWS else 0
        pbp = pw if pwk == PK_AT_COLS else 0
        blocked(n, m, k, pb, bcs, brs, pap, pa, acs, ars, pbp, pc, 1, ldc, S, zero, item, fma)
        return 0
    pap = pw if pwk == PK_A_ROWS else 0
    pbp = pw if pwk == PK_B_COLS else 0
    e = pe if k > 0 else 0
    blocked(m, n, k, pa, ars, acs, pap, pb, brs, bcs, pbp, pc, ldc, 1, S, zero, item, fma, e,
            eo, relu)
    return 1 if e != 0 else 0


def packed_size(rows, cols, k, kind, itemsize):
    """Elements of one operand packed as ``kind`` (rows x k for A kinds, k x cols for B)."""
    nr = nr_of(itemsize)
    if kind == PK_A_ROWS:
        return -(-rows // MR) * MR * k
    if kind == PK_AT_COLS:
        return -(-rows // nr) * nr * k
    if kind == PK_B_COLS:
        return -(-cols // nr) * nr * k
    return -(-cols // MR) * MR * k
