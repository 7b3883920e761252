"""Generic compiled elementwise engine: every dtype, broadcasting, any layout.

One cfunc (``anyelem_kernel``) runs every unary, binary and ternary elementwise
op of ``kernels/elementwise.py``, ``binary.py``, ``compare.py`` and
``activation.py`` for every dtype the reference kernel takes. The binder
decides everything the reference kernel decides from dtypes (type promotion,
the compute dtype, which casts happen) and writes it into the block; the
kernel only reads sizes at run time.

How a run goes:

1. shapes: the inputs broadcast (right-aligned) to the out's rank; ``out`` is
   resized; per-operand element strides over that shape (0 where broadcast);
   size-1 dims are dropped and dims contiguous for every operand merged, so
   contiguous same-shape operands become one flat row;
2. chunks of up to ``CH`` elements (spanning rows when rows are short) are
   gathered into float64 (floating compute) or int64 (integer/bool compute)
   buffers with one typed loop per dtype, computed with one loop per op, and
   scattered into ``out``'s dtype. The chunk buffers live on the stack.

Semantics follow the reference kernels: operands are first cast to the
compute dtype (int32/int64/float64 values rounded to float32 when the op
computes in float32, wider integers wrapped), float32 intermediate results
are rounded where the reference rounds them, the result is rounded to the
result dtype when ``out`` has another dtype, and integer results wrap on store.
Integer division by zero returns InvalidArgument (the reference raises).

Binders are registered as the fallback of ops that have a specialized binder
(``SPECIALIZED``), plainly for the others; a binder never raises: arguments the
reference kernel refuses are declined, so the reference reports them.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from cython_ext import from_numpy_dtype
from kernels.elementwise import BOOL, cast, fill_value, float_result
from kernels.fast import register_fast
from kernels.fast.nb import (INVALID_ARGUMENT, OK, ST_BF16, ST_BOOL, ST_F16, ST_F32, ST_F64,
                             ST_I8, ST_I16, ST_I32, ST_I64, ST_U8, bf16_to_f64, bits_to_f64,
                             desc, elem_size, f64_to_bf16, f64_to_bits, f64_to_half, f64_to_i32,
                             f64_to_int, half_to_f64,
                             is_float_st, lazy, load_f64, load_i64, ptr_like, resize_to)
from kernels.libm import (exp, expf, gelu, gelu_tanh, gelu_tanhf, geluf, log, logf, sigmoid,
                          sigmoidf, tanh, tanhf)
from kernels.promote import category, compute_dtype, result_type

_nj = njit(error_model="numpy")  # x / 0 gives inf/nan: nothing may raise in a kernel

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
def _stack(typingctx, marker):
    """Address of ``WORDS`` int64 words in the caller's stack frame (entry-block alloca)."""
    sig = types.int64(marker)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        p = cgutils.alloca_once(builder, i64, size=ir.Constant(i64, WORDS))
        return builder.ptrtoint(p, i64)

    return sig, codegen


@njit(inline="always")
def _words(addr, n):
    return carray(ptr_like(addr, np.int64(0)), n)


@njit(inline="always")
def round_to(v, st):
    """float64 ``v`` rounded to floating dtype ``st`` (kept as float64)."""
    if st == ST_F32:
        return np.float64(np.float32(v))
    if st == ST_F16:
        return half_to_f64(f64_to_half(v))
    if st == ST_BF16:
        return bf16_to_f64(f64_to_bf16(v))
    return v


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
def _vsincos(x, want_cos):
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
def _vlog(x):
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


# ---- gather / scatter: one typed loop per dtype over the chunk's segments -----------------

@_nj
def _gather_f(buf, addr, st, w, col, nseg, s):
    b = 0
    for q in range(nseg):
        n = w[SEG + 5 * q]
        off = w[SEG + 5 * q + col]
        if st == ST_F32:
            p32 = ptr_like(addr, np.float32(0))
            for j in range(n):
                buf[b + j] = np.float64(p32[off + j * s])
        elif st == ST_F64:
            p64 = ptr_like(addr, np.float64(0))
            for j in range(n):
                buf[b + j] = p64[off + j * s]
        elif st == ST_I64:
            pi64 = ptr_like(addr, np.int64(0))
            for j in range(n):
                buf[b + j] = np.float64(pi64[off + j * s])
        elif st == ST_I32:
            pi32 = ptr_like(addr, np.int32(0))
            for j in range(n):
                buf[b + j] = np.float64(pi32[off + j * s])
        elif st == ST_I16:
            pi16 = ptr_like(addr, np.int16(0))
            for j in range(n):
                buf[b + j] = np.float64(pi16[off + j * s])
        elif st == ST_I8:
            pi8 = ptr_like(addr, np.int8(0))
            for j in range(n):
                buf[b + j] = np.float64(pi8[off + j * s])
        elif st == ST_U8 or st == ST_BOOL:
            pu8 = ptr_like(addr, np.uint8(0))
            for j in range(n):
                buf[b + j] = np.float64(pu8[off + j * s])
        elif st == ST_F16:
            ph = ptr_like(addr, np.uint16(0))
            for j in range(n):
                buf[b + j] = half_to_f64(np.int64(ph[off + j * s]))
        else:
            pb = ptr_like(addr, np.uint16(0))
            for j in range(n):
                buf[b + j] = bf16_to_f64(np.int64(pb[off + j * s]))
        b += n


@_nj
def _gather_i(buf, addr, st, w, col, nseg, s):
    b = 0
    for q in range(nseg):
        n = w[SEG + 5 * q]
        off = w[SEG + 5 * q + col]
        if st == ST_I64:
            pi64 = ptr_like(addr, np.int64(0))
            for j in range(n):
                buf[b + j] = pi64[off + j * s]
        elif st == ST_I32:
            pi32 = ptr_like(addr, np.int32(0))
            for j in range(n):
                buf[b + j] = np.int64(pi32[off + j * s])
        elif st == ST_I16:
            pi16 = ptr_like(addr, np.int16(0))
            for j in range(n):
                buf[b + j] = np.int64(pi16[off + j * s])
        elif st == ST_I8:
            pi8 = ptr_like(addr, np.int8(0))
            for j in range(n):
                buf[b + j] = np.int64(pi8[off + j * s])
        elif st == ST_U8 or st == ST_BOOL:
            pu8 = ptr_like(addr, np.uint8(0))
            for j in range(n):
                buf[b + j] = np.int64(pu8[off + j * s])
        else:  # floating operand on the integer path (fill values): truncate
            p64 = ptr_like(addr, np.float64(0))
            p32 = ptr_like(addr, np.float32(0))
            ph = ptr_like(addr, np.uint16(0))
            for j in range(n):
                k = off + j * s
                if st == ST_F64:
                    v = p64[k]
                elif st == ST_F32:
                    v = np.float64(p32[k])
                elif st == ST_F16:
                    v = half_to_f64(np.int64(ph[k]))
                else:
                    v = bf16_to_f64(np.int64(ph[k]))
                buf[b + j] = f64_to_int(v)
        b += n


