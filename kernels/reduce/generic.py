"""Compiled reductions for every dtype (``reduce_kernel``), and the overview of the
reduction family (``var.py``, ``cumsum.py``, ``softmax.py``; element access and chunked
runs in ``reduce_io.py``) over bool, integers, half floats and float32/64.

Generic kernels over the descriptor ABI: the element type is dispatched at run
time, once per chunk of up to 256 elements converted into a typed buffer
(``load_run``/``store_run``); the accumulation type is fixed at bind time from
the reference kernel's rules (``kernels/reduce/reference.py``):

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

import numpy as np

from pyruntime.cython_ext.abi import (D_DATA, D_DTYPE, D_NDIM,
                                      D_NUMEL, D_SIZES, D_STRIDES, D_DIMORDER)
from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.fast.reduce_io import (A_F32, A_F64, A_I64, CH, FLOAT_ST, F_MEM, F_NONEMPTY,
                                            RED_WORDS, R_ANY, R_ARGMAX, R_ARGMIN, R_MAX, R_MAXDIM,
                                            R_MEAN, R_MIN, R_MINDIM, R_PROD, R_SUM, SUPPORTED, U,
                                            W_KC, W_KN, W_KO, W_KO2, W_KX, W_OSZ, W_RC, W_RN, W_RX,
                                            W_WORDS, advance_kept, st_acc)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, cast_like, descs, lazy, ptr_like,
                                       resize_both, scratch, store_i64_call)
from pyruntime.kernels.fast.runs import load_run
from pyruntime.kernels.reduce.typed import dims_mask
from pyruntime.kernels.promote import category, compute_dtype


# ---- planning: out sizes, kept dims, reduced dims ------------------------------------------

@njit(inline="always")
def plan_reduced(x, mask, mem, sc):
    """Reduced dims of size != 1 in visiting order (logical, or x's memory order when ``mem``),
    neighbours merged where their strides chain (the order is unchanged).
    Returns (number of entries, element count, some reduced dim is empty)."""
    nd = x[D_NDIM]
    nr = 0
    cnt = 1
    empty = False
    for k in range(nd):
        i = x[D_DIMORDER + k] if mem else k
        if (mask >> i) & 1:
            s = x[D_SIZES + i]
            cnt *= s
            if s == 0:
                empty = True
            if s == 1:
                continue
            sd = x[D_STRIDES + i]
            if nr > 0 and sc[W_RX + nr - 1] == s * sd:
                sc[W_RN + nr - 1] *= s
                sc[W_RX + nr - 1] = sd
            else:
                sc[W_RN + nr] = s
                sc[W_RX + nr] = sd
                nr += 1
    return nr, cnt, empty


@njit(inline="always")
def plan_kept(x, o, o2, mask, keep, sc):
    """Resize the out(s) to the reduced shape; kept dims with x and out strides.
    Returns (status, number of kept dims)."""
    nd = x[D_NDIM]
    nk = 0
    ond = 0
    for i in range(nd):
        if (mask >> i) & 1:
            if keep:
                sc[W_OSZ + ond] = 1
                ond += 1
        else:
            sc[W_OSZ + ond] = x[D_SIZES + i]
            sc[W_KN + nk] = x[D_SIZES + i]
            sc[W_KX + nk] = x[D_STRIDES + i]
            sc[W_KO + nk] = ond
            nk += 1
            ond += 1
    st = resize_both(o, o2, sc[W_OSZ:W_OSZ + 16], ond)
    if st != OK:
        return st, nk
    for j in range(nk):
        od = sc[W_KO + j]
        sc[W_KO + j] = o[D_STRIDES + od]
        sc[W_KO2 + j] = o2[D_STRIDES + od]
        sc[W_KC + j] = 0
    return OK, nk


@njit(inline="always")
def inner_run(sc, nr):
    """(innermost reduced run length, its stride, number of runs); resets the counter."""
    if nr == 0:
        return 1, 0, 1
    n_outer = 1
    for j in range(nr - 1):
        n_outer *= sc[W_RN + j]
        sc[W_RC + j] = 0
    return sc[W_RN + nr - 1], sc[W_RX + nr - 1], n_outer


@njit(inline="always")
def next_run(sc, nr, off):
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
def _pick(a, v, want_max):
    return max(a, v) if want_max else min(a, v)


@njit(inline="always")
def seg_extreme(buf, n, want_max):
    """max (``want_max``) or min of buf[:n] (n >= 1), NaN if any is NaN. Four lanes of the
    builtin max/min (a select: vectorizes, but lets NaN through), plus v * 0 sums that turn
    NaN on a NaN (or an inf): then an exact look for a NaN. Callers pass ``want_max`` as a
    constant: inlined, the choice folds away."""
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
        a0 = _pick(a0, v0, want_max)
        a1 = _pick(a1, v1, want_max)
        a2 = _pick(a2, v2, want_max)
        a3 = _pick(a3, v3, want_max)
        z0 += v0 * 0
        z1 += v1 * 0
        z2 += v2 * 0
        z3 += v3 * 0
        i += 4
    while i < n:
        v0 = buf[U(i)]
        a0 = _pick(a0, v0, want_max)
        z0 += v0 * 0
        i += 1
    r = _pick(_pick(a0, a1, want_max), _pick(a2, a3, want_max), want_max)
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
    inner_n, inner_s, n_outer = inner_run(sc, nr)
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
            load_run(buf, 0, xa, st, off + c * inner_s, inner_s, n)
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
                cm = seg_extreme(buf, n, True) if mx else seg_extreme(buf, n, False)
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
        off = next_run(sc, nr, off)
    return acc, idx


@njit
def _reduce_typed(op, x, o, o2, sc, nk, nr, cnt, buf):
    m = buf[0]
    xa = x[D_DATA]
    st = x[D_DTYPE]
    oa = o[D_DATA]
    ost = o[D_DTYPE]
    xb = 0
    ob = 0
    ob2 = 0
    for s in range(o[D_NUMEL]):
        v, idx = _slot(op, xa, st, xb, sc, nr, cnt, buf)
        if op == R_MEAN:
            st_acc(oa, ost, ob, v / cast_like(cnt, m))
        elif op == R_ANY:
            store_i64_call(oa, ost, ob, np.int64(1) if idx >= 0 else np.int64(0))
        elif op == R_ARGMAX or op == R_ARGMIN:
            store_i64_call(oa, ost, ob, idx)
        else:
            st_acc(oa, ost, ob, v)
            if op == R_MAXDIM or op == R_MINDIM:
                store_i64_call(o2[D_DATA], o2[D_DTYPE], ob2, idx)
        xb, ob, ob2 = advance_kept(sc, nk, xb, ob, ob2)
    return OK


def reduce_kernel(block):
    op = block[0]
    x, o, o2 = descs(block, 1, 3)
    mask = block[4]
    keep = block[5] != 0
    acc = block[6]
    sc = scratch(block[7], W_WORDS)
    bufa = block[7] + 8 * W_WORDS
    flags = block[8]
    nr, cnt, empty = plan_reduced(x, mask, (flags & F_MEM) != 0, sc)
    if empty and (flags & F_NONEMPTY) != 0 and x[D_NDIM] > 0:
        return INVALID_ARGUMENT
    st, nk = plan_kept(x, o, o2, mask, keep, sc)
    if st != OK:
        return st
    if acc == A_F32:
        return _reduce_typed(op, x, o, o2, sc, nk, nr, cnt,
                             carray(ptr_like(bufa, np.float32(0)), CH))
    if acc == A_F64:
        return _reduce_typed(op, x, o, o2, sc, nk, nr, cnt,
                             carray(ptr_like(bufa, np.float64(0)), CH))
    return _reduce_typed(op, x, o, o2, sc, nk, nr, cnt, carray(ptr_like(bufa, np.int64(0)), CH))


# ---- binders --------------------------------------------------------------------------------


def ok(*ts):
    return all(t.scalar_type in SUPPORTED and t.ndim <= 16 for t in ts)


def is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def reduced_mask(dim, ndim, empty_is_all=True):
    """Bit mask of reduced dims as the reference's ``_axes`` reads ``dim``, or None where
    it raises (a dim out of range, repeated, not an int)."""
    if dim is None:
        return (1 << ndim) - 1
    if is_int(dim):
        dim = [dim]
    if not isinstance(dim, (list, tuple)):
        return None
    if not dim:
        return (1 << ndim) - 1 if empty_is_all else 0
    mask = dims_mask(dim, max(ndim, 1))
    if mask is None:
        return None
    return mask if ndim else 0


def out_ndim(ndim, mask, keep):
    return ndim if keep else ndim - bin(mask).count("1")


def target_dtype(dtype, out):
    """The reference's ``target_dtype``: the dtype argument (must be out's) or out's dtype."""
    if dtype is None:
        return out.dtype
    if not is_int(dtype):
        return None
    try:
        dt = to_numpy_dtype(int(dtype))
    except Exception:  # noqa: BLE001 - an unknown ScalarType code: the reference raises
        return None
    return dt if dt == out.dtype else None


