"""The strided copy engine shared by the data-movement kernels: drops size-1 dims, merges
dims contiguous on both sides, copies contiguous runs in a flat loop and transposes in
cache-sized tiles (4-byte elements by 8 x 8 blocks transposed in vector registers). Its
state lives in a ``SCRATCH_WORDS``-word buffer owned by the instruction (sizes, source
and destination strides, counters), so nothing allocates.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from pyruntime.cython_ext.abi import D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.deferred import carray, intrinsic, njit, types
from pyruntime.kernels.fast.nb import INVALID_ARGUMENT, NOT_SUPPORTED, desc, ptr_like, resize_to


SCRATCH_WORDS = 128
# scratch layout: iteration sizes, source strides, destination strides, counter, out sizes
W_SZ, W_SS, W_DS, W_IX, W_OUT = 0, 16, 32, 48, 64
TILE = 32


# ---- the strided copy engine ------------------------------------------------------

@njit
def expand_view(a, want, at, n, dst, size_at, stride_at):
    """``a`` broadcast to the ``n`` sizes ``want[at:at + n]`` (-1 keeps a dim): sizes to
    ``dst[size_at:]``, strides to ``dst[stride_at:]`` (0 for new leading dims and expanded
    size-1 dims); False if ``a`` does not broadcast to them."""
    lead = n - a[D_NDIM]
    if lead < 0:
        return False
    for i in range(n):
        v = want[at + i]
        if i < lead:
            if v < 0:
                return False
            dst[stride_at + i] = 0
        else:
            have = a[D_SIZES + i - lead]
            if v == -1:
                v = have
            if v == have:
                dst[stride_at + i] = a[D_STRIDES + i - lead]
            elif have == 1 and v >= 0:
                dst[stride_at + i] = 0
            else:
                return False
        dst[size_at + i] = v
    return True


@njit(inline="always")
def view_sizes(block, first, n, numel, w):
    """The sizes of a view of ``numel`` elements, ``block[first:first + n]`` with at most one
    -1 (inferred), written to ``w[W_OUT:]``; False if they do not hold ``numel`` elements."""
    known = 1
    hole = -1
    for i in range(n):
        sz = block[first + i]
        w[W_OUT + i] = sz
        if sz == -1:
            hole = i
        else:
            known *= sz
    if hole >= 0:
        if known == 0 or numel % known != 0:
            return False
        w[W_OUT + hole] = numel // known
    elif known != numel:
        return False
    return True


@njit(inline="always")
def resize_with(o, a, d, size, w):
    """Resize ``o`` to ``a``'s sizes but ``size`` at dim ``d`` (through ``w[W_OUT:]``); a status."""
    for i in range(a[D_NDIM]):
        w[W_OUT + i] = a[D_SIZES + i]
    w[W_OUT + d] = size
    return resize_to(o, w[W_OUT:], a[D_NDIM])


@njit
def join_out(block, at, n, o, d, w, stack):
    """Resize ``o`` to the cat (or with ``stack`` the stack) along ``d`` of the ``n`` tensors
    whose descriptors are ``block[at:at + n]``, through ``w[W_OUT:]``; a status."""
    nd = o[D_NDIM]
    na = nd - 1 if stack else nd
    first = True
    total = 0
    for k in range(n):
        a = desc(block[at + k])
        if not stack and a[D_NDIM] == 1 and a[D_NUMEL] == 0:
            continue  # cat skips legacy empty tensors whatever their rank
        if a[D_NDIM] != na:
            return INVALID_ARGUMENT
        if first:
            first = False
            for i in range(na):
                w[W_OUT + i] = a[D_SIZES + i]
        else:
            for i in range(na):
                if a[D_SIZES + i] != w[W_OUT + i] and (stack or i != d):
                    return INVALID_ARGUMENT
        total += 1 if stack else a[D_SIZES + d]
    if first:
        if nd != 1:
            return NOT_SUPPORTED
        w[W_OUT] = 0
    elif stack:
        for i in range(nd - 1, d, -1):
            w[W_OUT + i] = w[W_OUT + i - 1]
        w[W_OUT + d] = n
    else:
        w[W_OUT + d] = total
    return resize_to(o, w[W_OUT:], nd)


@njit(inline="always")
def clamp_bound(i, n):
    """A slice bound into ``[0, n]``, a negative one counted from the end (as ATen's slice)."""
    if i < 0:
        i += n
        if i < 0:
            i = 0
    return n if i > n else i