@_nj
def _scatter_f(buf, addr, st, w, nseg, s):
    b = 0
    for q in range(nseg):
        n = w[SEG + 5 * q]
        off = w[SEG + 5 * q + 1]
        if st == ST_F32:
            p32 = ptr_like(addr, np.float32(0))
            for j in range(n):
                p32[off + j * s] = np.float32(buf[b + j])
        elif st == ST_F64:
            p64 = ptr_like(addr, np.float64(0))
            for j in range(n):
                p64[off + j * s] = buf[b + j]
        elif st == ST_BOOL:
            pu8 = ptr_like(addr, np.uint8(0))
            for j in range(n):
                pu8[off + j * s] = np.uint8(buf[b + j] != 0.0)
        elif st == ST_F16:
            ph = ptr_like(addr, np.uint16(0))
            for j in range(n):
                ph[off + j * s] = np.uint16(f64_to_half(buf[b + j]))
        elif st == ST_BF16:
            pb = ptr_like(addr, np.uint16(0))
            for j in range(n):
                pb[off + j * s] = np.uint16(f64_to_bf16(buf[b + j]))
        elif st == ST_I64:
            pi64 = ptr_like(addr, np.int64(0))
            for j in range(n):
                pi64[off + j * s] = f64_to_int(buf[b + j])
        elif st == ST_I32:
            pi32 = ptr_like(addr, np.int32(0))
            for j in range(n):
                pi32[off + j * s] = np.int32(f64_to_i32(buf[b + j]))
        elif st == ST_I16:
            pi16 = ptr_like(addr, np.int16(0))
            for j in range(n):
                pi16[off + j * s] = np.int16(f64_to_i32(buf[b + j]))
        elif st == ST_I8:
            pi8 = ptr_like(addr, np.int8(0))
            for j in range(n):
                pi8[off + j * s] = np.int8(f64_to_i32(buf[b + j]))
        else:
            pu8 = ptr_like(addr, np.uint8(0))
            for j in range(n):
                pu8[off + j * s] = np.uint8(f64_to_i32(buf[b + j]) & 0xFF)
        b += n


@_nj
def _scatter_i(buf, addr, st, w, nseg, s):
    b = 0
    for q in range(nseg):
        n = w[SEG + 5 * q]
        off = w[SEG + 5 * q + 1]
        if st == ST_I64:
            pi64 = ptr_like(addr, np.int64(0))
            for j in range(n):
                pi64[off + j * s] = buf[b + j]
        elif st == ST_I32:
            pi32 = ptr_like(addr, np.int32(0))
            for j in range(n):
                pi32[off + j * s] = np.int32(buf[b + j])
        elif st == ST_I16:
            pi16 = ptr_like(addr, np.int16(0))
            for j in range(n):
                pi16[off + j * s] = np.int16(buf[b + j])
        elif st == ST_I8:
            pi8 = ptr_like(addr, np.int8(0))
            for j in range(n):
                pi8[off + j * s] = np.int8(buf[b + j])
        elif st == ST_U8:
            pu8 = ptr_like(addr, np.uint8(0))
            for j in range(n):
                pu8[off + j * s] = np.uint8(buf[b + j] & 0xFF)
        elif st == ST_BOOL:
            pbool = ptr_like(addr, np.uint8(0))
            for j in range(n):
                pbool[off + j * s] = np.uint8(buf[b + j] != 0)
        elif st == ST_F32:
            p32 = ptr_like(addr, np.float32(0))
            for j in range(n):
                p32[off + j * s] = np.float32(buf[b + j])
        elif st == ST_F64:
            p64 = ptr_like(addr, np.float64(0))
            for j in range(n):
                p64[off + j * s] = np.float64(buf[b + j])
        elif st == ST_F16:
            ph = ptr_like(addr, np.uint16(0))
            for j in range(n):
                ph[off + j * s] = np.uint16(f64_to_half(np.float64(buf[b + j])))
        else:
            pb = ptr_like(addr, np.uint16(0))
            for j in range(n):
                pb[off + j * s] = np.uint16(f64_to_bf16(np.float64(buf[b + j])))
        b += n


@_nj
def _round_chunk(buf, m, st):
    if st == ST_F32:
        for j in range(m):
            buf[j] = np.float64(np.float32(buf[j]))
    elif st == ST_F16 or st == ST_BF16:
        for j in range(m):
            buf[j] = round_to(buf[j], st)
    elif st == ST_BOOL:
        for j in range(m):
            buf[j] = 1.0 if buf[j] != 0.0 else 0.0


@_nj
def _wrap_chunk(buf, m, st):
    for j in range(m):
        buf[j] = wrap_to(buf[j], st)


# ---- float64 compute ---------------------------------------------------------------------

@njit(inline="always")
def _rnd(v, c32):
    """An intermediate result rounded as the reference rounds it (float32 compute)."""
    return np.float64(np.float32(v)) if c32 else v


@njit(inline="always")
def _mx(x, y):  # np.maximum: NaN in either operand propagates
    return x if x >= y or x != x else y


@njit(inline="always")
def _mn(x, y):
    return x if x <= y or x != x else y


@njit(inline="always")
def _sigmoid(x, c32):  # ExecuTorch's 1 / (1 + exp(-x)) in the compute type, libm's exp
    return np.float64(sigmoidf(np.float32(x))) if c32 else sigmoid(x)


@njit(inline="always")
def _libm(op, x, c32):
    """exp, tanh, log as ExecuTorch computes them: the C library's float function on
    float32 compute (Half, BFloat16 and integers widen to float), its double one else."""
    if op == U_EXP:
        return np.float64(expf(np.float32(x))) if c32 else exp(x)
    if op == U_TANH:
        return np.float64(tanhf(np.float32(x))) if c32 else tanh(x)
    if op == U_LOG:
        return np.float64(logf(np.float32(x))) if c32 else log(x)
    return _sigmoid(x, c32)


@njit(inline="always")
def _f1(op, x, p0, p1, p2, c32):
    if op == U_SIGN:
        return (1.0 if x > 0 else 0.0) - (1.0 if x < 0 else 0.0)
    if op == U_RSQRT:
        return 1.0 / _rnd(math.sqrt(x), c32)
    if op == U_ROUND_DEC:  # p0 scale, p1 > 0: scale up first
        if p1 > 0:
            return _rnd(np.rint(_rnd(x * p0, c32)) / p0, c32)
        return _rnd(np.rint(_rnd(x / p0, c32)) * p0, c32)
    if op == U_ISNAN:
        return 1.0 if x != x else 0.0
    if op == U_ISINF:
        return 1.0 if math.isinf(x) else 0.0
    if op == U_LNOT:
        return 1.0 if x == 0.0 else 0.0
    if op == U_CLAMP:  # p2: 1 lower bound only, 2 upper only, 3 both
        r = x
        if p2 != 2.0:
            r = _mx(r, p0)
        if p2 != 1.0:
            r = _mn(r, p1)
        return r
    if op == U_ELU:  # p0 scale, p1 input_scale, p2 alpha * scale
        if x > 0:
            return _rnd(x * p0, c32)
        return _rnd(math.expm1(_rnd(x * p1, c32)), c32) * p2
    if op == U_LEAKY:
        return x if x > 0 else x * p0
    if op == U_GELU:  # ATen's formulas, libm's erf / tanh (kernels/libm.py)
        return np.float64(geluf(np.float32(x))) if c32 else gelu(x)
    if op == U_GELU_TANH:
        return np.float64(gelu_tanhf(np.float32(x))) if c32 else gelu_tanh(x)
    if op == U_LOGIT:  # p2 != 0: clip to [p0, p1] first
        if p2 != 0.0:
            x = _mn(_mx(x, p0), p1)
        return math.log(_rnd(x / _rnd(1.0 - x, c32), c32))
    return 0.0


