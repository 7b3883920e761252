"""The C library's scalar math functions, as ExecuTorch's kernels call them.

ExecuTorch's portable kernels compute transcendental elementwise ops one element
at a time with the C library: ``expf``/``tanhf``/``logf`` on float (Half and
BFloat16 widened to float first), ``exp``/``tanh``/``log`` on double. numpy's
float32 SIMD loops differ from glibc in the last bit for 15-40% of inputs, and
which loop numpy picks depends on the CPU; float64 then rounding differs too
(rarely). So both tiers call the very functions ExecuTorch calls:

* ``EXTERNAL[name]``: Numba external functions (``expf``, ``exp``, ...) that the
  compiled tier calls from its kernels. A declared external call is never
  replaced by a vectorised approximation (SVML), so the result is libm's on any
  CPU;
* ``c_exp``, ``c_sigmoid``, ... : the same for compiled code of either float type
  (the float function on float32, the double one otherwise);
* ``ufunc(name, dtype)``: a numpy ufunc (float32 and float64 loops) over the same calls,
  compiled on first use, for the reference tier.

``sigmoid`` is ExecuTorch's formula in the compute type: ``1 / (1 + exp(-x))``;
``gelu``/``gelu_tanh`` are ATen's (``ATen/native/cpu/Gelu.h``, which ExecuTorch's
optimized ``gelu.out`` runs with its scalar ``Vectorized``: per element, libm's
``erff``/``tanhf``), every step in the compute type.

``expf_map`` runs ``expf`` over a float32 array (with the ops built on it: sigmoid, SiLU,
softmax's shifted exp) as glibc's own algorithm where ``kernels.libm_variant`` finds it in
this process's C library: same bits, but loops that vectorize (about 3x faster than a
call per element). Elsewhere it calls the C library per element. ``gelu_map`` does the
same for the exact GELU, with glibc's ``erff`` on its main branch.

Numba is imported when one of these is first compiled (``kernels.fast.deferred``), so
the reference kernels import it on first use of one of these ops only.
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.fast.deferred import intrinsic, njit, overload, types, value, vectorize
from pyruntime.kernels.fast.nb import bits_to_f64, f32_to_bits, f64_to_bits
from pyruntime.kernels.libm_variant import erff_variant, expf_variant

# op -> (float function, double function) in the C library
FUNCTIONS = {
    "exp": ("expf", "exp"), "tanh": ("tanhf", "tanh"), "log": ("logf", "log"),
    "erf": ("erff", "erf"), "expm1": ("expm1f", "expm1"), "log1p": ("log1pf", "log1p"),
}


def _external(name: str, ty: str):
    """Numba's declaration of the C function ``name``: ``ty(ty)``."""
    from numba import types as t

    return t.ExternalFunction(name, getattr(t, ty)(getattr(t, ty)))


EXTERNAL = {}
for _f, _d in FUNCTIONS.values():
    EXTERNAL[_f] = value(lambda f=_f: _external(f, "float32"), _f)
    EXTERNAL[_d] = value(lambda d=_d: _external(d, "float64"), _d)

expf, exp = EXTERNAL["expf"], EXTERNAL["exp"]
tanhf, tanh = EXTERNAL["tanhf"], EXTERNAL["tanh"]
logf, log = EXTERNAL["logf"], EXTERNAL["log"]
erff, erf = EXTERNAL["erff"], EXTERNAL["erf"]