def acc_code(dt):
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
    if mask is None or not ok(x, *outs):
        return None
    nd = out_ndim(x.ndim, mask, keep)
    if any(t.ndim != nd for t in outs):
        return None
    if flags & F_NONEMPTY and _has_empty_extent(x, mask):
        return None  # the reference raises its message
    o2 = out if out2 is None else out2
    return ctx.bind(lazy(reduce_kernel), [op, ctx.desc(x), ctx.desc(out), ctx.desc(o2), mask,
                                          int(bool(keep)), acc, ctx.buffer(RED_WORDS * 8), flags])


def _bind_sum_like(ctx, op, self, dim, keepdim, dtype, out, flags=0):
    if not ok(self, out):
        return None
    target = target_dtype(dtype, out)
    if target is None:
        return None
    if op == R_MEAN:
        acc = (A_F64 if compute_dtype(target) == np.float64 else A_F32) \
            if category(target) >= 2 else A_F32
    else:
        acc = acc_code(target)
    return _bind(ctx, op, self, out, reduced_mask(dim, self.ndim), keepdim, acc, flags)


def bind_sum(ctx, self, dim, keepdim, dtype, out):
    return _bind_sum_like(ctx, R_SUM, self, dim, keepdim, dtype, out)


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
    if not is_int(dim):
        return None
    return _bind_sum_like(ctx, R_PROD, self, [dim], keepdim, dtype, out, F_MEM)