@_nj
def _fixup(op, x, r, m):
    """Recompute with libm what the call-free functions leave out (NaN, inf, far arguments)."""
    if op == U_SIN or op == U_COS:
        for j in range(m):
            if not abs(x[j]) <= 1e5:
                r[j] = math.sin(x[j]) if op == U_SIN else math.cos(x[j])
    else:  # log2, log10
        for j in range(m):
            v = x[j]
            if not 2.2250738585072014e-308 <= v <= 1.7976931348623157e308:
                r[j] = math.log2(v) if op == U_LOG2 else math.log10(v)


@_nj
def _cf1(op, x, r, m, p0, p1, p2, c32):
    # one loop per op (the op test stays out of the loop); the rest through _f1
    if op == U_EXP or op == U_TANH or op == U_LOG or op == U_SIGMOID:
        if c32:
            for j in range(m):
                r[j] = _libm(op, x[j], True)
        else:
            for j in range(m):
                r[j] = _libm(op, x[j], False)
    elif c32 and (op == U_SIN or op == U_COS or op == U_LOG2 or op == U_LOG10):
        if op == U_SIN or op == U_COS:
            for j in range(m):
                r[j] = _vsincos(x[j], op == U_COS)
        else:
            k = 1.4426950408889634 if op == U_LOG2 else 0.4342944819032518
            for j in range(m):
                r[j] = _vlog(x[j]) * k
        _fixup(op, x, r, m)
    elif op == U_COPY:
        for j in range(m):
            r[j] = x[j]
    elif op == U_ABS:
        for j in range(m):
            r[j] = abs(x[j])
    elif op == U_NEG:
        for j in range(m):
            r[j] = -x[j]
    elif op == U_RELU:
        for j in range(m):
            r[j] = _mx(x[j], 0.0)
    elif op == U_ACOS:
        for j in range(m):
            r[j] = math.acos(x[j])
    elif op == U_ACOSH:
        for j in range(m):
            r[j] = math.acosh(x[j])
    elif op == U_ASIN:
        for j in range(m):
            r[j] = math.asin(x[j])
    elif op == U_ASINH:
        for j in range(m):
            r[j] = math.asinh(x[j])
    elif op == U_ATAN:
        for j in range(m):
            r[j] = math.atan(x[j])
    elif op == U_ATANH:
        for j in range(m):
            r[j] = math.atanh(x[j])
    elif op == U_COS:
        for j in range(m):
            r[j] = math.cos(x[j])
    elif op == U_COSH:
        for j in range(m):
            r[j] = math.cosh(x[j])
    elif op == U_ERF:
        for j in range(m):
            r[j] = math.erf(x[j])
    elif op == U_EXPM1:
        for j in range(m):
            r[j] = math.expm1(x[j])
    elif op == U_LOG10:
        for j in range(m):
            r[j] = math.log10(x[j])
    elif op == U_LOG1P:
        for j in range(m):
            r[j] = math.log1p(x[j])
    elif op == U_LOG2:
        for j in range(m):
            r[j] = math.log2(x[j])
    elif op == U_RECIP:
        for j in range(m):
            r[j] = 1.0 / x[j]
    elif op == U_SIN:
        for j in range(m):
            r[j] = math.sin(x[j])
    elif op == U_SINH:
        for j in range(m):
            r[j] = math.sinh(x[j])
    elif op == U_SQRT:
        for j in range(m):
            r[j] = math.sqrt(x[j])
    elif op == U_TAN:
        for j in range(m):
            r[j] = math.tan(x[j])
    elif op == U_CEIL:
        for j in range(m):
            r[j] = np.ceil(x[j])
    elif op == U_FLOOR:
        for j in range(m):
            r[j] = np.floor(x[j])
    elif op == U_ROUND:
        for j in range(m):
            r[j] = np.rint(x[j])
    elif op == U_TRUNC:
        for j in range(m):
            r[j] = np.trunc(x[j])
    else:
        for j in range(m):
            r[j] = _f1(op, x[j], p0, p1, p2, c32)


@njit(inline="always")
def _floor_div(a, b, c32):
    """numpy's float floor_divide (npy_divmod), rounding each step as the dtype does."""
    if b == 0.0:
        return a / b
    mod = np.fmod(a, b)
    div = _rnd(_rnd(a - mod, c32) / b, c32)
    if mod != 0.0 and (b < 0) != (mod < 0):
        div = _rnd(div - 1.0, c32)
    if div != 0.0:
        fd = np.floor(div)
        if div - fd > 0.5:
            fd = _rnd(fd + 1.0, c32)
        return fd
    return math.copysign(0.0, a / b)


@njit(inline="always")
def _f2(op, x, y, p0, c32):
    if op == B_ADD_A:
        return x + _rnd(y * p0, c32)
    if op == B_SUB_A:
        return x - _rnd(y * p0, c32)
    if op == B_DIV_TRUNC:
        return np.trunc(_rnd(x / y, c32))
    if op == B_DIV_FLOOR:
        return _floor_div(x, y, c32)
    if op == B_FMOD:
        return np.fmod(x, y)
    if op == B_REM:
        mod = np.fmod(x, y)
        if y == 0.0:
            return mod
        if mod != 0.0:
            if (y < 0) != (mod < 0):
                mod = _rnd(mod + y, c32)
            return mod
        return math.copysign(0.0, y)
    if op == B_POW:
        return x ** y
    if op == B_ATAN2:
        return math.atan2(x, y)
    if op == B_LAND:
        return 1.0 if x != 0.0 and y != 0.0 else 0.0
    if op == B_LOR:
        return 1.0 if x != 0.0 or y != 0.0 else 0.0
    if op == B_LXOR:
        return 1.0 if (x != 0.0) != (y != 0.0) else 0.0
    if op == B_GLU:
        return x * _rnd(_sigmoid(y, c32), c32)
    return 0.0


@_nj
def _cf2(op, x, y, r, m, p0, c32):
    if op == B_ADD:
        for j in range(m):
            r[j] = x[j] + y[j]
    elif op == B_SUB:
        for j in range(m):
            r[j] = x[j] - y[j]
    elif op == B_MUL:
        for j in range(m):
            r[j] = x[j] * y[j]
    elif op == B_DIV:
        for j in range(m):
            r[j] = x[j] / y[j]
    elif op == B_MAX:
        for j in range(m):
            r[j] = _mx(x[j], y[j])
    elif op == B_MIN:
        for j in range(m):
            r[j] = _mn(x[j], y[j])
    elif op == B_EQ:
        for j in range(m):
            r[j] = 1.0 if x[j] == y[j] else 0.0
    elif op == B_NE:
        for j in range(m):
            r[j] = 1.0 if x[j] != y[j] else 0.0
    elif op == B_LT:
        for j in range(m):
            r[j] = 1.0 if x[j] < y[j] else 0.0
    elif op == B_LE:
        for j in range(m):
            r[j] = 1.0 if x[j] <= y[j] else 0.0
    elif op == B_GT:
        for j in range(m):
            r[j] = 1.0 if x[j] > y[j] else 0.0
    elif op == B_GE:
        for j in range(m):
            r[j] = 1.0 if x[j] >= y[j] else 0.0
    elif op == B_SECOND or op == B_FILL_T:
        for j in range(m):
            r[j] = y[j]
    else:
        for j in range(m):
            r[j] = _f2(op, x[j], y[j], p0, c32)


