"""Compiled 1-D/2-D convolution (non-transposed), in ExecuTorch's accumulation order.

float32/float64, NC(H)W contiguous input/weight/out of one dtype; transposed
and 3-D convolutions, channels-last layouts and other dtypes stay on the
reference kernel. Every output is a running sum from zero over (input channel,
kernel row, kernel column), the bias added last, as ExecuTorch's portable loop
computes it, bit for bit. Per batch and group:

* 1x1, stride 1, unpadded: the input plane already is the (C/g, H*W) column
  matrix, so one ordered gemm ``out = W @ x`` (``kernels.fast.ordered``);
* one input channel per group (depthwise, or a 1-channel input): a direct
  loop over the kernel taps, row by row; memory-bound, so no gemm;
* otherwise im2col into a scratch buffer shared by the method's convolutions
  (sized at bind time from the input's upper-bound sizes), then one ordered gemm.

A 1-D convolution runs as a 2-D one with H = 1. Padding reads as zeros, whose
products add exactly nothing, so the sums equal the C++ loop's that skips them.
"""
from __future__ import annotations

from math import prod

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_NDIM, D_NUMEL, D_SIZES
from pyruntime.kernels.conv.typed_direct import (EP_BIAS, EP_BN, EP_CLAMP, EP_RELU, PAD_GAP,
                                                 channel_epilogue, direct_conv)
from pyruntime.kernels.conv.typed_lanes import LANES, lanes_scratch, lanes_scratch_nb
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.fast.gemm import MR, has_fma, nr_of, swapped_nb
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, SPLIT_WHOLE, ST_F32,
                             ST_F64, desc, lazy, ptr_like, resize_to)
from pyruntime.kernels.fast.ordered import (PK_A_ROWS, gemm_scratch, ordered_gemm, pack_weight,
                                  packed_size, scratch_size)

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# argument block (B_FN is unused: once BLAS gemm's address, kept for the layout; B_WT: the
# weight packed per group for ``ordered_gemm`` at load when it is a constant, else 0; B_WK:
# how it is packed (``ordered.PK_*``), read only when B_WT is set)
B_FN, B_X, B_W, B_BIAS, B_OUT, B_SH, B_SW, B_PH, B_PW, B_DH, B_DW, B_G, B_SCR, B_SCRN, \
    B_WT, B_WK, B_EP, B_EPF, B_MOVE, B_PART, B_NPART, B_ROWS, B_FMA = range(23)
# A fused epilogue (``bind_fused``): B_EP, when not 0, is the address of the per-channel
# constants ``channel_epilogue`` reads; B_EPF says which parts are fused (EP_* bits; 0: none);
# B_MOVE, when not 0, is the descriptor the result is then moved to (B_OUT is the conv's
# own out: the final one overlaps the input).
# (EP_BIAS, EP_BN, EP_CLAMP, EP_RELU: kernels.conv.typed_direct)
EP_CHUNK = 512  # output columns per gemm call when an epilogue follows
COL_CHUNK = 256  # output columns per im2col + gemm step (their columns stay in L2)
# Split into parts (intra-op threads, ``BindContext.bind_split``): B_NPART parts, B_PART
# this block's: -1 checks and resizes the out, -2 does the move (B_MOVE), k >= 0 computes
# part k: a range of whole output planes (direct loop), a range of output columns of
# every plane (gemm), or with B_ROWS (not 0: a one-group gemm whose weight outweighs its
# columns, O > L) a range of output channels, whole panels of B_ROWS rows of the packed
# weight, so that each part reads only its share of the weight; each part with its own
# scratch. B_NPART 0: the whole call. The prep
# block's B_FN holds the multiply-adds below which the prep call does the whole call
# itself at the run's sizes (and returns SPLIT_WHOLE: the loop then skips the parts).
# B_FMA: 1 (math="fast") fuses the products' multiply-adds.
PART_PREP, PART_POST = -1, -2
# multiply-adds below which a convolution is not split: the pool's threads are awake during a
# run, so even a small layer gains (threads=2: MobileNetV2@224 -5%, DeepLabV3 at 96x96 -21%
# against 1 << 19, which left MobileNetV2's last depthwise layers on one thread)
SPLIT_MACS = 1 << 16


