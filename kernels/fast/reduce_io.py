"""Reduction kernels, shared part: op codes, scratch layout and typed element access
(runs of elements convert through ``kernels.fast.runs``).
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.fast.deferred import njit, overload, types
from pyruntime.kernels.fast.nb import (ST_BF16, ST_BOOL, ST_F16, ST_F32, ST_F64, ST_I16, ST_I32,
                                       ST_I64, ST_I8, ST_U8, load_f64, load_f64_call, load_i64,
                                       load_i64_call, ptr_like, store_f64_call, store_i64_call)


SUPPORTED = (ST_U8, ST_I8, ST_I16, ST_I32, ST_I64, ST_F16, ST_F32, ST_F64, ST_BOOL, ST_BF16)
FLOAT_ST = (ST_F16, ST_BF16, ST_F32, ST_F64)

# reduction op codes
R_SUM, R_MEAN, R_PROD, R_ANY, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_MAXDIM, R_MINDIM = range(10)
# accumulation types
A_F32, A_F64, A_I64 = 0, 1, 2
# flags
F_MEM = 1  # visit the reduced elements in memory order (prod), else logical order
F_NONEMPTY = 2  # an empty reduced extent is an error (min/max-style ops)

# scratch words
W_OSZ = 0  # out sizes
W_KN = 16  # kept dims: sizes (logical order)
W_KX = 32  # kept dims: x strides
W_KO = 48  # kept dims: out strides
W_KO2 = 64  # kept dims: second out's strides
W_KC = 80  # kept dims: counter
W_RN = 96  # reduced dims (size != 1, visiting order, merged): sizes
W_RX = 112  # reduced dims: x strides
W_RC = 128  # reduced dims: counter
W_WORDS = 144
CH = 256  # elements converted per chunk (a typed buffer after the plan words)
RED_WORDS = W_WORDS + CH
U = np.uint64  # unsigned buffer indices: no negative-index wraparound code in hot loops
PW_FRAMES = 64  # var: pairwise-summation stack (3 words a frame, then one float64 a frame)
VAR_WORDS = W_WORDS + 4 * PW_FRAMES


# ---- typed element access ------------------------------------------------------------------
# Single-element loads/stores (var, per-slot results) are called, not inlined: numba-level
# inlining of the dtype switch at every call site made compiling take minutes. Beware
# chaining numba-level inlines: an ``@overload(inline="always")`` result passed straight
# into nb's ``inline="always"`` store_i64 compiled to a loop that stored nothing
# (numba 0.68, with a "variable not in scope" NumbaIRAssumptionWarning).

@njit
def _g32(addr, st, i):
    """Element i as float32 the way numpy's astype(float32) converts it (one rounding)."""
    if st == ST_F64 or st == ST_F16 or st == ST_BF16:
        return np.float32(load_f64(addr, st, i))
    return np.float32(load_i64(addr, st, i))


def ld(addr, st, i, m):
    """Element ``i`` converted to ``m``'s type (numba only)."""
    raise NotImplementedError


@overload(ld)
def _ld(addr, st, i, m):
    # m's own scalar type loads in place, the others convert through a called load
    for same, code, load in ((types.float32, ST_F32, _g32),
                             (types.float64, ST_F64, load_f64_call),
                             (types.int64, ST_I64, load_i64_call)):
        if m == same:
            def impl(addr, st, i, m):
                if st == code:
                    return ptr_like(addr, m)[i]
                return load(addr, st, i)
            return impl
    return None


def st_acc(addr, st, i, v):
    """Store a float (through float64) or an integer (through int64) value (numba only)."""
    raise NotImplementedError


@overload(st_acc)
def _st_acc(addr, st, i, v):
    if isinstance(v, types.Integer):
        return lambda addr, st, i, v: store_i64_call(addr, st, i, np.int64(v))
    return lambda addr, st, i, v: store_f64_call(addr, st, i, np.float64(v))


@njit(inline="always")
def advance_kept(sc, nk, xb, ob, ob2):
    """Step the kept-dims counter ``sc[W_KC:]`` over its ``nk`` dims by one, moving the x,
    out and second out offsets by their strides (``W_KX``, ``W_KO``, ``W_KO2``)."""
    for j in range(nk - 1, -1, -1):
        sc[W_KC + j] += 1
        xb += sc[W_KX + j]
        ob += sc[W_KO + j]
        ob2 += sc[W_KO2 + j]
        if sc[W_KC + j] < sc[W_KN + j]:
            break
        xb -= sc[W_KX + j] * sc[W_KN + j]
        ob -= sc[W_KO + j] * sc[W_KN + j]
        ob2 -= sc[W_KO2 + j] * sc[W_KN + j]
        sc[W_KC + j] = 0
    return xb, ob, ob2
