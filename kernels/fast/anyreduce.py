"""Compiled reductions and scans for every dtype (bool, integers, half floats, float32/64).

Generic kernels over the descriptor ABI: the element type is dispatched at run
time, once per chunk of up to 256 elements converted into a typed buffer
(``load_run``/``store_run``); the accumulation type is fixed at bind time from
the reference kernel's rules (``kernels/reduce.py``):

* ``sum``/``prod``/``cumsum``: integers and bool accumulate in int64 (wrapping on
  store as C++ casts do), half floats in float32, float32/float64 in themselves;
  ``mean`` in the float target's compute type (float32 for integer targets).
* ``sum``/``mean`` add sequentially in the input's logical index order over the
  reduced dims, exactly as the reference's ``_sequential_sum`` (and ExecuTorch's
  portable kernels); ``prod`` multiplies sequentially in memory order, as numpy's
  ``np.prod`` (the reference) does; ``cumsum`` runs along its dim.
* ``amax``/``amin``/``max``/``min``/``argmax``/``argmin``: compared in float64
  (float inputs, exact) or int64 (integers, bool); NaN wins (the first one for
  the index ops), ties keep the first index (the value is that element's); an
  empty extent is an error
  (``INVALID_ARGUMENT`` at run time; declined at bind time so the reference
  raises its message).
* ``any``: ``x != 0`` (NaN counts as true).
* ``var``/``var_mean``: the reference's numpy arithmetic reproduced bit for bit:
  the mean is a float32 (float64 for float64 input) numpy sum divided by the
  count, the squared deviations are summed in float64; both sums follow
  numpy's reduction order (memory order, pairwise summation of the innermost
  run when the innermost memory dim is reduced, ``0.0`` initial value).
* ``_softmax``/``_log_softmax`` (fallback for half floats, non-contiguous
  layouts, mixed dtypes): the max and ``x - max`` in the compute type (float32
  for half floats), exp (a float32-grade polynomial; libm for float64 input),
  sum and log in float64, rounded once on store: close to, not bit-identical
  with, the reference's numpy float32 arithmetic.

Every output element is computed on its own ("slot" loop over the kept dims,
inner loops over the reduced dims), reading both tensors through their
descriptor strides: any dim order works, outs are resized at run time.
One cfunc per family: reductions, var, cumsum, softmax.
"""
from __future__ import annotations

import math

import numpy as np
from numba import carray, njit, types
from numba.extending import overload

from cython_ext.dtypes import to_numpy_dtype
from kernels.fast import register_fast
from kernels.fast.nb import (INVALID_ARGUMENT, OK, ST_BF16, ST_BOOL, ST_F16, ST_F32, ST_F64, ST_I16,
                             ST_I32, ST_I64, ST_I8, ST_U8, bf16_to_f64, bits_to_f64, cast_like,
                             desc, f64_to_bf16, f64_to_half, f64_to_int, half_to_f64, lazy,
                             load_f64, load_i64, ptr_like, resize_like, resize_to, scratch,
                             store_f64, store_i64, sum_seg)
from kernels.promote import category, compute_dtype

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


@njit
def _g64(addr, st, i):
    return load_f64(addr, st, i)


@njit
def _gi(addr, st, i):
    return load_i64(addr, st, i)


@njit
def _put_f(addr, st, i, v):
    store_f64(addr, st, i, v)


@njit
def _put_i(addr, st, i, v):
    store_i64(addr, st, i, v)


def ld(addr, st, i, m):
    """Element ``i`` converted to ``m``'s type (numba only)."""
    raise NotImplementedError


@overload(ld)
def _ld(addr, st, i, m):
    if m == types.float32:
        def impl(addr, st, i, m):
            if st == ST_F32:
                return ptr_like(addr, np.float32(0))[i]
            return _g32(addr, st, i)
        return impl
    if m == types.float64:
        def impl(addr, st, i, m):
            if st == ST_F64:
                return ptr_like(addr, np.float64(0))[i]
            return _g64(addr, st, i)
        return impl
    if m == types.int64:
        def impl(addr, st, i, m):
            if st == ST_I64:
                return ptr_like(addr, np.int64(0))[i]
            return _gi(addr, st, i)
        return impl
    return None


def st_acc(addr, st, i, v):
    """Store a float (through float64) or an integer (through int64) value (numba only)."""
    raise NotImplementedError


@overload(st_acc)
def _st_acc(addr, st, i, v):
    if isinstance(v, types.Integer):
        return lambda addr, st, i, v: _put_i(addr, st, i, np.int64(v))
    return lambda addr, st, i, v: _put_f(addr, st, i, np.float64(v))


def cvt(v, m):
    """``v`` converted to ``m``'s type as numpy's astype does (floats to int64 truncate;
    NaN and out-of-range give 0) (numba only)."""
    raise NotImplementedError


@overload(cvt)
def _cvt(v, m):
    if m == types.float32:
        return lambda v, m: np.float32(v)
    if m == types.float64:
        return lambda v, m: np.float64(v)
    if m == types.int64 and isinstance(v, types.Float):
        return lambda v, m: f64_to_int(np.float64(v))
    if m == types.int64:
        return lambda v, m: np.int64(v)
    return None


