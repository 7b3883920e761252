"""Data movement, part 2: the iteration space (sizes, strides, segments) of each op.
"""
from __future__ import annotations


from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.copy_engine import W_OUT, clamp_bound, expand_view, view_sizes
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.move_copy import (NSEG, OP_BCAST, OP_COPY, OP_COPY_INTO, OP_CPAD,
                                              OP_DIAG, OP_EXPAND, OP_FLIP, OP_NARROW, OP_PERMUTE,
                                              OP_PSHUF, OP_PUNSHUF, OP_REAL, OP_REFLECT, OP_REPEAT,
                                              OP_REPLICATE, OP_ROLL, OP_ROLL_FLAT, OP_SELECT,
                                              OP_SLICE, OP_SQUEEZE, OP_STRIDED, OP_TRIL, OP_TRIU,
                                              OP_UNFOLD, OP_UNSQUEEZE, OP_VIEW, V_N, V_S, V_T,
                                              copy_space, fill, seg, whole_dim)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, desc, elem_size,
                                       is_contiguous, offset_of)


# ---- building the iteration space of each op ---------------------------------------------

@njit(inline="always")
def _view_in(s, a, nd):
    for i in range(nd):
        s[V_N + i] = a[D_SIZES + i]
        s[V_S + i] = a[D_STRIDES + i]


@njit
def _bcast(s, a, t):
    """``a`` broadcast to ``t``'s sizes (ATen's copy rules)."""
    nd = t[D_NDIM]
    lead = nd - a[D_NDIM]
    if lead < 0:
        return INVALID_ARGUMENT
    for i in range(nd):
        want = t[D_SIZES + i]
        s[V_N + i] = want
        if i < lead:
            s[V_S + i] = 0
        else:
            have = a[D_SIZES + i - lead]
            if have == want:
                s[V_S + i] = a[D_STRIDES + i - lead]
            elif have == 1:
                s[V_S + i] = 0
            else:
                return INVALID_ARGUMENT
    return OK


@njit
def _pad_segments(s, a, d, lo, hi, reflect):
    """Reflection/replication pad of dim ``d``: three affine segments (ATen's index maps)."""
    n = a[D_SIZES + d]
    size = n + lo + hi
    if size <= 0 or n == 0 or (reflect and (lo >= n or hi >= n)):
        return INVALID_ARGUMENT
    s[V_N + d] = size
    s[NSEG + d] = 3
    ca = min(lo, size) if lo > 0 else 0  # out positions left of the input
    if reflect:
        seg(s, d, 0, 0, ca, lo, -1)
    else:
        seg(s, d, 0, 0, ca, 0, 0)
    bs = max(lo, 0)
    seg(s, d, 1, bs, min(lo + n, size) - bs, bs - lo, 1)
    cs = max(lo + n, 0)  # right of the input
    if reflect:
        seg(s, d, 2, cs, size - cs, 2 * (n - 1) - (cs - lo), -1)
    else:
        seg(s, d, 2, cs, size - cs, n - 1, 0)
    return OK