@_nj
def _cf3(op, x, y, z, r, m):
    if op == T_WHERE:
        for j in range(m):
            r[j] = y[j] if x[j] != 0.0 else z[j]
    else:
        for j in range(m):
            r[j] = _mn(_mx(x[j], y[j]), z[j])


# ---- int64 compute (values already cast to the compute dtype; results wrap on store) -----

@njit(inline="always")
def _i1(op, x, p0, p1, p2):
    if op == U_ABS:
        return -x if x < 0 else x
    if op == U_NEG:
        return -x
    if op == U_RELU:
        return x if x > 0 else np.int64(0)
    if op == U_SIGN:
        return np.int64(x > 0) - np.int64(x < 0)
    if op == U_BNOT:
        return ~x
    if op == U_BNOT_BOOL:
        return x ^ 1
    if op == U_LNOT:
        return np.int64(x == 0)
    if op == U_ZERO:
        return np.int64(0)
    if op == U_CLAMP:
        r = x
        if p2 != 2 and r < p0:
            r = p0
        if p2 != 1 and r > p1:
            r = p1
        return r
    return x


@njit(inline="always")
def _ipow(a, b):
    if b < 0:  # 1/a**n truncated
        if a == 1:
            return np.int64(1)
        if a == -1:
            return np.int64(-1) if b & 1 else np.int64(1)
        return np.int64(0)
    r = np.int64(1)
    while b:
        if b & 1:
            r *= a
        a *= a
        b >>= 1
    return r


@njit(inline="always")
def _i2(op, x, y, alpha):
    if op == B_ADD:
        return x + y
    if op == B_ADD_A:
        return x + y * alpha
    if op == B_SUB:
        return x - y
    if op == B_SUB_A:
        return x - y * alpha
    if op == B_MUL:
        return x * y
    if op == B_DIV_FLOOR or op == B_DIV_TRUNC:
        if y == -1:
            return -x
        q = x // y
        if op == B_DIV_TRUNC and q < 0 and q * y != x:
            q += 1
        return q
    if op == B_FMOD:
        if y == -1:
            return np.int64(0)
        r = x % y
        if r != 0 and (r < 0) != (x < 0):
            r -= y
        return r
    if op == B_REM:
        return np.int64(0) if y == -1 else x % y
    if op == B_POW:
        return _ipow(x, y)
    if op == B_POW_BOOL:
        return np.int64(x != 0 or y == 0)
    if op == B_MAX:
        return x if x >= y else y
    if op == B_MIN:
        return x if x <= y else y
    if op == B_AND:
        return x & y
    if op == B_OR:
        return x | y
    if op == B_XOR:
        return x ^ y
    if op == B_SHL:
        return x << y if 0 <= y < 64 else np.int64(0)
    if op == B_SHR:
        if 0 <= y < 64:
            return x >> y
        return np.int64(-1) if x < 0 else np.int64(0)
    if op == B_EQ:
        return np.int64(x == y)
    if op == B_NE:
        return np.int64(x != y)
    if op == B_LT:
        return np.int64(x < y)
    if op == B_LE:
        return np.int64(x <= y)
    if op == B_GT:
        return np.int64(x > y)
    if op == B_GE:
        return np.int64(x >= y)
    return y  # B_SECOND, B_FILL_T


@_nj
def _ci1(op, x, r, m, p0, p1, p2):
    if op == U_COPY:
        for j in range(m):
            r[j] = x[j]
    else:
        for j in range(m):
            r[j] = _i1(op, x[j], p0, p1, p2)


@_nj
def _ci2(op, x, y, r, m, alpha):
    if op == B_DIV_FLOOR or op == B_DIV_TRUNC or op == B_FMOD or op == B_REM:
        for j in range(m):
            if y[j] == 0:
                return INVALID_ARGUMENT  # the reference raises (ZeroDivisionError in ATen)
    if op == B_ADD:
        for j in range(m):
            r[j] = x[j] + y[j]
    elif op == B_SUB:
        for j in range(m):
            r[j] = x[j] - y[j]
    elif op == B_MUL:
        for j in range(m):
            r[j] = x[j] * y[j]
    elif op == B_MAX:
        for j in range(m):
            r[j] = max(x[j], y[j])
    elif op == B_MIN:
        for j in range(m):
            r[j] = min(x[j], y[j])
    elif op == B_AND:
        for j in range(m):
            r[j] = x[j] & y[j]
    elif op == B_OR:
        for j in range(m):
            r[j] = x[j] | y[j]
    elif op == B_EQ:
        for j in range(m):
            r[j] = np.int64(x[j] == y[j])
    elif op == B_NE:
        for j in range(m):
            r[j] = np.int64(x[j] != y[j])
    elif op == B_LT:
        for j in range(m):
            r[j] = np.int64(x[j] < y[j])
    elif op == B_GT:
        for j in range(m):
            r[j] = np.int64(x[j] > y[j])
    else:
        for j in range(m):
            r[j] = _i2(op, x[j], y[j], alpha)
    return OK


@_nj
def _ci3(op, x, y, z, r, m):
    if op == T_WHERE:
        for j in range(m):
            r[j] = y[j] if x[j] != 0 else z[j]
    else:
        for j in range(m):
            v = x[j] if x[j] >= y[j] else y[j]
            r[j] = v if v <= z[j] else z[j]


# ---- run-time preparation of special operands ---------------------------------------------

@njit(inline="always")
def _glu_views(s, dim, w, base):
    """Two views of ``s`` (first and second half along ``dim``) as descriptors in ``w``."""
    n = s[8 + dim]
    if n % 2 != 0:
        return INVALID_ARGUMENT
    h = n // 2
    for i in range(64):
        w[VD + i] = s[i]
        w[VD + 64 + i] = s[i]
    w[VD + 8 + dim] = h
    w[VD + 64 + 8 + dim] = h
    w[VD + 64] = s[0] + h * s[24 + dim] * elem_size(s[1])
    return OK


@njit(inline="always")
def _check_fill(v, block):
    """fill.Tensor_out's value must fit an integer ``self``, as the reference checks."""
    if block[P0 + 4] == 0:
        return OK
    st = v[1]
    if is_float_st(st):
        f = load_f64(v[0], st, 0)
        if not bits_to_f64(block[P0 + 2]) <= f <= bits_to_f64(block[P0 + 3]):
            return INVALID_ARGUMENT  # also NaN
    elif st != ST_BOOL:
        i = load_i64(v[0], st, 0)
        if not block[P0] <= i <= block[P0 + 1]:
            return INVALID_ARGUMENT
    return OK


