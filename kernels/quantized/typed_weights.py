"""Compiled weight-only quantized ops: ``quantized_decomposed::embedding_byte`` /
``embedding_2bit`` / ``embedding_4bit`` (rows unpacked and dequantized per group) and the
mixed-precision ``mixed_mm`` / ``mixed_linear`` (weight panels dequantized into float32
tiles, then a BLAS product).
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.blas import gemm_addr, matmul_strided
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_I8, desc,
                                       descs, is_contiguous, lazy, load_f64, offset_of, ptr_like,
                                       resize_to, same_shape, store_f64)
from pyruntime.kernels.quantized.typed import (F32, FLOATS, INTS, dtype_ok, ldf32, ldi, pos,
                                               quant_code)


# ---- embeddings ---------------------------------------------------------------------

@njit(inline="always")
def _unpacked(nbit, wa, wst, roff, cs, col):
    """Signed value ``col`` of the packed weight row at ``roff`` (column stride ``cs``)."""
    if nbit == 8:
        return ldi(wa, wst, roff + col * cs)
    p = ptr_like(wa, np.uint8(0))
    if nbit == 4:
        byte = np.int64(p[roff + (col >> 1) * cs])
        return (byte >> 4 if col & 1 == 0 else byte & 0xF) - 8
    byte = np.int64(p[roff + (col >> 2) * cs])
    return ((byte >> (2 * (col & 3))) & 3) - 2


@njit
def _emb_group(nbit, wa, wst, roff, cs, c0, c1, zc, sc, o, ost, kbase, oc):
    """Out elements kbase + c0 .. kbase + c1 of one group: (value - zero point) * scale."""
    if oc and ost == ST_F32:  # the common case, typed
        yp = ptr_like(o[D_DATA], np.float32(0))
        if nbit == 8 and wst == ST_I8:
            xi = ptr_like(wa, np.int8(0))
            for c in range(c0, c1):
                yp[kbase + c] = (np.float32(xi[roff + c * cs]) - zc) * sc
        elif nbit == 8:
            xu = ptr_like(wa, np.uint8(0))
            for c in range(c0, c1):
                yp[kbase + c] = (np.float32(xu[roff + c * cs]) - zc) * sc
        else:
            for c in range(c0, c1):
                yp[kbase + c] = (np.float32(_unpacked(nbit, wa, wst, roff, cs, c)) - zc) * sc
        return
    for c in range(c0, c1):
        v = (np.float32(_unpacked(nbit, wa, wst, roff, cs, c)) - zc) * sc
        k = kbase + c
        store_f64(o[D_DATA], ost, k if oc else offset_of(o, k), np.float64(v))


def embedding_kernel(blk):
    nbit = blk[0]
    w, s = descs(blk, 1, 2)
    za = blk[3]
    ix, o = descs(blk, 4, 2)
    wst, sst, zst, ist, ost = blk[6], blk[7], blk[8], blk[9], blk[10]
    rows = w[D_SIZES]
    dim = w[D_SIZES + 1] * (8 // nbit)
    if s[D_SIZES] != rows:
        return INVALID_ARGUMENT
    groups = 1 if s[D_NDIM] == 1 else s[D_SIZES + 1]
    if groups == 0 or dim % groups:
        return INVALID_ARGUMENT
    zd = s
    if za != 0:
        zd = desc(za)
        if not same_shape(zd, s):
            return INVALID_ARGUMENT
    ntok = ix[D_NUMEL]
    for t in range(ntok):
        r = ldi(ix[D_DATA], ist, pos(ix, t))
        if r < 0 or r >= rows:
            return INVALID_ARGUMENT
    nd = ix[D_NDIM]
    sizes = np.empty(16, np.int64)
    for i in range(nd):
        sizes[i] = ix[D_SIZES + i]
    sizes[nd] = dim
    st = resize_to(o, sizes, nd + 1)
    if st != OK:
        return st
    gs = dim // groups
    gstride = s[D_STRIDES + 1] if s[D_NDIM] == 2 else 0
    zgstride = zd[D_STRIDES + 1] if zd[D_NDIM] == 2 else 0
    oc = is_contiguous(o)
    for t in range(ntok):
        r = ldi(ix[D_DATA], ist, pos(ix, t))
        roff = r * w[D_STRIDES]
        for g in range(groups):
            sc = ldf32(s[D_DATA], sst, r * s[D_STRIDES] + g * gstride)
            zc = np.float32(0)
            if za != 0:
                zc = ldf32(zd[D_DATA], zst, r * zd[D_STRIDES] + g * zgstride)
            _emb_group(nbit, w[D_DATA], wst, roff, w[D_STRIDES + 1], g * gs, (g + 1) * gs, zc, sc,
                       o, ost, t * dim, oc)
    return OK


def _bind_embedding(ctx, nbit, weight, weight_scales, weight_zero_points, indices, dtype, out):
    wdt = (np.dtype(np.uint8), np.dtype(np.int8)) if nbit == 8 else (np.dtype(np.uint8),)
    z = weight_zero_points
    if (weight.ndim != 2 or weight.dtype not in wdt or weight_scales.ndim not in (1, 2)
            or weight_scales.dtype not in FLOATS or out.dtype not in FLOATS
            or not dtype_ok(dtype, out) or indices.dtype not in INTS
            or (z is not None and (z.ndim != weight_scales.ndim or quant_code(z) is None))):
        return None
    return ctx.bind(lazy(embedding_kernel), [
        nbit, ctx.desc(weight), ctx.desc(weight_scales), 0 if z is None else ctx.desc(z),
        ctx.desc(indices), ctx.desc(out), quant_code(weight), quant_code(weight_scales),
        0 if z is None else quant_code(z), quant_code(indices), quant_code(out)])


def _register_embeddings():
    for nbit, name in ((8, "byte"), (4, "4bit"), (2, "2bit")):
        def make(nbit):
            def emb(ctx, weight, weight_scales, weight_zero_points, weight_quant_min,
                    weight_quant_max, indices, out):
                return _bind_embedding(ctx, nbit, weight, weight_scales, weight_zero_points,
                                       indices, None, out)

            def emb_dtype(ctx, weight, weight_scales, weight_zero_points, weight_quant_min,
                          weight_quant_max, indices, dtype, out):
                return _bind_embedding(ctx, nbit, weight, weight_scales, weight_zero_points,
                                       indices, dtype, out)
            return emb, emb_dtype

        emb, emb_dtype = make(nbit)
        register_fast(f"quantized_decomposed::embedding_{name}.out")(emb)
        register_fast(f"quantized_decomposed::embedding_{name}.dtype_out")(emb_dtype)


_register_embeddings()


# ---- mixed-precision matmuls ---------------------------------------------------------
OP_MM, OP_LINEAR = 0, 1


@njit
def _to_f32(d, st, dst, n):
    """Logical elements of ``d`` as a contiguous float32 array at ``dst``."""
    p = ptr_like(dst, np.float32(0))
    c = is_contiguous(d)
    for k in range(n):
        p[k] = np.float32(load_f64(d[D_DATA], st, k if c else offset_of(d, k)))


@njit
def _panel(op, w, s, sst, wt, j0, nj, kk, g, ng):
    """Dequantized weight for output columns j0 .. j0+nj: a [k, nj] (mm) or [nj, k]
    (linear) float32 panel at ``wt``: ``float32(w) * float32(scale)`` as the reference.
    Strides are held in locals: stores through ``wt`` could alias the descriptors."""
    wp = ptr_like(w[0], np.int8(0))
    w0, w1 = w[24], w[25]
    sa, s0 = s[D_DATA], s[D_STRIDES]
    if op == OP_MM:  # weight [k, p], one scale per row q
        for q in range(kk):
            sc = ldf32(sa, sst, q * s0)
            base = q * w0 + j0 * w1
            for j in range(nj):
                wt[q * nj + j] = np.float32(wp[base + j * w1]) * sc
        return
    s1 = s[D_STRIDES + 1] if s[D_NDIM] == 2 else 0
    for j in range(nj):  # weight [p, k], scales [p, groups]: group q // g
        row = (j0 + j) * w0
        for gi in range(ng):
            sc = ldf32(sa, sst, (j0 + j) * s0 + gi * s1)
            q0 = gi * g
            q1 = min(kk, q0 + g)
            if w1 == 1:
                for q in range(q0, q1):
                    wt[j * kk + q] = np.float32(wp[row + q]) * sc
            else:
                for q in range(q0, q1):
                    wt[j * kk + q] = np.float32(wp[row + q * w1]) * sc


def mixed_kernel(blk):
    op = blk[0]
    fn = blk[1]
    x, w, s, o = descs(blk, 2, 4)
    xst, sst, ost = blk[6], blk[7], blk[8]
    tile, tile_cap, xbuf, obuf = blk[9], blk[10], blk[11], blk[12]
    if x[D_NDIM] != 2 or w[D_NDIM] != 2:
        return INVALID_ARGUMENT
    m, kk = x[D_SIZES], x[D_SIZES + 1]
    g = 1
    ng = 1
    if op == OP_MM:  # weight [k, p], scales [k]
        p = w[D_SIZES + 1]
        if w[D_SIZES] != kk or s[D_NDIM] != 1 or s[D_SIZES] != kk:
            return INVALID_ARGUMENT
    else:  # weight [p, k], scales [p] or [p, groups]; group size g = ceil(k / groups)
        p = w[D_SIZES]
        if (w[D_SIZES + 1] != kk or s[D_NDIM] > 2 or s[D_NDIM] == 0 or s[D_SIZES] != p
                or s[D_NUMEL] == 0 or kk == 0):
            return INVALID_ARGUMENT
        ng = s[D_SIZES + 1] if s[D_NDIM] == 2 else 1
        g = -(-kk // ng)
        if -(-kk // g) != ng:
            return INVALID_ARGUMENT
    sizes = np.empty(2, np.int64)
    sizes[0] = m
    sizes[1] = p
    st = resize_to(o, sizes, 2)
    if st != OK:
        return st
    if m * p == 0:
        return OK
    xa = x[D_DATA]
    if xst != ST_F32 or not is_contiguous(x):
        if m * kk > blk[13]:
            return NOT_SUPPORTED
        _to_f32(x, xst, xbuf, m * kk)
        xa = xbuf
    direct = ost == ST_F32 and is_contiguous(o)
    oa = o[D_DATA] if direct else obuf
    if not direct and m * p > blk[14]:
        return NOT_SUPPORTED
    cols = min(p, tile_cap // kk) if kk else p
    if cols == 0:
        return NOT_SUPPORTED
    wt = ptr_like(tile, np.float32(0))
    mk = np.float32(0)
    for j0 in range(0, p, cols):
        nj = min(cols, p - j0)
        _panel(op, w, s, sst, wt, j0, nj, kk, g, ng)
        if op == OP_MM:
            st = matmul_strided(fn, m, nj, kk, np.float32(1), xa, kk, 1, tile, nj, 1, mk,
                                oa + 4 * j0, p, mk)
        else:
            st = matmul_strided(fn, m, nj, kk, np.float32(1), xa, kk, 1, tile, 1, kk, mk,
                                oa + 4 * j0, p, mk)
        if st != OK:
            return st
    if not direct:
        oc = is_contiguous(o)
        src = ptr_like(obuf, np.float32(0))
        for k in range(m * p):
            store_f64(o[D_DATA], ost, k if oc else offset_of(o, k), np.float64(src[k]))
    return OK


TILE_FLOATS = 1 << 16  # dequantized weight panel: 256 KiB


def _bind_mixed(ctx, op, input, weight, weight_scales, weight_zero_points, out):
    fn = gemm_addr(np.float32)
    if (not fn or input.ndim != 2 or weight.ndim != 2 or weight.dtype != np.int8
            or input.dtype not in FLOATS or weight_zero_points is not None
            or out.dtype not in FLOATS or quant_code(weight_scales) is None):
        return None
    k = input.sizes[1]
    tile_cap = max(TILE_FLOATS, 8 * k)
    direct_x = input.dtype == F32 and input.is_contiguous()
    direct_o = out.dtype == F32 and out.is_contiguous()
    xcap = 0 if direct_x else input.capacity
    ocap = 0 if direct_o else out.capacity
    return ctx.bind(lazy(mixed_kernel), [
        op, fn, ctx.desc(input), ctx.desc(weight), ctx.desc(weight_scales), ctx.desc(out),
        quant_code(input), quant_code(weight_scales), quant_code(out), ctx.buffer(4 * tile_cap),
        tile_cap,
        ctx.buffer(4 * xcap) if xcap else 0, ctx.buffer(4 * ocap) if ocap else 0, xcap, ocap])


@register_fast("quantized_decomposed::mixed_mm.out")
def bind_mixed_mm(ctx, input, weight, weight_scales, weight_zero_points, out):
    return _bind_mixed(ctx, OP_MM, input, weight, weight_scales, weight_zero_points, out)


@register_fast("quantized_decomposed::mixed_linear.out")
def bind_mixed_linear(ctx, input, weight, weight_scales, weight_zero_points, dtype, out):
    if not dtype_ok(dtype, out):
        return None
    return _bind_mixed(ctx, OP_LINEAR, input, weight, weight_scales, weight_zero_points, out)