# ---- glibc's expf, vectorizable (sysdeps/ieee754/flt-32/e_expf.c, glibc 2.27+) -------
# exp(x) = 2**(k/32) * 2**(r/32) with x * 32/ln2 = k + r: k from the table and the
# exponent field, 2**(r/32) a cubic in r, all in double, rounded once to float at the end.
# Where the C library picks its FMA build, the same steps with its fused products.
EXPF_VARIANT = expf_variant()  # frozen into compiled code: part of its cache key (_cache)
_EXPF_FUSED = EXPF_VARIANT == "fma"
_EXPF_REPLICA = EXPF_VARIANT is not None
_EXPF_TAB = np.array([  # bits of 2**(i/32) less i << 47 (glibc's __exp2f_data.tab)
    0x3FF0000000000000, 0x3FEFD9B0D3158574, 0x3FEFB5586CF9890F, 0x3FEF9301D0125B51,
    0x3FEF72B83C7D517B, 0x3FEF54873168B9AA, 0x3FEF387A6E756238, 0x3FEF1E9DF51FDEE1,
    0x3FEF06FE0A31B715, 0x3FEEF1A7373AA9CB, 0x3FEEDEA64C123422, 0x3FEECE086061892D,
    0x3FEEBFDAD5362A27, 0x3FEEB42B569D4F82, 0x3FEEAB07DD485429, 0x3FEEA47EB03A5585,
    0x3FEEA09E667F3BCD, 0x3FEE9F75E8EC5F74, 0x3FEEA11473EB0187, 0x3FEEA589994CCE13,
    0x3FEEACE5422AA0DB, 0x3FEEB737B0CDC5E5, 0x3FEEC49182A3F090, 0x3FEED503B23E255D,
    0x3FEEE89F995AD3AD, 0x3FEEFF76F2FB5E47, 0x3FEF199BDD85529C, 0x3FEF3720DCEF9069,
    0x3FEF5818DCFBA487, 0x3FEF7C97337B9B5F, 0x3FEFA4AFA2A490DA, 0x3FEFD0765B6E4540,
], np.int64)
_INVLN2N = float.fromhex("0x1.71547652b82fep+0") * 32
_SHIFT = float.fromhex("0x1.8p+52")  # adding it leaves round(z) in the low bits
_C0 = float.fromhex("0x1.c6af84b912394p-5") / 32 / 32 / 32
_C1 = float.fromhex("0x1.ebfce50fac4f3p-3") / 32 / 32
_C2 = float.fromhex("0x1.62e42ff0c52d6p-1") / 32
_OFLOW = np.float32(float.fromhex("0x1.62e42ep6"))  # above: inf
_UFLOW = np.float32(-float.fromhex("0x1.9fe368p6"))  # below: 0
_EXPF_BLOCK = 512
E_EXP, E_SIGMOID, E_SILU = range(3)  # expf_map's ops


@intrinsic
def _fused(typingctx, a, b, c):
    """``a * b + c`` rounded once (``llvm.fma``), on every target."""
    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return a(a, b, c), codegen


@njit(inline="always")
def _expf_head(v):
    """(k's bits, the cubic) of expf(v): no table, so loops over it vectorize."""
    xd = np.float64(v)
    if _EXPF_FUSED:
        kd = _fused(_INVLN2N, xd, _SHIFT)
        ki = f64_to_bits(kd)
        kd -= _SHIFT
        r = _fused(_INVLN2N, xd, -kd)
        r2 = r * r
        y = _fused(_fused(_C0, r, _C1), r2, _fused(_C2, r, 1.0))
    else:
        z = _INVLN2N * xd
        kd = z + _SHIFT
        ki = f64_to_bits(kd)
        kd -= _SHIFT
        r = z - kd
        r2 = r * r
        y = (_C0 * r + _C1) * r2 + (_C2 * r + 1.0)
    return ki, y


@njit(inline="always")
def _expf_tail(v, y, t):
    """expf(v) from the cubic ``y`` and ``t``, the table entry plus k << 47."""
    e = np.float32(y * bits_to_f64(t))
    e = np.float32(np.inf) if v > _OFLOW else e
    e = np.float32(0.0) if v < _UFLOW else e
    return e if v == v else v + v


@njit(inline="always")
def _expf_op(op, x, e):
    """What ``expf_map``'s op makes of x and e = expf(-x) (or expf(x - shift))."""
    if op == E_SIGMOID:
        one = np.float32(1.0)
        return one / (one + e)
    if op == E_SILU:  # x / (1 + exp(-x)) in double, as the exact SiLU kernel computes it
        return np.float32(np.float64(x) / (1.0 + np.float64(e)))
    return e


@njit(inline="always")
def _expf_arg(op, x, shift):
    return x - shift if op == E_EXP else -x


@njit(inline="always")
def _expf_span(op, x, z, n, shift, ki, y):
    """``expf_map`` on n <= _EXPF_BLOCK elements from index 0 (so the loops vectorize)."""
    for i in range(n):
        k, p = _expf_head(_expf_arg(op, x[i], shift))
        ki[i] = k
        y[i] = p
    for i in range(n):  # the table lookup: a gather, which LLVM will not vectorize here
        k = ki[i]
        ki[i] = _EXPF_TAB[np.uint64(k & 31)] + (k << 47)
    if op == E_SIGMOID:  # one loop per op, so that each vectorizes
        for i in range(n):
            z[i] = _expf_op(E_SIGMOID, x[i], _expf_tail(-x[i], y[i], ki[i]))
    elif op == E_SILU:
        for i in range(n):
            z[i] = _expf_op(E_SILU, x[i], _expf_tail(-x[i], y[i], ki[i]))
    else:
        for i in range(n):
            z[i] = _expf_tail(x[i] - shift, y[i], ki[i])