@njit
def build(op, block, a, o, s):
    """Fill the iteration space for ``op``; returns (status, iteration rank, source offset)."""
    nd = a[D_NDIM]
    for i in range(16):
        s[NSEG + i] = 0
    off = 0
    if op == OP_COPY or op == OP_TRIL or op == OP_TRIU or op == OP_ROLL_FLAT:
        _view_in(s, a, nd)
    elif op == OP_BCAST or op == OP_COPY_INTO:
        t = desc(block[4]) if op == OP_BCAST else o
        nd = t[2]
        st = _bcast(s, a, t)
        if st != OK:
            return st, nd, off
    elif op == OP_NARROW:
        d = block[4]
        start = block[5]
        length = block[6]
        n = a[D_SIZES + d]
        if start < -n or start > n:
            return INVALID_ARGUMENT, nd, off
        if start < 0:
            start += n
        if length < 0 or start + length > n:
            return INVALID_ARGUMENT, nd, off
        _view_in(s, a, nd)
        s[V_N + d] = length
        off = start * a[D_STRIDES + d]
    elif op == OP_DIAG:
        offset = block[4]
        d1 = block[5]
        d2 = block[6]
        k = 0
        for i in range(nd):
            if i != d1 and i != d2:
                s[V_N + k] = a[D_SIZES + i]
                s[V_S + k] = a[D_STRIDES + i]
                k += 1
        n1 = a[D_SIZES + d1]
        n2 = a[D_SIZES + d2]
        if offset >= 0:
            ln = min(n1, n2 - offset)
            off = offset * a[D_STRIDES + d2]
        else:
            ln = min(n1 + offset, n2)
            off = -offset * a[D_STRIDES + d1]
        if ln <= 0:
            ln = 0
            off = 0
        s[V_N + k] = ln
        s[V_S + k] = a[D_STRIDES + d1] + a[D_STRIDES + d2]
        nd = k + 1
    elif op == OP_STRIDED:
        nd = block[4]
        off = block[5]
        last = off
        empty = False
        for i in range(nd):
            sz = block[6 + i]
            s[V_N + i] = sz
            s[V_S + i] = block[6 + nd + i]
            if sz == 0:
                empty = True
            last += s[V_S + i] * (sz - 1)
        if not empty and last >= a[D_NUMEL]:  # strides index the input's storage
            return INVALID_ARGUMENT, nd, off
    elif op == OP_UNFOLD:
        d = block[4]
        size = block[5]
        step = block[6]
        if nd == 0:
            if size > 1:
                return INVALID_ARGUMENT, nd, off
            s[V_N] = size
            s[V_S] = 0
            nd = 1
        else:
            n = a[D_SIZES + d]
            if size > n:
                return INVALID_ARGUMENT, nd, off
            _view_in(s, a, nd)
            s[V_N + d] = (n - size) // step + 1
            s[V_S + d] = a[D_STRIDES + d] * step
            s[V_N + nd] = size
            s[V_S + nd] = a[D_STRIDES + d]
            nd += 1
    elif op == OP_REAL:  # in units of the complex type's components
        for i in range(nd):
            s[V_N + i] = a[D_SIZES + i]
            s[V_S + i] = 2 * a[D_STRIDES + i]
        s[V_N + nd] = 2
        s[V_S + nd] = 1
        nd += 1
    elif op == OP_FLIP:
        _view_in(s, a, nd)
        mask = block[4]
        for i in range(nd):
            if (mask >> i) & 1 == 1:
                n = a[D_SIZES + i]
                s[NSEG + i] = 1
                seg(s, i, 0, 0, n, n - 1, -1)
    elif op == OP_ROLL:
        _view_in(s, a, nd)
        for k in range(block[4]):
            d = block[5 + 2 * k]
            n = a[D_SIZES + d]
            if n == 0:
                continue
            sh = block[6 + 2 * k] % n
            if sh != 0:  # out[i] = in[(i - sh) mod n]
                s[NSEG + d] = 2
                seg(s, d, 0, 0, sh, n - sh, 1)
                seg(s, d, 1, sh, n - sh, 0, 1)
    elif op == OP_CPAD:
        _view_in(s, a, nd)
        for i in range(block[5]):
            d = nd - 1 - i
            lo = block[6 + 2 * i]
            hi = block[7 + 2 * i]
            n = a[D_SIZES + d]
            size = n + lo + hi
            if size < 0:
                return INVALID_ARGUMENT, nd, off
            clo = max(0, -lo)  # negative pads crop
            keep = max(0, n - clo - max(0, -hi))
            s[V_N + d] = size
            s[NSEG + d] = 1
            seg(s, d, 0, max(0, lo), keep, clo, 1)
    elif op == OP_REFLECT or op == OP_REPLICATE:
        _view_in(s, a, nd)
        for i in range(block[4]):
            st = _pad_segments(s, a, nd - 1 - i, block[5 + 2 * i], block[6 + 2 * i],
                               op == OP_REFLECT)
            if st != OK:
                return st, nd, off
    elif op == OP_REPEAT:  # out sizes only; the iteration space follows the resize
        n = block[4]
        lead = n - nd
        for j in range(n):
            r = block[5 + j]
            s[W_OUT + j] = r if j < lead else r * a[D_SIZES + j - lead]
        nd = n
    elif op == OP_PSHUF or op == OP_PUNSHUF:
        r = block[4]
        for i in range(nd):
            s[W_OUT + i] = a[D_SIZES + i]
        c = a[D_SIZES + nd - 3]
        h = a[D_SIZES + nd - 2]
        w = a[D_SIZES + nd - 1]
        if op == OP_PSHUF:
            if c % (r * r) != 0:
                return INVALID_ARGUMENT, nd, off
            s[W_OUT + nd - 3] = c // (r * r)
            s[W_OUT + nd - 2] = h * r
            s[W_OUT + nd - 1] = w * r
        else:
            if h % r != 0 or w % r != 0:
                return INVALID_ARGUMENT, nd, off
            s[W_OUT + nd - 3] = c * r * r
            s[W_OUT + nd - 2] = h // r
            s[W_OUT + nd - 1] = w // r
    else:
        return _build_view(op, block, a, s)
    return OK, nd, off


