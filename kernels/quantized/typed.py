"""Compiled ``quantized_decomposed::`` kernels (reference: ``kernels/quantized/reference.py``).

Every dtype the reference takes, through the any-dtype loads/stores of
``nb``; the arithmetic is the reference's, bit for bit: quantize computes
``clamp(int64(float32(zp) + rint(float32(x * inv_scale))), qmin, qmax)`` in
float32 (float64 inputs multiply in float64 and round once), NaN and
out-of-range values take the C++ cast's INT64_MIN; dequantize is
``float32(q - zp) * float32(scale)``. Quantization parameters given as
tensors are read at run time (they are often computed by an earlier
instruction). mixed_mm / mixed_linear dequantize the int8 weight a panel of
output columns at a time into a float32 scratch and multiply with OpenBLAS
sgemm, so no full float32 copy of the weight is ever held.

Four cfuncs: quantize/dequantize/add, choose_qparams, embeddings, mixed matmuls.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.cython_ext.dtypes import from_numpy_dtype, to_numpy_dtype
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_F64, ST_I8,
                                       ST_U8, bits_to_f64, desc, descs, f64_to_int, is_contiguous,
                                       is_float_st, lazy, load_f64, load_i64, offset_of, ptr_like,
                                       resize_like, resize_to, same_shape, store_f64, store_i64)


ST_U16, ST_U32, ST_U64 = 27, 28, 29
INT64_MIN = np.int64(-(1 << 63))
F32 = np.dtype(np.float32)
FLOATS = {np.dtype(t) for t in (np.float16, np.float32, np.float64)} | {to_numpy_dtype(15)}
QUANT = {np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.uint16, np.int32)}
INTS = QUANT | {np.dtype(t) for t in (np.int64, np.uint32, np.uint64)}
# dtypes a kernel can load or store (numpy dtype -> the code the kernel dispatches on)
_CODES = {dt: int(from_numpy_dtype(dt)) for dt in FLOATS | INTS | {np.dtype(np.bool_)}}
_NO_STORE = {np.dtype(np.uint32), np.dtype(np.uint64)}  # loads only
_SMALL_SCALE = float(np.float32(6.1e-5))


def quant_code(t):
    return _CODES.get(t.dtype)


def _out_code(t):
    """The dtype code of an out tensor the kernels can store into, else None."""
    return None if t.dtype in _NO_STORE else _CODES.get(t.dtype)


# ---- element access by run-time dtype code (nb's plus the unsigned 16/32/64-bit types) --

@njit(inline="always")
def ldi(addr, st, i):
    if st == ST_U16:
        return np.int64(ptr_like(addr, np.uint16(0))[i])
    if st == ST_U32:
        return np.int64(ptr_like(addr, np.uint32(0))[i])
    if st == ST_U64:
        return np.int64(ptr_like(addr, np.uint64(0))[i])
    return load_i64(addr, st, i)


@njit(inline="always")
def _sti(addr, st, i, v):
    if st == ST_U16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(v & 0xFFFF)
    else:
        store_i64(addr, st, i, v)


@njit(inline="always")
def _stf(addr, st, i, v):
    if st == ST_U16:
        _sti(addr, st, i, f64_to_int(v))
    else:
        store_f64(addr, st, i, v)


@njit(inline="always")
def ldf32(addr, st, i):
    """Element as float32, as numpy's ``astype(float32)`` converts it."""
    if is_float_st(st):
        return np.float32(load_f64(addr, st, i))
    return np.float32(ldi(addr, st, i))


@njit(inline="always")
def pos(d, k):
    """Storage offset of logical element ``k`` (``k`` itself for a contiguous tensor)."""
    return k if is_contiguous(d) else offset_of(d, k)


@njit(inline="always")
def _wrap32(v):
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@njit(inline="always")
def _same_strides(a, b):
    for i in range(a[D_NDIM]):
        if a[D_STRIDES + i] != b[D_STRIDES + i]:
            return False
    return True