@njit
def load_run(addr, st, off, step, n, buf):
    """buf[:n] = elements off, off+step, ... converted to buf's type: one dtype switch per
    run, then a typed loop."""
    m = buf[0]
    if st == ST_F32:
        p = ptr_like(addr, np.float32(0))
        for i in range(n):
            buf[U(i)] = cvt(p[off + i * step], m)
    elif st == ST_F64:
        p = ptr_like(addr, np.float64(0))
        for i in range(n):
            buf[U(i)] = cvt(p[off + i * step], m)
    elif st == ST_I64:
        p = ptr_like(addr, np.int64(0))
        for i in range(n):
            buf[U(i)] = cvt(p[off + i * step], m)
    elif st == ST_I32:
        p = ptr_like(addr, np.int32(0))
        for i in range(n):
            buf[U(i)] = cvt(p[off + i * step], m)
    elif st == ST_I16:
        p = ptr_like(addr, np.int16(0))
        for i in range(n):
            buf[U(i)] = cvt(p[off + i * step], m)
    elif st == ST_I8:
        p = ptr_like(addr, np.int8(0))
        for i in range(n):
            buf[U(i)] = cvt(p[off + i * step], m)
    elif st == ST_U8 or st == ST_BOOL:
        p = ptr_like(addr, np.uint8(0))
        for i in range(n):
            buf[U(i)] = cvt(p[off + i * step], m)
    elif st == ST_BF16:
        p = ptr_like(addr, np.uint16(0))
        for i in range(n):
            buf[U(i)] = cvt(bf16_to_f64(np.int64(p[off + i * step])), m)
    else:
        p = ptr_like(addr, np.uint16(0))
        for i in range(n):
            buf[U(i)] = cvt(half_to_f64(np.int64(p[off + i * step])), m)


@njit
def store_run(addr, st, off, step, n, buf):
    """Elements off, off+step, ... = buf[:n] converted to scalar type ``st`` (C++ casts)."""
    if st == ST_F32:
        p = ptr_like(addr, np.float32(0))
        for i in range(n):
            p[off + i * step] = np.float32(buf[U(i)])
    elif st == ST_F64:
        p = ptr_like(addr, np.float64(0))
        for i in range(n):
            p[off + i * step] = np.float64(buf[U(i)])
    elif st == ST_BOOL:
        p = ptr_like(addr, np.uint8(0))
        for i in range(n):
            p[off + i * step] = np.uint8(buf[U(i)] != 0)
    elif st == ST_F16:
        p = ptr_like(addr, np.uint16(0))
        for i in range(n):
            p[off + i * step] = np.uint16(f64_to_half(np.float64(buf[U(i)])))
    elif st == ST_BF16:
        p = ptr_like(addr, np.uint16(0))
        for i in range(n):
            p[off + i * step] = np.uint16(f64_to_bf16(np.float64(buf[U(i)])))
    elif st == ST_I64:
        p = ptr_like(addr, np.int64(0))
        for i in range(n):
            p[off + i * step] = cvt(buf[U(i)], np.int64(0))
    elif st == ST_I32:  # integers wrap, as C++ casts do
        p = ptr_like(addr, np.int32(0))
        for i in range(n):
            p[off + i * step] = np.int32(cvt(buf[U(i)], np.int64(0)))
    elif st == ST_I16:
        p = ptr_like(addr, np.int16(0))
        for i in range(n):
            p[off + i * step] = np.int16(cvt(buf[U(i)], np.int64(0)))
    elif st == ST_I8:
        p = ptr_like(addr, np.int8(0))
        for i in range(n):
            p[off + i * step] = np.int8(cvt(buf[U(i)], np.int64(0)))
    else:
        p = ptr_like(addr, np.uint8(0))
        for i in range(n):
            p[off + i * step] = np.uint8(cvt(buf[U(i)], np.int64(0)) & 0xFF)


# ---- planning: out sizes, kept dims, reduced dims ------------------------------------------

@njit(inline="always")
def _plan_reduced(x, mask, mem, sc):
    """Reduced dims of size != 1 in visiting order (logical, or x's memory order when ``mem``),
    neighbours merged where their strides chain (the order is unchanged).
    Returns (number of entries, element count, some reduced dim is empty)."""
    nd = x[2]
    nr = 0
    cnt = 1
    empty = False
    for k in range(nd):
        i = x[40 + k] if mem else k
        if (mask >> i) & 1:
            s = x[8 + i]
            cnt *= s
            if s == 0:
                empty = True
            if s == 1:
                continue
            sd = x[24 + i]
            if nr > 0 and sc[W_RX + nr - 1] == s * sd:
                sc[W_RN + nr - 1] *= s
                sc[W_RX + nr - 1] = sd
            else:
                sc[W_RN + nr] = s
                sc[W_RX + nr] = sd
                nr += 1
    return nr, cnt, empty


@njit(inline="always")
def _plan_kept(x, o, o2, mask, keep, sc):
    """Resize the out(s) to the reduced shape; kept dims with x and out strides.
    Returns (status, number of kept dims)."""
    nd = x[2]
    nk = 0
    ond = 0
    for i in range(nd):
        if (mask >> i) & 1:
            if keep:
                sc[W_OSZ + ond] = 1
                ond += 1
        else:
            sc[W_OSZ + ond] = x[8 + i]
            sc[W_KN + nk] = x[8 + i]
            sc[W_KX + nk] = x[24 + i]
            sc[W_KO + nk] = ond
            nk += 1
            ond += 1
    st = resize_to(o, sc[W_OSZ:W_OSZ + 16], ond)
    if st != OK:
        return st, nk
    st = resize_to(o2, sc[W_OSZ:W_OSZ + 16], ond)
    if st != OK:
        return st, nk
    for j in range(nk):
        od = sc[W_KO + j]
        sc[W_KO + j] = o[24 + od]
        sc[W_KO2 + j] = o2[24 + od]
        sc[W_KC + j] = 0
    return OK, nk