@njit
def _build_view(op, block, a, s):
    """The plain views (permute, expand, slice, select, squeeze, unsqueeze, view), for
    casting outs: the same-dtype ones run in ``kernels.shape.typed``."""
    nd = a[D_NDIM]
    off = 0
    if op == OP_PERMUTE:
        for i in range(nd):
            p = block[4 + i]
            s[V_N + i] = a[D_SIZES + p]
            s[V_S + i] = a[D_STRIDES + p]
    elif op == OP_EXPAND:
        n = block[4]
        if not expand_view(a, block, 5, n, s, V_N, V_S):
            return INVALID_ARGUMENT, nd, off
        nd = n
    elif op == OP_SLICE:
        d = block[4]
        step = block[7]
        n = a[D_SIZES + d]
        start = clamp_bound(block[5], n)
        end = clamp_bound(block[6], n)
        _view_in(s, a, nd)
        s[V_N + d] = (end - start + step - 1) // step if end > start else 0
        s[V_S + d] = a[D_STRIDES + d] * step
        off = start * a[D_STRIDES + d]
    elif op == OP_SELECT or op == OP_SQUEEZE or op == OP_UNSQUEEZE:
        d = block[4]
        if op == OP_SELECT:
            n = a[D_SIZES + d]
            idx = block[5]
            if idx < -n or idx >= n:
                return INVALID_ARGUMENT, nd, off
            off = (idx + n if idx < 0 else idx) * a[D_STRIDES + d]
        k = 0
        for i in range(nd + 1):
            if op == OP_UNSQUEEZE and i == d:
                s[V_N + k] = 1
                s[V_S + k] = 0
                k += 1
            if i == nd:
                break
            if op == OP_SELECT and i == d:
                continue
            if op == OP_SQUEEZE and (d >> i) & 1 == 1 and a[D_SIZES + i] == 1:
                continue
            s[V_N + k] = a[D_SIZES + i]
            s[V_S + k] = a[D_STRIDES + i]
            k += 1
        nd = k
    elif op == OP_VIEW:  # out sizes only (one -1 inferred); see special
        n = block[4]
        if not view_sizes(block, 5, n, a[D_NUMEL], s):
            return INVALID_ARGUMENT, nd, off
        nd = n
    else:
        return NOT_SUPPORTED, nd, off
    return OK, nd, off