@njit(inline="always")
def _quant1(v, xst, inv, zf, qmin, qmax):
    if xst == ST_F64:
        scaled = np.float32(np.float64(inv) * v)
    else:
        scaled = inv * np.float32(v)
    r = np.float64(zf + np.float32(np.rint(np.float64(scaled))))
    q = np.int64(r) if r == r and abs(r) < 9.223372036854775808e18 else INT64_MIN
    return min(max(q, qmin), qmax)


# ---- quantize / dequantize / add -----------------------------------------------------
OP_Q, OP_DQ, OP_ADD = 0, 1, 2
M_SCALAR, M_TENSOR, M_CHANNEL, M_TOKEN = 0, 1, 2, 3


@njit
def _params(mode, s0, z0, sda, sst, zda, zst, c):
    if mode == M_SCALAR:
        return s0, z0
    sd = desc(sda)
    s = ldf32(sd[D_DATA], sst, pos(sd, c))
    z = np.int64(0)
    if zda != 0:
        zd = desc(zda)
        z = ldi(zd[D_DATA], zst, pos(zd, c))
    return s, z


@njit(inline="always")
def _q_typed(xa, oa, k, cnt, inv, zf, qmin, qmax, om):
    """The common case, typed and branch-free (it vectorizes): contiguous float32 ->
    (u)int8. ``r`` is integer-valued, so clamping it as a float is exact; NaN, inf and
    |r| >= 2**63 go to quant_min like the int64 cast in ``_quant1``."""
    xp = ptr_like(xa, np.float32(0))
    yp = ptr_like(oa, om)
    lo = np.float32(qmin)
    hi = np.float32(qmax)
    big = np.float32(9.223372036854775808e18)
    for i in range(k, k + cnt):
        r = zf + np.rint(inv * xp[i])
        c = r if r < hi else hi
        c = c if c > lo else lo
        yp[i] = np.int32(c if abs(r) < big else lo)


@njit(inline="always")
def _dq_typed(xa, oa, k, cnt, s, z, xm):
    """The common case, typed: contiguous (u)int8 -> float32 (|z| < 2**30, so the
    difference is exact in int32, which converts to float32 in SIMD)."""
    xp = ptr_like(xa, xm)
    yp = ptr_like(oa, np.float32(0))
    z32 = np.int32(z)
    for i in range(k, k + cnt):
        yp[i] = np.float32(np.int32(xp[i]) - z32) * s


@njit
def _qdq_segment(op, x, o, xst, ost, k, cnt, flat, s, z, qmin, qmax):
    xa = x[D_DATA]
    oa = o[D_DATA]
    if op == OP_Q:
        inv = np.float32(1.0) / s
        zf = np.float32(_wrap32(z))
        if flat and xst == ST_F32 and ost == ST_U8:
            _q_typed(xa, oa, k, cnt, inv, zf, qmin, qmax, np.uint8(0))
        elif flat and xst == ST_F32 and ost == ST_I8:
            _q_typed(xa, oa, k, cnt, inv, zf, qmin, qmax, np.int8(0))
        elif flat:
            for i in range(k, k + cnt):
                _sti(oa, ost, i, _quant1(load_f64(xa, xst, i), xst, inv, zf, qmin, qmax))
        else:
            for i in range(k, k + cnt):
                _sti(oa, ost, offset_of(o, i),
                     _quant1(load_f64(xa, xst, offset_of(x, i)), xst, inv, zf, qmin, qmax))
    else:
        small = -(1 << 30) < z < (1 << 30)
        if flat and small and ost == ST_F32 and xst == ST_U8:
            _dq_typed(xa, oa, k, cnt, s, z, np.uint8(0))
        elif flat and small and ost == ST_F32 and xst == ST_I8:
            _dq_typed(xa, oa, k, cnt, s, z, np.int8(0))
        elif flat:
            for i in range(k, k + cnt):
                store_f64(oa, ost, i, np.float64(np.float32(ldi(xa, xst, i) - z) * s))
        else:
            for i in range(k, k + cnt):
                v = np.float32(ldi(xa, xst, offset_of(x, i)) - z) * s
                store_f64(oa, ost, offset_of(o, i), np.float64(v))