@njit(inline="always")
def expf_map(op, x, z, shift):
    """z[i] = op(x[i]) over float32 arrays of one size (``z`` may be ``x``): ``E_EXP``
    expf(x - shift) (float32 subtraction), ``E_SIGMOID`` 1 / (1 + expf(-x)) in float,
    ``E_SILU`` x / (1 + expf(-x)) in double. The C library's bits either way."""
    n = z.size
    if not _EXPF_REPLICA:
        for i in range(n):
            xi = x[i]
            z[i] = _expf_op(op, xi, expf(_expf_arg(op, xi, shift)))
        return
    ki = np.empty(min(n, _EXPF_BLOCK), np.int64)
    y = np.empty(min(n, _EXPF_BLOCK), np.float64)
    for b in range(0, n, _EXPF_BLOCK):
        m = min(_EXPF_BLOCK, n - b)
        _expf_span(op, x[b:b + m], z[b:b + m], m, shift, ki, y)


# ATen's gelu constants (Gelu.h), as the C++ computes them in double
SQRT1_2 = 0.70710678118654752440
GELU_BETA = 1.41421356237309504880 * 1.12837916709551257390 * 0.5  # M_SQRT2 * M_2_SQRTPI / 2
GELU_KAPPA = 0.044715


@njit(inline="always")
def sigmoidf(x):
    """ExecuTorch's sigmoid on float: every step rounds to float32."""
    one = np.float32(1.0)
    return one / (one + expf(-x))


@njit(inline="always")
def sigmoid(x):
    return 1.0 / (1.0 + exp(-x))


@njit(inline="always")
def geluf(x):
    """ATen's scalar_gelu / vectorized_gelu on float: x * 0.5 * (1 + erf(x * M_SQRT1_2))."""
    one = np.float32(1.0)
    return x * np.float32(0.5) * (one + erff(x * np.float32(SQRT1_2)))


@njit(inline="always")
def gelu(x):
    return x * 0.5 * (1.0 + erf(x * SQRT1_2))


# ---- glibc's erff on |x| in [2**-28, 1.25) (s_erff.c, from fdlibm): float arithmetic,
# two rational branches (x + x * P(x*x) / Q(x*x) below 0.84375, erx + P(|x|-1) / Q(|x|-1)
# above), both computed and one chosen, so loops vectorize. The rest of its range (where
# it calls expf twice) stays a call: for GELU's x / sqrt(2) that is |x| >= 1.77.
_ERFF_REPLICA = erff_variant() == "fdlibm"
_ERFF_LO, _ERFF_MID, _ERFF_HI = 0x31800000, 0x3F580000, 0x3FA00000  # |x|'s bits
_PP = tuple(np.float32(c) for c in (1.2837916613e-01, -3.2504209876e-01, -2.8481749818e-02,
                                    -5.7702702470e-03, -2.3763017452e-05))
_QQ = tuple(np.float32(c) for c in (3.9791721106e-01, 6.5022252500e-02, 5.0813062117e-03,
                                    1.3249473704e-04, -3.9602282413e-06))
_PA = tuple(np.float32(c) for c in (-2.3621185683e-03, 4.1485610604e-01, -3.7220788002e-01,
                                    3.1834661961e-01, -1.1089469492e-01, 3.5478305072e-02,
                                    -2.1663755178e-03))
_QA = tuple(np.float32(c) for c in (1.0642088205e-01, 5.4039794207e-01, 7.1828655899e-02,
                                    1.2617121637e-01, 1.3637083583e-02, 1.1984500103e-02))
_ERX = np.float32(8.4506291151e-01)


@njit(inline="always")
def _erff_mid(x, a):
    """glibc's erff(x) for |x| (bits ``a``) in [2**-28, 1.25); elsewhere a value to
    discard."""
    one = np.float32(1.0)
    z = x * x
    r = _PP[0] + z * (_PP[1] + z * (_PP[2] + z * (_PP[3] + z * _PP[4])))
    s = one + z * (_QQ[0] + z * (_QQ[1] + z * (_QQ[2] + z * (_QQ[3] + z * _QQ[4]))))
    t = abs(x) - one
    p = _PA[0] + t * (_PA[1] + t * (_PA[2] + t * (_PA[3] + t * (_PA[4] + t * (
        _PA[5] + t * _PA[6])))))
    q = one + t * (_QA[0] + t * (_QA[1] + t * (_QA[2] + t * (_QA[3] + t * (_QA[4] + t * (
        _QA[5]))))))
    small = a < _ERFF_MID
    num = r if small else p  # one division for both branches
    den = s if small else q
    y = num / den
    return x + x * y if small else (_ERX + y if x >= 0 else -_ERX - y)


