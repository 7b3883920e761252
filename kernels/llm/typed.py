"""Compiled ``llama::`` kernels: KV-cache updates, SDPA, the Hadamard transform.

Reference: ``kernels/llm/reference.py`` (layouts ``[B, S, H, D]``, grouped-query
attention, the start_pos / mask / causal rules). Cache updates copy elements
of any dtype by size, through the strides. SDPA computes in float32 like the
reference: per (batch, query head, or the group of query heads sharing a KV
head) the scores, a softmax row by row (exponentials summed in float64), the
product with the values; both products are OpenBLAS sgemms, or, for at most 6
rows (decoding) and a head_dim that is a multiple of 16, our own vector code
(``kernels.llm.typed_attention``: a BLAS call costs more than such a product's
arithmetic). Float32 operands whose head_dim is innermost are used in place,
others (half, bfloat16, float64, other dim orders) are converted into
float32 scratch first, and only the key rows attention reads. ``start_pos``
may be an Int computed at run time (read through ``ctx.int_ref`` on every
call); every size is read at run time, so dynamic sequence lengths work.

One cfunc for all five ops.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.cython_ext.dtypes import from_numpy_dtype, to_numpy_dtype
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.llm.typed_attention import fits as few_rows_fits_py
from pyruntime.kernels.llm.typed_attention import fits_nb as few_rows_fit
from pyruntime.kernels.llm.typed_attention import scores as few_rows_scores
from pyruntime.kernels.llm.typed_attention import scratch_floats as few_rows_scratch_py
from pyruntime.kernels.llm.typed_attention import scratch_nb as few_rows_scratch
from pyruntime.kernels.llm.typed_attention import weighted_values as few_rows_values
from pyruntime.kernels.fast.blas import gemm_addr, matmul_strided
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, ST_F32, bits_to_f64, desc, descs,
                                       f32_from_bits, is_contiguous, lazy, load_f64, offset_of,
                                       ptr_like, resize_like, resize_to, same_shape, store_f64,
                                       sum_seg)

NOT_IMPLEMENTED = 0x11
FLOATS = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), to_numpy_dtype(15)}
OP_UPDATE, OP_UPDATE_IDX, OP_SDPA, OP_SDPA_KV, OP_HADAMARD = range(5)
NEG_INF = np.float32(-np.inf)


# ---- cache updates ---------------------------------------------------------------------

@njit(inline="always")
def _copy(sa, so, ss, da, do, ds, n, esize):
    """n elements of ``esize`` bytes: src[so + i*ss] -> dst[do + i*ds] (element units)."""
    if esize == 4:
        p4 = ptr_like(sa, np.uint32(0))
        q4 = ptr_like(da, np.uint32(0))
        for i in range(n):
            q4[do + i * ds] = p4[so + i * ss]
    elif esize == 8:
        p8 = ptr_like(sa, np.uint64(0))
        q8 = ptr_like(da, np.uint64(0))
        for i in range(n):
            q8[do + i * ds] = p8[so + i * ss]
    elif esize == 2:
        p2 = ptr_like(sa, np.uint16(0))
        q2 = ptr_like(da, np.uint16(0))
        for i in range(n):
            q2[do + i * ds] = p2[so + i * ss]
    else:
        p1 = ptr_like(sa, np.uint8(0))
        q1 = ptr_like(da, np.uint8(0))
        for i in range(n):
            q1[do + i * ds] = p1[so + i * ss]


@njit
def _copy_pos(v, c, b, s, pos, esize):
    """cache[b, pos] = value[b, s] (all heads)."""
    for h in range(v[D_SIZES + 2]):
        _copy(v[D_DATA], b * v[D_STRIDES] + s * v[D_STRIDES + 1] + h * v[D_STRIDES + 2],
              v[D_STRIDES + 3], c[D_DATA], b * c[D_STRIDES] + pos * c[D_STRIDES + 1]
              + h * c[D_STRIDES + 2], c[D_STRIDES + 3], v[D_SIZES + 3], esize)


@njit
def _cache_ok(v, c):
    return (v[D_NDIM] == 4 and c[D_NDIM] == 4 and v[D_SIZES] == c[D_SIZES]
            and v[D_SIZES + 2] == c[D_SIZES + 2] and v[D_SIZES + 3] == c[D_SIZES + 3])


@njit
def _update(v, c, start, esize):
    if not _cache_ok(v, c):
        return INVALID_ARGUMENT
    seq, cap = v[D_SIZES + 1], c[D_SIZES + 1]
    if start < 0 or start >= cap or start + seq > cap:
        return INVALID_ARGUMENT
    for b in range(v[D_SIZES]):
        for s in range(seq):
            _copy_pos(v, c, b, s, start + s, esize)
    return OK


@njit
def _update_indices(v, c, ix, esize):
    if not _cache_ok(v, c):
        return INVALID_ARGUMENT
    nb, seq, cap = v[D_SIZES], v[D_SIZES + 1], c[D_SIZES + 1]
    if ix[D_NDIM] != 2 or ix[D_SIZES] != nb or ix[D_SIZES + 1] != seq:
        return INVALID_ARGUMENT
    p = ptr_like(ix[D_DATA], np.int64(0))
    for b in range(nb):  # every index is checked before anything is written
        for s in range(seq):
            pos = p[b * ix[D_STRIDES] + s * ix[D_STRIDES + 1]]
            if pos < 0 or pos >= cap:
                return INVALID_ARGUMENT
    for b in range(nb):
        for s in range(seq):
            _copy_pos(v, c, b, s, p[b * ix[D_STRIDES] + s * ix[D_STRIDES + 1]], esize)
    return OK


# ---- attention -------------------------------------------------------------------------

@njit
def f32_stage(d, st, rows, buf, back):
    """Convert ``d[:, :rows]`` (4-d, scalar type ``st``, any strides) into the packed
    float32 buffer at ``buf``, or (``back``) the buffer back into it."""
    nb, nh, nd = d[D_SIZES], d[D_SIZES + 2], d[D_SIZES + 3]
    p = ptr_like(buf, np.float32(0))
    k = 0
    for b in range(nb):
        for s in range(rows):
            for h in range(nh):
                base = b * d[D_STRIDES] + s * d[D_STRIDES + 1] + h * d[D_STRIDES + 2]
                for i in range(nd):
                    if back:
                        store_f64(d[D_DATA], st, base + i * d[D_STRIDES + 3], np.float64(p[k]))
                    else:
                        p[k] = np.float32(load_f64(d[D_DATA], st, base + i * d[D_STRIDES + 3]))
                    k += 1


@njit
def _f32_rows(d, st, rows, buf, strides):
    """Address and (batch, seq, head) strides of ``d[:, :rows]`` as float32 with a unit
    innermost stride: in place when it already is, else converted into ``buf``."""
    if st == ST_F32 and (d[D_STRIDES + 3] == 1 or d[D_SIZES + 3] <= 1):
        strides[0] = d[D_STRIDES]
        strides[1] = d[D_STRIDES + 1]
        strides[2] = d[D_STRIDES + 2]
        return d[D_DATA]
    f32_stage(d, st, rows, buf, False)
    nh, nd = d[D_SIZES + 2], d[D_SIZES + 3]
    strides[0] = rows * nh * nd
    strides[1] = nh * nd
    strides[2] = nd
    return buf


@njit(inline="always")
def _expf(x):
    """float32 exp (Cephes' expf, within 2 ulp) written so that loops over it vectorize;
    below -87.3 (beyond float32's normal range) it is 0, NaN stays NaN."""
    lo = np.float32(-87.33654)
    xc = x if x > lo else lo
    xc = xc if xc < np.float32(88.0) else np.float32(88.0)
    n = np.floor(xc * np.float32(1.44269504088896341) + np.float32(0.5))
    r = xc - n * np.float32(0.693359375) + n * np.float32(2.12194440e-4)
    p = ((((np.float32(1.9875691500e-4) * r + np.float32(1.3981999507e-3)) * r
           + np.float32(8.3334519073e-3)) * r + np.float32(4.1665795894e-2)) * r
         + np.float32(1.6666665459e-1)) * r + np.float32(5.0000001201e-1)
    e = (p * (r * r) + r + np.float32(1)) * f32_from_bits(np.int32((np.int32(n) + 127) << 23))
    e = e if x >= lo else np.float32(0)
    return e if x == x else x


@njit(inline="always")
def _rowmax(sc, b, n):
    """The largest of sc[b:b+n] (NaN if any is NaN), in 8 independent lanes so it vectorizes."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = NEG_INF
    nan = False
    e8 = b + n - n % 8
    for i in range(b, e8, 8):
        x0, x1, x2, x3 = sc[i], sc[i + 1], sc[i + 2], sc[i + 3]
        x4, x5, x6, x7 = sc[i + 4], sc[i + 5], sc[i + 6], sc[i + 7]
        m0 = x0 if x0 > m0 else m0
        m1 = x1 if x1 > m1 else m1
        m2 = x2 if x2 > m2 else m2
        m3 = x3 if x3 > m3 else m3
        m4 = x4 if x4 > m4 else m4
        m5 = x5 if x5 > m5 else m5
        m6 = x6 if x6 > m6 else m6
        m7 = x7 if x7 > m7 else m7
        nan |= (x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3) | (x4 != x4) | (x5 != x5) \
            | (x6 != x6) | (x7 != x7)
    for i in range(e8, b + n):
        x = sc[i]
        m0 = x if x > m0 else m0
        nan |= x != x
    if nan:
        return np.float32(np.nan)
    m0 = m0 if m0 > m1 else m1
    m2 = m2 if m2 > m3 else m3
    m4 = m4 if m4 > m5 else m5
    m6 = m6 if m6 > m7 else m7
    m0 = m0 if m0 > m2 else m2
    m4 = m4 if m4 > m6 else m6
    return m0 if m0 > m4 else m4


@njit
def _softmax_rows(psc, rows, per, L, start, scale, causal, has_mask, m, mst):
    """Scores (rows x L, contiguous; row r is query position r // per) -> probabilities,
    in place, as the reference computes: ``* scale`` (+ mask) in float32, masked-out
    causal positions exactly zero; the exponentials are summed in float64. Each pass is
    its own simple loop over the row, through a pointer (no wraparound checks), so that
    it vectorizes whatever the arguments."""
    sc = ptr_like(psc, np.float32(0))
    for r in range(rows):
        i = r // per
        row = r * L
        vis = min(L, start + i + 1) if causal else L
        end = row + vis
        if has_mask:
            for j in range(row, end):
                mv = load_f64(m[D_DATA], mst, i * m[D_STRIDES] + (j - row) * m[D_STRIDES + 1])
                sc[j] = sc[j] * scale + np.float32(mv)
        else:
            for j in range(row, end):
                sc[j] = sc[j] * scale
        mx = _rowmax(sc, row, vis)
        for j in range(row, end):
            sc[j] = _expf(sc[j] - mx)
        t32 = np.float32(sum_seg(sc, row, vis))
        for j in range(row, end):
            sc[j] = sc[j] / t32
        for j in range(end, row + L):
            sc[j] = 0


@njit(inline="always")
def attn_span(mask_addr, q, S, kv, start):
    """(the mask's descriptor, or ``q`` without one; how many key positions S query rows
    attend): -1 positions for a mask that is not (S, kv) or S rows from ``start`` past kv."""
    if mask_addr != 0:
        m = desc(mask_addr)
        return m, kv if m[D_NDIM] == 2 and m[D_SIZES] == S and m[D_SIZES + 1] == kv else -1
    return q, start + S if start >= 0 and start + S <= kv else -1


@njit
def _sdpa(blk, q, k, v, o, start):
    fn = blk[1]
    nb, S, hq, D = q[D_SIZES], q[D_SIZES + 1], q[D_SIZES + 2], q[D_SIZES + 3]
    if (q[D_NDIM] != 4 or k[D_NDIM] != 4 or not same_shape(k, v) or k[D_SIZES] != nb
            or k[D_SIZES + 3] != D):
        return INVALID_ARGUMENT
    hk, kv = k[D_SIZES + 2], k[D_SIZES + 1]
    if hk == 0 or hq % hk:
        return INVALID_ARGUMENT
    causal = blk[7] != 0
    m, L = attn_span(blk[6], q, S, kv, start)
    if L < 0:
        return INVALID_ARGUMENT
    if blk[9] != 0:
        scale = np.float32(bits_to_f64(blk[8]))
    elif D == 0:
        return INVALID_ARGUMENT  # 1 / sqrt(0)
    else:
        scale = np.float32(1.0 / math.sqrt(D))
    st = resize_to(o, q[D_SIZES:D_SIZES + 4], 4)
    if st != OK:
        return st
    if nb * S * hq == 0:
        return OK
    if L == 0:
        return INVALID_ARGUMENT  # softmax over no keys
    ist, ost = blk[10], blk[11]
    qs = np.empty(3, np.int64)
    ks = np.empty(3, np.int64)
    vs = np.empty(3, np.int64)
    qa = _f32_rows(q, ist, S, blk[13], qs)
    ka = _f32_rows(k, ist, L, blk[14], ks)
    va = _f32_rows(v, ist, L, blk[15], vs)
    direct = ost == ST_F32 and (o[D_STRIDES + 3] == 1 or D <= 1)
    if direct:
        oa, ob, osq, oh = o[D_DATA], o[D_STRIDES], o[D_STRIDES + 1], o[D_STRIDES + 2]
    else:
        oa, ob, osq, oh = blk[16], S * hq * D, hq * D, D
    mst = blk[12]
    rep = hq // hk
    one = np.float32(1)
    zero = np.float32(0)
    # The query heads sharing a kv head form one matrix (one gemm each way) when their
    # rows have a uniform stride: always when decoding one position.
    grouped = rep > 1 and (S == 1 or (qs[1] == rep * qs[2] and osq == rep * oh))
    per = rep if grouped else 1
    rows = S * per
    qrs = qs[2] if grouped else qs[1]
    ors = oh if grouped else osq
    few = few_rows_fit(rows, D)  # decoding: no BLAS (see kernels.llm.typed_attention)
    # scores of one head (and, without BLAS, their panel); a size beyond the bind-time
    # estimate gets per-call scratch
    n = few_rows_scratch(rows, L) if few else rows * L
    sc = carray(ptr_like(blk[17], np.float32(0)), n) if n <= blk[18] else np.empty(n, np.float32)
    sca = sc.ctypes.data
    for b in range(nb):
        for hh in range(hk if grouped else hq):
            h0 = hh * rep if grouped else hh
            g = hh if grouped else hh // rep
            pq = qa + 4 * (b * qs[0] + h0 * qs[2])
            pk = ka + 4 * (b * ks[0] + g * ks[2])
            pv = va + 4 * (b * vs[0] + g * vs[2])
            po = oa + 4 * (b * ob + h0 * oh)
            if few:
                few_rows_scores(rows, L, D, pq, qrs, pk, ks[1], sca)
            else:
                st = matmul_strided(fn, rows, L, D, one, pq, qrs, 1, pk, 1, ks[1], zero, sca, L,
                                    zero)
                if st != OK:
                    return st
            _softmax_rows(sca, rows, per, L, start, scale, causal, blk[6] != 0, m, mst)
            if few:
                few_rows_values(rows, L, D, sca, sca + 4 * rows * L, pv, vs[1], po, ors)
            else:
                st = matmul_strided(fn, rows, D, L, one, sca, L, 1, pv, vs[1], 1, zero, po, ors,
                                    zero)
                if st != OK:
                    return st
    if not direct:
        f32_stage(o, ost, S, oa, True)
    return OK


# ---- Hadamard transform ----------------------------------------------------------------

@njit
def _hadamard(x, o, st, buf, cap):
    s = resize_like(o, x)
    if s != OK:
        return s
    nd = x[D_NDIM]
    n = x[D_SIZES + nd - 1] if nd else 1
    if n & (n - 1):
        return NOT_IMPLEMENTED  # 28 * 2**k sizes are not carried (nor by the reference)
    if x[D_NUMEL] == 0:
        return OK
    row = carray(ptr_like(buf, np.float32(0)), n) if n <= cap else np.empty(n, np.float32)
    xc = is_contiguous(x)
    oc = is_contiguous(o)
    norm = np.float32(1.0 / math.sqrt(n))
    for r in range(x[D_NUMEL] // n):
        k0 = r * n
        for j in range(n):
            row[j] = np.float32(load_f64(x[D_DATA], st, k0 + j if xc else offset_of(x, k0 + j)))
        h = 1
        while h < n:  # butterflies (i, i + h) -> (a + b, a - b), in float32
            for blk in range(0, n, 2 * h):
                for i in range(blk, blk + h):
                    a = row[i]
                    bb = row[i + h]
                    row[i] = a + bb
                    row[i + h] = a - bb
            h *= 2
        for j in range(n):
            store_f64(o[D_DATA], st, k0 + j if oc else offset_of(o, k0 + j),
                      np.float64(row[j] * norm))
    return OK


def llm_kernel(blk):
    op = blk[0]
    if op == OP_HADAMARD:
        return _hadamard(desc(blk[1]), desc(blk[2]), blk[3], blk[4], blk[5])
    if op == OP_UPDATE:
        return _update(desc(blk[2]), desc(blk[3]), ptr_like(blk[4], np.int64(0))[0], blk[5])
    if op == OP_UPDATE_IDX:
        return _update_indices(desc(blk[2]), desc(blk[3]), desc(blk[4]), blk[5])
    start = ptr_like(blk[5], np.int64(0))[0]
    k, v = descs(blk, 3, 2)
    if op == OP_SDPA_KV:  # key/value into the caches first, as the reference does
        k_new, v_new = descs(blk, 19, 2)
        if not same_shape(k, v):
            return INVALID_ARGUMENT
        esize = blk[21]
        st = _update(k_new, k, start, esize)
        if st != OK:
            return st
        st = _update(v_new, v, start, esize)
        if st != OK:
            return st
    return _sdpa(blk, desc(blk[2]), k, v, desc(blk[21 + 1]), start)


# ---- binders ---------------------------------------------------------------------------

def _code(t):
    return int(from_numpy_dtype(t.dtype))


def _cache_args_ok(value, cache):
    return value.ndim == 4 and cache.ndim == 4 and value.dtype == cache.dtype


@register_fast("llama::update_cache.out", dynamic_ints=True)
def bind_update_cache(ctx, value, cache, start_pos, out):
    if not _cache_args_ok(value, cache) or not isinstance(start_pos, int):
        return None
    return ctx.bind(lazy(llm_kernel), [OP_UPDATE, 0, ctx.desc(value), ctx.desc(cache),
                                       ctx.int_ref(start_pos), value.dtype.itemsize])


@register_fast("llama::update_cache_with_indices.out", dynamic_ints=True)
def bind_update_cache_with_indices(ctx, value, cache, start_pos, indices, out):
    if not _cache_args_ok(value, cache) or indices.dtype != np.int64:
        return None
    return ctx.bind(lazy(llm_kernel), [OP_UPDATE_IDX, 0, ctx.desc(value), ctx.desc(cache),
                                       ctx.desc(indices), value.dtype.itemsize])


def _rows(t):
    """Upper bound of ``t``'s dim 1 from its capacity (dims 0, 2, 3 as bound)."""
    per = t.sizes[0] * t.sizes[2] * t.sizes[3]
    return t.capacity // per if per else 0


def _bind_sdpa(ctx, op, query, key, value, start_pos, attn_mask, is_causal, scale, out,
               new_key=None, new_value=None):
    fn = gemm_addr(np.float32)
    ts = (query, key, value)
    if (not fn or any(t.ndim != 4 for t in ts) or query.dtype not in FLOATS
            or any(t.dtype != query.dtype for t in ts) or out.dtype not in FLOATS
            or out.ndim != 4 or not isinstance(start_pos, int) or isinstance(start_pos, bool)):
        return None
    if attn_mask is not None and (is_causal or attn_mask.dtype not in FLOATS):
        return None  # the reference raises
    if scale is not None and not isinstance(scale, (int, float)):
        return None

    def buf(t):  # float32 staging of a tensor the kernel cannot read in place
        if t.dtype == np.float32 and t.dim_order[-1] == 3:
            return 0
        return ctx.buffer(4 * t.capacity)

    rep = query.sizes[2] // key.sizes[2] if key.sizes[2] else 1
    score_cap = max(1, _rows(query) * _rows(key) * rep)
    if few_rows_fits_py(1, query.sizes[3]):  # room for the panel of few rows too
        score_cap += few_rows_scratch_py(0, _rows(key))
    words = [op, fn, ctx.desc(query), ctx.desc(key), ctx.desc(value), ctx.int_ref(start_pos),
             0 if attn_mask is None else ctx.desc(attn_mask), int(bool(is_causal)),
             ctx.f64(0.0 if scale is None else scale), int(scale is not None),
             _code(query), _code(out), 0 if attn_mask is None else _code(attn_mask),
             buf(query), buf(key), buf(value), buf(out), ctx.buffer(4 * score_cap), score_cap,
             0 if new_key is None else ctx.desc(new_key),
             0 if new_value is None else ctx.desc(new_value),
             key.dtype.itemsize, ctx.desc(out)]
    return ctx.bind(lazy(llm_kernel), words)


@register_fast("llama::custom_sdpa.out", dynamic_ints=True)
def bind_custom_sdpa(ctx, query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale,
                     out):
    return _bind_sdpa(ctx, OP_SDPA, query, key, value, start_pos, attn_mask, is_causal, scale,
                      out)


@register_fast("llama::sdpa_with_kv_cache.out", dynamic_ints=True)
def bind_sdpa_with_kv_cache(ctx, query, key, value, key_cache, value_cache, start_pos, seq_len,
                            attn_mask, drpout_p, is_causal, scale, out):
    if not (_cache_args_ok(key, key_cache) and _cache_args_ok(value, value_cache)):
        return None
    return _bind_sdpa(ctx, OP_SDPA_KV, query, key_cache, value_cache, start_pos, attn_mask,
                      is_causal, scale, out, key, value)


@register_fast("llama::fast_hadamard_transform.out")
def bind_fast_hadamard_transform(ctx, mat, out):
    if mat.dtype != out.dtype or mat.dtype not in FLOATS:
        return None
    n = mat.sizes[-1] if mat.ndim else 1
    if n & (n - 1):
        return None  # the reference raises NotImplemented
    cap = max(n, 1) if not mat.dynamism else max(mat.capacity, 1)
    return ctx.bind(lazy(llm_kernel), [OP_HADAMARD, ctx.desc(mat), ctx.desc(out), _code(mat),
                                       ctx.buffer(4 * cap), cap])