@njit(inline="always")
def _inner(sc, nr):
    """(innermost reduced run length, its stride, number of runs); resets the counter."""
    if nr == 0:
        return 1, 0, 1
    n_outer = 1
    for j in range(nr - 1):
        n_outer *= sc[W_RN + j]
        sc[W_RC + j] = 0
    return sc[W_RN + nr - 1], sc[W_RX + nr - 1], n_outer


@njit(inline="always")
def _next_run(sc, nr, off):
    """Advance the reduced-dims counter (all but the innermost entry); the new x offset."""
    for j in range(nr - 2, -1, -1):
        sc[W_RC + j] += 1
        off += sc[W_RX + j]
        if sc[W_RC + j] < sc[W_RN + j]:
            break
        off -= sc[W_RX + j] * sc[W_RN + j]
        sc[W_RC + j] = 0
    return off


# ---- reductions ----------------------------------------------------------------------------

@njit(inline="always")
def _seg_max(buf, n):
    """max of buf[:n] (n >= 1), NaN if any is NaN. Four lanes of the builtin max (a select:
    vectorizes, but lets NaN through), plus v * 0 sums that turn NaN on a NaN (or an inf):
    then an exact look for a NaN."""
    a0 = buf[0]
    a1 = a0
    a2 = a0
    a3 = a0
    z0 = a0 * 0
    z1 = z0
    z2 = z0
    z3 = z0
    i = 1
    while i + 4 <= n:
        v0 = buf[U(i)]
        v1 = buf[U(i + 1)]
        v2 = buf[U(i + 2)]
        v3 = buf[U(i + 3)]
        a0 = max(a0, v0)
        a1 = max(a1, v1)
        a2 = max(a2, v2)
        a3 = max(a3, v3)
        z0 += v0 * 0
        z1 += v1 * 0
        z2 += v2 * 0
        z3 += v3 * 0
        i += 4
    while i < n:
        v0 = buf[U(i)]
        a0 = max(a0, v0)
        z0 += v0 * 0
        i += 1
    r = max(max(a0, a1), max(a2, a3))
    z = (z0 + z1) + (z2 + z3)
    if z != z:
        for i in range(n):
            if buf[U(i)] != buf[U(i)]:
                return buf[U(i)]
    return r


@njit(inline="always")
def _seg_min(buf, n):
    """min of buf[:n] (n >= 1), NaN if any is NaN. Four lanes of the builtin min (a select:
    vectorizes, but lets NaN through), plus v * 0 sums that turn NaN on a NaN (or an inf):
    then an exact look for a NaN."""
    a0 = buf[0]
    a1 = a0
    a2 = a0
    a3 = a0
    z0 = a0 * 0
    z1 = z0
    z2 = z0
    z3 = z0
    i = 1
    while i + 4 <= n:
        v0 = buf[U(i)]
        v1 = buf[U(i + 1)]
        v2 = buf[U(i + 2)]
        v3 = buf[U(i + 3)]
        a0 = min(a0, v0)
        a1 = min(a1, v1)
        a2 = min(a2, v2)
        a3 = min(a3, v3)
        z0 += v0 * 0
        z1 += v1 * 0
        z2 += v2 * 0
        z3 += v3 * 0
        i += 4
    while i < n:
        v0 = buf[U(i)]
        a0 = min(a0, v0)
        z0 += v0 * 0
        i += 1
    r = min(min(a0, a1), min(a2, a3))
    z = (z0 + z1) + (z2 + z3)
    if z != z:
        for i in range(n):
            if buf[U(i)] != buf[U(i)]:
                return buf[U(i)]
    return r


@njit
def _slot(op, xa, st, xb, sc, nr, cnt, buf):
    """Reduce the elements of one output slot (x offset ``xb`` plus the reduced dims'
    offsets) in the planned order, converted chunk by chunk into ``buf`` (the accumulation
    type). Returns (value, index of the chosen element in visiting order, or -1)."""
    m = buf[0]
    inner_n, inner_s, n_outer = _inner(sc, nr)
    if op == R_PROD:
        acc = cast_like(1.0, m)
    elif (op == R_SUM or op == R_MEAN) and cnt > 0:
        acc = cast_like(-0.0, m)  # the additive identity that keeps a -0.0 first element
    else:
        acc = cast_like(0.0, m)
    idx = np.int64(-1)
    mx = op == R_MAX or op == R_ARGMAX or op == R_MAXDIM
    off = xb
    pos = np.int64(0)
    stop = False
    for t in range(n_outer):
        c = 0
        while c < inner_n and not stop:
            n = min(CH, inner_n - c)
            load_run(xa, st, off + c * inner_s, inner_s, n, buf)
            if op == R_SUM or op == R_MEAN:
                for k in range(n):
                    acc += buf[U(k)]
            elif op == R_PROD:
                for k in range(n):
                    acc *= buf[U(k)]
            elif op == R_ANY:
                for k in range(n):
                    if buf[U(k)] != 0:
                        idx = pos + c + k
                        stop = True
                        break
            else:
                cm = _seg_max(buf, n) if mx else _seg_min(buf, n)
                if idx < 0 or cm != cm or (cm > acc if mx else cm < acc):
                    k = 0  # the first element equal to the chunk's extreme (or NaN)
                    if cm != cm:
                        while buf[U(k)] == buf[U(k)]:
                            k += 1
                        stop = True
                    else:
                        while buf[U(k)] != cm:
                            k += 1
                    acc = buf[U(k)]
                    idx = pos + c + k
            c += n
        if stop:
            break
        pos += inner_n
        off = _next_run(sc, nr, off)
    return acc, idx