# ---- the kernel ----------------------------------------------------------------------------

def anyelem_kernel(block):
    base = _stack(np.int64(0))
    w = _words(base, WORDS)
    op = block[0]
    fpath = block[1] != 0
    ct = block[2]
    rdt = block[3]
    o = desc(block[4])
    nin = 1 if op < 64 else (2 if op < 128 else 3)
    a0 = block[5]
    a1 = block[6]
    if op == B_GLU:
        st = _glu_views(desc(block[5]), block[18], w, base)
        if st != OK:
            return st
        a0 = base + VD * 8
        a1 = base + (VD + 64) * 8
    elif op == B_FILL_T:
        v = desc(a1)
        if v[3] != 1:
            return INVALID_ARGUMENT
        st = _check_fill(v, block)
        if st != OK:
            return st
    # broadcast the inputs to out's rank
    nd = o[2]
    for i in range(nd):
        w[SH + i] = 1
    for k in range(nin):
        d = desc(a0 if k == 0 else (a1 if k == 1 else block[7]))
        nk = d[2]
        if nk > nd:
            return INVALID_ARGUMENT
        for i in range(nd - nk, nd):
            sz = d[8 + i - (nd - nk)]
            if sz != 1:
                if w[SH + i] != 1 and w[SH + i] != sz:
                    return INVALID_ARGUMENT
                w[SH + i] = sz
    st = resize_to(o, w, nd)
    if st != OK:
        return st
    total = o[3]
    if total == 0:
        return OK
    for i in range(nd):
        w[STR + i] = o[24 + i] if w[SH + i] != 1 else 0
    for k in range(nin):
        d = desc(a0 if k == 0 else (a1 if k == 1 else block[7]))
        nk = d[2]
        c = STR + 16 * (k + 1)
        for i in range(nd):
            ik = i - (nd - nk)
            w[c + i] = d[24 + ik] if ik >= 0 and d[8 + ik] != 1 else 0
    # drop size-1 dims, merge dims that are contiguous for every operand
    m = 0
    for i in range(nd):
        sz = w[SH + i]
        if sz == 1:
            continue
        if m > 0:
            ok = True
            for k in range(nin + 1):
                c = STR + 16 * k
                if w[c + m - 1] != w[c + i] * sz:
                    ok = False
            if ok:
                w[SH + m - 1] *= sz
                for k in range(nin + 1):
                    c = STR + 16 * k
                    w[c + m - 1] = w[c + i]
                continue
        w[SH + m] = sz
        for k in range(nin + 1):
            c = STR + 16 * k
            w[c + m] = w[c + i]
        m += 1
    if m == 0:
        m = 1
        w[SH] = 1
        for k in range(nin + 1):
            w[STR + 16 * k] = 0
    inner = w[SH + m - 1]
    so = w[STR + m - 1]
    s0 = w[STR + 16 + m - 1]
    s1 = w[STR + 32 + m - 1]
    s2 = w[STR + 48 + m - 1]
    d0 = desc(a0)
    addr0, st0 = d0[0], d0[1]
    addr1, st1, addr2, st2 = np.int64(0), np.int64(0), np.int64(0), np.int64(0)
    if nin > 1:
        d1 = desc(a1)
        addr1, st1 = d1[0], d1[1]
    if nin > 2:
        d2 = desc(block[7])
        addr2, st2 = d2[0], d2[1]
    skip = block[11]
    c32 = fpath and ct == ST_F32
    # segment-table columns of the inputs, typed int64 (literals would compile three gathers)
    col0, col1, col2 = np.int64(2), np.int64(3), np.int64(4)
    fx = ptr_like(base + BUF * 8, np.float64(0))
    fy = ptr_like(base + (BUF + CH) * 8, np.float64(0))
    fz = ptr_like(base + (BUF + 2 * CH) * 8, np.float64(0))
    fr = ptr_like(base + (BUF + 3 * CH) * 8, np.float64(0))
    ix = ptr_like(base + BUF * 8, np.int64(0))
    iy = ptr_like(base + (BUF + CH) * 8, np.int64(0))
    iz = ptr_like(base + (BUF + 2 * CH) * 8, np.int64(0))
    ir_ = ptr_like(base + (BUF + 3 * CH) * 8, np.int64(0))
    fp0 = bits_to_f64(block[P0])
    fp1 = bits_to_f64(block[P0 + 1])
    fp2 = bits_to_f64(block[P0 + 2])
    for i in range(m - 1):
        w[CNT + i] = 0
    bo, b0, b1, b2 = np.int64(0), np.int64(0), np.int64(0), np.int64(0)
    pos = np.int64(0)
    done = np.int64(0)
    while done < total:
        filled = 0
        nseg = 0
        while filled < CH and done + filled < total:
            n = min(inner - pos, CH - filled)
            q = SEG + 5 * nseg
            w[q] = n
            w[q + 1] = bo + pos * so
            w[q + 2] = b0 + pos * s0
            w[q + 3] = b1 + pos * s1
            w[q + 4] = b2 + pos * s2
            nseg += 1
            filled += n
            pos += n
            if pos == inner:
                pos = 0
                for i in range(m - 2, -1, -1):  # advance the outer counter
                    w[CNT + i] += 1
                    bo += w[STR + i]
                    b0 += w[STR + 16 + i]
                    b1 += w[STR + 32 + i]
                    b2 += w[STR + 48 + i]
                    if w[CNT + i] < w[SH + i]:
                        break
                    bo -= w[STR + i] * w[SH + i]
                    b0 -= w[STR + 16 + i] * w[SH + i]
                    b1 -= w[STR + 32 + i] * w[SH + i]
                    b2 -= w[STR + 48 + i] * w[SH + i]
                    w[CNT + i] = 0
        if fpath:
            if skip & 1 == 0:
                _gather_f(fx, addr0, st0, w, col0, nseg, s0)
                if block[8] >= 0:
                    _round_chunk(fx, filled, block[8])
            if nin > 1:
                _gather_f(fy, addr1, st1, w, col1, nseg, s1)
                if block[9] >= 0:
                    _round_chunk(fy, filled, block[9])
            if nin > 2:
                _gather_f(fz, addr2, st2, w, col2, nseg, s2)
                if block[10] >= 0:
                    _round_chunk(fz, filled, block[10])
            if nin == 1:
                _cf1(op, fx, fr, filled, fp0, fp1, fp2, c32)
            elif nin == 2:
                _cf2(op, fx, fy, fr, filled, fp0, c32)
            else:
                _cf3(op, fx, fy, fz, fr, filled)
            if rdt >= 0:
                _round_chunk(fr, filled, rdt)
            _scatter_f(fr, o[0], o[1], w, nseg, so)
        else:
            if skip & 1 == 0:
                _gather_i(ix, addr0, st0, w, col0, nseg, s0)
                if block[8] >= 0:
                    _wrap_chunk(ix, filled, block[8])
            if nin > 1:
                _gather_i(iy, addr1, st1, w, col1, nseg, s1)
                if block[9] >= 0:
                    _wrap_chunk(iy, filled, block[9])
            if nin > 2:
                _gather_i(iz, addr2, st2, w, col2, nseg, s2)
                if block[10] >= 0:
                    _wrap_chunk(iz, filled, block[10])
            if nin == 1:
                _ci1(op, ix, ir_, filled, block[P0], block[P0 + 1], block[P0 + 2])
            elif nin == 2:
                st = _ci2(op, ix, iy, ir_, filled, block[P0])
                if st != OK:
                    return st
            else:
                _ci3(op, ix, iy, iz, ir_, filled)
            if rdt >= 0:
                _wrap_chunk(ir_, filled, rdt)
            _scatter_i(ir_, o[0], o[1], w, nseg, so)
        done += filled
    return OK


