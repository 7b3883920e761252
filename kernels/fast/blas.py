"""BLAS from compiled kernels: numpy's OpenBLAS (ILP64), called through a function pointer.

numpy's wheel ships OpenBLAS as ``numpy.libs/libscipy_openblas64_-<hash>.so``
with ILP64 cblas entry points (``scipy_cblas_sgemm64_``...). We find the library
numpy loaded, take the gemm addresses with ctypes, and binders put the address
in the kernel's argument block. A kernel calls it through ``gemm`` below, an
``@intrinsic`` that turns the int64 into an LLVM function pointer: no ctypes
object is referenced from compiled code, so Numba's on-disk cache holds no
process-specific address. Without the library ``gemm_addr`` returns 0 and the
binders that need it decline (the reference tier runs).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from pyruntime.kernels.blas_lib import (  # noqa: F401 (re-export)
    blas_threads, lookup, set_blas_threads)
from pyruntime.kernels.fast.deferred import carray, intrinsic, njit, types
from pyruntime.kernels.fast.nb import NOT_SUPPORTED, OK, ptr_like

# cblas enums (C int)
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def gemm_addr(dtype) -> int:
    """Address of the ILP64 cblas gemm for ``dtype`` (float32/float64), 0 if unavailable."""
    return lookup()[1].get(np.dtype(dtype), 0)


def available() -> bool:
    return bool(lookup()[1])


@intrinsic
def gemm(typingctx, fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """cblas_?gemm(RowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc).

    ``fn`` is the function's address; ``a``, ``b``, ``c`` are data addresses; the
    element type (float32/float64) follows ``alpha``.
    """
    if alpha not in (types.float32, types.float64):
        return None
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64,
                     types.int64, alpha, types.int64, types.int64, types.int64, types.int64,
                     alpha, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        flt = context.get_value_type(signature.args[6])
        ptr = flt.as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, flt, ptr, i64, ptr,
                                               i64, flt, ptr, i64])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(f, [ir.Constant(i32, ROW_MAJOR), builder.trunc(args[1], i32),
                         builder.trunc(args[2], i32), args[3], args[4], args[5], args[6],
                         builder.inttoptr(args[7], ptr), args[8], builder.inttoptr(args[9], ptr),
                         args[10], args[11], builder.inttoptr(args[12], ptr), args[13]])
        return context.get_dummy_value()

    return sig, codegen


# ---- helpers for kernels -------------------------------------------------------------
@njit(inline="always")
def layout(rows, cols, rs, cs):
    """(transpose flag, leading dimension) addressing a strided matrix, or (0, 0)."""
    if cs == 1 or cols <= 1:
        return NO_TRANS, max(rs if rows > 1 else 1, cols, 1)
    if rs == 1 or rows <= 1:
        return TRANS, max(cs if cols > 1 else 1, rows, 1)
    return 0, 0


@njit(inline="always")
def matmul_strided(fn, m, n, k, alpha, pa, ars, acs, pb, brs, bcs, beta, pc, ldc, mk):
    """C (m x n, row stride ldc) = alpha * A @ B + beta * C for strided A, B (addresses)."""
    if m == 0 or n == 0:
        return OK
    if k == 0:  # BLAS may reject the leading dims; C = beta * C (beta == 0 ignores C)
        c = carray(ptr_like(pc, mk), (m - 1) * ldc + n)
        for i in range(m):
            for j in range(n):
                c[i * ldc + j] = 0 if beta == 0 else beta * c[i * ldc + j]
        return OK
    ta, lda = layout(m, k, ars, acs)
    tb, ldb = layout(k, n, brs, bcs)
    if ta == 0 or tb == 0:
        return NOT_SUPPORTED
    gemm(fn, ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
    return OK