@njit(inline="always")
def cols_range(off, sw, W, OW):
    """Output columns ``ow`` whose input column ``ow * sw + off`` lies in [0, W)."""
    lo = 0 if off >= 0 else (-off + sw - 1) // sw
    hi = (W - off + sw - 1) // sw
    lo = min(lo, OW)
    return lo, min(max(hi, lo), OW)


# The loops index raw pointers (ptr_like), not arrays: array indexing with a computed
# index carries Numba's negative-index wraparound, which keeps LLVM from vectorizing
# (measured 25x slower on the depthwise 3x3 loop).

@njit
def _im2col(cols, xp, xbase, Cg, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OW, c0, c1):
    """The columns of output positions [c0, c1) (flat, row-major) as a (Cg*KH*KW, c1 - c0)
    matrix."""
    Lp = c1 - c0
    r = 0
    for c in range(Cg):
        for ki in range(KH):
            for kj in range(KW):
                off = kj * dw - pw
                lo, hi = cols_range(off, sw, W, OW)
                for oh in range(c0 // OW, (c1 - 1) // OW + 1):
                    a, b = max(c0 - oh * OW, 0), min(c1 - oh * OW, OW)
                    d = r * Lp + oh * OW - c0
                    ih = oh * sh - ph + ki * dh
                    if ih < 0 or ih >= H:
                        for ow in range(a, b):
                            cols[d + ow] = 0
                        continue
                    s = xbase + (c * H + ih) * W + off
                    for ow in range(a, min(lo, b)):
                        cols[d + ow] = 0
                    if sw == 1:
                        for ow in range(max(lo, a), min(hi, b)):
                            cols[d + ow] = xp[s + ow]
                    else:
                        for ow in range(max(lo, a), min(hi, b)):
                            cols[d + ow] = xp[s + ow * sw]
                    for ow in range(max(hi, a), b):
                        cols[d + ow] = 0
                r += 1


@njit
def _gemm_conv(buf, x, w, wt, wk, o, N, C, H, W, O, g, Cg, KH, KW, sh, sw, ph, pw, dh, dw,
               OH, OW, zero, item, ep, pep, flags, c0, c1, r0, r1, fma):
    """Per batch and group: out (Og, L) = W_g (Og, Cg*k) @ cols (Cg*k, L), in k order,
    with the fused epilogue (if any) run by the gemm on its sums before it stores them
    (``pep``: its constants' address), or where the gemm cannot (its product swapped), on
    the block after it while it is recent; only output
    columns [c0, c1) of each plane, and rows [r0, r1) of each group's (a packed weight's
    rows from a panel boundary). ``buf`` holds the im2col columns, then the gemm's own
    scratch."""
    L = OH * OW
    og, kg = O // g, Cg * KH * KW
    pointwise = KH == 1 and KW == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0
    ncols = 0 if pointwise else kg * (c1 - c0)
    pcols = buf.ctypes.data
    cols = ptr_like(pcols, zero)
    gscr = buf[ncols:]
    xp = ptr_like(x[D_DATA], zero)
    nr = 64 // item  # a packed weight's group stride (see ordered.packed_size)
    wstep = (-(-og // 6) * 6 if wk == PK_A_ROWS else -(-og // nr) * nr) * kg * item
    for n in range(N):
        for gi in range(g):
            xbase = (n * C + gi * Cg) * H * W
            pwt = wt + gi * wstep + r0 * kg * item if wt else 0
            j0 = c0
            while j0 < c1:
                nc = c1 - j0
                # im2col in chunks whose columns the gemm reads while in cache (unless the
                # weight is packed by each gemm call: that would repeat)
                if not pointwise and wt and nc >= 2 * COL_CHUNK:
                    nc = COL_CHUNK
                # an epilogue the gemm cannot run goes in column chunks: each chunk's outputs
                # are still in cache when it runs (a pointwise 96 x 112*112 block is 4.8 MB)
                if flags and swapped_nb(r1 - r0, nc, nr) and nc >= 2 * EP_CHUNK:
                    nc = EP_CHUNK
                if pointwise:  # B: the input plane itself
                    pb, ldb = x[D_DATA] + (xbase + j0) * item, L
                else:
                    _im2col(cols, xp, xbase, Cg, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OW, j0,
                            j0 + nc)
                    pb, ldb = pcols, nc
                pe = pep + (gi * og + r0) * item if flags else 0
                done = ordered_gemm(r1 - r0, nc, kg, w[0] + (gi * og + r0) * kg * item, kg, 1,
                                    pb, ldb, 1,
                                    o[D_DATA] + ((n * O + gi * og + r0) * L + j0) * item, L,
                                    gscr, zero, item, pwt, wk if wt else 0, fma, pe, O,
                                    flags & EP_RELU)
                if flags and not done:
                    of = ptr_like(o[D_DATA], zero)
                    for oc in range(gi * og + r0, gi * og + r1):
                        channel_epilogue(of, (n * O + oc) * L + j0, nc, oc, O, ep, flags)
                j0 += nc


@njit
def conv_typed(block, zero, item):
    x = desc(block[B_X])
    w = desc(block[B_W])
    o = desc(block[B_OUT])
    nd = x[D_NDIM]
    if w[D_NDIM] != nd or o[D_NDIM] != nd or (nd != 3 and nd != 4):
        return INVALID_ARGUMENT
    N, C, O, Cg = x[D_SIZES], x[D_SIZES + 1], w[D_SIZES], w[D_SIZES + 1]
    H, KH = (x[D_SIZES + 2], w[D_SIZES + 2]) if nd == 4 else (1, 1)
    W, KW = x[D_SIZES + nd - 1], w[D_SIZES + nd - 1]
    sh, sw, ph, pw, dh, dw = (block[B_SH], block[B_SW], block[B_PH], block[B_PW], block[B_DH],
                              block[B_DW])
    g = block[B_G]
    if Cg * g != C or O % g != 0 or H + 2 * ph < dh * (KH - 1) + 1 \
            or W + 2 * pw < dw * (KW - 1) + 1:
        return INVALID_ARGUMENT
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    npart, part = block[B_NPART], block[B_PART]
    L = OH * OW
    if block[B_BIAS] != 0 and desc(block[B_BIAS])[3] != O:
        return INVALID_ARGUMENT
    # the whole call: with no parts, or from the prep call when these sizes are too small
    # to split (the bind-time split was for the upper-bound sizes)
    whole = npart == 0 or (part == PART_PREP and N * O * L * Cg * KH * KW < block[B_FN])
    if whole:
        st = _conv_part(block, x, w, o, nd, N, C, H, W, O, g, Cg, KH, KW, sh, sw, ph, pw, dh,
                        dw, OH, OW, 0, 1, zero, item)
        if st != OK:
            return st
    elif part == PART_PREP:
        return _conv_resize(o, nd, N, O, OH, OW)
    elif part != PART_POST:
        return _conv_part(block, x, w, o, nd, N, C, H, W, O, g, Cg, KH, KW, sh, sw, ph, pw, dh,
                          dw, OH, OW, part, npart, zero, item)
    if block[B_MOVE] != 0:  # the whole call's or the post call's move
        d = desc(block[B_MOVE])
        st = resize_to(d, (N, O, OH, OW), 4) if nd == 4 else resize_to(d, (N, O, OW), 3)
        if st != OK:
            return st
        _move(d[D_DATA], o[D_DATA], N * O * L, zero)
    return SPLIT_WHOLE if npart != 0 and part == PART_PREP else OK


@njit
def _conv_resize(o, nd, N, O, OH, OW):
    return resize_to(o, (N, O, OH, OW), 4) if nd == 4 else resize_to(o, (N, O, OW), 3)


@njit
def _conv_part(block, x, w, o, nd, N, C, H, W, O, g, Cg, KH, KW, sh, sw, ph, pw, dh, dw, OH,
               OW, part, npart, zero, item):
    """Part ``part`` of ``npart`` (the whole for 0 of 1, which also resizes the out): output
    planes [p0, p1), columns [c0, c1) of each."""
    if npart == 1:
        st = _conv_resize(o, nd, N, O, OH, OW)
        if st != OK:
            return st
    L = OH * OW
    if N * O * L == 0:
        return OK
    p0, p1, c0, c1, r0, r1 = 0, N * O, 0, L, 0, O // g
    al = block[B_ROWS]
    byrow = al > 0 and g == 1 and Cg != 1
    if Cg == 1 and O == g and KH == 3 and KW == 3 and item == 4:
        # whole groups of eight planes (``typed_lanes``): a plane is computed eight at a
        # time or alone (the remainder of an image's channels) whatever the split, and
        # math="fast" rounds the two ways differently
        G = (O + LANES - 1) // LANES
        g0, g1 = N * G * part // npart, N * G * (part + 1) // npart
        p0 = g0 // G * O + min(O, g0 % G * LANES)
        p1 = g1 // G * O + min(O, g1 % G * LANES)
    elif Cg == 1:  # whole planes of the direct loop
        p0, p1 = N * O * part // npart, N * O * (part + 1) // npart
    elif byrow:  # output channels: whole panels of the packed weight
        panels = (O + al - 1) // al
        r0, r1 = min(O, panels * part // npart * al), min(O, panels * (part + 1) // npart * al)
    else:  # columns of every plane: each part runs the gemm on its own im2col columns
        c0, c1 = L * part // npart, L * (part + 1) // npart
    if p0 >= p1 or c0 >= c1 or r0 >= r1:
        return OK
    # this part's output channels of each plane range [p0, p1): all, or its rows
    q0, q1 = (r0, r1) if byrow else (0, O)
    of = ptr_like(o[D_DATA], zero)
    if x[D_NUMEL] == 0:  # (``direct_conv`` zeroes the planes it adds onto)
        for p in range(p0, p1):
            if q0 <= p % O < q1:
                for i in range(p * L + c0, p * L + c1):
                    of[i] = zero
    # a fused epilogue (``bind_fused``): per channel once its values are done
    flags = block[B_EPF] if block[B_EP] else 0
    ep = ptr_like(block[B_EP] if flags else o[D_DATA], zero)
    if x[D_NUMEL] != 0:
        pointwise = KH == 1 and KW == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0
        if Cg == 1:
            # the zero-padded plane (if padded), then a flat stride-1 3x3 output plane
            need = ((H + 2 * ph) * (W + 2 * pw) + PAD_GAP if ph or pw else 0) \
                + H * (W + 2 * pw) + 2 * ph * (W + 2 * pw)
            if O == g and KH == 3 and KW == 3:
                need += lanes_scratch_nb(H, W, ph, pw, OH, OW, dh)
        else:
            kg = Cg * KH * KW
            need = (0 if pointwise else kg * (c1 - c0)) + gemm_scratch(O // g, c1 - c0, kg)
        if need <= block[B_SCRN] or need <= 1:
            buf = carray(ptr_like(block[B_SCR] if block[B_SCR] else o[D_DATA], zero), max(need, 1))
        else:  # sizes over the bind-time bound (a dynamic input grew in one dim): allocate
            buf = np.full(need, zero)
        if Cg == 1:
            direct_conv(buf, x, w, o, N, C, H, W, O, g, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW,
                    zero, item, ep, block[B_EP], flags, p0, p1, block[B_FMA])
        else:
            wt = block[B_WT]
            wk = block[B_WK] if wt else 0
            _gemm_conv(buf, x, w, wt, wk, o, N, C, H, W, O, g, Cg, KH, KW, sh, sw, ph, pw, dh,
                       dw, OH, OW, zero, item, ep, block[B_EP], flags, c0, c1, r0, r1,
                       block[B_FMA])
    elif flags:
        for p in range(p0, p1):
            if q0 <= p % O < q1:
                channel_epilogue(of, p * L + c0, c1 - c0, p % O, O, ep, flags)
    if block[B_BIAS] != 0:  # the bias last, as ExecuTorch adds it
        bf = ptr_like(desc(block[B_BIAS])[0], zero)
        for p in range(p0, p1):
            if q0 <= p % O < q1:
                v = bf[p % O]
                for i in range(p * L + c0, p * L + c1):
                    of[i] += v
    return OK


@njit
def _move(pd, ps, n, zero):
    """memmove of ``n`` elements: the final out may overlap the conv's out (the plan
    reuses dead memory)."""
    if pd == ps:
        return
    dst, src = ptr_like(pd, zero), ptr_like(ps, zero)
    if pd < ps:
        for i in range(n):
            dst[i] = src[i]
    else:
        for i in range(n - 1, -1, -1):
            dst[i] = src[i]


def conv_kernel(block):
    dt = desc(block[B_OUT])[1]
    if dt == ST_F32:
        return conv_typed(block, np.float32(0), 4)
    if dt == ST_F64:
        return conv_typed(block, 0.0, 8)
    return NOT_SUPPORTED


def int_list(values, k, lo=None):
    """``values`` as ``k`` ints (each >= ``lo`` if given), or None (the reference raises)."""
    if not isinstance(values, (list, tuple)) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in values):
        return None
    values = list(values)
    if len(values) == 1:
        values *= k
    if len(values) != k or (lo is not None and values and min(values) < lo):
        return None
    return values


def scratch_elems(og, cg, kern, sp, stride, padding, dilation, packed=False):
    """Scratch elements ``conv_typed`` needs at the load-time (upper-bound) 2-D sizes ``sp``: the
    direct loop's zero-padded plane, or the im2col columns plus the gemm's scratch."""
    osp = [max(0, (sp[i] + 2 * padding[i] - dilation[i] * (kern[i] - 1) - 1) // stride[i] + 1)
           for i in range(2)]
    if cg == 1:  # the padded plane (if padded), then a flat output plane as wide
        padded = prod(sp[i] + 2 * padding[i] for i in range(2))
        eight = lanes_scratch(sp[0], sp[1], padding[0], padding[1], osp[0], osp[1],
                              dilation[0]) \
            if og == 1 and kern == [3, 3] else 0
        return (padded + PAD_GAP if any(padding) else 0) + padded + eight
    pointwise = kern == [1, 1] and stride == [1, 1] and padding == [0, 0]
    kg, L = cg * prod(kern), prod(osp)
    return (0 if pointwise else kg * L) + scratch_size(og, L, kg)


def packed_weight(ctx, weight, groups, L, rows=None):
    """(address, kind): the weight packed per group for ``ordered_gemm`` (``pack_weight``,
    in the orientation the load-time output size ``L`` and a part's ``rows`` (default: a
    group's) pick) in a method-owned buffer, when it is a constant (read-only storage: it
    cannot change under the copy); else (0, 0)."""
    if weight.storage is None or weight.storage.flags.writeable or weight.shape[1] == 1:
        return 0, 0
    w = weight.numpy()
    og = w.shape[0] // groups
    w3 = w.reshape(groups, og, -1)
    parts = [pack_weight(w3[gi], rows or og, L, True) for gi in range(groups)]
    kind = parts[0][1]
    assert all(p.size == packed_size(og, L, w3.shape[2], kind, w.dtype.itemsize)
               for p, _ in parts)
    wt = np.concatenate([p for p, _ in parts])
    ctx.scratch.append(wt)
    return wt.ctypes.data, kind


def conv_scratch(ctx, nbytes, part=0):
    """(address, bytes) of one scratch buffer per method and part (instructions run one at
    a time, their parts at once), replaced by a larger one when a later convolution needs
    more."""
    bufs = ctx.__dict__.setdefault("_conv_scratch", {})
    cur = bufs.get(part)
    if cur is None or cur[1] < nbytes:
        cur = bufs[part] = (ctx.buffer(nbytes), nbytes)
    return cur


def _conv_words(ctx, input, weight, bias, stride, padding, dilation, transposed, groups, out):
    """(the argument block of a convolution ``conv_typed`` runs, up to B_WK; its parts' blocks
    (``_parts``)), or None."""
    dt = out.dtype
    if transposed or dt not in FLOATS or input.ndim not in (3, 4):
        return None
    k = input.ndim - 2
    ts = (input, weight, out) + (() if bias is None else (bias,))
    if any(t.dtype != dt or not t.is_contiguous() for t in ts) or weight.ndim != input.ndim \
            or out.ndim != input.ndim or (bias is not None and bias.ndim != 1):
        return None
    stride, padding, dilation = int_list(stride, k), int_list(padding, k), int_list(dilation, k)
    if stride is None or padding is None or dilation is None or isinstance(groups, bool) \
            or not isinstance(groups, int) or groups < 1 or min(stride) < 1 \
            or min(dilation) < 1 or min(padding) < 0:
        return None
    if k == 1:
        stride, padding, dilation = [1] + stride, [0] + padding, [1] + dilation
    sp = ([1] + list(input.shape[2:]))[-2:]
    kern = ([1] + list(weight.shape[2:]))[-2:]
    osp = [max(0, (sp[i] + 2 * padding[i] - dilation[i] * (kern[i] - 1) - 1) // stride[i] + 1)
           for i in range(2)]
    O, L = weight.shape[0], osp[0] * osp[1]
    macs = input.shape[0] * O * L * weight.shape[1] * prod(kern)
    split = macs >= SPLIT_MACS and ctx.threads > 1
    # a one-group gemm whose weight outweighs its columns (MobileNetV2's 7x7 and 14x14
    # pointwise layers) splits its output channels: each part reads its share of the weight
    byrow = split and groups == 1 and weight.shape[1] > 1 and O > L \
        and O >= ctx.threads * nr_of(dt.itemsize)
    wt, wk = packed_weight(ctx, weight, groups, L, -(-O // ctx.threads) if byrow else None)
    rows = (MR if wk == PK_A_ROWS or not wt else nr_of(dt.itemsize)) if byrow else 0
    nelem = scratch_elems(weight.shape[0] // groups, weight.shape[1], kern, sp, stride, padding,
                          dilation)
    words = [0, ctx.desc(input), ctx.desc(weight), 0 if bias is None else ctx.desc(bias),
             ctx.desc(out), stride[0], stride[1], padding[0], padding[1], dilation[0],
             dilation[1], groups, 0, 0, wt, wk]
    # the parts: whole planes (one input channel per group), channels or columns; at least
    # one each
    if byrow:
        span = -(-O // rows)
    else:
        span = input.shape[0] * O if weight.shape[1] == 1 else L
    n = min(ctx.threads, span) if split else 1
    parts = []
    for k in range(n):
        w = list(words)
        w[B_SCR], w[B_SCRN] = conv_scratch(ctx, nelem * dt.itemsize, k) if nelem else (0, 0)
        w[B_SCRN] //= dt.itemsize
        parts.append(w)
    return parts[0], parts if n > 1 else [], rows


def _bind(ctx, words, parts, rows, tail, weight):
    """The whole call's block, and its parts' (``BindContext.bind_split``)."""
    fn = lazy(conv_kernel)
    # math="fast": the gemm's multiply-adds fused, and a float32 depthwise 3x3's
    # (``typed_lanes``; other direct loops are bound by their loads: they run as in exact
    # mode)
    lanes = weight.shape[0] == words[B_G] and tuple(weight.shape[2:]) == (3, 3) \
        and weight.dtype == np.float32
    fma = ctx.pick_fast() if (weight.shape[1] != 1 or lanes) and has_fma() else 0
    if not parts:
        return ctx.bind(fn, words + tail + [0, 0, 0, fma])
    n = len(parts)
    return ctx.bind_split(fn, words + tail + [0, 0, 0, fma],
                          [w + tail + [k, n, rows, fma] for k, w in enumerate(parts)],
                          [SPLIT_MACS] + words[1:] + tail + [PART_PREP, n, rows, fma],
                          words + tail + [PART_POST, n, rows, fma] if tail[2] else None)


def bind_convolution(ctx, input, weight, bias, stride, padding, dilation, transposed,
                     output_padding, groups, out):  # noqa: A002 - schema names
    r = _conv_words(ctx, input, weight, bias, stride, padding, dilation, transposed, groups,
                    out)
    return None if r is None else _bind(ctx, *r, [0, 0, 0], weight)


def _constant(t, n, dt):
    """``t``'s values when it is a constant (read-only storage) vector of ``n`` ``dt``."""
    if t is None or t.storage is None or t.storage.flags.writeable or t.dtype != dt \
            or t.shape != (n,) or not t.is_contiguous():
        return None
    return t.numpy()


def bind_fused(ctx, conv, bn, act, out, conv_out=None):
    """One kernel for a convolution, the batch norm reading it and the activation reading
    that, written straight to the last one's ``out`` (the instructions and conditions are
    ``pyruntime.fusion``'s). ``conv``: the convolution's arguments without its out;
    ``bn``: (weight, bias, running_mean, running_var, eps) of
    ``_native_batch_norm_legit_no_training`` or None; ``act``: ("clamp", min, max) with
    bounds the compiled clamp takes (``elementwise.bounds_ok``), ("relu",) or None. The
    per-channel constants are read here, so the bias and the batch norm's tensors must be
    constants. The values are bit for bit the unfused ones: the same
    float operations on each element, in the same order (``channel_epilogue``). With
    ``conv_out`` (when ``out`` overlaps the input or the weight, which are read while
    results are written), the kernel writes there and then moves the result to ``out``.
    None if not fusable."""
    input, weight, bias, stride, padding, dilation, transposed, _, groups = conv
    if conv_out is not None and (conv_out.dtype != out.dtype or conv_out.shape != out.shape
                                 or not out.is_contiguous()):
        return None
    r = _conv_words(ctx, input, weight, None, stride, padding, dilation, transposed, groups,
                    out if conv_out is None else conv_out)
    if r is None:
        return None
    dt, O = out.dtype, weight.shape[0]
    # per channel: conv bias, batch norm mean, invstd, weight, bias, clamp lo, hi; each
    # part not fused holds its exact identity (see channel_epilogue)
    ep = np.empty((7, O), dt)
    ep[:] = np.array([-0.0, 0.0, 1.0, 1.0, -0.0, -np.inf, np.inf], dt)[:, None]
    flags = 0
    if bias is not None:
        b = _constant(bias, O, dt)
        if b is None:
            return None
        ep[0], flags = b, flags | EP_BIAS
    if bn is not None:
        w, b, mean, var, eps = bn
        mean, var = _constant(mean, O, dt), _constant(var, O, dt)
        if mean is None or var is None or not isinstance(eps, float):
            return None
        w = np.ones(O, dt) if w is None else _constant(w, O, dt)
        b = np.zeros(O, dt) if b is None else _constant(b, O, dt)
        if w is None or b is None:
            return None
        # as batch_norm_kernel: invstd in float64, rounded once to the dtype
        ep[1], ep[2] = mean, (1.0 / np.sqrt(var.astype(np.float64) + eps)).astype(dt)
        ep[3], ep[4] = w, b
        flags |= EP_BN
    if act is not None:
        if act[0] == "relu":
            flags |= EP_RELU
        else:
            ep[5], ep[6] = dt.type(act[1]), dt.type(act[2])  # as the unary kernel rounds them
            flags |= EP_CLAMP
    if not flags:
        return None
    ctx.scratch.append(ep)
    move = 0 if conv_out is None else ctx.desc(out)
    return _bind(ctx, *r, [ep.ctypes.data, flags, move], weight)