# ---- binders -------------------------------------------------------------------------------
# Each mirrors its reference kernel's dtype decisions; a case the reference refuses (raises)
# is declined so the reference reports it.

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
_CODES = {np.dtype(n): int(from_numpy_dtype(np.dtype(n))) for n in (
    np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32,
    np.float64)}
_CODES[np.dtype(__import__("ml_dtypes").bfloat16)] = ST_BF16


class _Scalar:
    """A Python-scalar operand, already cast to the compute dtype."""

    def __init__(self, value):
        self.value = value
        self.ndim = 0
        self.shape = ()


def _code(dt):
    return _CODES[np.dtype(dt)]


def _is_tensor(x):
    return hasattr(x, "dim_order")


def _supported(*xs):
    return all(x.dtype in _CODES for x in xs if _is_tensor(x))


def _out_ok(dt, out, *tensors):
    """torch's canCast into ``out``, and ``out``'s rank = the broadcast rank."""
    if category(dt) > category(out.dtype) or not _supported(out, *tensors):
        return False
    try:
        shape = np.broadcast_shapes(*(t.shape for t in tensors if t is not None))
    except ValueError:
        return False
    return len(shape) == out.ndim


def _cast_code(x, ct, fpath):
    """How an input is cast to the compute dtype after loading (-1: exact already)."""
    dt = x.dtype
    if fpath:
        return ST_F32 if ct == F32 and dt in (I32, I64, F64) else -1
    return -1 if np.can_cast(dt, ct, "safe") else _code(ct)


def _scalar_desc(ctx, value, fpath):
    """A rank-0 descriptor over a float64 (float path) or int64 word holding ``value``."""
    addr = ctx.buffer(65 * 8)
    words = (ctypes.c_int64 * 65).from_address(addr)
    words[0] = addr + 64 * 8
    words[1] = ST_F64 if fpath else ST_I64
    words[3] = words[4] = 1
    words[64] = ctx.f64(value) if fpath else int(value)
    return addr


def _bind(ctx, op, out, ins, dt, fpath=None, ct=None, params=(), casts=None, skip=0, extra=0):
    """Block for ``anyelem_kernel``: ``ins`` are ETensors or ``_Scalar``s (None: virtual)."""
    ct = compute_dtype(dt) if ct is None else np.dtype(ct)
    if fpath is None:
        fpath = category(ct) == 2
    words = [op, int(fpath), _code(ct), -1 if out.dtype == dt else _code(dt), ctx.desc(out)]
    descs, codes = [], []
    for k in range(3):
        x = ins[k] if k < len(ins) else None
        if isinstance(x, _Scalar):
            descs.append(_scalar_desc(ctx, x.value, fpath))
            codes.append(-1)
        elif x is None:
            descs.append(0)
            codes.append(-1)
        else:
            descs.append(ctx.desc(x))
            codes.append(_cast_code(x, ct, fpath) if casts is None or casts[k] is None
                         else casts[k])
    params = list(params) + [0] * (6 - len(params))
    # float path: every parameter as float64 bits; int path: ints as is, floats as bits
    params = [ctx.f64(p) if fpath or isinstance(p, float) else int(p) for p in params]
    return ctx.bind(lazy(anyelem_kernel), words + descs + codes + [skip] + params + [extra])


def _operand(x, ct):
    """A tensor as is; a Python scalar cast to ``ct`` the way the reference casts it."""
    if _is_tensor(x):
        return x
    v = cast(x, ct)
    return _Scalar(float(v) if category(ct) == 2 else int(v))


def _num(v, ct):
    """A bound/parameter as the reference casts it to ``ct`` (float or int)."""
    v = cast(v, ct)
    return float(v) if category(ct) == 2 else int(v)


# ---- unary --------------------------------------------------------------------------------

# Ops with a specialized (fast-path) binder elsewhere: ours is their fallback.
SPECIALIZED = {f"aten::{n}" for n in (
    "abs.out neg.out relu.out exp.out sqrt.out rsqrt.out sigmoid.out tanh.out logical_not.out "
    "gelu.out hardtanh.out clamp.out add.out add.Scalar_out sub.out mul.out mul.Scalar_out "
    "div.out maximum.out minimum.out where.self_out eq.Scalar_out ne.Scalar_out lt.Scalar_out "
    "le.Scalar_out gt.Scalar_out ge.Scalar_out").split()}


def _register(names, fn):
    """Register ``fn`` under ``names``; it never raises (a failure to bind is a decline)."""
    def binder(ctx, *values):
        try:
            return fn(ctx, *values)
        except Exception:  # noqa: BLE001 - the reference kernel reports bad arguments
            return None
    binder.__name__ = fn.__name__
    binder.__wrapped__ = fn
    for n in [names] if isinstance(names, str) else names:
        register_fast(n, fallback=n in SPECIALIZED)(binder)
    return fn


def _fast(*names):
    return lambda fn: _register(names, fn)



_FLOAT_UNARY = {
    "acos": U_ACOS, "acosh": U_ACOSH, "asin": U_ASIN, "asinh": U_ASINH, "atan": U_ATAN,
    "atanh": U_ATANH, "cos": U_COS, "cosh": U_COSH, "erf": U_ERF, "exp": U_EXP,
    "expm1": U_EXPM1, "log": U_LOG, "log10": U_LOG10, "log1p": U_LOG1P, "log2": U_LOG2,
    "reciprocal": U_RECIP, "rsqrt": U_RSQRT, "sigmoid": U_SIGMOID, "sin": U_SIN,
    "sinh": U_SINH, "sqrt": U_SQRT, "tan": U_TAN, "tanh": U_TANH,
}
_ROUNDING = {"ceil": U_CEIL, "floor": U_FLOOR, "round": U_ROUND, "trunc": U_TRUNC}
_SAME = {"abs": U_ABS, "neg": U_NEG, "relu": U_RELU, "sign": U_SIGN, "bitwise_not": U_BNOT}


def _unary(ctx, op, x, out, dt, params=()):
    if not _out_ok(dt, out, x):
        return None
    return _bind(ctx, op, out, [x], dt, params=params)


def _float_unary_binder(op):
    def bind(ctx, self, out):
        return _unary(ctx, op, self, out, float_result(self.dtype))
    return bind


def _rounding_binder(op):
    def bind(ctx, self, out):
        if self.dtype == BOOL:
            return None
        return _unary(ctx, U_COPY if category(self.dtype) == 1 else op, self, out, self.dtype)
    return bind