@njit
def _reduce_typed(op, x, o, o2, sc, nk, nr, cnt, buf):
    m = buf[0]
    xa = x[0]
    st = x[1]
    oa = o[0]
    ost = o[1]
    xb = 0
    ob = 0
    ob2 = 0
    for s in range(o[3]):
        v, idx = _slot(op, xa, st, xb, sc, nr, cnt, buf)
        if op == R_MEAN:
            st_acc(oa, ost, ob, v / cast_like(cnt, m))
        elif op == R_ANY:
            _put_i(oa, ost, ob, np.int64(1) if idx >= 0 else np.int64(0))
        elif op == R_ARGMAX or op == R_ARGMIN:
            _put_i(oa, ost, ob, idx)
        else:
            st_acc(oa, ost, ob, v)
            if op == R_MAXDIM or op == R_MINDIM:
                _put_i(o2[0], o2[1], ob2, idx)
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
    return OK


def reduce_kernel(block):
    op = block[0]
    x = desc(block[1])
    o = desc(block[2])
    o2 = desc(block[3])
    mask = block[4]
    keep = block[5] != 0
    acc = block[6]
    sc = scratch(block[7], W_WORDS)
    bufa = block[7] + 8 * W_WORDS
    flags = block[8]
    nr, cnt, empty = _plan_reduced(x, mask, (flags & F_MEM) != 0, sc)
    if empty and (flags & F_NONEMPTY) != 0 and x[2] > 0:
        return INVALID_ARGUMENT
    st, nk = _plan_kept(x, o, o2, mask, keep, sc)
    if st != OK:
        return st
    if acc == A_F32:
        return _reduce_typed(op, x, o, o2, sc, nk, nr, cnt,
                             carray(ptr_like(bufa, np.float32(0)), CH))
    if acc == A_F64:
        return _reduce_typed(op, x, o, o2, sc, nk, nr, cnt,
                             carray(ptr_like(bufa, np.float64(0)), CH))
    return _reduce_typed(op, x, o, o2, sc, nk, nr, cnt, carray(ptr_like(bufa, np.int64(0)), CH))


# ---- var / var_mean: numpy's reduction order -------------------------------------------------

@njit
def _leaf(sq, xa, st, i, mean, m, am):
    """An addend of var's sums: the element (mean pass) or its squared deviation from
    ``mean``, computed in float64 (``sq``)."""
    if sq:
        d = np.float64(ld(xa, st, i, m) - mean)
        return cast_like(d * d, am)
    return cast_like(ld(xa, st, i, m), am)


@njit
def _pw_leaf(sq, xa, st, b, n, mean, m, am):
    """numpy's pairwise_sum for n <= 128 elements at x offsets b, b+1, ..."""
    if n < 8:
        res = cast_like(0.0, am)
        for i in range(n):
            res += _leaf(sq, xa, st, b + i, mean, m, am)
        return res
    r0 = _leaf(sq, xa, st, b, mean, m, am)
    r1 = _leaf(sq, xa, st, b + 1, mean, m, am)
    r2 = _leaf(sq, xa, st, b + 2, mean, m, am)
    r3 = _leaf(sq, xa, st, b + 3, mean, m, am)
    r4 = _leaf(sq, xa, st, b + 4, mean, m, am)
    r5 = _leaf(sq, xa, st, b + 5, mean, m, am)
    r6 = _leaf(sq, xa, st, b + 6, mean, m, am)
    r7 = _leaf(sq, xa, st, b + 7, mean, m, am)
    i = 8
    end = n - n % 8
    while i < end:
        r0 += _leaf(sq, xa, st, b + i, mean, m, am)
        r1 += _leaf(sq, xa, st, b + i + 1, mean, m, am)
        r2 += _leaf(sq, xa, st, b + i + 2, mean, m, am)
        r3 += _leaf(sq, xa, st, b + i + 3, mean, m, am)
        r4 += _leaf(sq, xa, st, b + i + 4, mean, m, am)
        r5 += _leaf(sq, xa, st, b + i + 5, mean, m, am)
        r6 += _leaf(sq, xa, st, b + i + 6, mean, m, am)
        r7 += _leaf(sq, xa, st, b + i + 7, mean, m, am)
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += _leaf(sq, xa, st, b + i, mean, m, am)
        i += 1
    return res


