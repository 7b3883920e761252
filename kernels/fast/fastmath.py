"""Building blocks of the ``math="fast"`` kernels (``pyruntime.mathmode``).

The exact kernels compute what ExecuTorch's C++ loops compute: every product rounded
before its add, libm's ``expf``/``tanhf``/``erff`` called per element (a call LLVM never
vectorizes). The fast kernels may instead

* fuse a multiply and an add (``fmadd``: ``llvm.fma`` on a target with FMA, one
  instruction and one rounding; a multiply and an add elsewhere. Never LLVM's
  ``contract`` flag, which LLVM may honour in one compiled copy of a loop (its vector
  body) and not in another (its scalar remainder): results would depend on where a
  thread's share of the elements starts);
* approximate the transcendentals with branch-free float32 code that vectorizes:
  ``exp_fast`` (Cody-Waite reduction, Cephes' degree-7 polynomial, 2**n from bits in two
  halves so that the whole float range, denormals included, comes out right), and on
  it ``sigmoid_fast``, ``tanh_fast``, ``erf_fast`` (Abramowitz-Stegun 7.1.26),
  ``gelu_fast``, ``gelu_tanh_fast``, ``silu_fast``.

Measured against float64 references over a million float32 inputs spread over their
useful ranges (``tests/kernels/test_fastmath.py``, AMD EPYC with AVX-512): exp within
0.70 ulp; |error| / max(1, |ref|) below 8.9e-8 for sigmoid and tanh, 1.2e-7 for silu,
3.4e-7 for erf, 2.6e-7 for gelu, 1.6e-7 for gelu_tanh. NaN stays NaN, +-inf give the
limits.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from pyruntime.kernels.fast.deferred import intrinsic, njit


@intrinsic
def fmadd(typingctx, a, b, c):
    """``a * b + c``: one fused multiply-add where the target has FMA, else a multiply
    and an add. All three of one float type."""
    sig = a(a, b, c)

    def codegen(context, builder, signature, args):
        from pyruntime.kernels.fast.gemm import has_fma

        if has_fma():
            return builder.fma(*args)
        return builder.fadd(builder.fmul(args[0], args[1]), args[2])

    return sig, codegen


LOG2E = np.float32(1.44269504088896341)
LN2_HI = np.float32(0.693359375)  # ln 2 in two parts (Cephes): n * LN2_HI is exact
LN2_LO = np.float32(-2.12194440e-4)
ROUND = np.float32(12582912.0)  # 1.5 * 2**23: x + ROUND - ROUND rounds x to an integer
ONE, HALF, TWO = np.float32(1.0), np.float32(0.5), np.float32(2.0)
# Cephes expf's polynomial on [-ln2/2, ln2/2]
E0, E1, E2 = np.float32(1.9875691500e-4), np.float32(1.3981999507e-3), np.float32(8.3334519073e-3)
E3, E4, E5 = np.float32(4.1665795894e-2), np.float32(1.6666665459e-1), np.float32(5.0000001201e-1)
HI, LO = np.float32(88.8), np.float32(-104.0)  # past these exp is inf / 0 anyway


@intrinsic
def pow2_f32(typingctx, v):
    """2**v for a float32 ``v`` holding an integer in [-126, 127], from bits in 32-bit
    lanes: v + 127 + ROUND has v + 127 in its low mantissa bits, and the shift to the
    exponent field drops the rest. (Numba's integer arithmetic is 64-bit: a float ->
    int32 -> shift in Python code widens every lane to int64 and back.)"""
    sig = v(v)

    def codegen(context, builder, signature, args):
        f32, i32 = ir.FloatType(), ir.IntType(32)
        b = builder.bitcast(builder.fadd(args[0], ir.Constant(f32, 127.0 + 12582912.0)), i32)
        return builder.bitcast(builder.shl(b, ir.Constant(i32, 23)), f32)

    return sig, codegen


@njit(inline="always")
def exp_fast(x):
    """exp of a float32, branch-free (vectorizes). NaN -> NaN."""
    xc = HI if x > HI else x  # (NaN compares false: kept)
    xc = LO if xc < LO else xc
    n = (xc * LOG2E + ROUND) - ROUND  # round to nearest, exactly
    r = (xc - n * LN2_HI) - n * LN2_LO
    p = fmadd(fmadd(fmadd(fmadd(fmadd(E0, r, E1), r, E2), r, E3), r, E4), r, E5)
    y = fmadd(p * r, r, r) + ONE
    n = n if n == n else np.float32(0)
    h = np.floor(n * HALF)  # 2**n as 2**h * 2**(n - h): each half a normal float for n in
    return y * pow2_f32(h) * pow2_f32(n - h)  # [-252, 254]


@njit(inline="always")
def sigmoid_fast(x):
    return ONE / (ONE + exp_fast(-x))


@njit(inline="always")
def silu_fast(x):
    return x / (ONE + exp_fast(-x))


# odd Taylor terms of tanh and erf for |x| < SMALL (where 1 - e and 1 - p lose digits)
SMALL = np.float32(0.3)
T3, T5, T7, T9 = (np.float32(-1 / 3), np.float32(2 / 15), np.float32(-17 / 315),
                  np.float32(62 / 2835))
R3, R5, R7, R9 = (np.float32(-1 / 3), np.float32(1 / 10), np.float32(-1 / 42),
                  np.float32(1 / 216))
TWO_SQRTPI = np.float32(1.12837916709551257390)


@njit(inline="always")
def tanh_fast(x):
    """(1 - e) / (1 + e) with e = exp(-2|x|), the sign put back (NaN -> NaN); a Taylor
    polynomial below |x| = 0.3."""
    a = abs(x)
    e = exp_fast(-TWO * a)
    t = (ONE - e) / (ONE + e)
    x2 = x * x
    s = fmadd(fmadd(fmadd(fmadd(T9, x2, T7), x2, T5), x2, T3) * x2, x, x)
    t = np.float32(np.copysign(t, x))
    return s if a < SMALL else t


P_ERF = np.float32(0.3275911)
A1, A2, A3 = np.float32(0.254829592), np.float32(-0.284496736), np.float32(1.421413741)
A4, A5 = np.float32(-1.453152027), np.float32(1.061405429)


@njit(inline="always")
def erf_fast(x):
    """Abramowitz-Stegun 7.1.26 (absolute error below 1.5e-7 in exact arithmetic), a
    Taylor polynomial below |x| = 0.3; NaN -> NaN."""
    a = abs(x)
    t = ONE / fmadd(P_ERF, a, ONE)
    p = fmadd(fmadd(fmadd(fmadd(A5, t, A4), t, A3), t, A2), t, A1) * t
    y = ONE - p * exp_fast(-a * a)
    y = ONE if a > np.float32(10.0) else y  # (t * exp: 0 * 0 past here; inf * 0 at inf)
    x2 = x * x
    s = fmadd(fmadd(fmadd(fmadd(R9, x2, R7), x2, R5), x2, R3) * x2, x, x) * TWO_SQRTPI
    y = np.float32(np.copysign(y, x))
    return s if a < SMALL else y


SQRT1_2 = np.float32(0.70710678118654752440)
GELU_BETA = np.float32(0.79788456080286535588)  # sqrt(2 / pi)
GELU_KAPPA = np.float32(0.044715)


@njit(inline="always")
def gelu_fast(x):
    return HALF * x * (ONE + erf_fast(x * SQRT1_2))


@njit(inline="always")
def gelu_tanh_fast(x):
    inner = GELU_BETA * fmadd(GELU_KAPPA * x * x, x, x)
    return HALF * x * (ONE + tanh_fast(inner))
