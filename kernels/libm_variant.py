"""Which ``expf`` and ``erff`` this process's C library computes, found by asking it
(no Numba).

glibc (2.27 and later) computes ``expf`` with one algorithm: a 32-entry table
of 2**(i/32) and a degree-3 polynomial in double precision. x86-64 glibc builds it twice
and picks one per CPU when it loads: the FMA build where the CPU has FMA and AVX2 (its
compiler fused three products and adds, and ``x * N/ln2`` with both of its uses), the
plain build elsewhere. The two disagree on exactly 2 of the 2**32 floats (found by
comparing both over every float; both are listed below).

``kernels.libm`` repeats the algorithm in a form loops can vectorize, and uses it only
when ``expf_variant()`` names one of the two builds: then the results are the C
library's, bit for bit. Anything else (another C library, a future glibc with a different
``expf``) gets None and the C library's own function, called per element. The answer
is part of the compiled kernels' cache key (``kernels.fast._cache``), so code built for
one variant never runs where the C library computes another.

``erff`` likewise: glibc's (fdlibm's float code) on its two rational branches,
|x| in [2**-28, 1.25), which ``kernels.libm`` repeats for GELU (its other branches stay
calls); a C library that rounds differently there (a correctly rounded ``erff``) gets None.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

# (input, the FMA build's result, the plain build's result), as float32 bits: the two
# inputs the builds disagree on, ten where both round differently from exp (so a
# correctly rounded expf fails the probe), and the special cases
PROBE = (
    (0x4202422F, 0x56FC9F1C, 0x56FC9F1B), (0xC27C65D9, 0x11FA2993, 0x11FA2992),
    (0xBBE32FE7, 0x3F7E3B33, 0x3F7E3B33), (0x411BAF62, 0x468367CE, 0x468367CE),
    (0xC18BC53A, 0x32DDF90B, 0x32DDF90B), (0xC1D478FF, 0x2C4D8CD9, 0x2C4D8CD9),
    (0xC210AA79, 0x25626951, 0x25626951), (0xC235D053, 0x1EABCB8D, 0x1EABCB8D),
    (0xC254D4C3, 0x1916E545, 0x1916E545), (0xC27D512A, 0x11C6CD4D, 0x11C6CD4D),
    (0x4292B596, 0x74634ACC, 0x74634ACC), (0x429F7E94, 0x79049946, 0x79049946),
    (0x00000000, 0x3F800000, 0x3F800000), (0xFF800000, 0x00000000, 0x00000000),
    (0x7F800000, 0x7F800000, 0x7F800000), (0x42B20000, 0x7F800000, 0x7F800000),
    (0xC2D00000, 0x00000000, 0x00000000), (0xC2CF0000, 0x00000001, 0x00000001),
    (0x7FC00000, 0x7FC00000, 0x7FC00000),
)
VARIANTS = ("fma", "plain")
# erff: glibc's (from fdlibm, float arithmetic, one build) on |x| in [2**-28, 1.25), its
# two rational branches, as (input, result) bits: twelve where it rounds differently
# from erf (eight below 0.84375, four above)
ERFF_PROBE = (
    (0xBE585742, 0xBE7087D6), (0x3E5A0DD0, 0x3E7260EC), (0x3E601484, 0x3E78DE66),
    (0xBF54988C, 0xBF4280F3), (0xBF549125, 0xBF427CC2), (0xBF321B49, 0xBF2CC24E),
    (0xBF5584C8, 0xBF43064C), (0x3D7538CA, 0x3D8A2FBD),
    (0x3F5CB83D, 0x3F46FB88), (0x3F935023, 0x3F6579C2), (0x3F888BE7, 0x3F5E5D2C),
    (0xBF7B78BD, 0xBF55D176),
)


def _bits(v: float) -> int:
    return int.from_bytes(ctypes.c_float(v), sys.byteorder)


def _from_bits(b: int) -> float:
    return ctypes.c_float.from_buffer_copy(b.to_bytes(4, sys.byteorder)).value


def _c_float_fn(name: str):
    """The C function ``name`` (float -> float) compiled code links to: the process's
    global symbol (as Numba's external functions resolve it), else the math library's."""
    for find in (lambda: None, lambda: ctypes.util.find_library("m")):
        try:  # (find_library runs a subprocess: only if the first fails)
            f = getattr(ctypes.CDLL(find()), name)
        except (AttributeError, OSError, TypeError):
            continue
        f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
        return f
    return None


def _gives(fn, rows, column: int) -> bool:
    return all(_bits(fn(_from_bits(row[0]))) == row[column] for row in rows)


def classify(expf) -> str | None:
    """"fma" or "plain" when ``expf`` (float -> float) gives that build's result on every
    probe input, else None."""
    for k, name in enumerate(VARIANTS):
        if _gives(expf, PROBE, 1 + k):
            return name
    return None


@functools.cache
def expf_variant() -> str | None:
    """Which of glibc's ``expf`` builds this process's C library computes: "fma",
    "plain", or None (another, or none found)."""
    f = _c_float_fn("expf")
    return None if f is None else classify(f)


def classify_erff(erff) -> str | None:
    """"fdlibm" when ``erff`` gives glibc's results on its rational branches' probe
    inputs, else None."""
    return "fdlibm" if _gives(erff, ERFF_PROBE, 1) else None


@functools.cache
def erff_variant() -> str | None:
    """"fdlibm" where this process's ``erff`` is glibc's (checked on 2.36) on
    |x| in [2**-28, 1.25), else None."""
    f = _c_float_fn("erff")
    return None if f is None else classify_erff(f)


def tag() -> str:
    """What compiled code that repeats these functions depends on (a cache key part)."""
    return f"expf={expf_variant()},erff={erff_variant()}"