@njit
def _pw(sq, xa, st, b, n, mean, m, am, stk, stv):
    """numpy's pairwise_sum of a contiguous run (n > 128 splits at n/2 rounded down to a
    multiple of 8, recursively), with an explicit stack."""
    if n <= 128:
        return _pw_leaf(sq, xa, st, b, n, mean, m, am)
    ret = cast_like(0.0, am)
    stk[0] = 0
    stk[1] = n
    stk[2] = 0
    sp = 1
    while sp > 0:
        f = 3 * (sp - 1)
        lo = stk[f]
        nn = stk[f + 1]
        ph = stk[f + 2]
        if nn <= 128:
            ret = _pw_leaf(sq, xa, st, b + lo, nn, mean, m, am)
            sp -= 1
            continue
        n2 = nn // 2
        n2 -= n2 % 8
        if ph == 0:
            stk[f + 2] = 1
            stk[f + 3] = lo
            stk[f + 4] = n2
            stk[f + 5] = 0
            sp += 1
        elif ph == 1:
            stv[sp - 1] = np.float64(ret)
            stk[f + 2] = 2
            stk[f + 3] = lo + n2
            stk[f + 4] = nn - n2
            stk[f + 5] = 0
            sp += 1
        else:
            ret = cast_like(stv[sp - 1], am) + ret
            sp -= 1
    return ret


@njit
def _var_sum(sq, xa, st, xb, sc, nr, pw, mean, m, am, stk, stv):
    """numpy's add.reduce of leaf values over one slot: 0.0, plus each innermost run's
    pairwise sum (``pw``) or each element in turn, in memory order."""
    acc = cast_like(0.0, am)
    inner_n, inner_s, n_outer = _inner(sc, nr)
    off = xb
    for t in range(n_outer):
        if pw:
            acc += _pw(sq, xa, st, off, inner_n, mean, m, am, stk, stv)
        else:
            for k in range(inner_n):
                acc += _leaf(sq, xa, st, off + k * inner_s, mean, m, am)
        off = _next_run(sc, nr, off)
    return acc


@njit
def _var_typed(x, o, o1, sc, nk, nr, pw, cnt, ddof, has_mean, stk, stv, m):
    xa = x[0]
    st = x[1]
    denom = max(np.float64(cnt) - ddof, 0.0)
    xb = 0
    ob = 0
    ob1 = 0
    for s in range(o[3]):
        sm = _var_sum(False, xa, st, xb, sc, nr, pw, m, m, m, stk, stv)
        mean = sm / cast_like(cnt, m)
        ss = _var_sum(True, xa, st, xb, sc, nr, pw, mean, m, np.float64(0), stk, stv)
        _put_f(o[0], o[1], ob, ss / denom)
        if has_mean:
            _put_f(o1[0], o1[1], ob1, np.float64(mean))
        for j in range(nk - 1, -1, -1):
            sc[W_KC + j] += 1
            xb += sc[W_KX + j]
            ob += sc[W_KO + j]
            ob1 += sc[W_KO2 + j]
            if sc[W_KC + j] < sc[W_KN + j]:
                break
            xb -= sc[W_KX + j] * sc[W_KN + j]
            ob -= sc[W_KO + j] * sc[W_KN + j]
            ob1 -= sc[W_KO2 + j] * sc[W_KN + j]
            sc[W_KC + j] = 0
    return OK


def var_kernel(block):
    x = desc(block[0])
    o = desc(block[1])
    o1 = desc(block[2])
    mask = block[3]
    keep = block[4] != 0
    ddof = bits_to_f64(block[5])
    wide = block[6] != 0
    has_mean = block[7] != 0
    sc = scratch(block[8], VAR_WORDS)
    stk = sc[W_WORDS:W_WORDS + 3 * PW_FRAMES]
    stv = carray(ptr_like(block[8] + 8 * (W_WORDS + 3 * PW_FRAMES), np.float64(0)), PW_FRAMES)
    nr, cnt, empty = _plan_reduced(x, mask, True, sc)
    # numpy sums the innermost run pairwise when the innermost non-unit memory dim is reduced
    pw = False
    for k in range(x[2] - 1, -1, -1):
        i = x[40 + k]
        if x[8 + i] != 1:
            pw = ((mask >> i) & 1) != 0
            break
    st, nk = _plan_kept(x, o, o1, mask, keep, sc)
    if st != OK:
        return st
    if wide:
        return _var_typed(x, o, o1, sc, nk, nr, pw, cnt, ddof, has_mean, stk, stv,
                          np.float64(0))
    return _var_typed(x, o, o1, sc, nk, nr, pw, cnt, ddof, has_mean, stk, stv, np.float32(0))


# ---- cumsum ------------------------------------------------------------------------------

@njit
def _lines(x, o, d, sc):
    """Lines along dim ``d``: the other dims (with x and out strides) as the kept-dims
    counter; returns (number of lines, number of counter dims)."""
    nk = 0
    lines = 1
    for i in range(x[2]):
        if i != d:
            sc[W_KN + nk] = x[8 + i]
            sc[W_KX + nk] = x[24 + i]
            sc[W_KO + nk] = o[24 + i]
            sc[W_KC + nk] = 0
            lines *= x[8 + i]
            nk += 1
    return lines, nk