@njit(inline="always")
def start(w, nd):
    """Zero the N-d counter ``w[W_IX:]`` over the first ``nd`` dims; how many steps
    ``advance`` takes to walk them."""
    outer = 1
    for i in range(nd):
        w[W_IX + i] = 0
        outer *= w[W_SZ + i]
    return outer


@njit(inline="always")
def advance(w, nd, so, do):
    """Step the N-d counter ``w[W_IX:]`` over the first ``nd`` dims (sizes ``W_SZ``) by one,
    moving the source and destination offsets by their strides (``W_SS``, ``W_DS``)."""
    for i in range(nd - 1, -1, -1):
        w[W_IX + i] += 1
        so += w[W_SS + i]
        do += w[W_DS + i]
        if w[W_IX + i] < w[W_SZ + i]:
            break
        so -= w[W_SS + i] * w[W_SZ + i]
        do -= w[W_DS + i] * w[W_SZ + i]
        w[W_IX + i] = 0
    return so, do


@njit(inline="always")
def scratch(addr):
    return carray(ptr_like(addr, np.int64(0)), SCRATCH_WORDS)


@njit
def simplify(w, nd):
    """Drop size-1 dims and merge dims contiguous on both sides; -1 when empty."""
    for i in range(nd):
        if w[W_SZ + i] == 0:
            return -1
    k = 0
    for i in range(nd):
        s = w[W_SZ + i]
        if s == 1:
            continue
        a = w[W_SS + i]
        b = w[W_DS + i]
        if k > 0 and w[W_SS + k - 1] == a * s and w[W_DS + k - 1] == b * s:
            w[W_SZ + k - 1] *= s
            w[W_SS + k - 1] = a
            w[W_DS + k - 1] = b
        else:
            w[W_SZ + k] = s
            w[W_SS + k] = a
            w[W_DS + k] = b
            k += 1
    return k


@njit(inline="always")
def copy_element(sp, si, dp, di, es):
    """Element ``di`` at byte address ``dp`` = element ``si`` at ``sp``, ``es`` bytes each."""
    if es == 4:
        ptr_like(dp, np.uint32(0))[di] = ptr_like(sp, np.uint32(0))[si]
    elif es == 8:
        ptr_like(dp, np.uint64(0))[di] = ptr_like(sp, np.uint64(0))[si]
    elif es == 2:
        ptr_like(dp, np.uint16(0))[di] = ptr_like(sp, np.uint16(0))[si]
    else:
        ptr_like(dp, np.uint8(0))[di] = ptr_like(sp, np.uint8(0))[si]


@njit(inline="always")
def _swap(w, i, j):
    for base in (W_SZ, W_SS, W_DS):
        t = w[base + i]
        w[base + i] = w[base + j]
        w[base + j] = t