def _same_binder(name, op):
    def bind(ctx, self, out):
        dt = self.dtype
        if dt == BOOL:
            if name == "sign":
                return _unary(ctx, U_COPY, self, out, dt)
            if name == "bitwise_not":
                return _unary(ctx, U_BNOT_BOOL, self, out, dt)
            return None
        if name == "bitwise_not" and category(dt) > 1:
            return None
        return _unary(ctx, op, self, out, dt)
    return bind


def _predicate_binder(op):
    def bind(ctx, self, out):
        if not _out_ok(BOOL, out, self):
            return None
        if op == U_LNOT:  # truth of any dtype: float64 holds every nonzero as nonzero
            return _bind(ctx, op, out, [self], BOOL, fpath=True, ct=F64)
        if category(self.dtype) < 2:
            return _bind(ctx, U_ZERO, out, [self], BOOL)  # integers are never NaN or inf
        return _bind(ctx, op, out, [self], BOOL, fpath=True, ct=compute_dtype(self.dtype))
    return bind




for _n, _op in _FLOAT_UNARY.items():
    _register(f"aten::{_n}.out", _float_unary_binder(_op))
for _n, _op in _ROUNDING.items():
    _register(f"aten::{_n}.out", _rounding_binder(_op))
for _n, _op in _SAME.items():
    _register(f"aten::{_n}.out", _same_binder(_n, _op))
for _n, _op in (("logical_not", U_LNOT), ("isnan", U_ISNAN), ("isinf", U_ISINF)):
    _register(f"aten::{_n}.out", _predicate_binder(_op))


@_fast("aten::round.decimals_out")
def bind_round_decimals(ctx, self, decimals, out):
    if category(self.dtype) != 2 or isinstance(decimals, bool) or not isinstance(decimals, int):
        return None
    try:
        scale = _num(10.0 ** abs(decimals), compute_dtype(self.dtype))
    except OverflowError:
        return None
    return _unary(ctx, U_ROUND_DEC, self, out, self.dtype, (scale, float(decimals > 0)))


@_fast("aten::_conj_physical.out")
def bind_conj_physical(ctx, self, out):
    if not _supported(self, out) or self.ndim != out.ndim:
        return None
    return _bind(ctx, U_COPY, out, [self], self.dtype)  # out.write casts: no canCast check


@_fast("aten::hardtanh.out")
def bind_hardtanh(ctx, self, min_val, max_val, out):
    dt = self.dtype
    if dt == BOOL or dt.kind == "u" and (int(min_val) < 0 or int(max_val) < 0):
        return None
    ct = compute_dtype(dt)
    return _unary(ctx, U_CLAMP, self, out, dt, (_num(min_val, ct), _num(max_val, ct), 3))


@_fast("aten::clamp.out")
def bind_clamp(ctx, self, min, max, out):  # noqa: A002 - schema names
    if min is None and max is None:
        return None
    dt = result_type(self, min, max)
    if dt == BOOL:
        return None
    ct = compute_dtype(dt)
    mode = (1 if min is not None else 0) + (2 if max is not None else 0)
    lo = _num(min, ct) if min is not None else 0
    hi = _num(max, ct) if max is not None else 0
    if category(ct) == 2:
        lo, hi = float(lo), float(hi)
    return _unary(ctx, U_CLAMP, self, out, dt, (lo, hi, mode))


def _float_param(v, ct):
    return float(np.asarray(v, ct))


@_fast("aten::gelu.out")
def bind_gelu(ctx, self, approximate, out):
    if category(self.dtype) != 2 or approximate not in ("none", "tanh"):
        return None
    return _unary(ctx, U_GELU if approximate == "none" else U_GELU_TANH, self, out, self.dtype)


@_fast("aten::elu.out")
def bind_elu(ctx, self, alpha, scale, input_scale, out):
    if category(self.dtype) != 2:
        return None
    ct = compute_dtype(self.dtype)
    return _unary(ctx, U_ELU, self, out, self.dtype,
                  (_float_param(scale, ct), _float_param(input_scale, ct),
                   _float_param(alpha * scale, ct)))


@_fast("aten::leaky_relu.out")
def bind_leaky_relu(ctx, self, negative_slope, out):
    if category(self.dtype) != 2:
        return None
    return _unary(ctx, U_LEAKY, self, out, self.dtype,
                  (_float_param(negative_slope, compute_dtype(self.dtype)),))


@_fast("aten::logit.out")
def bind_logit(ctx, self, eps, out):
    dt = float_result(self.dtype)
    ct = compute_dtype(dt)
    clip = eps is not None and eps >= 0  # ATen ignores a negative eps
    lo, hi = (_float_param(eps, ct), _float_param(1.0 - eps, ct)) if clip else (0.0, 0.0)
    return _unary(ctx, U_LOGIT, self, out, dt, (lo, hi, float(clip)))


@_fast("aten::glu.out")
def bind_glu(ctx, self, dim, out):
    n = self.ndim
    if category(self.dtype) != 2 or n == 0 or not -n <= dim < n or self.shape[dim] % 2 \
            or not _out_ok(self.dtype, out, self):
        return None
    return _bind(ctx, B_GLU, out, [self], self.dtype, extra=dim % n)


# ---- binary -------------------------------------------------------------------------------

def _binary(ctx, op, a, b, out, dt, ct=None, fpath=None, params=()):
    ct = compute_dtype(dt) if ct is None else ct
    if not _out_ok(dt, out, *(x for x in (a, b) if _is_tensor(x))) \
            or not (_is_tensor(a) or _is_tensor(b)):
        return None
    return _bind(ctx, op, out, [_operand(a, ct), _operand(b, ct)], dt, fpath=fpath, ct=ct,
                 params=params)


def _kind_dtype(kind, rt):
    """The reference's ``_check_kind``: result dtype, or None where it raises."""
    if kind == "float":
        return float_result(rt)
    if kind == "int_div" and rt == BOOL or kind == "bitwise" and category(rt) > 1 \
            or kind == "shift" and category(rt) != 1:
        return None
    return rt


def _simple_binder(op, kind):
    def bind(ctx, self, other, out):
        dt = _kind_dtype(kind, result_type(self, other))
        return None if dt is None else _binary(ctx, op, self, other, out, dt)
    return bind


_SIMPLE = [
    (("mul.out", "mul.Scalar_out"), B_MUL, "any"),
    (("div.out", "div.Scalar_out"), B_DIV, "float"),
    (("floor_divide.out",), B_DIV_FLOOR, "int_div"),
    (("fmod.Tensor_out", "fmod.Scalar_out"), B_FMOD, "int_div"),
    (("remainder.Tensor_out", "remainder.Scalar_out"), B_REM, "int_div"),
    (("atan2.out",), B_ATAN2, "float"),
    (("maximum.out",), B_MAX, "any"),
    (("minimum.out",), B_MIN, "any"),
    (("bitwise_and.Tensor_out", "bitwise_and.Scalar_out"), B_AND, "bitwise"),
    (("bitwise_or.Tensor_out", "bitwise_or.Scalar_out"), B_OR, "bitwise"),
    (("bitwise_xor.Tensor_out", "bitwise_xor.Scalar_out"), B_XOR, "bitwise"),
    (("bitwise_left_shift.Tensor_out", "bitwise_left_shift.Tensor_Scalar_out"), B_SHL, "shift"),
    (("bitwise_right_shift.Tensor_out", "bitwise_right_shift.Tensor_Scalar_out"), B_SHR,
     "shift"),
]