@njit(inline="always")
def _next_line(sc, nk, xb, ob):
    for j in range(nk - 1, -1, -1):
        sc[W_KC + j] += 1
        xb += sc[W_KX + j]
        ob += sc[W_KO + j]
        if sc[W_KC + j] < sc[W_KN + j]:
            break
        xb -= sc[W_KX + j] * sc[W_KN + j]
        ob -= sc[W_KO + j] * sc[W_KN + j]
        sc[W_KC + j] = 0
    return xb, ob


@njit
def _cumsum_typed(x, o, d, sc, buf):
    m = buf[0]
    nd = x[2]
    n = x[8 + d] if nd > 0 else 1
    xs = x[24 + d] if nd > 0 else 0
    os_ = o[24 + d] if nd > 0 else 0
    lines, nk = _lines(x, o, d, sc)
    xb = 0
    ob = 0
    for t in range(lines):
        acc = cast_like(-0.0, m)
        c = 0
        while c < n:
            k = min(CH, n - c)
            load_run(x[0], x[1], xb + c * xs, xs, k, buf)
            for i in range(k):
                acc += buf[U(i)]
                buf[U(i)] = acc
            store_run(o[0], o[1], ob + c * os_, os_, k, buf)
            c += k
        xb, ob = _next_line(sc, nk, xb, ob)
    return OK


def cumsum_kernel(block):
    x = desc(block[0])
    o = desc(block[1])
    d = block[2]
    acc = block[3]
    sc = scratch(block[4], W_WORDS)
    bufa = block[4] + 8 * W_WORDS
    st = resize_like(o, x)
    if st != OK:
        return st
    if x[3] == 0:
        return OK
    if acc == A_F32:
        return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.float32(0)), CH))
    if acc == A_F64:
        return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.float64(0)), CH))
    return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.int64(0)), CH))


# ---- softmax / log_softmax ------------------------------------------------------------------

LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10


@njit(inline="always")
def _exp_poly(xd):
    """exp(x) for float32-precision results: a degree-8 polynomial on [-ln2/2, ln2/2]
    (relative error ~2e-10) times 2**n built from bits; branch-free, so loops vectorize.
    NaN -> NaN; below -110 (far under float32's smallest subnormal) it stays ~1e-48."""
    xc = min(max(xd, -110.0), 89.0)
    n = math.floor(xc * LOG2E + 0.5)
    r = (xc - n * LN2_HI) - n * LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (
        1.0 / 120 + r * (1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320))))))))
    e = p * bits_to_f64((np.int64(n) + 1023) << 52)
    return e if xd == xd else xd


@njit(inline="always")
def _sum_exp(buf, n):
    """sum of exp(buf[:n]) in four lanes (no serial dependency chain)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    i = 0
    while i + 4 <= n:
        s0 += _exp_poly(buf[U(i)])
        s1 += _exp_poly(buf[U(i + 1)])
        s2 += _exp_poly(buf[U(i + 2)])
        s3 += _exp_poly(buf[U(i + 3)])
        i += 4
    while i < n:
        s0 += _exp_poly(buf[U(i)])
        i += 1
    return (s0 + s1) + (s2 + s3)


@njit
def _softmax_typed(log, x, o, d, sc, buf, m):
    """Line by line: the line in float64 (exact for every float input), its max, then
    ``x - max`` rounded to the compute type ``m``, exp and sum in float64."""
    nd = x[2]
    n = x[8 + d] if nd > 0 else 1
    xs = x[24 + d] if nd > 0 else 0
    os_ = o[24 + d] if nd > 0 else 0
    lines, nk = _lines(x, o, d, sc)
    wide = x[1] == ST_F64  # float64 input: libm exp; else the float32-grade polynomial
    xb = 0
    ob = 0
    for t in range(lines):
        load_run(x[0], x[1], xb, xs, n, buf)
        mxm = cast_like(_seg_max(buf, n), m)
        for k in range(n):
            buf[U(k)] = np.float64(cast_like(buf[U(k)], m) - mxm)
        if log:
            s = 0.0
            if wide:
                for k in range(n):
                    s += math.exp(buf[U(k)])
            else:
                s = _sum_exp(buf, n)
            ls = math.log(s)
            for k in range(n):
                buf[U(k)] = buf[U(k)] - ls
        else:
            if wide:
                for k in range(n):
                    buf[U(k)] = math.exp(buf[U(k)])
            else:
                for k in range(n):
                    buf[U(k)] = _exp_poly(buf[U(k)])
            s = sum_seg(buf, 0, n)
            for k in range(n):
                buf[U(k)] = buf[U(k)] / s
        store_run(o[0], o[1], ob, os_, n, buf)
        xb, ob = _next_line(sc, nk, xb, ob)
    return OK


def softmax_kernel(block):
    log = block[0] != 0
    x = desc(block[1])
    o = desc(block[2])
    d = block[3]
    sc = scratch(block[4], W_WORDS)
    cap = block[5]
    st = resize_like(o, x)
    if st != OK:
        return st
    if x[3] == 0:
        return OK
    n = x[8 + d] if x[2] > 0 else 1
    if n <= cap:
        buf = carray(ptr_like(block[4] + 8 * W_WORDS, np.float64(0)), max(cap, 1))
    else:  # a line longer than at load (dynamic shapes): per-call scratch
        buf = np.empty(n, np.float64)
    if x[1] == ST_F64:
        return _softmax_typed(log, x, o, d, sc, buf, np.float64(0))
    return _softmax_typed(log, x, o, d, sc, buf, np.float32(0))


# ---- binders --------------------------------------------------------------------------------


def _ok(*ts):
    return all(t.scalar_type in SUPPORTED and t.ndim <= 16 for t in ts)


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _mask(dim, ndim, empty_is_all=True):
    """Bit mask of reduced dims as the reference's ``_axes`` reads ``dim``, or None where
    it raises (a dim out of range, repeated, not an int)."""
    if dim is None:
        return (1 << ndim) - 1
    if _is_int(dim):
        dim = [dim]
    if not isinstance(dim, (list, tuple)):
        return None
    if not dim:
        return (1 << ndim) - 1 if empty_is_all else 0
    n = max(ndim, 1)
    axes = []
    for d in dim:
        if not _is_int(d) or not -n <= d < n:
            return None
        axes.append(int(d) % n)
    if len(set(axes)) != len(axes):
        return None
    mask = 0
    for a in axes:
        mask |= 1 << a
    return mask if ndim else 0


def _out_ndim(ndim, mask, keep):
    return ndim if keep else ndim - bin(mask).count("1")


def _target(dtype, out):
    """The reference's ``_target``: the dtype argument (must be out's) or out's dtype."""
    if dtype is None:
        return out.dtype
    if not _is_int(dtype):
        return None
    try:
        dt = to_numpy_dtype(int(dtype))
    except Exception:  # noqa: BLE001 - an unknown ScalarType code: the reference raises
        return None
    return dt if dt == out.dtype else None