@intrinsic
def _t8x8(typingctx, src, ss, dst, ds):
    """The 8 x 8 block of 4-byte elements at byte address ``src`` (rows ``ss`` bytes
    apart) transposed into ``dst`` (rows ``ds`` bytes apart): eight vector loads, three
    rounds of two-input shuffles, eight vector stores (unaligned)."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        src_, ss_, dst_, ds_ = args
        i32 = ir.IntType(32)
        v8 = ir.VectorType(i32, 8)

        def row(base, stride, i):
            return builder.inttoptr(builder.add(base, builder.mul(stride, ir.Constant(
                ir.IntType(64), i))), v8.as_pointer())

        def mix(a, b, lanes):
            return builder.shuffle_vector(a, b, ir.Constant(v8, [ir.Constant(i32, k)
                                                                 for k in lanes]))
        r = [builder.load(row(src_, ss_, i), align=4) for i in range(8)]
        lo, hi = (0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15)
        t = []
        for i in range(0, 8, 2):  # [r_i[0], r_i+1[0], r_i[1], r_i+1[1], ...]: pairs
            t += [mix(r[i], r[i + 1], lo), mix(r[i], r[i + 1], hi)]
        even, odd = (0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15)
        u = []
        for i in (0, 4):  # quads: columns j and j + 4 of four rows
            u += [mix(t[i], t[i + 2], even), mix(t[i], t[i + 2], odd),
                  mix(t[i + 1], t[i + 3], even), mix(t[i + 1], t[i + 3], odd)]
        first, second = (0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)
        for j in range(4):  # column j from the halves of the two quads, then column j + 4
            builder.store(mix(u[j], u[j + 4], first), row(dst_, ds_, j), align=4)
            builder.store(mix(u[j], u[j + 4], second), row(dst_, ds_, j + 4), align=4)
        return context.get_dummy_value()

    return sig, codegen


@njit
def _tile4(sp, dp, so, do, rs, rd, si, di, r0, r1, c0, c1):
    """One tile of a transpose of 4-byte elements, rows [r0, r1) x columns [c0, c1), one
    side unit-stride along columns (si == 1: then rd == 1) and the other along rows: 8 x 8
    blocks through ``_t8x8``, the edges one element at a time."""
    src = ptr_like(sp, np.uint32(0))
    dst = ptr_like(dp, np.uint32(0))
    r8 = r0 + (r1 - r0) // 8 * 8
    c8 = c0 + (c1 - c0) // 8 * 8
    for r in range(r0, r8, 8):
        for c in range(c0, c8, 8):
            if si == 1:  # src rows along c, dst rows along r
                _t8x8(sp + 4 * (so + r * rs + c), 4 * rs, dp + 4 * (do + r + c * di), 4 * di)
            else:  # src rows along r (rs == 1), dst rows along c (di == 1)
                _t8x8(sp + 4 * (so + r + c * si), 4 * si, dp + 4 * (do + r * rd + c), 4 * rd)
        for c in range(c8, c1):
            for i in range(r, r + 8):
                dst[do + i * rd + c * di] = src[so + i * rs + c * si]
    for i in range(r8, r1):
        for c in range(c0, c1):
            dst[do + i * rd + c * di] = src[so + i * rs + c * si]


@njit
def _copy_typed(sp, dp, w, nd, m, vec4=False):
    src = ptr_like(sp, m)
    dst = ptr_like(dp, m)
    if nd == 0:
        dst[0] = src[0]
        return
    last = nd - 1
    n = w[W_SZ + last]
    si = w[W_SS + last]
    di = w[W_DS + last]
    # A transpose: the inner dim is unit-stride on one side only and another dim is
    # unit-stride on the other side; those two dims are copied in TILE x TILE tiles.
    tile = -1
    if nd >= 2 and (si == 1) != (di == 1):
        other = W_SS if di == 1 else W_DS
        for i in range(last - 1, -1, -1):
            if w[other + i] == 1:
                tile = i
                break
    no = last
    if tile >= 0:
        _swap(w, tile, last - 1)
        no = last - 1
    rn = w[W_SZ + no] if tile >= 0 else 1
    rs = w[W_SS + no] if tile >= 0 else 0
    rd = w[W_DS + no] if tile >= 0 else 0
    outer = start(w, no)
    so = 0
    do = 0
    # 4-byte elements (the two dims are unit-stride on opposite sides): 8 x 8 vector blocks
    blocks = vec4 and tile >= 0 and ((si == 1 and rd == 1) or (di == 1 and rs == 1))
    for _ in range(outer):
        if tile >= 0:
            for r0 in range(0, rn, TILE):
                r1 = min(r0 + TILE, rn)
                for c0 in range(0, n, TILE):
                    c1 = min(c0 + TILE, n)
                    if blocks:
                        _tile4(sp, dp, so, do, rs, rd, si, di, r0, r1, c0, c1)
                        continue
                    for r in range(r0, r1):
                        s0 = so + r * rs
                        d0 = do + r * rd
                        for c in range(c0, c1):
                            dst[d0 + c * di] = src[s0 + c * si]
        elif si == 1 and di == 1:
            for c in range(n):
                dst[do + c] = src[so + c]
        elif si == 0:
            v = src[so]
            for c in range(n):
                dst[do + c * di] = v
        else:
            for c in range(n):
                dst[do + c * di] = src[so + c * si]
        so, do = advance(w, no, so, do)


@njit
def copy_simplified(sp, dp, w, nd, es):
    """Copy a simplified iteration space (``simplify``'s result) of ``es``-byte elements."""
    if nd < 0:
        return
    if es == 4:
        _copy_typed(sp, dp, w, nd, np.uint32(0), True)
    elif es == 8:
        _copy_typed(sp, dp, w, nd, np.uint64(0))
    elif es == 2:
        _copy_typed(sp, dp, w, nd, np.uint16(0))
    else:
        _copy_typed(sp, dp, w, nd, np.uint8(0))


@njit
def copy_nd(sp, dp, w, nd, es):
    """Copy ``w[W_SZ:]`` sizes from byte address ``sp`` (strides ``w[W_SS:]``, elements)
    to ``dp`` (strides ``w[W_DS:]``)."""
    copy_simplified(sp, dp, w, simplify(w, nd), es)


@njit(inline="always")
def dst_strides(w, o, nd):
    for i in range(nd):
        w[W_DS + i] = o[D_STRIDES + i]
