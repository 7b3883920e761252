"""Compiled advanced indexing for every dtype (``adv_kernel``), and the family's overview.

Five cfuncs serve every indexing op (``gather.py``, this module, ``mask.py``, ``topk.py``,
``rand.py``; shared element moves in ``index_io.py``); each reads element types from the
descriptors at run time (``nb.load_*``/``store_*``, bytes moved as they are
when source and destination types agree) and walks any dim order through
the descriptor strides:

* ``scatter_kernel``: gather, scatter (src / value / add), select_scatter,
  slice_scatter;
* ``adv_kernel``: advanced indexing ``x[indices]`` and ``x[indices] = values``
  (index.Tensor, index_put, index_put_, and the generic forms of
  index_select and embedding): int32/int64 index tensors broadcast together,
  bool/uint8 masks expand to their true positions, and the indexed dims land
  where ATen (and numpy) put them. Each indexed position moves a whole
  sub-block of the remaining dims with the strided copy engine of
  ``kernels.shape.typed``;
* ``mask_kernel``: masked_select, masked_scatter, nonzero,
  repeat_interleave (outs sized at run time);
* ``topk_kernel``: top-k along one dim by a heap over a total order
  (value, then position), so ties and NaN (ranked largest) come out as the
  reference kernel's stable sort gives them;
* ``rand_kernel``: rand, randn, native_dropout from a splitmix64 stream
  seeded at bind time (the distribution, not the reference's stream).

Every index is checked before anything is written; an out-of-range index or
a shape that does not fit returns InvalidArgument, and the reference kernel
then explains it.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.copy_engine import W_DS, W_SS, W_SZ, simplify
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.index.generic_gather import wrap_dim
from pyruntime.kernels.fast.index_io import (ALL, E, INDEX, MASK, copy_all, index_at,
                                             move_simplified)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, desc, elem_size, is_contiguous, lazy,
                                       offset_of, ptr_like, resize_like, resize_to, scratch)


# ---- advanced indexing: index.Tensor, index_put(_), index_select, embedding ---------------
M_INDEX, M_PUT, M_ACC = range(3)
IT_INT, IT_MASK, IT_FLAT = range(3)  # index tensor; bool mask; index flattened to 1-d
# block: [mode, x, values, out, scratch, scratch words, items, nb, p, x0, negative ok,
#         (kind, tensor, first dim, dims, positions word) per item]
A_ITEM, A_ITEM_WORDS = 11, 5
# words: E x sizes, E+16 x-side strides, E+32 broadcast sizes, E+48 result-side strides of
# the broadcast dims, E+64 sliced dims, E+80 result sizes, E+96 values strides over the
# result, E+112 counter, E+128 per item: 16 strides over the broadcast dims + count
A_X, A_XS, A_B, A_RB, A_SL, A_R, A_VS, A_C, A_IT = (E + 16 * i for i in range(9))
A_IT_WORDS = 17


@njit
def _adv(block, w):
    mode = block[0]
    x = desc(block[1])
    o = desc(block[3])
    nit = block[6]
    nb = block[7]
    p = block[8]
    x0 = block[9]
    neg = block[10]
    xnd = x[D_NDIM]
    if mode != M_INDEX:
        st = resize_like(o, x)
        if st != OK:
            return st
    if x0 != 0:  # a rank-0 self indexed as if it had one dim of size 1
        xnd = 1
        w[A_X] = 1
        w[A_XS] = 0
    else:
        for i in range(xnd):
            w[A_X + i] = x[D_SIZES + i]
            w[A_XS + i] = x[D_STRIDES + i] if mode == M_INDEX else o[D_STRIDES + i]
    # masks: their true positions; the broadcast shape of every index
    for j in range(nb):
        w[A_B + j] = 1
    for k in range(nit):
        b = A_ITEM + A_ITEM_WORDS * k
        kind = block[b]
        t = desc(block[b + 1])
        d = block[b + 2]
        m = block[b + 3]
        iw = A_IT + A_IT_WORDS * k
        if kind == IT_MASK:
            if t[D_NDIM] != m:
                return INVALID_ARGUMENT
            for i in range(m):
                if t[D_SIZES + i] != w[A_X + d + i]:
                    return INVALID_ARGUMENT
            pos = block[b + 4]
            cnt = 0
            u8 = ptr_like(t[D_DATA], np.uint8(0))
            dense = is_contiguous(t)
            for q in range(t[D_NUMEL]):
                if u8[q if dense else offset_of(t, q)] != 0:
                    w[pos + cnt] = q
                    cnt += 1
            w[iw + 16] = cnt
            r = 1
        elif kind == IT_FLAT:
            r = 1
        else:
            r = t[D_NDIM]
        for i in range(r):
            j = nb - r + i
            sz = (w[iw + 16] if kind == IT_MASK
                  else t[D_NUMEL] if kind == IT_FLAT else t[D_SIZES + i])
            if sz != 1:
                if w[A_B + j] == 1:
                    w[A_B + j] = sz
                elif w[A_B + j] != sz:
                    return INVALID_ARGUMENT
        for j in range(nb):
            i = j - (nb - r)
            w[iw + j] = 0
            if i >= 0:
                if kind == IT_INT:
                    if t[D_SIZES + i] != 1:
                        w[iw + j] = t[D_STRIDES + i]
                else:
                    sz = w[iw + 16] if kind == IT_MASK else t[D_NUMEL]
                    if sz != 1:
                        w[iw + j] = 1
    nbel = 1
    for j in range(nb):
        nbel *= w[A_B + j]
    if nbel > 0:  # every element of every index is used: check them all before writing
        for k in range(nit):
            b = A_ITEM + A_ITEM_WORDS * k
            if block[b] == IT_MASK:
                continue
            t = desc(block[b + 1])
            n = w[A_X + block[b + 2]]
            for q in range(t[D_NUMEL]):
                v = index_at(t, q)
                if v >= n or v < (-n if neg != 0 else 0):
                    return INVALID_ARGUMENT
    # the result: sliced dims [:p], the broadcast dims, sliced dims [p:]
    nsl = 0
    for i in range(xnd):
        covered = False
        for k in range(nit):
            b = A_ITEM + A_ITEM_WORDS * k
            if block[b + 2] <= i < block[b + 2] + block[b + 3]:
                covered = True
        if not covered:
            w[A_SL + nsl] = i
            nsl += 1
    nr = nsl + nb
    for r in range(nr):
        w[A_R + r] = w[A_X + w[A_SL + (r if r < p else r - nb)]] if r < p or r >= p + nb \
            else w[A_B + r - p]
    if mode == M_INDEX:
        if o[D_NDIM] == nr:
            st = resize_to(o, w[A_R:], nr)
            if st != OK:
                return st
            for r in range(nr):
                w[A_VS + r] = o[D_STRIDES + r]
        else:  # a rank-0 out of a rank-0 self (index_select): one element
            if nr - o[D_NDIM] != 1 or w[A_R] != 1:
                return INVALID_ARGUMENT
            w[A_VS] = 0
    else:
        v = desc(block[2])
        nv = v[D_NDIM]
        for r in range(nr):
            w[A_VS + r] = 0
        for i in range(nv):
            r = i - (nv - nr)
            sz = v[D_SIZES + i]
            if r < 0:
                if sz != 1:
                    return INVALID_ARGUMENT
            elif sz != 1:
                if sz != w[A_R + r]:
                    return INVALID_ARGUMENT
                w[A_VS + r] = v[D_STRIDES + i]
        if o[D_DATA] != x[D_DATA]:
            copy_all(x, o, w)
    # the block moved per broadcast position: the sliced dims
    for q in range(nsl):
        r = q if q < p else q + nb
        i = w[A_SL + q]
        w[W_SZ + q] = w[A_X + i]
        if mode == M_INDEX:
            w[W_SS + q] = w[A_XS + i]
            w[W_DS + q] = w[A_VS + r]
        else:
            w[W_SS + q] = w[A_VS + r]
            w[W_DS + q] = w[A_XS + i]
    ns = simplify(w, nsl)
    if ns < 0 or nbel == 0:
        return OK
    for j in range(nb):
        w[A_RB + j] = w[A_VS + p + j]
    xs = elem_size(x[D_DTYPE])
    os_ = elem_size(o[D_DTYPE])
    for bi in range(nbel):
        rem = bi
        for j in range(nb - 1, -1, -1):
            w[A_C + j] = rem % w[A_B + j]
            rem //= w[A_B + j]
        roff = 0
        for j in range(nb):
            roff += w[A_C + j] * w[A_RB + j]
        xoff = 0
        for k in range(nit):
            b = A_ITEM + A_ITEM_WORDS * k
            kind = block[b]
            t = desc(block[b + 1])
            d = block[b + 2]
            iw = A_IT + A_IT_WORDS * k
            e = 0
            for j in range(nb):
                e += w[A_C + j] * w[iw + j]
            if kind == IT_MASK:
                q = w[block[b + 4] + e]
                for i in range(d + block[b + 3] - 1, d - 1, -1):
                    xoff += (q % w[A_X + i]) * w[A_XS + i]
                    q //= w[A_X + i]
            else:
                if kind == IT_FLAT and not is_contiguous(t):
                    e = offset_of(t, e)
                v = index_at(t, e)
                if v < 0:
                    v += w[A_X + d]
                xoff += v * w[A_XS + d]
        if mode == M_INDEX:
            move_simplified(x[D_DATA] + xoff * xs, x[D_DTYPE], o[D_DATA] + roff * os_, o[D_DTYPE],
                            w, ns, 0)
        else:
            v = desc(block[2])
            move_simplified(v[D_DATA] + roff * elem_size(v[D_DTYPE]), v[D_DTYPE],
                            o[D_DATA] + xoff * os_, o[D_DTYPE], w, ns, 1 if mode == M_ACC else 0)
    return OK


def adv_kernel(block):
    return _adv(block, scratch(block[4], block[5]))


def _bind_adv(ctx, mode, x, items, values, out, x0=False, neg=True):
    """``items``: (kind, tensor, first dim of x, dims) in order."""
    if x.dtype not in ALL or out.dtype not in ALL or (values is not None
                                                      and values.dtype not in ALL):
        return None
    xnd = 1 if x0 else x.ndim
    covered = sum(m for _, _, _, m in items)
    if covered > xnd:
        return None
    adjacent = all(items[k + 1][2] == items[k][2] + items[k][3] for k in range(len(items) - 1))
    p = items[0][2] if items and adjacent else 0
    nb = max([1 if kind != IT_INT else t.ndim for kind, t, _, _ in items], default=0)
    nr = nb + xnd - covered
    if mode == M_INDEX and not (out.ndim == nr or (x0 and out.ndim == nr - 1)):
        return None
    if mode != M_INDEX and (out.ndim != x.ndim or not items or values.ndim > nr):
        return None  # (values with more dims, or no index: ATen refuses them)
    nwords = A_IT + A_IT_WORDS * len(items)
    words = []
    for kind, t, d, m in items:
        pos = 0
        if kind == IT_MASK:
            pos = nwords
            nwords += max(t.capacity, 1)
        words += [kind, ctx.desc(t), d, m, pos]
    return ctx.bind(lazy(adv_kernel), [mode, ctx.desc(x), 0 if values is None else ctx.desc(values),
                                       ctx.desc(out), ctx.buffer(nwords * 8), nwords, len(items),
                                       nb, p, int(x0), int(neg)] + words)


def _items(x, indices):
    """The index items of an ATen ``Tensor?[]``, or None for what stays on the reference."""
    if not isinstance(indices, (list, tuple)):
        return None
    items, d = [], 0
    for t in indices:
        if t is None:
            d += 1
        elif t.dtype in MASK:
            if t.ndim == 0:
                return None  # a 0-d mask adds a dim: rare, left to the reference kernel
            items.append((IT_MASK, t, d, t.ndim))
            d += t.ndim
        elif t.dtype in INDEX:
            items.append((IT_INT, t, d, 1))
            d += 1
        else:
            return None
    return items if d <= x.ndim else None


def bind_index(ctx, self, indices, out):
    items = _items(self, indices)
    return None if items is None else _bind_adv(ctx, M_INDEX, self, items, None, out)


def _bind_put(ctx, self, indices, values, accumulate, out):
    items = _items(self, indices)
    if items is None or not isinstance(accumulate, bool):
        return None
    return _bind_adv(ctx, M_ACC if accumulate else M_PUT, self, items, values, out)


def bind_index_put(ctx, self, indices, values, accumulate, out):
    return _bind_put(ctx, self, indices, values, accumulate, out)


@register_fast("aten::index_put_")
def bind_index_put_(ctx, self, indices, values, accumulate):
    return _bind_put(ctx, self, indices, values, accumulate, self)


def bind_index_select(ctx, self, dim, index, out):
    d = wrap_dim(dim, self.ndim)
    if d is None or index.dtype not in INDEX:
        return None
    return _bind_adv(ctx, M_INDEX, self, [(IT_FLAT, index, d, 1)], None, out,
                     x0=self.ndim == 0, neg=False)


def bind_embedding(ctx, weight, indices, padding_idx, scale_grad_by_freq, sparse, out):
    if weight.ndim != 2 or indices.dtype not in INDEX:
        return None
    return _bind_adv(ctx, M_INDEX, weight, [(IT_INT, indices, 0, 1)], None, out, neg=False)