def _acc_code(dt):
    """The reference's ``_acc``: int64 for integers/bool, else the float compute type."""
    if category(dt) < 2:
        return A_I64
    return A_F64 if compute_dtype(dt) == np.float64 else A_F32


def _domain(t):
    """Comparison domain of an input: float64 for floats, int64 for integers and bool."""
    return A_F64 if t.scalar_type in FLOAT_ST else A_I64


def _has_empty_extent(t, mask):
    return t.ndim > 0 and any(t.shape[i] == 0 for i in range(t.ndim) if (mask >> i) & 1)


def _bind(ctx, op, x, out, mask, keep, acc, flags=0, out2=None):
    outs = (out,) if out2 is None else (out, out2)
    if mask is None or not _ok(x, *outs):
        return None
    nd = _out_ndim(x.ndim, mask, keep)
    if any(t.ndim != nd for t in outs):
        return None
    if flags & F_NONEMPTY and _has_empty_extent(x, mask):
        return None  # the reference raises its message
    o2 = out if out2 is None else out2
    return ctx.bind(lazy(reduce_kernel), [op, ctx.desc(x), ctx.desc(out), ctx.desc(o2), mask,
                                          int(bool(keep)), acc, ctx.buffer(RED_WORDS * 8), flags])


def _bind_sum_like(ctx, op, self, dim, keepdim, dtype, out, flags=0):
    if not _ok(self, out):
        return None
    target = _target(dtype, out)
    if target is None:
        return None
    if op == R_MEAN:
        acc = (A_F64 if compute_dtype(target) == np.float64 else A_F32) \
            if category(target) >= 2 else A_F32
    else:
        acc = _acc_code(target)
    return _bind(ctx, op, self, out, _mask(dim, self.ndim), keepdim, acc, flags)


@register_fast("aten::sum.IntList_out", fallback=True)
def bind_sum(ctx, self, dim, keepdim, dtype, out):
    return _bind_sum_like(ctx, R_SUM, self, dim, keepdim, dtype, out)


@register_fast("aten::mean.out", fallback=True)
def bind_mean(ctx, self, dim, keepdim, dtype, out):
    return _bind_sum_like(ctx, R_MEAN, self, dim, keepdim, dtype, out)


@register_fast("aten::mean.dtype_out")
def bind_mean_dtype(ctx, self, dtype, out):
    return _bind_sum_like(ctx, R_MEAN, self, None, False, dtype, out)


@register_fast("aten::prod.out")
def bind_prod(ctx, self, dtype, out):
    return _bind_sum_like(ctx, R_PROD, self, None, False, dtype, out, F_MEM)


@register_fast("aten::prod.int_out")
def bind_prod_int(ctx, self, dim, keepdim, dtype, out):
    if not _is_int(dim):
        return None
    return _bind_sum_like(ctx, R_PROD, self, [dim], keepdim, dtype, out, F_MEM)


@register_fast("aten::amax.out")
def bind_amax(ctx, self, dim, keepdim, out):
    return _bind(ctx, R_MAX, self, out, _mask(dim, self.ndim), keepdim, _domain(self), F_NONEMPTY)


@register_fast("aten::amin.out")
def bind_amin(ctx, self, dim, keepdim, out):
    return _bind(ctx, R_MIN, self, out, _mask(dim, self.ndim), keepdim, _domain(self), F_NONEMPTY)


@register_fast("aten::max.unary_out")
def bind_max_unary(ctx, self, out):
    return _bind(ctx, R_MAX, self, out, _mask(None, self.ndim), False, _domain(self), F_NONEMPTY)


@register_fast("aten::min.unary_out")
def bind_min_unary(ctx, self, out):
    return _bind(ctx, R_MIN, self, out, _mask(None, self.ndim), False, _domain(self), F_NONEMPTY)


