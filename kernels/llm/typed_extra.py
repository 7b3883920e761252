"""Compiled LLM custom ops of ``kernels/llm/reference_extra.py``: quantized SDPA, the gated
delta rule, the quantized MoE FFN, ``llama::fallback`` and ``preprocess::tile_crop``.

* ``custom_quantized_sdpa``: int8 q/k/v (per-token qparams, float32 out) and
  float32/float16/bfloat16 q/k/v, any dim order (elements are addressed through
  the descriptors' strides). Per query row: scores in float64 from the float32
  dequantized values, a two-pass softmax, then the weighted sum of values.
* ``gated_delta_rule`` (and its alias): float32, contiguous; the C++ decode
  recurrence (two passes over the K x V state per token) for every T.
* ``quantized_moe_ffn``: float32; router and expert GEMMs through BLAS sgemm;
  expert weights are unpacked from the torchao blobs into scratch per call,
  only for the experts that some token picked. Declines without BLAS.
* ``fallback`` / ``tile_crop``: byte moves through the strided copy engine of
  ``kernels.shape.typed`` (any dtype, any dim order).

Results match the reference kernels to float rounding (summation order), not
bit for bit, except the two copies.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.cython_ext.errors import ExecuTorchError
from pyruntime.kernels.llm import reference_extra as ref
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.blas import NO_TRANS, TRANS, gemm, gemm_addr
from pyruntime.kernels.fast.copy_engine import SCRATCH_WORDS, W_DS, W_SS, W_SZ, copy_nd, scratch
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.llm.typed import attn_span
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_I8,
                                       bits_to_f64, desc, descs, is_contiguous, lazy, load_f64,
                                       ptr_like, resize_to, store_f64)

F32 = np.dtype(np.float32)
NEG_INF = -np.inf


def _checked(check, *args) -> bool:
    """True when the reference kernel's argument check passes (else it raises there)."""
    try:
        check(*args)
    except ExecuTorchError:
        return False
    return True


# ---- custom_quantized_sdpa ------------------------------------------------------------

@njit(inline="always")
def _off(t, b, s, h, d, sd, hd):
    return b * t[D_STRIDES] + s * t[D_STRIDES + sd] + h * t[D_STRIDES + hd] + d * t[D_STRIDES + 3]


@njit(inline="always")
def _raw(addr, st, i):
    """Element ``i`` (int8 as its integer value) as float64."""
    if st == ST_I8:
        return np.float64(ptr_like(addr, np.int8(0))[i])
    if st == ST_F32:
        return np.float64(ptr_like(addr, np.float32(0))[i])
    return load_f64(addr, st, i)


