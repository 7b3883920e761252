"""Elementwise engine, part 2: every op on float64 (float compute) and int64 (integer
compute) values, with the reference kernels' rounding and wrapping.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.elementwise.generic_io import (B_ADD, B_ADD_A, B_AND, B_ATAN2, B_DIV,
                                                      B_DIV_FLOOR, B_DIV_TRUNC, B_EQ, B_FILL_T,
                                                      B_FMOD, B_GE, B_GLU, B_GT, B_LAND, B_LE,
                                                      B_LOR, B_LT, B_LXOR, B_MAX, B_MIN, B_MUL,
                                                      B_NE, B_OR, B_POW, B_POW_BOOL, B_REM,
                                                      B_SECOND, B_SHL, B_SHR, B_SUB, B_SUB_A, B_XOR,
                                                      T_WHERE, U_ABS, U_ACOS, U_ACOSH, U_ASIN,
                                                      U_ASINH, U_ATAN, U_ATANH, U_BNOT, U_BNOT_BOOL,
                                                      U_CEIL, U_CLAMP, U_COPY, U_COS, U_COSH, U_ELU,
                                                      U_ERF, U_EXP, U_EXPM1, U_FLOOR, U_GELU,
                                                      U_GELU_TANH, U_ISINF, U_ISNAN, U_LEAKY,
                                                      U_LNOT, U_LOG, U_LOG10, U_LOG1P, U_LOG2,
                                                      U_LOGIT, U_NEG, U_RECIP, U_RELU, U_ROUND,
                                                      U_ROUND_DEC, U_RSQRT, U_SIGMOID, U_SIGN,
                                                      U_SIN, U_SINH, U_SQRT, U_TAN, U_TANH, U_TRUNC,
                                                      U_ZERO, nj, vlog, vsincos)
from pyruntime.kernels.fast.nb import INVALID_ARGUMENT, OK
from pyruntime.kernels.libm import (exp, expf, gelu, gelu_tanh, gelu_tanhf, geluf, log, logf,
                                    sigmoid, sigmoidf, tanh, tanhf)


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


@nj
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


@nj
def cf1(op, x, r, m, p0, p1, p2, c32):
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
                r[j] = vsincos(x[j], op == U_COS)
        else:
            k = 1.4426950408889634 if op == U_LOG2 else 0.4342944819032518
            for j in range(m):
                r[j] = vlog(x[j]) * k
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


@njit(inline="always")
def common_rows(op, x, y, r, m):
    """r = x op y for the ops float64 and int64 compute alike: add, sub, mul, max and min
    (NaN propagates) and the comparisons (1 or 0 in ``r``'s type), a loop each so that it
    vectorizes; False (nothing written) for any other op."""
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
            r[j] = _mx(x[j], y[j])
    elif op == B_MIN:
        for j in range(m):
            r[j] = _mn(x[j], y[j])
    elif op == B_EQ:
        for j in range(m):
            r[j] = x[j] == y[j]
    elif op == B_NE:
        for j in range(m):
            r[j] = x[j] != y[j]
    elif op == B_LT:
        for j in range(m):
            r[j] = x[j] < y[j]
    elif op == B_LE:
        for j in range(m):
            r[j] = x[j] <= y[j]
    elif op == B_GT:
        for j in range(m):
            r[j] = x[j] > y[j]
    elif op == B_GE:
        for j in range(m):
            r[j] = x[j] >= y[j]
    else:
        return False
    return True


@nj
def cf2(op, x, y, r, m, p0, c32):
    if common_rows(op, x, y, r, m):
        return
    if op == B_DIV:
        for j in range(m):
            r[j] = x[j] / y[j]
    elif op == B_SECOND or op == B_FILL_T:
        for j in range(m):
            r[j] = y[j]
    else:
        for j in range(m):
            r[j] = _f2(op, x[j], y[j], p0, c32)


@nj
def ternary_rows(op, x, y, z, r, m):
    """where(x, y, z) or clamp(x, y, z) on float64 or int64 rows (a float NaN propagates)."""
    if op == T_WHERE:
        for j in range(m):
            r[j] = y[j] if x[j] != 0 else z[j]
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


@nj
def ci1(op, x, r, m, p0, p1, p2):
    if op == U_COPY:
        for j in range(m):
            r[j] = x[j]
    else:
        for j in range(m):
            r[j] = _i1(op, x[j], p0, p1, p2)


@nj
def ci2(op, x, y, r, m, alpha):
    if op == B_DIV_FLOOR or op == B_DIV_TRUNC or op == B_FMOD or op == B_REM:
        for j in range(m):
            if y[j] == 0:
                return INVALID_ARGUMENT  # the reference raises (ZeroDivisionError in ATen)
    if common_rows(op, x, y, r, m):
        return OK
    if op == B_AND:
        for j in range(m):
            r[j] = x[j] & y[j]
    elif op == B_OR:
        for j in range(m):
            r[j] = x[j] | y[j]
    else:
        for j in range(m):
            r[j] = _i2(op, x[j], y[j], alpha)
    return OK
