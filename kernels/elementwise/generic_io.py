"""Elementwise engine, part 1: op codes, the argument block and stack scratch layout,
and the typed gather/scatter of chunks between tensors and float64/int64 buffers.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from pyruntime.kernels.fast.deferred import carray, cgutils, intrinsic, njit, overload, types
from pyruntime.kernels.fast.nb import (ST_BF16, ST_BOOL, ST_F16, ST_F32, ST_I16, ST_I32, ST_I8,
                                       ST_U8, bits_to_f64, f64_to_bits, ptr_like, round_to)
from pyruntime.kernels.fast.runs import load_run, narrow_c, store_run


nj = njit(error_model="numpy")  # x / 0 gives inf/nan: nothing may raise in a kernel

# ---- op codes: unary < 64 <= binary < 128 <= ternary ------------------------------------
(U_COPY, U_ABS, U_NEG, U_RELU, U_SIGN, U_ACOS, U_ACOSH, U_ASIN, U_ASINH, U_ATAN, U_ATANH,
 U_COS, U_COSH, U_ERF, U_EXP, U_EXPM1, U_LOG, U_LOG10, U_LOG1P, U_LOG2, U_RECIP, U_RSQRT,
 U_SIGMOID, U_SIN, U_SINH, U_SQRT, U_TAN, U_TANH, U_CEIL, U_FLOOR, U_ROUND, U_TRUNC,
 U_ROUND_DEC, U_ISNAN, U_ISINF, U_LNOT, U_CLAMP, U_ELU, U_LEAKY, U_GELU, U_GELU_TANH,
 U_LOGIT, U_BNOT, U_BNOT_BOOL, U_ZERO) = range(45)
(B_ADD, B_ADD_A, B_SUB, B_SUB_A, B_MUL, B_DIV, B_DIV_TRUNC, B_DIV_FLOOR, B_FMOD, B_REM, B_POW,
 B_POW_BOOL, B_ATAN2, B_MAX, B_MIN, B_AND, B_OR, B_XOR, B_SHL, B_SHR, B_LAND, B_LOR, B_LXOR,
 B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_GLU, B_SECOND, B_FILL_T) = range(64, 96)
T_WHERE, T_CLAMP = 128, 129

# ---- block words ------------------------------------------------------------------------
# 0 op, 1 float compute (else int64), 2 compute dtype code, 3 round/wrap results to this
# dtype before the store (-1: no), 4 out desc, 5..7 input descs, 8..10 per-input cast code
# (-1: none), 11 bit mask of inputs not read (only their shape counts), 12..17 params
# (float64 bits on the float path, int64 on the int path), 18 extra int (glu dim)
P0 = 12

# ---- stack scratch (int64 words) ---------------------------------------------------------
CH = 256                # elements per chunk
SH, STR, CNT, VD = 0, 16, 80, 96   # shape, strides (operand k at STR + 16k), counter, 2 descs
SEG = VD + 128          # per segment: length, then base offset of out and each input
BUF = SEG + 5 * CH      # chunk buffers: inputs 0..2, then out
WORDS = BUF + 4 * CH


@intrinsic
def stack_words(typingctx, marker):
    """Address of ``WORDS`` int64 words in the caller's stack frame (entry-block alloca)."""
    sig = types.int64(marker)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        p = cgutils.alloca_once(builder, i64, size=ir.Constant(i64, WORDS))
        return builder.ptrtoint(p, i64)

    return sig, codegen


@njit(inline="always")
def words_at(addr, n):
    return carray(ptr_like(addr, np.int64(0)), n)


@njit(inline="always")
def wrap_to(v, st):
    """int64 ``v`` cast to integer dtype ``st`` (wrapping, bool -> 0/1), kept as int64."""
    if st == ST_I8:
        return np.int64(np.int8(v))
    if st == ST_U8:
        return v & 0xFF
    if st == ST_I16:
        return np.int64(np.int16(v))
    if st == ST_I32:
        return np.int64(np.int32(v))
    if st == ST_BOOL:
        return np.int64(1) if v != 0 else np.int64(0)
    return v


@njit(inline="always")
def vsincos(x, want_cos):
    n = np.rint(min(max(x, -1e6), 1e6) * 6.36619772367581382433e-01) if x == x else 0.0
    r = ((x - n * 1.57079632673412561417e+00) - n * 6.07710050630396597660e-11) \
        - n * 2.02226624871116645580e-21
    z = r * r
    s = r + r * z * (-1.66666666666666324348e-01 + z * (8.33333333332248946124e-03 + z * (
        -1.98412698298579493134e-04 + z * (2.75573137070700676789e-06 + z * (
            -2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))))
    cr = z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * (
        2.48015872894767294178e-05 + z * (-2.75573143513906633035e-07 + z * (
            2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))))
    hz = 0.5 * z
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + z * cr)
    q = n - 4.0 * np.floor(n * 0.25) + (1.0 if want_cos else 0.0)  # quadrant
    q = q - 4.0 if q >= 4.0 else q
    v = s if q == 0.0 or q == 2.0 else c
    return -v if q >= 2.0 else v


@njit(inline="always")
def vlog(x):
    b = f64_to_bits(x)
    e = ((b >> 52) & 0x7FF) - 1023
    m = bits_to_f64((b & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    de = np.float64(e + 1 if big else e)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01
                                              + w * 1.531383769920937332e-01))
    t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 + w * (
        1.818357216161805012e-01 + w * 1.479819860511658591e-01)))
    hfsq = 0.5 * f * f
    return de * 6.93147180369123816490e-01 - (
        (hfsq - (s * (hfsq + t1 + t2) + de * 1.90821492927058770002e-10)) - f)


# ---- gather / scatter: the chunk's segments, a typed run each (kernels.fast.runs) ---------

@nj
def gather_chunk(buf, addr, st, w, col, nseg, s):
    """Operand ``col``'s elements of the chunk into ``buf`` (float64 or int64)."""
    b = 0
    for q in range(nseg):
        n = w[SEG + 5 * q]
        load_run(buf, b, addr, st, w[SEG + 5 * q + col], s, n)
        b += n


@nj
def scatter_chunk(buf, addr, st, w, nseg, s):
    """``buf`` (float64 or int64) into out's elements of the chunk, as C++ casts."""
    b = 0
    for q in range(nseg):
        n = w[SEG + 5 * q]
        store_run(addr, st, w[SEG + 5 * q + 1], s, n, buf, b, narrow_c)
        b += n


@nj
def round_chunk(buf, m, st):
    if st == ST_F32:
        for j in range(m):
            buf[j] = np.float64(np.float32(buf[j]))
    elif st == ST_F16 or st == ST_BF16:
        for j in range(m):
            buf[j] = round_to(buf[j], st)
    elif st == ST_BOOL:
        for j in range(m):
            buf[j] = 1.0 if buf[j] != 0.0 else 0.0


@nj
def wrap_chunk(buf, m, st):
    for j in range(m):
        buf[j] = wrap_to(buf[j], st)


def fix_chunk(buf, m, st):
    """``round_chunk`` on a float64 buffer, ``wrap_chunk`` on an int64 one (numba only)."""
    raise NotImplementedError


@overload(fix_chunk, inline="always")
def _fix_chunk_ov(buf, m, st):
    if buf.dtype == types.float64:
        return lambda buf, m, st: round_chunk(buf, m, st)
    return lambda buf, m, st: wrap_chunk(buf, m, st)