@register_fast("aten::amax.out")
def bind_amax(ctx, self, dim, keepdim, out):
    return _bind(ctx, R_MAX, self, out, reduced_mask(dim, self.ndim), keepdim, _domain(self),
                 F_NONEMPTY)


@register_fast("aten::amin.out")
def bind_amin(ctx, self, dim, keepdim, out):
    return _bind(ctx, R_MIN, self, out, reduced_mask(dim, self.ndim), keepdim, _domain(self),
                 F_NONEMPTY)


@register_fast("aten::max.unary_out")
def bind_max_unary(ctx, self, out):
    return _bind(ctx, R_MAX, self, out, reduced_mask(None, self.ndim), False, _domain(self),
                 F_NONEMPTY)


@register_fast("aten::min.unary_out")
def bind_min_unary(ctx, self, out):
    return _bind(ctx, R_MIN, self, out, reduced_mask(None, self.ndim), False, _domain(self),
                 F_NONEMPTY)


def _bind_arg(ctx, op, self, dim, keepdim, out):
    if dim is not None and not is_int(dim):
        return None
    return _bind(ctx, op, self, out, reduced_mask(dim, self.ndim), keepdim, _domain(self),
                 F_NONEMPTY)


@register_fast("aten::argmax.out")
def bind_argmax(ctx, self, dim, keepdim, out):
    return _bind_arg(ctx, R_ARGMAX, self, dim, keepdim, out)


@register_fast("aten::argmin.out")
def bind_argmin(ctx, self, dim, keepdim, out):
    return _bind_arg(ctx, R_ARGMIN, self, dim, keepdim, out)


def _bind_dim_extreme(ctx, op, self, dim, keepdim, values, indices):
    if not is_int(dim):
        return None
    return _bind(ctx, op, self, values, reduced_mask(dim, self.ndim), keepdim, _domain(self),
                 F_NONEMPTY, indices)


@register_fast("aten::max.dim_max")
def bind_max_dim(ctx, self, dim, keepdim, max, max_values):  # noqa: A002 (schema names)
    return _bind_dim_extreme(ctx, R_MAXDIM, self, dim, keepdim, max, max_values)


@register_fast("aten::min.dim_min")
def bind_min_dim(ctx, self, dim, keepdim, min, min_indices):  # noqa: A002 (schema names)
    return _bind_dim_extreme(ctx, R_MINDIM, self, dim, keepdim, min, min_indices)


def bind_any_all(ctx, self, out):
    return _bind(ctx, R_ANY, self, out, reduced_mask(None, self.ndim), False, _domain(self))


@register_fast("aten::any.dims_out")
def bind_any_dims(ctx, self, dim, keepdim, out):
    # unlike sum, an empty dim list reduces nothing
    return _bind(ctx, R_ANY, self, out, reduced_mask(dim, self.ndim, empty_is_all=False), keepdim,
                 _domain(self))


def bind_any(ctx, self, dim, keepdim, out):
    if not is_int(dim):
        return None
    return _bind(ctx, R_ANY, self, out, reduced_mask([dim], self.ndim), keepdim, _domain(self))