for _names, _op, _kind in _SIMPLE:
    _register([f"aten::{n}" for n in _names], _simple_binder(_op, _kind))


def _is_bool(x):
    return isinstance(x, bool) or getattr(x, "dtype", None) == BOOL


def _add_like(ctx, a, b, alpha, out, subtract):
    dt = result_type(a, b)
    if subtract and (_is_bool(a) or _is_bool(b)) \
            or isinstance(alpha, bool) and dt != BOOL \
            or isinstance(alpha, float) and category(dt) < 2:
        return None
    ct = compute_dtype(dt)
    if alpha != 1:
        op = B_SUB_A if subtract else B_ADD_A
        return _binary(ctx, op, a, b, out, dt, params=(_num(alpha, ct),))
    return _binary(ctx, B_SUB if subtract else B_ADD, a, b, out, dt)


def bind_add(ctx, self, other, alpha, out):
    return _add_like(ctx, self, other, alpha, out, False)


def bind_sub(ctx, self, other, alpha, out):
    return _add_like(ctx, self, other, alpha, out, True)


def bind_rsub(ctx, self, other, alpha, out):
    return _add_like(ctx, other, self, alpha, out, True)


_register(["aten::add.out", "aten::add.Scalar_out"], bind_add)
_register(["aten::sub.out", "aten::sub.Scalar_out"], bind_sub)
_register(["aten::rsub.Scalar_out"], bind_rsub)


def bind_div_mode(ctx, self, other, rounding_mode, out):
    if rounding_mode is None:
        return _simple_binder(B_DIV, "float")(ctx, self, other, out)
    if rounding_mode not in ("trunc", "floor"):
        return None
    dt = _kind_dtype("int_div", result_type(self, other))
    op = B_DIV_TRUNC if rounding_mode == "trunc" else B_DIV_FLOOR
    return None if dt is None else _binary(ctx, op, self, other, out, dt)


_register(["aten::div.out_mode", "aten::div.Scalar_mode_out"], bind_div_mode)


def _bind_pow(ctx, base, exponent, out, bool_exponent_scalar=False):
    dt = result_type(base, exponent)
    if dt == BOOL:
        if not bool_exponent_scalar:
            return None
        return _binary(ctx, B_POW_BOOL, base, exponent, out, dt)
    return _binary(ctx, B_POW, base, exponent, out, dt)


@_fast("aten::pow.Tensor_Tensor_out")
def bind_pow_tt(ctx, self, exponent, out):
    return _bind_pow(ctx, self, exponent, out)


@_fast("aten::pow.Tensor_Scalar_out")
def bind_pow_ts(ctx, self, exponent, out):
    if category(self.dtype) < 2 and not isinstance(exponent, (float, bool)) and exponent < 0:
        return None
    return _bind_pow(ctx, self, exponent, out, bool_exponent_scalar=True)


@_fast("aten::pow.Scalar_out")
def bind_pow_s(ctx, self, exponent, out):
    return _bind_pow(ctx, self, exponent, out)


def _comparison_binder(op):
    def bind(ctx, self, other, out):
        ct = compute_dtype(result_type(self, other))
        return _binary(ctx, op, self, other, out, BOOL, ct=ct, fpath=category(ct) == 2)
    return bind


for _n, _op in (("eq", B_EQ), ("ne", B_NE), ("lt", B_LT), ("le", B_LE), ("gt", B_GT),
                ("ge", B_GE)):
    _register([f"aten::{_n}.Tensor_out", f"aten::{_n}.Scalar_out"], _comparison_binder(_op))


def _logical_binder(op):
    def bind(ctx, self, other, out):
        return _binary(ctx, op, self, other, out, BOOL, ct=F64, fpath=True)
    return bind


for _n, _op in (("logical_and", B_LAND), ("logical_or", B_LOR), ("logical_xor", B_LXOR)):
    _register(f"aten::{_n}.out", _logical_binder(_op))


# ---- selection, clamp with tensor bounds, fills ---------------------------------------------

@_fast("aten::where.self_out")
def bind_where(ctx, condition, self, other, out):
    if condition.dtype not in (BOOL, np.dtype(np.uint8)):
        return None
    dt = result_type(self, other)
    if not _out_ok(dt, out, condition, self, other):
        return None
    return _bind(ctx, T_WHERE, out, [condition, self, other], dt, casts=(-1, None, None))


@_fast("aten::masked_fill.Scalar_out")
def bind_masked_fill(ctx, self, mask, value, out):
    dt = self.dtype
    if mask.dtype != BOOL or not _out_ok(dt, out, self, mask):
        return None
    try:
        v = fill_value("aten::masked_fill.Scalar_out", "value", value, dt)
    except Exception:  # noqa: BLE001 - the reference raises: let it
        return None
    v = float(v) if category(dt) == 2 else int(v)
    return _bind(ctx, T_WHERE, out, [mask, _Scalar(v), self], dt, casts=(-1, -1, None))


@_fast("aten::clamp.Tensor_out")
def bind_clamp_tensor(ctx, self, min, max, out):  # noqa: A002 - schema names
    if min is None and max is None:
        return None
    dt = result_type(self, min, max)
    if dt == BOOL and min is not None and max is not None:
        return None
    if not _out_ok(dt, out, self, min, max):
        return None
    if min is not None and max is not None:
        return _bind(ctx, T_CLAMP, out, [self, min, max], dt)
    return _bind(ctx, B_MAX if max is None else B_MIN, out,
                 [self, min if max is None else max], dt)


@_fast("aten::fill.Scalar_out")
def bind_fill_scalar(ctx, self, value, out):
    dt = self.dtype
    if not _supported(self, out) or out.ndim != self.ndim:  # out.write casts: no canCast
        return None
    try:
        v = fill_value("aten::fill.Scalar_out", "value", value, dt)
    except Exception:  # noqa: BLE001 - the reference raises: let it
        return None
    fpath = category(dt) == 2
    v = float(v) if fpath else int(v)
    return _bind(ctx, B_SECOND, out, [self, _Scalar(v)], dt, fpath=fpath, ct=dt,
                 casts=(-1, -1, None), skip=1)


@_fast("aten::fill.Tensor_out")
def bind_fill_tensor(ctx, self, value, out):
    dt = self.dtype
    if value.ndim != 0 or not _supported(self, value, out) or out.ndim != self.ndim:
        return None
    params = ()
    fpath = category(dt) == 2 or dt == BOOL  # bool: value != 0, whatever value's dtype
    if not fpath:
        info = np.iinfo(dt)
        hi = float(np.nextafter(2.0 ** 63, 0)) if dt == I64 else float(info.max)
        params = (int(info.min), int(info.max), float(info.min), hi, 1)
    return _bind(ctx, B_FILL_T, out, [self, value], dt, fpath=fpath, ct=dt,
                 casts=(-1, -1, None), skip=1, params=params)