@njit(inline="always")
def _gelu_mid(x):
    """(``geluf(x)`` where erff's argument is in ``_erff_mid``'s range, whether it is)."""
    one = np.float32(1.0)
    v = x * np.float32(SQRT1_2)
    a = f32_to_bits(v) & 0x7FFFFFFF
    inside = (a >= _ERFF_LO) & (a < _ERFF_HI)
    return x * np.float32(0.5) * (one + _erff_mid(v, a)), inside


@njit(inline="always")
def gelu_map(x, z):
    """z[i] = ``geluf(x[i])`` (ATen's exact GELU on float) over float32 arrays of one size
    (``z`` may be ``x``): erff through ``_erff_mid`` in vector loops where glibc's erff
    takes that branch, a call elsewhere. The C library's bits either way."""
    n = z.size
    if not _ERFF_REPLICA:
        for i in range(n):
            z[i] = geluf(x[i])
        return
    m = min(n, _EXPF_BLOCK)
    xs = np.empty(m, np.float32)  # the block's inputs (z may be x)
    outside = np.empty(m, np.uint8)
    for b in range(0, n, _EXPF_BLOCK):
        m = min(_EXPF_BLOCK, n - b)
        xb = x[b:b + m]
        zb = z[b:b + m]
        for i in range(m):
            xs[i] = xb[i]
        for i in range(m):
            g, inside = _gelu_mid(xs[i])
            zb[i] = g
            outside[i] = not inside
        for i in range(m):  # the rest: erff's other branches, through the C library
            if outside[i]:
                zb[i] = geluf(xs[i])


@njit(inline="always")
def gelu_tanhf(x):
    """ATen's gelu approximated with tanh on float:
    0.5 * x * (1 + tanh(beta * (x + kappa * x * x * x)))."""
    one = np.float32(1.0)
    cube = x * x * x
    inner = np.float32(GELU_BETA) * (x + np.float32(GELU_KAPPA) * cube)
    return np.float32(0.5) * x * (one + tanhf(inner))


@njit(inline="always")
def gelu_tanh(x):
    cube = x * x * x
    return 0.5 * x * (1.0 + tanh(GELU_BETA * (x + GELU_KAPPA * cube)))


# the reference tier's loops: one float and one double function per op (module-level
# bodies, so Numba caches the compiled ufuncs on disk)
def _exp32(x):
    return expf(x)


def _exp64(x):
    return exp(x)


def _tanh32(x):
    return tanhf(x)


def _tanh64(x):
    return tanh(x)


def _log32(x):
    return logf(x)


def _log64(x):
    return log(x)


def _sigmoid32(x):
    return sigmoidf(x)


def _sigmoid64(x):
    return sigmoid(x)


def _gelu32(x):
    return geluf(x)


def _gelu64(x):
    return gelu(x)


def _gelu_tanh32(x):
    return gelu_tanhf(x)


def _gelu_tanh64(x):
    return gelu_tanh(x)


_BODIES = {"exp": (_exp32, _exp64), "tanh": (_tanh32, _tanh64), "log": (_log32, _log64),
           "sigmoid": (_sigmoid32, _sigmoid64), "gelu": (_gelu32, _gelu64),
           "gelu_tanh": (_gelu_tanh32, _gelu_tanh64)}
_UFUNCS: dict = {}


def _generic(name):
    """``name(x)`` for compiled code: the C library's float function on float32, its
    double one on anything else (chosen when the caller compiles)."""
    f32, f64 = _BODIES[name]

    def stub(x):
        raise NotImplementedError

    stub.__name__ = stub.__qualname__ = f"c_{name}"

    @overload(stub)
    def _choose(x):
        return f32 if x == types.float32 else f64

    return stub


c_exp, c_tanh, c_log, c_sigmoid, c_gelu, c_gelu_tanh = (
    _generic(n) for n in ("exp", "tanh", "log", "sigmoid", "gelu", "gelu_tanh"))


def ufunc(name: str, dtype) -> np.ufunc:
    """The op's loop over ``dtype`` (float32 or float64), compiled on first use."""
    key = (name, np.dtype(dtype) == np.float64)
    u = _UFUNCS.get(key)
    if u is None:
        fn = _BODIES[name][key[1]]
        sig = "float64(float64)" if key[1] else "float32(float32)"
        u = _UFUNCS[key] = vectorize([sig], cache=True)(fn)
    return u
