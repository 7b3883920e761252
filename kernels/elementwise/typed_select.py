"""Compiled predicates, selection and fills: the small ops of a KV-cache decode step.

* ``logical_not.out`` and ``eq/ne/lt/le/gt/ge.Scalar_out`` (one predicate
  kernel): bool/uint8/int32/int64/float32/float64 input, bool out, contiguous.
  A comparison scalar is rounded to the tensor's dtype at bind time, as ATen
  promotes (float tensor vs Python number compares in the tensor's dtype);
  integer tensors take only integer scalars in their dtype's range.
* ``any.out`` (one dim, keepdim or not) and ``any.all_out``: bool/uint8 in,
  bool out, contiguous.
* ``where.self_out``: bool/uint8 condition, self/other/out of one dtype
  (float32/float64/int32/int64), N-d broadcasting over descriptor strides.
* ``full_like.out`` and ``scalar_tensor.out``: fill ``out`` with a constant.
* ``index_put.out``: leading (and trailing) Nones then one int64/int32 1-d
  index tensor selecting along dim ``k``; ``values`` broadcast to the indexed
  shape; accumulate=False only. ``out`` = ``self`` with the rows replaced
  (the copy is skipped when ``out`` shares ``self``'s data pointer).
Everything else stays on the reference kernels.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.broadcast import bcast_dim, bcast_size
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_BOOL, ST_F32, ST_F64,
                             ST_I32, ST_I64, ST_U8, bits_to_f64, desc, descs, flat, is_contiguous,
                             lazy, ptr_like, resize_like, resize_to)
from pyruntime.kernels.fast.nb import scratch

BOOL = np.dtype(np.bool_)
U8 = np.dtype(np.uint8)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
FLOATS = (F32, F64)
INTS = (I32, I64)
PRED_IN = (BOOL, U8, I32, I64, F32, F64)

# ---- predicates: logical_not and scalar comparisons ------------------------------------
P_NOT, P_EQ, P_NE, P_LT, P_LE, P_GT, P_GE = range(7)


@njit(inline="always")
def _cmp(op, x, s):
    if op == P_NOT:
        return x == 0
    if op == P_EQ:
        return x == s
    if op == P_NE:
        return x != s
    if op == P_LT:
        return x < s
    if op == P_LE:
        return x <= s
    if op == P_GT:
        return x > s
    return x >= s


@njit(inline="always")
def _pred_loop(op, x, z, n, s):
    for i in range(n):
        z[i] = np.uint8(1) if _cmp(op, x[i], s) else np.uint8(0)


@njit(inline="always")
def _pred_typed(op, a, o, s, m):
    st = resize_like(o, a)
    if st != OK:
        return st
    if not (is_contiguous(a) and is_contiguous(o)):
        return NOT_SUPPORTED
    x = flat(a, m)
    z = flat(o, np.uint8(0))
    n = o[D_NUMEL]
    # one loop per predicate, its op a constant, so that each vectorizes (a test of ``op``
    # per element kept the loop scalar: 3 ns an element)
    if op == P_NOT:
        _pred_loop(P_NOT, x, z, n, s)
    elif op == P_EQ:
        _pred_loop(P_EQ, x, z, n, s)
    elif op == P_NE:
        _pred_loop(P_NE, x, z, n, s)
    elif op == P_LT:
        _pred_loop(P_LT, x, z, n, s)
    elif op == P_LE:
        _pred_loop(P_LE, x, z, n, s)
    elif op == P_GT:
        _pred_loop(P_GT, x, z, n, s)
    else:
        _pred_loop(P_GE, x, z, n, s)
    return OK


def pred_kernel(block):
    op = block[0]
    a, o = descs(block, 1, 2)
    si = block[3]
    sf = bits_to_f64(block[4])
    if o[D_DTYPE] != ST_BOOL:
        return NOT_SUPPORTED
    dt = a[D_DTYPE]
    if dt == ST_F32:
        return _pred_typed(op, a, o, np.float32(sf), np.float32(0))
    if dt == ST_F64:
        return _pred_typed(op, a, o, sf, np.float64(0))
    if dt == ST_I64:
        return _pred_typed(op, a, o, si, np.int64(0))
    if dt == ST_I32:
        return _pred_typed(op, a, o, si, np.int32(0))
    if dt == ST_BOOL or dt == ST_U8:
        return _pred_typed(op, a, o, si, np.uint8(0))
    return NOT_SUPPORTED


def _bind_pred(ctx, op, a, out, s=0):
    if a.dtype not in PRED_IN or out.dtype != BOOL or not a.is_contiguous() \
            or not out.is_contiguous() or a.ndim != out.ndim:
        return None
    si, sf = 0, 0.0
    if op != P_NOT:
        if isinstance(s, bool):
            s = int(s)
        if not isinstance(s, (int, float)):
            return None
        if a.dtype in FLOATS:
            try:
                with np.errstate(all="ignore"):  # compared in the tensor's dtype, as ATen promotes
                    sf = float(a.dtype.type(s))
            except OverflowError:
                return None
        elif isinstance(s, int):
            # bool tensors compare as int64; integer tensors in their own dtype, so only
            # scalars that dtype holds exactly (ATen would wrap the others)
            info = np.iinfo(I64 if a.dtype == BOOL else a.dtype)
            if not info.min <= s <= info.max:
                return None
            si = s
        else:
            return None  # float scalar vs integral tensor: compared in float32 by ATen
    return ctx.bind(lazy(pred_kernel), [op, ctx.desc(a), ctx.desc(out), si, ctx.f64(sf)])


def bind_logical_not(ctx, self, out):
    return _bind_pred(ctx, P_NOT, self, out)


def _cmp_binder(op):
    def bind(ctx, self, other, out):
        return _bind_pred(ctx, op, self, out, other)
    return bind


# op -> binder (registered with the generic binder behind it by elementwise/choose.py)
COMPARE = {f"aten::{_name}.Scalar_out": _cmp_binder(_op) for _name, _op in (
    ("eq", P_EQ), ("ne", P_NE), ("lt", P_LT), ("le", P_LE), ("gt", P_GT), ("ge", P_GE))}


# ---- any ------------------------------------------------------------------------------

def any_kernel(block):
    a, o = descs(block, 0, 2)
    d = block[2]  # reduced dim, or -1 for all
    keep = block[3]
    w = scratch(block[4], 16)
    nd = a[D_NDIM]
    outer = 1
    n = 1
    inner = 1
    ond = 0
    if d < 0:
        n = a[D_NUMEL]
    else:
        for i in range(nd):
            s = a[D_SIZES + i]
            if i < d:
                outer *= s
            elif i == d:
                n = s
            else:
                inner *= s
            if i != d:
                w[ond] = s
                ond += 1
            elif keep != 0:
                w[ond] = 1
                ond += 1
    st = resize_to(o, w, ond)
    if st != OK:
        return st
    if not (is_contiguous(a) and is_contiguous(o)):
        return NOT_SUPPORTED
    x = flat(a, np.uint8(0))
    z = flat(o, np.uint8(0))
    for p in range(outer):
        for q in range(inner):
            r = np.uint8(0)
            base = p * n * inner + q
            for k in range(n):
                if x[base + k * inner] != 0:
                    r = np.uint8(1)
                    break
            z[p * inner + q] = r
    return OK


def _bind_any(ctx, a, out, d, keep):
    if a.dtype not in (BOOL, U8) or out.dtype != BOOL or not a.is_contiguous() \
            or not out.is_contiguous():
        return None
    return ctx.bind(lazy(any_kernel), [ctx.desc(a), ctx.desc(out), d, int(keep),
                                       ctx.buffer(16 * 8)])


def bind_any(ctx, self, dim, keepdim, out):
    n = self.ndim
    if n == 0 or isinstance(dim, bool) or not isinstance(dim, int) or not -n <= dim < n \
            or not isinstance(keepdim, bool) or out.ndim != (n if keepdim else n - 1):
        return None
    return _bind_any(ctx, self, out, dim % n, keepdim)


def bind_any_all(ctx, self, out):
    if out.ndim != 0:
        return None
    return _bind_any(ctx, self, out, -1, False)


# ---- where ----------------------------------------------------------------------------
# scratch words: 0..15 out sizes, 16.. cond strides, 32.. self strides, 48.. other strides,
# 64.. counter
W_WORDS = 80


@njit(inline="always")
def _where_typed(c, a, b, o, w, m):
    nd = o[D_NDIM]
    nc, na, nb = c[D_NDIM], a[D_NDIM], b[D_NDIM]
    if nc > nd or na > nd or nb > nd:
        return INVALID_ARGUMENT
    for i in range(nd):
        dc, w[16 + i] = bcast_dim(c, i, nd)
        da, w[32 + i] = bcast_dim(a, i, nd)
        db, w[48 + i] = bcast_dim(b, i, nd)
        s = bcast_size(bcast_size(dc, da), db)
        if s < 0:
            return INVALID_ARGUMENT
        w[i] = s
        w[64 + i] = 0
    st = resize_to(o, w, nd)
    if st != OK:
        return st
    n = o[D_NUMEL]
    if n == 0:
        return OK
    cx = flat(c, np.uint8(0))
    x = flat(a, m)
    y = flat(b, m)
    z = flat(o, m)
    if is_contiguous(o) and c[D_NUMEL] == n and a[D_NUMEL] == n and b[D_NUMEL] == n \
            and is_contiguous(c) and is_contiguous(a) and is_contiguous(b):
        for i in range(n):
            z[i] = x[i] if cx[i] != 0 else y[i]
        return OK
    if nd == 0:
        z[0] = x[0] if cx[0] != 0 else y[0]
        return OK
    last = nd - 1
    ln = w[last]
    lc, la, lb, lo = w[16 + last], w[32 + last], w[48 + last], o[D_STRIDES + last]
    pc = 0
    pa = 0
    pb = 0
    po = 0
    # contiguous rows of self, other and out (a condition broadcast along them, as the
    # masked softmax of an attention has, or contiguous too): loops that vectorize
    rows = la == 1 and lb == 1 and lo == 1 and (lc == 0 or lc == 1)
    cp, xp, yp, zp = ptr_like(c[D_DATA], np.uint8(0)), ptr_like(a[D_DATA], m), \
        ptr_like(b[D_DATA], m), ptr_like(o[D_DATA], m)
    for r in range(n // ln):
        if rows and lc == 0:
            if cp[pc] != 0:
                for j in range(ln):
                    zp[po + j] = xp[pa + j]
            else:
                for j in range(ln):
                    zp[po + j] = yp[pb + j]
        elif rows:
            for j in range(ln):
                zp[po + j] = xp[pa + j] if cp[pc + j] != 0 else yp[pb + j]
        else:
            for j in range(ln):
                z[po + j * lo] = x[pa + j * la] if cx[pc + j * lc] != 0 else y[pb + j * lb]
        # advance the counter over dims 0..nd-2
        for i in range(last - 1, -1, -1):
            w[64 + i] += 1
            pc += w[16 + i]
            pa += w[32 + i]
            pb += w[48 + i]
            po += o[D_STRIDES + i]
            if w[64 + i] < w[i]:
                break
            pc -= w[16 + i] * w[i]
            pa -= w[32 + i] * w[i]
            pb -= w[48 + i] * w[i]
            po -= o[D_STRIDES + i] * w[i]
            w[64 + i] = 0
    return OK


def where_kernel(block):
    c, a, b, o = descs(block, 0, 4)
    w = scratch(block[4], W_WORDS)
    dt = o[D_DTYPE]
    if dt == ST_F32:
        return _where_typed(c, a, b, o, w, np.float32(0))
    if dt == ST_F64:
        return _where_typed(c, a, b, o, w, np.float64(0))
    if dt == ST_I64:
        return _where_typed(c, a, b, o, w, np.int64(0))
    if dt == ST_I32:
        return _where_typed(c, a, b, o, w, np.int32(0))
    return NOT_SUPPORTED


def bind_where(ctx, condition, self, other, out):
    dt = out.dtype
    if condition.dtype not in (BOOL, U8) or dt not in FLOATS + INTS or self.dtype != dt \
            or other.dtype != dt or out.ndim < max(condition.ndim, self.ndim, other.ndim):
        return None
    return ctx.bind(lazy(where_kernel), [ctx.desc(condition), ctx.desc(self), ctx.desc(other),
                                         ctx.desc(out), ctx.buffer(W_WORDS * 8)])


# ---- fills: full_like, scalar_tensor ---------------------------------------------------

@njit(inline="always")
def _fill_typed(o, v, m):
    z = flat(o, m)
    for i in range(o[D_NUMEL]):
        z[i] = v
    return OK


def fill_kernel(block):
    src = block[0]
    o = desc(block[1])
    vi = block[2]
    vf = bits_to_f64(block[3])
    if src != 0:
        st = resize_like(o, desc(src))
        if st != OK:
            return st
    elif o[D_NDIM] != 0:
        return NOT_SUPPORTED
    dt = o[D_DTYPE]
    if dt == ST_F32:
        return _fill_typed(o, np.float32(vf), np.float32(0))
    if dt == ST_F64:
        return _fill_typed(o, vf, np.float64(0))
    if dt == ST_I64:
        return _fill_typed(o, vi, np.int64(0))
    if dt == ST_I32:
        return _fill_typed(o, np.int32(vi), np.int32(0))
    if dt == ST_BOOL or dt == ST_U8:
        return _fill_typed(o, np.uint8(vi), np.uint8(0))
    return NOT_SUPPORTED


def _bind_fill(ctx, src, out, value):
    dt = out.dtype
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, (int, float)):
        return None
    vi, vf = 0, 0.0
    if dt in FLOATS:
        vf = float(value)
        if math.isfinite(vf) and abs(vf) > float(np.finfo(dt).max):
            return None  # overflow to inf: leave the exact behaviour to the reference kernel
    elif dt == BOOL:
        vi = int(value != 0)
    elif dt in INTS + (U8,) and isinstance(value, int):
        info = np.iinfo(dt)
        if not info.min <= value <= info.max:
            return None
        vi = value
    else:
        return None
    return ctx.bind(lazy(fill_kernel), [0 if src is None else ctx.desc(src), ctx.desc(out),
                                        vi, ctx.f64(vf)])


def bind_full_like(ctx, self, fill_value, memory_format, out):
    # memory_format only picks out's dim order, fixed at export; a fill writes every
    # element of out's dense storage whatever its dim order.
    if self.ndim != out.ndim:
        return None
    return _bind_fill(ctx, self, out, fill_value)


def bind_scalar_tensor(ctx, s, out):
    if out.ndim != 0:
        return None
    return _bind_fill(ctx, None, out, s)


# ---- index_put (accumulate=False, one index tensor on one dim) ---------------------------
# scratch words: 0..15 values strides over the indexed shape, 16..31 counter

@njit(inline="always")
def _put_typed(x, ix, v, o, k, w, m):
    nd = x[D_NDIM]
    nv = v[D_NDIM]
    n = x[D_SIZES + k]
    cnt = ix[D_NUMEL]
    i64 = ptr_like(ix[D_DATA], np.int64(0))
    i32 = ptr_like(ix[D_DATA], np.int32(0))
    wide = ix[D_DTYPE] == ST_I64
    for j in range(cnt):  # validate every index before writing anything
        r = i64[j] if wide else np.int64(i32[j])
        if r < -n or r >= n:
            return INVALID_ARGUMENT
    # values broadcast to the indexed shape: x's sizes with dim k replaced by cnt
    if nv > nd:
        return INVALID_ARGUMENT
    for i in range(nd):
        dv, w[i] = bcast_dim(v, i, nd)
        if dv != 1 and dv != (cnt if i == k else x[D_SIZES + i]):
            return INVALID_ARGUMENT
    st = resize_like(o, x)
    if st != OK:
        return st
    xs = flat(x, m)
    vs = flat(v, m)
    z = flat(o, m)
    total = x[D_NUMEL]
    if o[D_DATA] != x[D_DATA]:
        for i in range(total):
            z[i] = xs[i]
    if total == 0 or cnt == 0:
        return OK
    outer = 1
    for i in range(k):
        outer *= x[D_SIZES + i]
    inner = 1
    for i in range(k + 1, nd):
        inner *= x[D_SIZES + i]
    # how the trailing (inner) dims of values are laid out
    full = True  # values' inner dims are dense and unbroadcast
    zero = True  # every inner dim broadcast
    s = 1
    for i in range(nd - 1, k, -1):
        if x[D_SIZES + i] != 1:
            if w[i] != s:
                full = False
            if w[i] != 0:
                zero = False
        s *= x[D_SIZES + i]
    for i in range(nd):
        w[16 + i] = 0
    pv_outer = 0  # values offset of the outer multi-index
    for p in range(outer):
        for j in range(cnt):
            r = i64[j] if wide else np.int64(i32[j])
            if r < 0:
                r += n
            dst = (p * n + r) * inner
            src = pv_outer + j * w[k]
            if full:
                for q in range(inner):
                    z[dst + q] = vs[src + q]
            elif zero:
                val = vs[src]
                for q in range(inner):
                    z[dst + q] = val
            else:
                for q in range(inner):
                    rem = q
                    off = src
                    for i in range(nd - 1, k, -1):
                        sz = x[D_SIZES + i]
                        off += (rem % sz) * w[i]
                        rem //= sz
                    z[dst + q] = vs[off]
        # advance the outer counter over dims 0..k-1
        for i in range(k - 1, -1, -1):
            w[16 + i] += 1
            pv_outer += w[i]
            if w[16 + i] < x[D_SIZES + i]:
                break
            pv_outer -= w[i] * x[D_SIZES + i]
            w[16 + i] = 0
    return OK


def index_put_kernel(block):
    x, ix, v, o = descs(block, 0, 4)
    k = block[4]
    es = block[5]
    w = scratch(block[6], 32)
    if not (is_contiguous(x) and is_contiguous(o)):
        return NOT_SUPPORTED
    if es == 4:
        return _put_typed(x, ix, v, o, k, w, np.int32(0))
    if es == 8:
        return _put_typed(x, ix, v, o, k, w, np.int64(0))
    if es == 1:
        return _put_typed(x, ix, v, o, k, w, np.uint8(0))
    if es == 2:
        return _put_typed(x, ix, v, o, k, w, np.int16(0))
    return NOT_SUPPORTED


def bind_index_put(ctx, self, indices, values, accumulate, out):
    if accumulate is not False or self.ndim == 0 or not isinstance(indices, (list, tuple)):
        return None
    pos = [i for i, t in enumerate(indices) if t is not None]
    if len(pos) != 1 or len(indices) > self.ndim:
        return None
    k = pos[0]
    idx = indices[k]
    dt = self.dtype
    # values of the same dtype only: bits are copied, never converted
    if idx.dtype not in (I64, I32) or idx.ndim != 1 or not idx.is_contiguous() \
            or values.dtype != dt or out.dtype != dt or dt.itemsize not in (1, 2, 4, 8) \
            or out.ndim != self.ndim or not self.is_contiguous() or not out.is_contiguous() \
            or values.ndim > self.ndim:
        return None
    return ctx.bind(lazy(index_put_kernel), [ctx.desc(self), ctx.desc(idx), ctx.desc(values),
                                             ctx.desc(out), k, dt.itemsize,
                                             ctx.buffer(32 * 8)])