@njit
def special(op, block, a, o, s):
    """Iteration space of repeat / pixel (un)shuffle over the resized out; returns its rank."""
    nd = a[D_NDIM]
    if op == OP_VIEW:  # iterate whichever side is contiguous, the other in its own strides
        src_flat = is_contiguous(a)
        if not src_flat and not is_contiguous(o):
            return -1
        v = o if src_flat else a
        k = v[D_NDIM]
        st = 1
        for i in range(k - 1, -1, -1):
            s[V_N + i] = v[D_SIZES + i]
            s[V_S + i] = st if src_flat else a[D_STRIDES + i]
            s[V_T + i] = o[D_STRIDES + i] if src_flat else st
            st *= v[D_SIZES + i]
        return k
    if op == OP_REPEAT:
        n = block[4]
        lead = n - nd
        k = 0
        for j in range(n):
            r = block[5 + j]
            t = o[D_STRIDES + j]
            if j < lead:
                whole_dim(s, k, r, 0, t)
                k += 1
            else:
                m = a[D_SIZES + j - lead]
                if r != 1:  # the copies of the whole dim, then the dim itself
                    whole_dim(s, k, r, 0, t * m)
                    k += 1
                whole_dim(s, k, m, a[D_STRIDES + j - lead], t)
                k += 1
        return k
    r = block[4]
    lead = nd - 3
    for i in range(lead):
        whole_dim(s, i, a[D_SIZES + i], a[D_STRIDES + i], o[D_STRIDES + i])
    sc, sh, sw = a[D_STRIDES + lead], a[D_STRIDES + lead + 1], a[D_STRIDES + lead + 2]
    tc, th, tw = o[D_STRIDES + lead], o[D_STRIDES + lead + 1], o[D_STRIDES + lead + 2]
    h = a[D_SIZES + lead + 1]
    w = a[D_SIZES + lead + 2]
    if op == OP_PSHUF:  # out[c, y*r+i, x*r+j] = in[c*r*r + i*r + j, y, x]
        whole_dim(s, lead, o[D_SIZES + lead], sc * r * r, tc)
        whole_dim(s, lead + 1, h, sh, th * r)
        whole_dim(s, lead + 2, r, sc * r, th)
        whole_dim(s, lead + 3, w, sw, tw * r)
        whole_dim(s, lead + 4, r, sc, tw)
    else:  # out[c*r*r + i*r + j, y, x] = in[c, y*r+i, x*r+j]
        whole_dim(s, lead, a[D_SIZES + lead], sc, tc * r * r)
        whole_dim(s, lead + 1, r, sh, tc * r)
        whole_dim(s, lead + 2, r, sw, tc)
        whole_dim(s, lead + 3, h // r, sh * r, th)
        whole_dim(s, lead + 4, w // r, sw * r, tw)
    return lead + 5


@njit
def triangle(o, lower, diag):
    """Zero out's elements above (tril) or below (triu) diagonal ``diag``."""
    nd = o[D_NDIM]
    rows = o[D_SIZES + nd - 2]
    cols = o[D_SIZES + nd - 1]
    tr = o[D_STRIDES + nd - 2]
    tc = o[D_STRIDES + nd - 1]
    es = elem_size(o[D_DTYPE])
    batch = 1
    for i in range(nd - 2):
        batch *= o[D_SIZES + i]
    for b in range(batch):
        base = 0
        rem = b
        for i in range(nd - 3, -1, -1):
            base += (rem % o[D_SIZES + i]) * o[D_STRIDES + i]
            rem //= o[D_SIZES + i]
        for r in range(rows):
            if lower:
                c0 = min(max(r + diag + 1, 0), cols)
                c1 = cols
            else:
                c0 = 0
                c1 = min(max(r + diag, 0), cols)
            if c1 > c0:
                fill(o[D_DATA] + (base + r * tr + c0 * tc) * es, es, c1 - c0, 0, tc)


@njit
def roll_flat(a, o, sst, shift, w):
    """Roll of the flattened tensor when either side is not contiguous: element by element."""
    n = a[D_NUMEL]
    if n == 0:
        return
    sh = shift % n
    ses = elem_size(sst)
    des = elem_size(o[D_DTYPE])
    for k in range(n):
        copy_space(a[D_DATA] + offset_of(a, (k - sh + n) % n) * ses, sst,
                   o[D_DATA] + offset_of(o, k) * des, o[D_DTYPE], w, 0)