def _bind_arg(ctx, op, self, dim, keepdim, out):
    if dim is not None and not _is_int(dim):
        return None
    return _bind(ctx, op, self, out, _mask(dim, self.ndim), keepdim, _domain(self), F_NONEMPTY)


@register_fast("aten::argmax.out")
def bind_argmax(ctx, self, dim, keepdim, out):
    return _bind_arg(ctx, R_ARGMAX, self, dim, keepdim, out)


@register_fast("aten::argmin.out")
def bind_argmin(ctx, self, dim, keepdim, out):
    return _bind_arg(ctx, R_ARGMIN, self, dim, keepdim, out)


def _bind_dim_extreme(ctx, op, self, dim, keepdim, values, indices):
    if not _is_int(dim):
        return None
    return _bind(ctx, op, self, values, _mask(dim, self.ndim), keepdim, _domain(self),
                 F_NONEMPTY, indices)


@register_fast("aten::max.dim_max")
def bind_max_dim(ctx, self, dim, keepdim, max, max_values):  # noqa: A002 (schema names)
    return _bind_dim_extreme(ctx, R_MAXDIM, self, dim, keepdim, max, max_values)


@register_fast("aten::min.dim_min")
def bind_min_dim(ctx, self, dim, keepdim, min, min_indices):  # noqa: A002 (schema names)
    return _bind_dim_extreme(ctx, R_MINDIM, self, dim, keepdim, min, min_indices)


@register_fast("aten::any.all_out", fallback=True)
def bind_any_all(ctx, self, out):
    return _bind(ctx, R_ANY, self, out, _mask(None, self.ndim), False, _domain(self))


@register_fast("aten::any.dims_out")
def bind_any_dims(ctx, self, dim, keepdim, out):
    # unlike sum, an empty dim list reduces nothing
    return _bind(ctx, R_ANY, self, out, _mask(dim, self.ndim, empty_is_all=False), keepdim,
                 _domain(self))


@register_fast("aten::any.out", fallback=True)
def bind_any(ctx, self, dim, keepdim, out):
    if not _is_int(dim):
        return None
    return _bind(ctx, R_ANY, self, out, _mask([dim], self.ndim), keepdim, _domain(self))


def _bind_var(ctx, self, dim, ddof, keepdim, out, out1=None):
    outs = (out,) if out1 is None else (out, out1)
    if not _ok(self, *outs) or self.scalar_type not in FLOAT_ST:
        return None  # the reference refuses non-float inputs
    if isinstance(ddof, bool) or not isinstance(ddof, (int, float, np.integer, np.floating)):
        return None
    mask = _mask(dim, self.ndim)
    if mask is None:
        return None
    nd = _out_ndim(self.ndim, mask, keepdim)
    if any(t.ndim != nd for t in outs):
        return None
    o1 = out if out1 is None else out1
    return ctx.bind(lazy(var_kernel), [ctx.desc(self), ctx.desc(out), ctx.desc(o1), mask,
                                       int(bool(keepdim)), ctx.f64(ddof),
                                       int(self.scalar_type == ST_F64), int(out1 is not None),
                                       ctx.buffer(VAR_WORDS * 8)])


@register_fast("aten::var.correction_out")
def bind_var_correction(ctx, self, dim, correction, keepdim, out):
    return _bind_var(ctx, self, dim, 1 if correction is None else correction, keepdim, out)


@register_fast("aten::var.out")
def bind_var(ctx, self, dim, unbiased, keepdim, out):
    return _bind_var(ctx, self, dim, 1 if unbiased else 0, keepdim, out)


@register_fast("aten::var_mean.correction_out")
def bind_var_mean(ctx, self, dim, correction, keepdim, out0, out1):
    return _bind_var(ctx, self, dim, 1 if correction is None else correction, keepdim, out0,
                     out1)


@register_fast("aten::cumsum.out")
def bind_cumsum(ctx, self, dim, dtype, out):
    if not _ok(self, out) or not _is_int(dim) or out.ndim != self.ndim:
        return None
    n = max(self.ndim, 1)
    if not -n <= dim < n:
        return None
    target = _target(dtype, out)
    if target is None:
        return None
    return ctx.bind(lazy(cumsum_kernel), [ctx.desc(self), ctx.desc(out), int(dim) % n,
                                          _acc_code(target), ctx.buffer(RED_WORDS * 8)])


def _bind_softmax(ctx, log, self, dim, out):
    # half_to_float is ignored, as by the reference (it writes in out's dtype)
    if not _ok(self, out) or self.scalar_type not in FLOAT_ST or out.ndim != self.ndim:
        return None  # non-float input: the reference raises
    n = max(self.ndim, 1)
    if not _is_int(dim) or not -n <= dim < n:
        return None
    dim = int(dim) % n
    cap = self.shape[dim] if self.ndim else 1
    return ctx.bind(lazy(softmax_kernel), [int(log), ctx.desc(self), ctx.desc(out), dim,
                                           ctx.buffer((W_WORDS + cap) * 8), cap])


@register_fast("aten::_softmax.out", fallback=True)
def bind_softmax(ctx, self, dim, half_to_float, out):
    return _bind_softmax(ctx, False, self, dim, out)


@register_fast("aten::_log_softmax.out", fallback=True)
def bind_log_softmax(ctx, self, dim, half_to_float, out):
    return _bind_softmax(ctx, True, self, dim, out)