@njit
def _qadd(blk, a, o, qmin, qmax):
    b = desc(blk[15])
    if not same_shape(a, b):
        return INVALID_ARGUMENT
    st = resize_like(o, a)
    if st != OK:
        return st
    ast, bst, ost = blk[3], blk[16], blk[4]
    sa = np.float64(np.float32(bits_to_f64(blk[17])))
    sb = np.float64(np.float32(bits_to_f64(blk[19])))
    za, zb = blk[18], blk[20]
    inv = np.float32(1.0) / np.float32(bits_to_f64(blk[7]))
    zf = np.float32(blk[8])
    flat = is_contiguous(a) and is_contiguous(b) and is_contiguous(o)
    for k in range(a[D_NUMEL]):
        ia, ib, io = (k, k, k) if flat else (offset_of(a, k), offset_of(b, k), offset_of(o, k))
        da = np.float32(np.float64(ldi(a[D_DATA], ast, ia) - za) * sa)
        db = np.float32(np.float64(ldi(b[D_DATA], bst, ib) - zb) * sb)
        _sti(o[D_DATA], ost, io, _quant1(np.float64(da + db), ST_F32, inv, zf, qmin, qmax))
    return OK


def qdq_kernel(blk):
    op = blk[0]
    x, o = descs(blk, 1, 2)
    qmin, qmax = blk[13], blk[14]
    if op == OP_ADD:
        return _qadd(blk, x, o, qmin, qmax)
    mode = blk[5]
    axis = blk[6]
    sda, zda = blk[9], blk[11]
    nd = x[D_NDIM]
    n = x[D_NUMEL]
    inner = n
    nch = 1
    if mode == M_CHANNEL:
        if axis >= nd:
            return INVALID_ARGUMENT
        nch = x[D_SIZES + axis]
        inner = 1
        for i in range(axis + 1, nd):
            inner *= x[D_SIZES + i]
    elif mode == M_TOKEN:
        if nd == 0:
            return INVALID_ARGUMENT
        inner = x[D_SIZES + nd - 1]
        for i in range(nd - 1):
            nch *= x[D_SIZES + i]
    if mode != M_SCALAR:
        want = 1 if mode == M_TENSOR else nch
        if desc(sda)[3] != want or (zda != 0 and desc(zda)[3] != want):
            return INVALID_ARGUMENT
    st = resize_like(o, x)
    if st != OK:
        return st
    if n == 0:
        return OK
    flat = (is_contiguous(x) and is_contiguous(o)) or (nch == 1 and _same_strides(x, o))
    s0 = np.float32(bits_to_f64(blk[7]))
    z0 = blk[8]
    k = 0
    for _ in range(n // (inner * nch)):
        for c in range(nch):
            s, z = _params(mode, s0, z0, sda, blk[10], zda, blk[12], c)
            _qdq_segment(op, x, o, blk[3], blk[4], k, inner, flat, s, z, qmin, qmax)
            k += inner
    return OK


def dtype_ok(code, t):
    if code is None:
        return True
    try:
        return to_numpy_dtype(code) == t.dtype
    except (KeyError, ValueError):
        return False  # not a ScalarType: the reference reports it


def _quant_args_ok(input, quant_min, quant_max, dtype, out):
    if input.dtype not in FLOATS or out.dtype not in QUANT or not dtype_ok(dtype, out):
        return False
    info = np.iinfo(out.dtype)
    return info.min <= quant_min <= quant_max <= info.max


def _dequant_args_ok(input, dtype, out_dtype, out):
    return (input.dtype in QUANT and out.dtype in FLOATS and dtype_ok(dtype, input)
            and dtype_ok(out_dtype, out))


def _bind_qdq(ctx, op, input, out, mode, axis=0, scale=0.0, zp=0, st=None, zt=None,
              qmin=0, qmax=0):
    for t in (st, zt):
        if t is not None and quant_code(t) is None:
            return None
    return ctx.bind(lazy(qdq_kernel), [
        op, ctx.desc(input), ctx.desc(out), quant_code(input), quant_code(out), mode, axis,
        ctx.f64(scale), zp, 0 if st is None else ctx.desc(st), 0 if st is None else quant_code(st),
        0 if zt is None else ctx.desc(zt), 0 if zt is None else quant_code(zt), qmin, qmax])


def bind_quantize(ctx, ok, input, out, quant_min, quant_max, dtype, mode, axis=0, **params):
    """A quantize op's binding, or None unless ``ok`` and its dtypes and range are valid."""
    if not ok or not _quant_args_ok(input, quant_min, quant_max, dtype, out):
        return None
    return _bind_qdq(ctx, OP_Q, input, out, mode, axis, qmin=quant_min, qmax=quant_max,
                     **params)


def _scalar_tensors_ok(scale, zero_point):
    return scale.dtype in FLOATS and zero_point.dtype in INTS


def _norm_axis(axis, ndim):
    if ndim == 0 or not -ndim <= axis < ndim:
        return None
    return axis % ndim


@register_fast("quantized_decomposed::quantize_per_tensor.out")
def bind_quantize_per_tensor(ctx, input, scale, zero_point, quant_min, quant_max, dtype, out):
    return bind_quantize(ctx, -2**63 <= zero_point < 2**63, input, out, quant_min, quant_max,
                         dtype, M_SCALAR, scale=scale, zp=zero_point)


@register_fast("quantized_decomposed::quantize_per_tensor.Tensor_out")
def bind_quantize_per_tensor_tensor(ctx, input, scale, zero_point, quant_min, quant_max,
                                    dtype, out):
    return bind_quantize(ctx, _scalar_tensors_ok(scale, zero_point), input, out, quant_min,
                         quant_max, dtype, M_TENSOR, st=scale, zt=zero_point)


@register_fast("quantized_decomposed::dequantize_per_tensor.out")
def bind_dequantize_per_tensor(ctx, input, scale, zero_point, quant_min, quant_max, dtype,
                               out_dtype, out):
    if not _dequant_args_ok(input, dtype, out_dtype, out) or not -2**63 <= zero_point < 2**63:
        return None
    return _bind_qdq(ctx, OP_DQ, input, out, M_SCALAR, scale=scale, zp=zero_point)


@register_fast("quantized_decomposed::dequantize_per_tensor.Tensor_out")
def bind_dequantize_per_tensor_tensor(ctx, input, scale, zero_point, quant_min, quant_max,
                                      dtype, out_dtype, out):
    if not _dequant_args_ok(input, dtype, out_dtype, out) \
            or not _scalar_tensors_ok(scale, zero_point):
        return None
    return _bind_qdq(ctx, OP_DQ, input, out, M_TENSOR, st=scale, zt=zero_point)


@register_fast("quantized_decomposed::quantize_per_channel.out")
def bind_quantize_per_channel(ctx, input, scales, zero_points, axis, quant_min, quant_max,
                              dtype, out):
    ax = _norm_axis(axis, input.ndim)
    # the reference needs zero points here (None fails there)
    return bind_quantize(ctx, ax is not None and zero_points is not None, input, out, quant_min,
                         quant_max, dtype, M_CHANNEL, ax, st=scales, zt=zero_points)


@register_fast("quantized_decomposed::dequantize_per_channel.out")
def bind_dequantize_per_channel(ctx, input, scales, zero_points, axis, quant_min, quant_max,
                                dtype, out_dtype, out):
    ax = _norm_axis(axis, input.ndim)
    if ax is None or not _dequant_args_ok(input, dtype, out_dtype, out):
        return None
    return _bind_qdq(ctx, OP_DQ, input, out, M_CHANNEL, ax, st=scales, zt=zero_points)


@register_fast("quantized_decomposed::quantize_per_token.out")
def bind_quantize_per_token(ctx, input, scales, zero_points, quant_min, quant_max, dtype, out):
    # a rank-0 input broadcasts to rank 1 in the reference: left to it
    return bind_quantize(ctx, input.ndim != 0 and zero_points is not None, input, out,
                         quant_min, quant_max, dtype, M_TOKEN, st=scales, zt=zero_points)


@register_fast("quantized_decomposed::dequantize_per_token.out")
def bind_dequantize_per_token(ctx, input, scales, zero_points, quant_min, quant_max, dtype,
                              output_dtype, out):
    if input.ndim == 0 or zero_points is None \
            or not _dequant_args_ok(input, dtype, output_dtype, out):
        return None
    return _bind_qdq(ctx, OP_DQ, input, out, M_TOKEN, st=scales, zt=zero_points)


@register_fast("quantized_decomposed::add.out")
def bind_add(ctx, a, a_scale, a_zero_point, a_quant_min, a_quant_max,
             b, b_scale, b_zero_point, b_quant_min, b_quant_max,
             out_scale, out_zero_point, out_quant_min, out_quant_max, out):
    if a.dtype != b.dtype or a.dtype != out.dtype or a.dtype not in INTS or _out_code(a) is None:
        return None
    for lo, hi in ((a_quant_min, a_quant_max), (b_quant_min, b_quant_max),
                   (out_quant_min, out_quant_max)):
        if not 0 <= lo <= hi <= 255:
            return None
    if not all(-2**31 <= z < 2**31 for z in (a_zero_point, b_zero_point, out_zero_point)):
        return None  # np.int32(zp) raises in the reference
    words = [OP_ADD, ctx.desc(a), ctx.desc(out), quant_code(a), quant_code(out), 0, 0,
             ctx.f64(out_scale),
             out_zero_point, 0, 0, 0, 0, out_quant_min, out_quant_max, ctx.desc(b), quant_code(b),
             ctx.f64(a_scale), a_zero_point, ctx.f64(b_scale), b_zero_point]
    return ctx.bind(lazy(qdq_kernel), words)


# ---- choose_qparams -----------------------------------------------------------------

@njit
def _qparams(lo, hi, qmin, qmax):
    """ExecuTorch's calculate_scale_and_zero_point on float32 min/max (the reference's
    vectorized ``choose_qparams``, one element)."""
    zero = np.float32(0)
    xmin = lo if lo < zero or lo != lo else zero
    xmax = hi if hi > zero or hi != hi else zero
    span = qmax - qmin
    scale = (np.float64(xmax) - np.float64(xmin)) / np.float64(span)
    s32 = np.float32(scale)
    if s32 == zero or np.isinf(np.float32(1) / s32):
        scale = 0.1
    if scale < _SMALL_SCALE:
        small = np.float32(_SMALL_SCALE)
        amp = small / np.float32(scale)
        grow = small * np.float32(span)
        if xmin == zero:
            xmax = grow
        elif xmax == zero:
            xmin = -grow
        else:
            xmin = xmin * amp
            xmax = xmax * amp
        scale = _SMALL_SCALE
    lo64 = np.float64(xmin) / scale
    hi64 = np.float64(xmax) / scale
    initial = qmax - hi64
    if abs(qmin) - abs(lo64) < abs(qmax) - abs(hi64):
        initial = qmin - lo64
    r = np.rint(initial)
    if r != r:
        return scale, INT64_MIN  # NaN: what numpy's float -> int64 cast gives on x86
    return scale, np.int64(min(max(r, np.float64(qmin)), np.float64(qmax)))


@njit(inline="always")
def _minmax(xa, x, start, cnt, flat):
    p = ptr_like(xa, np.float32(0))
    lo = np.float32(0)
    hi = np.float32(0)
    for i in range(start, start + cnt):
        v = p[i if flat else offset_of(x, i)]
        if i == start:
            lo = v
            hi = v
        else:  # NaN propagates, as numpy's min/max
            if v < lo or v != v:
                lo = v if lo == lo else lo
            if v > hi or v != v:
                hi = v if hi == hi else hi
    return lo, hi


@njit
def _qparams_out(t, st, rows, x, tmp, vals_i, vals_f, is_int):
    """Write ``rows`` values into ``t``: in its logical order when its numel matches,
    else resized to ``x.shape[:-1] + (1,)`` (the reference's ``t.write``)."""
    if t[D_NUMEL] != rows:
        nd = x[D_NDIM]
        if t[D_NDIM] != nd:
            return NOT_SUPPORTED
        for i in range(nd - 1):
            tmp[i] = x[D_SIZES + i]
        tmp[nd - 1] = 1
        s = resize_to(t, tmp, nd)
        if s != OK:
            return s
    for r in range(rows):
        if is_int:
            _sti(t[D_DATA], st, pos(t, r), vals_i[r])
        else:
            _stf(t[D_DATA], st, pos(t, r), vals_f[r])
    return OK


def qparams_kernel(blk):
    per_token = blk[0] == 1
    x, so, zo = descs(blk, 1, 3)
    qmin, qmax = blk[6], blk[7]
    n = x[D_NUMEL]
    nd = x[D_NDIM]
    if per_token:
        if nd == 0 or x[D_SIZES + nd - 1] == 0:
            return INVALID_ARGUMENT
        cnt = x[D_SIZES + nd - 1]
    else:
        if so[D_NUMEL] != 1 or zo[D_NUMEL] != 1:
            return INVALID_ARGUMENT
        cnt = n
    rows = n // cnt if cnt else 1
    flat = is_contiguous(x) or not per_token  # min/max of a whole tensor: storage order
    vals_f = np.empty(rows, np.float64)
    vals_i = np.empty(rows, np.int64)
    for r in range(rows):
        lo, hi = _minmax(x[D_DATA], x, r * cnt, cnt, flat)
        vals_f[r], vals_i[r] = _qparams(lo, hi, qmin, qmax)
    tmp = np.empty(16, np.int64)
    s = _qparams_out(so, blk[4], rows, x, tmp, vals_i, vals_f, False)
    if s != OK:
        return s
    return _qparams_out(zo, blk[5], rows, x, tmp, vals_i, vals_f, True)


def _bind_qparams(ctx, per_token, input, scale_out, zero_point_out, qmin, qmax):
    if input.dtype != F32 or _out_code(scale_out) is None or _out_code(zero_point_out) is None:
        return None
    return ctx.bind(lazy(qparams_kernel), [
        int(per_token), ctx.desc(input), ctx.desc(scale_out), ctx.desc(zero_point_out),
        quant_code(scale_out), quant_code(zero_point_out), qmin, qmax])


@register_fast("quantized_decomposed::choose_qparams.Tensor_out")
def bind_choose_qparams(ctx, input, quant_min, quant_max, eps, dtype, scale_out,
                        zero_point_out):
    if quant_min >= quant_max:
        return None
    return _bind_qparams(ctx, False, input, scale_out, zero_point_out, quant_min, quant_max)


@register_fast("quantized_decomposed::choose_qparams_per_token_asymmetric.out")
def bind_choose_qparams_per_token(ctx, input, dtype, scale_out, zero_point_out):
    # like the C++ kernel the reference always targets int8's range
    return _bind_qparams(ctx, True, input, scale_out, zero_point_out, -128, 127)