@njit
def _dot(addr, st, base, step, x, n):
    """sum_d x[d] * t[base + d * step] in float64, four partial sums (no serial chain)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    d = 0
    while d + 4 <= n:
        s0 += x[d] * _raw(addr, st, base + d * step)
        s1 += x[d + 1] * _raw(addr, st, base + (d + 1) * step)
        s2 += x[d + 2] * _raw(addr, st, base + (d + 2) * step)
        s3 += x[d + 3] * _raw(addr, st, base + (d + 3) * step)
        d += 4
    while d < n:
        s0 += x[d] * _raw(addr, st, base + d * step)
        d += 1
    return (s0 + s1) + (s2 + s3)


@njit
def _axpy(acc, p, addr, st, base, step, n):
    for d in range(n):
        acc[d] += p * _raw(addr, st, base + d * step)


@njit(inline="always")
def _qparams(zq, sq, b, s, h, sd, hd, quant):
    if not quant:
        return np.int64(0), np.float32(1)
    z = desc(zq)
    c = desc(sq)
    zp = np.int64(ptr_like(z[D_DATA], np.int8(0))[_off(z, b, s, h, 0, sd, hd)])
    return zp, ptr_like(c[D_DATA], np.float32(0))[_off(c, b, s, h, 0, sd, hd)]


@njit
def _qparams_ok(t, zq, sq):
    for a in (desc(zq), desc(sq)):
        if a[D_NDIM] != 4 or a[D_SIZES + 3] < 1:
            return False
        for i in range(3):
            if a[D_SIZES + i] != t[D_SIZES + i]:
                return False
    return True


def sdpa_kernel(block):
    q, k, v, o = descs(block, 0, 4)
    quant = block[5] != 0
    start = block[6]
    causal = block[7] != 0
    sd, hd = (2, 1) if block[8] != 0 else (1, 2)
    scale32 = np.float32(bits_to_f64(block[9]))
    nb, ns, nh, nd = q[D_SIZES], q[D_SIZES + sd], q[D_SIZES + hd], q[D_SIZES + 3]
    nl, nhk = k[D_SIZES + sd], k[D_SIZES + hd]
    for i in range(4):
        if v[D_SIZES + i] != k[D_SIZES + i]:
            return INVALID_ARGUMENT
    if k[D_SIZES] != nb or k[D_SIZES + 3] != nd or nhk <= 0 or nh % nhk != 0:
        return INVALID_ARGUMENT
    if quant and not (_qparams_ok(q, block[10], block[11]) and _qparams_ok(k, block[12], block[13])
                      and _qparams_ok(v, block[14], block[15])):
        return INVALID_ARGUMENT
    has_mask = block[4] != 0
    m, length = attn_span(block[4], q, ns, nl, start)
    if length < 0:
        return INVALID_ARGUMENT
    st = resize_to(o, q[D_SIZES:D_SIZES + 4], 4)
    if st != OK:
        return st
    if block[16] == 0:
        scale32 = np.float32(1.0 / math.sqrt(nd))
    rep = nh // nhk
    scores = np.empty(max(length, 1), np.float64)
    qrow = np.empty(max(nd, 1), np.float64)
    acc = np.empty(max(nd, 1), np.float64)
    # int8: x = (q - zp) * scale, factored out of the sums: scale * (sum x q - zp * sum x)
    for b in range(nb):
        for h in range(nh):
            kh = h // rep
            for i in range(ns):
                zp, sc = _qparams(block[10], block[11], b, i, h, sd, hd, quant)
                qsum = 0.0
                for d in range(nd):
                    x = _raw(q[D_DATA], q[D_DTYPE], _off(q, b, i, h, d, sd, hd))
                    if quant:
                        x = np.float64(np.float32(np.float32(x - zp) * sc))
                    qrow[d] = x
                    qsum += x
                mx = NEG_INF
                for j in range(length):
                    if causal and j > start + i:  # never read, as in the C++
                        scores[j] = NEG_INF
                        continue
                    kz, ks = _qparams(block[12], block[13], b, j, kh, sd, hd, quant)
                    dot = _dot(k[D_DATA], k[D_DTYPE], _off(k, b, j, kh, 0, sd, hd),
                               k[D_STRIDES + 3], qrow, nd)
                    if quant:
                        dot = ks * (dot - kz * qsum)
                    s32 = np.float32(np.float32(dot) * scale32)
                    if has_mask:
                        mv = load_f64(m[0], m[1], i * m[24] + j * m[25])
                        s32 = np.float32(s32 + np.float32(mv))
                    scores[j] = s32
                    if mx == mx and (s32 > mx or s32 != s32):  # NaN propagates, as np.max
                        mx = s32
                total = 0.0
                for j in range(length):
                    e = math.exp(scores[j] - mx)
                    scores[j] = e
                    total += e
                for d in range(nd):
                    acc[d] = 0.0
                shift = 0.0
                for j in range(min(length, start + i + 1) if causal else length):
                    p = scores[j] / total
                    vz, vs = _qparams(block[14], block[15], b, j, kh, sd, hd, quant)
                    if quant:
                        p *= vs
                        shift += p * vz
                    _axpy(acc, p, v[D_DATA], v[D_DTYPE], _off(v, b, j, kh, 0, sd, hd),
                          v[D_STRIDES + 3], nd)
                for d in range(nd):
                    store_f64(o[D_DATA], o[D_DTYPE], _off(o, b, i, h, d, sd, hd), acc[d] - shift)
    return OK


@register_fast("llama::custom_quantized_sdpa.out")
def bind_custom_quantized_sdpa(ctx, query, key, value, start_pos, attn_mask, drpout_p, is_causal,
                               scale, q_zero_points, q_scales, k_zero_points, k_scales,
                               v_zero_points, v_scales, is_seq_at_dim_2, out):
    qparams = (q_zero_points, q_scales, k_zero_points, k_scales, v_zero_points, v_scales)
    if isinstance(start_pos, bool) or not isinstance(start_pos, int) or not _checked(
            ref.check_quantized_sdpa, "", query, key, value, start_pos, attn_mask, is_causal,
            qparams, is_seq_at_dim_2, out):
        return None
    quant = query.dtype == ref.I8
    words = [ctx.desc(query), ctx.desc(key), ctx.desc(value), ctx.desc(out),
             0 if attn_mask is None else ctx.desc(attn_mask), int(quant), start_pos,
             int(bool(is_causal)), int(bool(is_seq_at_dim_2)), ctx.f64(scale or 0.0)]
    words += [ctx.desc(t) if quant else 0 for t in qparams]
    words.append(int(scale is not None))
    return ctx.bind(lazy(sdpa_kernel), words)


# ---- gated delta rule -----------------------------------------------------------------

def gdr_kernel(block):
    q, k, v, g, bt, s0, o, fs = descs(block, 0, 8)
    nb, nh, nt, nk = q[D_SIZES], q[D_SIZES + 1], q[D_SIZES + 2], q[D_SIZES + 3]
    nhs, nv = k[D_SIZES + 1], v[D_SIZES + 3]
    scalar = g[D_NDIM] == 3
    if (k[D_SIZES] != nb or k[D_SIZES + 2] != nt or k[D_SIZES + 3] != nk or nhs <= 0
            or nh % nhs != 0
            or v[D_SIZES] != nb or v[D_SIZES + 1] != nhs or v[D_SIZES + 2] != nt
            or g[D_SIZES] != nb or g[D_SIZES + 1] != nhs or g[D_SIZES + 2] != nt
            or (not scalar and g[D_SIZES + 3] != nk)
            or bt[D_SIZES] != nb or bt[D_SIZES + 1] != nhs or bt[D_SIZES + 2] != nt
            or s0[D_SIZES] != nb or s0[D_SIZES + 1] != nhs or s0[D_SIZES + 2] != nk
            or s0[D_SIZES + 3] != nv):
        return INVALID_ARGUMENT
    for t in (q, k, v, g, bt, s0):
        if not is_contiguous(t):
            return NOT_SUPPORTED
    st = resize_to(o, (nb, nh, nt, nv), 4)
    if st != OK:
        return st
    st = resize_to(fs, (nb, nhs, nk, nv), 4)
    if st != OK:
        return st
    if not (is_contiguous(o) and is_contiguous(fs)):
        return NOT_SUPPORTED
    n = s0[D_NUMEL] * 4
    # the C++ rejects aliasing too
    if n > 0 and s0[D_DATA] < fs[D_DATA] + n and fs[D_DATA] < s0[D_DATA] + n:
        return INVALID_ARGUMENT
    m = np.float32(0)
    qp, kp, vp = ptr_like(q[D_DATA], m), ptr_like(k[D_DATA], m), ptr_like(v[D_DATA], m)
    gp, bp, ip = ptr_like(g[D_DATA], m), ptr_like(bt[D_DATA], m), ptr_like(s0[D_DATA], m)
    op, sp = ptr_like(o[D_DATA], m), ptr_like(fs[D_DATA], m)
    rep = nh // nhs
    pred = np.empty(max(nv, 1), np.float32)
    delta = np.empty(max(nv, 1), np.float32)
    kv = nk * nv
    for bh in range(nb * nhs):
        sb = bh * kv
        for i in range(kv):
            sp[sb + i] = ip[sb + i]
        for t in range(nt):
            row = bh * nt + t
            kb = row * nk
            vb = row * nv
            beta = bp[row]
            for j in range(nv):
                pred[j] = 0
            for c in range(nk):
                dc = gp[row] if scalar else gp[kb + c]
                kc = kp[kb + c]
                r = sb + c * nv
                for j in range(nv):
                    pred[j] += (sp[r + j] * dc) * kc
            for j in range(nv):
                delta[j] = (vp[vb + j] - pred[j]) * beta
            for c in range(nk):
                dc = gp[row] if scalar else gp[kb + c]
                kc = kp[kb + c]
                r = sb + c * nv
                for j in range(nv):
                    sp[r + j] = sp[r + j] * dc + kc * delta[j]
            for rr in range(rep):  # query heads sharing this state head
                qrow = ((bh // nhs) * nh + (bh % nhs) * rep + rr) * nt + t
                ob = qrow * nv
                for j in range(nv):
                    op[ob + j] = 0
                for c in range(nk):
                    qc = qp[qrow * nk + c]
                    r = sb + c * nv
                    for j in range(nv):
                        op[ob + j] += sp[r + j] * qc
    return OK


@register_fast("llama::gated_delta_rule.out", "llama::channelwise_gated_delta_rule.out")
def bind_gated_delta_rule(ctx, query, key, value, decay, beta, initial_state, out,
                          final_state_out):
    ts = (query, key, value, decay, beta, initial_state, out, final_state_out)
    if not all(t.is_contiguous() for t in ts) or not _checked(ref.check_gated_delta, "", *ts):
        return None
    return ctx.bind(lazy(gdr_kernel), [ctx.desc(t) for t in ts])


# ---- quantized MoE FFN ------------------------------------------------------------------

@njit
def _unpack(blob, n, kk, gs, nbit, w):
    """Dequantize a universal-packed [n, kk] weight (see kernels/llm/reference_extra.py) into w.

    Per 16 columns of a group, 128 values ordered (half of the 16, row j, 8 values): 8-bit
    values are int8; 4-bit runs of 16 bytes hold runs of 32 values, byte i the i-th (low
    nibble) and the (i+16)-th (high nibble), i.e. rows j and j + 2 of the same columns."""
    p = ptr_like(blob, np.uint8(0))
    ng, nc = kk // gs, gs // 16
    chunk = 16 * nbit
    grp = nc * chunk + 64
    for bi in range((n + 7) // 8):
        for gi in range(ng):
            base = 64 + (bi * ng + gi) * grp
            scales = ptr_like(blob + base + nc * chunk, np.float32(0))
            for ci in range(nc):
                cb = base + ci * chunk
                col = gi * gs + ci * 16
                if nbit == 8:
                    for half in range(2):
                        for j in range(min(8, n - bi * 8)):
                            sc = scales[j]
                            o = (bi * 8 + j) * kk + col + half * 8
                            src = cb + half * 64 + j * 8
                            for u in range(8):
                                w[o + u] = np.float32(np.int8(p[src + u])) * sc
                    continue
                for r in range(4):
                    half = r // 2
                    for i8 in range(2):
                        jl = 4 * (r % 2) + i8
                        src = cb + r * 16 + i8 * 8
                        for jj, shift in ((jl, 0), (jl + 2, 4)):
                            if bi * 8 + jj >= n:
                                continue
                            sc = scales[jj]
                            o = (bi * 8 + jj) * kk + col + half * 8
                            for u in range(8):
                                qv = ((np.int32(p[src + u]) >> shift) & 15) - 8
                                w[o + u] = np.float32(qv) * sc


@njit(inline="always")
def _sigmoid32(x):
    if x >= 0:
        return np.float32(1) / (np.float32(1) + np.exp(-x))
    e = np.exp(x)
    return e / (np.float32(1) + e)


@njit
def _route(scores, sel, idx, wts, nt, ne, kk, sigmoid, rs):
    """Top-k (ties to the lower index, NaN last) and routing weights per token."""
    for t in range(nt):
        for s in range(kk):
            best = -1
            bv = np.float32(NEG_INF)
            for e in range(ne):
                taken = False
                for j in range(s):
                    if idx[t * kk + j] == e:
                        taken = True
                if taken:
                    continue
                x = sel[t * ne + e]
                if x > bv or (x == bv and best < 0):
                    bv = x
                    best = e
            if best < 0:  # only NaN left: the lowest unselected index
                for e in range(ne):
                    taken = False
                    for j in range(s):
                        if idx[t * kk + j] == e:
                            taken = True
                    if not taken:
                        best = e
                        break
            idx[t * kk + s] = best
            wts[t * kk + s] = scores[t * ne + best]
        if sigmoid:
            total = np.float32(0)
            for s in range(kk):
                total += wts[t * kk + s]
            f = rs / max(total, np.float32(1.1754943508222875e-38))
            for s in range(kk):
                wts[t * kk + s] *= f
        else:
            mx = wts[t * kk]
            for s in range(1, kk):
                mx = max(mx, wts[t * kk + s])
            total = np.float32(0)
            for s in range(kk):
                wts[t * kk + s] = np.exp(wts[t * kk + s] - mx)
                total += wts[t * kk + s]
            inv = np.float32(1) / total
            for s in range(kk):
                wts[t * kk + s] *= inv


def moe_kernel(block):
    x, gw = descs(block, 0, 2)
    o = desc(block[5])
    kk, ne, nf, nd, gs, nbit = block[6], block[7], block[8], block[9], block[10], block[11]
    sigmoid = block[12] != 0
    rs = np.float32(bits_to_f64(block[13]))
    fn, tmax = block[14], block[17]
    if x[D_NDIM] != 2 or x[D_SIZES + 1] != nd or x[D_SIZES] > tmax or not is_contiguous(x):
        return INVALID_ARGUMENT
    nt = x[D_SIZES]
    st = resize_to(o, (nt, nd), 2)
    if st != OK:
        return st
    if not is_contiguous(o):
        return NOT_SUPPORTED
    m = np.float32(0)
    out = ptr_like(o[D_DATA], m)
    xs = ptr_like(x[D_DATA], m)
    for i in range(nt * nd):
        out[i] = 0
    if nt == 0:
        return OK
    # float32 scratch: scores, sel, weights, W13, W2, x rows, h13, mid, y
    f = carray(ptr_like(block[15], m), block[18])
    o_sel = tmax * ne
    o_w = 2 * tmax * ne
    o_w13 = o_w + tmax * kk
    o_w2 = o_w13 + 2 * nf * nd
    o_xe = o_w2 + nd * nf
    o_h = o_xe + tmax * nd
    o_mid = o_h + tmax * 2 * nf
    o_y = o_mid + tmax * nf
    ib = carray(ptr_like(block[16], np.int64(0)), 3 * tmax * kk)  # idx; token, slot per row
    bias = ptr_like(desc(block[2])[0] if block[2] != 0 else block[15], m)
    gemm(fn, NO_TRANS, TRANS, nt, ne, nd, np.float32(1), x[D_DATA], nd, gw[D_DATA], nd,
         np.float32(0), block[15], ne)
    for i in range(nt * ne):
        s = f[i]
        if sigmoid:
            s = _sigmoid32(s)
            f[i] = s
        f[o_sel + i] = s + (bias[i % ne] if block[2] != 0 else np.float32(0))
    _route(f, f[o_sel:], ib, f[o_w:], nt, ne, kk, sigmoid, rs)
    w13b, w2b = desc(block[3]), desc(block[4])
    for e in range(ne):
        rows = 0
        for t in range(nt):
            for s in range(kk):
                if ib[t * kk + s] == e:
                    ib[tmax * kk + rows] = t
                    ib[2 * tmax * kk + rows] = s
                    for d in range(nd):
                        f[o_xe + rows * nd + d] = xs[t * nd + d]
                    rows += 1
        if rows == 0:
            continue
        _unpack(w13b[0] + e * w13b[24], 2 * nf, nd, gs, nbit, f[o_w13:])
        _unpack(w2b[0] + e * w2b[24], nd, nf, gs, nbit, f[o_w2:])
        gemm(fn, NO_TRANS, TRANS, rows, 2 * nf, nd, np.float32(1), block[15] + 4 * o_xe, nd,
             block[15] + 4 * o_w13, nd, np.float32(0), block[15] + 4 * o_h, 2 * nf)
        for r in range(rows):
            for j in range(nf):
                h1 = f[o_h + r * 2 * nf + j]
                f[o_mid + r * nf + j] = h1 * _sigmoid32(h1) * f[o_h + r * 2 * nf + nf + j]
        gemm(fn, NO_TRANS, TRANS, rows, nd, nf, np.float32(1), block[15] + 4 * o_mid, nf,
             block[15] + 4 * o_w2, nf, np.float32(0), block[15] + 4 * o_y, nd)
        for r in range(rows):
            t = ib[tmax * kk + r]
            wt = f[o_w + t * kk + ib[2 * tmax * kk + r]]
            for d in range(nd):
                out[t * nd + d] += wt * f[o_y + r * nd + d]
    return OK


@register_fast("llama::quantized_moe_ffn.out")
def bind_quantized_moe_ffn(ctx, x, gate_weight, expert_bias, packed_w13, packed_w2,
                           num_activated_experts, num_experts, hidden_dim, dim, group_size,
                           weight_nbit, score_func, route_scale, out):
    fn = gemm_addr(F32)
    ts = (x, gate_weight, expert_bias, packed_w13, packed_w2, out)
    if not fn or not all(t.is_contiguous() for t in ts) or not _checked(
            ref.check_moe, "", x, gate_weight, expert_bias, packed_w13, packed_w2,
            num_activated_experts, num_experts, hidden_dim, dim, group_size, weight_nbit,
            score_func, out):
        return None
    kk, ne, nf, nd = num_activated_experts, num_experts, hidden_dim, dim
    tmax = x.capacity // nd
    floats = tmax * (2 * ne + kk + 2 * nd + 3 * nf) + 3 * nf * nd
    words = [ctx.desc(x), ctx.desc(gate_weight), ctx.desc(expert_bias) if expert_bias.numel else 0,
             ctx.desc(packed_w13), ctx.desc(packed_w2), ctx.desc(out), kk, ne, nf, nd,
             group_size, weight_nbit, int(score_func == "sigmoid"), ctx.f64(route_scale), fn,
             ctx.buffer(4 * floats), ctx.buffer(8 * 3 * tmax * kk), tmax, floats]
    return ctx.bind(lazy(moe_kernel), words)


# ---- fallback / tile_crop: byte moves ---------------------------------------------------
OP_FALLBACK, OP_TILE = 0, 1


def move_kernel(block):
    a, o = descs(block, 1, 2)
    w = scratch(block[3])
    es = block[4]
    if block[0] == OP_FALLBACK:
        nd = a[D_NDIM]
        for i in range(nd):
            w[W_SZ + i] = a[D_SIZES + i]
            w[W_SS + i] = a[D_STRIDES + i]
        st = resize_to(o, w, nd)
        if st != OK:
            return st
        for i in range(nd):
            w[W_DS + i] = o[D_STRIDES + i]
        copy_nd(a[D_DATA], o[D_DATA], w, nd, es)
        return OK
    ts = block[5]
    c, hh, ww = a[D_SIZES], a[D_SIZES + 1], a[D_SIZES + 2]
    if hh % ts != 0 or ww % ts != 0:
        return INVALID_ARGUMENT
    nh, nw = hh // ts, ww // ts
    st = resize_to(o, (nh * nw, c, ts, ts), 4)
    if st != OK:
        return st
    # iterate (tile row, tile col, channel, y, x) over the input's strides
    sizes = (nh, nw, c, ts, ts)
    src = (ts * a[D_STRIDES + 1], ts * a[D_STRIDES + 2], a[D_STRIDES], a[D_STRIDES + 1],
           a[D_STRIDES + 2])
    dst = (nw * o[D_STRIDES], o[D_STRIDES], o[D_STRIDES + 1], o[D_STRIDES + 2], o[D_STRIDES + 3])
    for i in range(5):
        w[W_SZ + i] = sizes[i]
        w[W_SS + i] = src[i]
        w[W_DS + i] = dst[i]
    copy_nd(a[D_DATA], o[D_DATA], w, 5, es)
    return OK


def _bind_move(ctx, op, a, out, *params):
    if a.dtype != out.dtype or a.dtype.itemsize not in (1, 2, 4, 8):
        return None
    return ctx.bind(lazy(move_kernel), [op, ctx.desc(a), ctx.desc(out),
                                        ctx.buffer(SCRATCH_WORDS * 8), a.dtype.itemsize, *params])


@register_fast("llama::fallback.out")
def bind_fallback(ctx, input, output):
    return _bind_move(ctx, OP_FALLBACK, input, output)


@register_fast("preprocess::tile_crop.out")
def bind_tile_crop(ctx, input, tile_size, out):
    if (input.ndim != 3 or out.ndim != 4 or isinstance(tile_size, bool)
            or not isinstance(tile_size, int) or tile_size <= 0):
        return None
    if input.sizes[1] % tile_size or input.sizes[2] % tile_size:
        return None
    return _bind_move(ctx, OP_TILE, input, out, tile_size)
