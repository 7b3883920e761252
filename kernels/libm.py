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

Numba is imported when one of these is first compiled (``kernels.fast.deferred``), so
the reference kernels import it on first use of one of these ops only.
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.fast.deferred import njit, overload, types, value, vectorize

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
