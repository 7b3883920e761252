"""Compiled ``cadence::`` kernels (reference: ``kernels/cadence/reference.py``), bit for bit.

Contiguous tensors (NHWC as the flow lays them out; a conv weight in any dim order), int8
or uint8 activations with weights of the same dtype; quantize into int8/uint8/int16/int32,
dequantize from them into float32. The integer sums are exact (int64, whatever the
order). Requantizing is the reference's float32 ``rint(v * f32(1 / scale)) +
zero_point``, a non-finite result read as 0, clamped. ``quantized_layer_norm``'s float32
means are numpy's pairwise sums, mirrored.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.cadence import reference as ref
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_I8,
                                       ST_U8, bits_to_f64, desc, descs, lazy, load_i64,
                                       ptr_like, resize_like, resize_to, store_i64)
from pyruntime.kernels.pool import reference as pool_ref
from pyruntime.kernels.pool.typed import out_size

_ACT = {np.dtype(np.int8): ST_I8, np.dtype(np.uint8): ST_U8}  # activation dtypes
_STORE = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32)}  # quantize outs
_BIAS = {np.dtype(np.int32), np.dtype(np.int64)}  # codes 3, 4: a code of 0 says "no bias"
LIN, MM, MM_T = 0, 1, 2  # linear (w [N, K]); matmul (Y [.., K, N]); matmul, Y [.., N, K]
Q, DQ = 0, 1


def _contiguous(*ts) -> bool:
    return all(t is None or t.is_contiguous() for t in ts)


def _f32_bits(ctx, v) -> int:
    return ctx.f64(float(np.float32(v)))


def _inverse(ctx, scale) -> int:
    """The reference's ``inverse_scale(scale)`` as a block word."""
    return ctx.f64(float(ref.inverse_scale(scale)))


def _bias_word(ctx, bias, n):
    """(descriptor, dtype code) of an int bias of ``n`` values (any number for None: one
    that must be all zeros), (0, 0) without one, or None."""
    if bias is None:
        return 0, 0
    if bias.dtype not in _BIAS or (n is not None and bias.numel != n) or not bias.is_contiguous():
        return None
    return ctx.desc(bias), int(bias.scalar_type)


# ---- shared element steps ------------------------------------------------------------------

@njit(inline="always")
def _requant(v, inv, zf, qmin, qmax):
    """float32 ``v`` requantized: ``rint(v * inv) + zf`` (0 if not finite), clamped."""
    r = np.float32(np.rint(v * inv)) + zf
    if not np.isfinite(r):
        r = np.float32(0.0)
    return np.int64(min(max(r, np.float32(qmin)), np.float32(qmax)))


@njit(inline="always")
def _bias_at(bd, bst, i):
    return load_i64(bd[D_DATA], bst, i) if bst != 0 else np.int64(0)


# ---- quantize / dequantize -------------------------------------------------------------------

def qdq_kernel(block):
    x, o = descs(block, 1, 2)
    st = resize_like(o, x)
    if st != OK:
        return st
    xst, ost = block[3], block[4]
    s = np.float32(bits_to_f64(block[5]))
    zf = np.float32(block[6])
    n = x[D_NUMEL]
    if block[0] == Q:
        inv = np.float32(bits_to_f64(block[7]))
        qmin, qmax = block[8], block[9]
        xf = ptr_like(x[D_DATA], np.float32(0))
        for i in range(n):
            store_i64(o[D_DATA], ost, i, _requant(xf[i], inv, zf, qmin, qmax))
    else:
        of = ptr_like(o[D_DATA], np.float32(0))
        for i in range(n):
            of[i] = (np.float32(load_i64(x[D_DATA], xst, i)) - zf) * s
    return OK


@register_fast("cadence::quantize_per_tensor.out")
def bind_quantize_per_tensor(ctx, input, scale, zero_point, quant_min, quant_max, dtype, out):
    if dtype not in ref._INT or ref._INT[dtype] != out.dtype or input.dtype != np.float32 \
            or out.dtype not in _STORE or not _contiguous(input, out) \
            or not -2**24 <= zero_point <= 2**24 or float(scale) == 0:
        return None
    return ctx.bind(lazy(qdq_kernel), [
        Q, ctx.desc(input), ctx.desc(out), ST_F32, int(out.scalar_type), ctx.f64(0.0),
        zero_point, _inverse(ctx, scale), quant_min, quant_max])


@register_fast("cadence::dequantize_per_tensor.out")
def bind_dequantize_per_tensor(ctx, input, scale, zero_point, quant_min, quant_max, dtype, out):
    if input.dtype not in _STORE or out.dtype != np.float32 or not _contiguous(input, out) \
            or not -2**24 <= zero_point <= 2**24:
        return None
    return ctx.bind(lazy(qdq_kernel), [
        DQ, ctx.desc(input), ctx.desc(out), int(input.scalar_type), ST_F32, _f32_bits(ctx, scale),
        zero_point, 0, 0, 0])


# ---- linear, fully connected, matmul ---------------------------------------------------------

@njit(inline="always")
def _mm(block, x, y, o, marker):
    """out[b, m, n] = requant(sum_k (x[b, m, k] - zx) (y(b, k, n) - zy) + bias[n])."""
    mode = block[5]
    bd = desc(block[4]) if block[4] != 0 else x
    bst = block[6]
    zx, zy, zo = block[7], block[8], np.float32(block[9])
    inv = np.float32(bits_to_f64(block[10]))
    qmin, qmax = block[12], block[13]
    nd, yd = x[D_NDIM], y[D_NDIM]
    K = x[D_SIZES + nd - 1]
    if mode == LIN:
        M = 1
        for i in range(nd - 1):
            M *= x[D_SIZES + i]
        Bn, N = 1, y[D_SIZES]
        if yd != 2 or y[D_SIZES + 1] != K:
            return INVALID_ARGUMENT
    else:
        if yd != nd or nd < 2:
            return INVALID_ARGUMENT
        M = x[D_SIZES + nd - 2]
        kk, N = (y[D_SIZES + nd - 1], y[D_SIZES + nd - 2]) if mode == MM_T else \
            (y[D_SIZES + nd - 2], y[D_SIZES + nd - 1])
        if kk != K:
            return INVALID_ARGUMENT
        Bn = 1
        for i in range(nd - 2):
            if x[D_SIZES + i] != y[D_SIZES + i]:
                return INVALID_ARGUMENT
            Bn *= x[D_SIZES + i]
    if bst != 0 and mode != LIN:  # a matmul's bias: all zeros, else the reference's error
        for i in range(bd[D_NUMEL]):
            if load_i64(bd[D_DATA], bst, i) != 0:
                return INVALID_ARGUMENT
        bst = 0
    if bst != 0 and bd[D_NUMEL] != N:
        return INVALID_ARGUMENT
    sizes = np.empty(nd, np.int64)
    for i in range(nd - 1):
        sizes[i] = x[D_SIZES + i]
    sizes[nd - 1] = N
    st = resize_to(o, sizes, nd)
    if st != OK:
        return st
    xp = ptr_like(x[D_DATA], marker)
    yp = ptr_like(y[D_DATA], marker)
    op = ptr_like(o[D_DATA], marker)
    row = np.empty(N, np.int64)
    for b in range(Bn):
        for m in range(M):
            xb = (b * M + m) * K
            if mode == MM:  # y rows [K, N]: the row of sums grows one y row at a time
                row[:] = 0
                for k in range(K):
                    a = np.int64(xp[xb + k]) - zx
                    yb = (b * K + k) * N
                    for n in range(N):
                        row[n] += a * (np.int64(yp[yb + n]) - zy)
            else:  # y rows [N, K]: one dot product per out
                yb0 = b * N * K
                for n in range(N):
                    s = np.int64(0)
                    yb = yb0 + n * K
                    for k in range(K):
                        s += (np.int64(xp[xb + k]) - zx) * (np.int64(yp[yb + k]) - zy)
                    row[n] = s
            ob = (b * M + m) * N
            for n in range(N):
                v = row[n] + _bias_at(bd, bst, n)
                op[ob + n] = _requant(np.float32(v), inv, zo, qmin, qmax)
    return OK


def mm_kernel(block):
    x, y, o = descs(block, 1, 3)
    if block[11] == ST_I8:
        return _mm(block, x, y, o, np.int8(0))
    if block[11] == ST_U8:
        return _mm(block, x, y, o, np.uint8(0))
    return NOT_SUPPORTED


def _bind_mm(ctx, mode, x, y, bias, zx, zy, multiplier, shift, zo, out, n_bias):
    if x.dtype not in _ACT or y.dtype != x.dtype or out.dtype != x.dtype \
            or not _contiguous(x, y, out) or not x.ndim:
        return None
    b = _bias_word(ctx, bias, n_bias)
    if b is None or not (-2**24 <= zo <= 2**24 and abs(zx) < 2**31 and abs(zy) < 2**31):
        return None
    try:
        scale = ref._multiplier_scale(multiplier, shift)
    except Exception:  # noqa: BLE001 - a zero multiplier: the reference raises
        return None
    return ctx.bind(lazy(mm_kernel), [0, ctx.desc(x), ctx.desc(y), ctx.desc(out), b[0], mode, b[1],
                                      zx, zy, zo, _inverse(ctx, scale), _ACT[x.dtype],
                                      *ref._limits(x.dtype)])


@register_fast("cadence::quantized_linear.per_tensor_out",
               "cadence::quantized_fully_connected.per_tensor_out")
def bind_quantized_linear(ctx, src, weight, bias, src_zero_point, weight_zero_point,
                          out_multiplier, out_shift, out_zero_point, offset, out):
    if weight.ndim != 2:
        return None
    return _bind_mm(ctx, LIN, src, weight, bias, src_zero_point, weight_zero_point,
                    out_multiplier, out_shift, out_zero_point, out, weight.sizes[0])


@register_fast("cadence::quantized_matmul.out")
def bind_quantized_matmul(ctx, X, X_zero_point, Y, Y_zero_point, bias, out_multiplier,
                          out_shift, out_zero_point, transposed, out):
    # the flow passes a bias of zeros (made by the program at run time): the kernel checks
    # it is all zeros, and a failed check re-runs on the reference, which names it
    if X.ndim < 2 or Y.ndim != X.ndim or X.sizes[:-2] != Y.sizes[:-2]:
        return None  # broadcast batch dims: the reference's
    return _bind_mm(ctx, MM_T if transposed else MM, X, Y, bias, X_zero_point, Y_zero_point,
                    out_multiplier, out_shift, out_zero_point, out, None)


# ---- relu --------------------------------------------------------------------------------------

@njit(inline="always")
def _relu(block, x, o, marker):
    st = resize_like(o, x)
    if st != OK:
        return st
    zx, zo = block[3], np.float32(block[4])
    inv = np.float32(bits_to_f64(block[5]))
    qmin, qmax = block[7], block[8]
    xp = ptr_like(x[D_DATA], marker)
    op = ptr_like(o[D_DATA], marker)
    for i in range(x[D_NUMEL]):
        d = max(np.int64(xp[i]) - zx, 0)
        op[i] = _requant(np.float32(d), inv, zo, qmin, qmax)
    return OK


def relu_kernel(block):
    x, o = descs(block, 1, 2)
    if block[6] == ST_I8:
        return _relu(block, x, o, np.int8(0))
    return _relu(block, x, o, np.uint8(0))


@register_fast("cadence::quantized_relu.per_tensor_out")
def bind_quantized_relu(ctx, X, X_zero_point, out_zero_point, out_multiplier, out_shift, out):
    if X.dtype not in _ACT or out.dtype != X.dtype or not _contiguous(X, out) \
            or not -2**24 <= out_zero_point <= 2**24 or abs(X_zero_point) >= 2**31:
        return None
    try:
        scale = ref._multiplier_scale(out_multiplier, out_shift)
    except Exception:  # noqa: BLE001 - a zero multiplier: the reference raises
        return None
    return ctx.bind(lazy(relu_kernel), [0, ctx.desc(X), ctx.desc(out), X_zero_point,
                                        out_zero_point, _inverse(ctx, scale), _ACT[X.dtype],
                                        *ref._limits(X.dtype)])


# ---- conv2d (NHWC) -------------------------------------------------------------------------

@njit(inline="always")
def _conv(block, x, w, o, marker):
    """out[n, oh, ow, oc] = requant(f32(sum over taps and group channels + bias) * bias
    scale); taps outside the input add nothing (zero-point padding)."""
    sh, sw, ph, pw, dh, dw, g = (block[5], block[6], block[7], block[8], block[9], block[10],
                                 block[11])
    zx, zw, zo = block[12], block[13], np.float32(block[14])
    bscale = np.float32(bits_to_f64(block[15]))
    inv = np.float32(bits_to_f64(block[16]))
    bst = block[17]
    qmin, qmax = block[19], block[20]
    bd = desc(block[4]) if block[4] != 0 else x
    if x[D_NDIM] != 4:
        return INVALID_ARGUMENT
    N, H, W, C = x[D_SIZES], x[D_SIZES + 1], x[D_SIZES + 2], x[D_SIZES + 3]
    # the weight by its strides: the flow's may be laid out [OC, C / groups, KH, KW]
    if w[D_NDIM] == 3:  # depthwise [KH, KW, OC]
        KH, KW, OC, Cg = w[D_SIZES], w[D_SIZES + 1], w[D_SIZES + 2], 1
        s_ki, s_kj, s_oc, s_c = w[D_STRIDES], w[D_STRIDES + 1], w[D_STRIDES + 2], 0
    else:  # [OC, KH, KW, C / groups]
        OC, KH, KW, Cg = w[D_SIZES], w[D_SIZES + 1], w[D_SIZES + 2], w[D_SIZES + 3]
        s_oc, s_ki, s_kj, s_c = (w[D_STRIDES], w[D_STRIDES + 1], w[D_STRIDES + 2],
                                 w[D_STRIDES + 3])
    if C != Cg * g or OC % g != 0 or H + 2 * ph < dh * (KH - 1) + 1 \
            or W + 2 * pw < dw * (KW - 1) + 1 or (bst != 0 and bd[D_NUMEL] != OC):
        return INVALID_ARGUMENT
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    st = resize_to(o, (N, OH, OW, OC), 4)
    if st != OK:
        return st
    og = OC // g
    xp = ptr_like(x[D_DATA], marker)
    wp = ptr_like(w[D_DATA], marker)
    op = ptr_like(o[D_DATA], marker)
    acc = np.empty(OC, np.int64)
    for n in range(N):
        for oh in range(OH):
            for ow in range(OW):
                acc[:] = 0
                for ki in range(KH):
                    ih = oh * sh - ph + ki * dh
                    if ih < 0 or ih >= H:
                        continue
                    for kj in range(KW):
                        iw = ow * sw - pw + kj * dw
                        if iw < 0 or iw >= W:
                            continue
                        xb = ((n * H + ih) * W + iw) * C
                        wb = ki * s_ki + kj * s_kj
                        if Cg == 1 and og == 1:  # depthwise: channel c with weight c
                            for c in range(C):
                                acc[c] += (np.int64(xp[xb + c]) - zx) * \
                                    (np.int64(wp[wb + c * s_oc]) - zw)
                        else:
                            for oc in range(OC):
                                xg = xb + oc // og * Cg
                                wo = wb + oc * s_oc
                                s = np.int64(0)
                                for c in range(Cg):
                                    s += (np.int64(xp[xg + c]) - zx) * \
                                        (np.int64(wp[wo + c * s_c]) - zw)
                                acc[oc] += s
                ob = ((n * OH + oh) * OW + ow) * OC
                for oc in range(OC):
                    v = np.float32(acc[oc] + _bias_at(bd, bst, oc)) * bscale
                    op[ob + oc] = _requant(v, inv, zo, qmin, qmax)
    return OK


def conv_kernel(block):
    x, w, o = descs(block, 1, 3)
    if block[18] == ST_I8:
        return _conv(block, x, w, o, np.int8(0))
    return _conv(block, x, w, o, np.uint8(0))


@register_fast("cadence::quantized_conv2d_nhwc.per_tensor_out")
def bind_quantized_conv2d_nhwc(ctx, input, weight, bias, stride, padding, dilation, groups,
                               input_zero_point, weight_zero_point, bias_scale, out_scale,
                               out_zero_point, out_multiplier, out_shift, offset, out):
    x, w = input, weight
    if x.dtype not in _ACT or w.dtype != x.dtype or out.dtype != x.dtype or x.ndim != 4 \
            or w.ndim not in (3, 4) or out.ndim != 4 or not _contiguous(x, out) \
            or not isinstance(groups, int) or groups < 1 or float(out_scale) == 0:
        return None
    try:
        sp, pd, dl = ([int(v) for v in a[-2:]] for a in (stride, padding, dilation))
    except (TypeError, ValueError):
        return None
    if len(sp + pd + dl) != 6 or min(sp + dl) < 1 or min(pd) < 0:
        return None
    oc = w.sizes[2] if w.ndim == 3 else w.sizes[0]
    b = _bias_word(ctx, bias, oc)
    if b is None or not -2**24 <= out_zero_point <= 2**24 \
            or max(abs(input_zero_point), abs(weight_zero_point)) >= 2**31:
        return None
    return ctx.bind(lazy(conv_kernel), [
        0, ctx.desc(x), ctx.desc(w), ctx.desc(out), b[0], *sp, *pd, *dl, groups,
        input_zero_point, weight_zero_point, out_zero_point, _f32_bits(ctx, bias_scale),
        _inverse(ctx, out_scale), b[1], _ACT[x.dtype], *ref._limits(x.dtype)])


# ---- max pool (NHWC) -------------------------------------------------------------------------

@njit(inline="always")
def _pool(block, x, o, marker):
    kh, kw, sh, sw, ph, pw, dh, dw, ceil = (block[3], block[4], block[5], block[6], block[7],
                                            block[8], block[9], block[10], block[11])
    if x[D_NDIM] != 4:
        return INVALID_ARGUMENT
    N, H, W, C = x[D_SIZES], x[D_SIZES + 1], x[D_SIZES + 2], x[D_SIZES + 3]
    OH = out_size(H, kh, sh, ph, dh, ceil != 0)
    OW = out_size(W, kw, sw, pw, dw, ceil != 0)
    if OH < 1 or OW < 1:
        return INVALID_ARGUMENT
    st = resize_to(o, (N, OH, OW, C), 4)
    if st != OK:
        return st
    lowest = block[13]
    xp = ptr_like(x[D_DATA], marker)
    op = ptr_like(o[D_DATA], marker)
    for n in range(N):
        for oh in range(OH):
            for ow in range(OW):
                ob = ((n * OH + oh) * OW + ow) * C
                for c in range(C):
                    op[ob + c] = lowest
                for ki in range(kh):
                    ih = oh * sh - ph + ki * dh
                    if ih < 0 or ih >= H:
                        continue
                    for kj in range(kw):
                        iw = ow * sw - pw + kj * dw
                        if iw < 0 or iw >= W:
                            continue
                        xb = ((n * H + ih) * W + iw) * C
                        for c in range(C):
                            op[ob + c] = max(op[ob + c], xp[xb + c])
    return OK


def pool_kernel(block):
    x, o = descs(block, 1, 2)
    if block[12] == ST_I8:
        return _pool(block, x, o, np.int8(0))
    return _pool(block, x, o, np.uint8(0))


@register_fast("cadence::quantized_max_pool2d_nhwc.out")
def bind_quantized_max_pool2d_nhwc(ctx, input, kernel_size, stride, padding, dilation,
                                   ceil_mode, out):
    if input.dtype not in _ACT or out.dtype != input.dtype or input.ndim != 4 \
            or out.ndim != 4 or not _contiguous(input, out):
        return None
    try:  # ATen's parameter rules, checked on the load-time sizes (one NCHW plane: only
        # H and W count)
        plane = ETensor.empty(input.scalar_type, (1, 1, *input.sizes[1:3]))
        k, s, p, d, _ = pool_ref._params("cadence::quantized_max_pool2d_nhwc.out", plane,
                                         kernel_size, stride, padding, dilation, ceil_mode)
    except Exception:  # noqa: BLE001 - the reference raises the error at run time
        return None
    return ctx.bind(lazy(pool_kernel), [0, ctx.desc(input), ctx.desc(out), *k, *s, *p, *d,
                                        int(bool(ceil_mode)), _ACT[input.dtype],
                                        ref._limits(input.dtype)[0]])


# ---- layer norm ------------------------------------------------------------------------------
# The reference's float32 means are numpy's: a pairwise sum (runs of up to 128 in eight
# partial sums, longer ones halved at a multiple of 8) added to 0, divided by the count.

@njit
def _pw_run(a, i, n):
    """numpy's float32 pairwise sum of a[i:i + n], n <= 128."""
    res = np.float32(0.0)
    if n < 8:
        for k in range(n):
            res += a[i + k]
        return res
    r0, r1, r2, r3 = a[i], a[i + 1], a[i + 2], a[i + 3]
    r4, r5, r6, r7 = a[i + 4], a[i + 5], a[i + 6], a[i + 7]
    k = 8
    while k < n - n % 8:
        r0 += a[i + k]
        r1 += a[i + k + 1]
        r2 += a[i + k + 2]
        r3 += a[i + k + 3]
        r4 += a[i + k + 4]
        r5 += a[i + k + 5]
        r6 += a[i + k + 6]
        r7 += a[i + k + 7]
        k += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while k < n:
        res += a[i + k]
        k += 1
    return res


def _pw_level(inner):
    """A pairwise sum of up to twice ``inner``'s reach: halved (at a multiple of 8) above
    128, each half by ``inner`` (fixed levels, each a call: Numba compiles no recursion
    here, and inlined levels would copy the run loop 2**levels times)."""
    @njit
    def level(a, i, n):
        if n <= 128:
            return _pw_run(a, i, n)
        n2 = n // 2
        n2 -= n2 % 8
        return inner(a, i, n2) + inner(a, i + n2, n - n2)
    return level


_pw = _pw_run
for _ in range(8):  # up to 128 * 2**8 = 32768 values
    _pw = _pw_level(_pw)
PW_MAX = 128 << 8


@njit(inline="always")
def _mean(a, n):
    return (np.float32(0.0) + _pw(a, 0, n)) / np.float32(n)


@njit(inline="always")
def _layer_norm(block, x, o, marker):
    st = resize_like(o, x)
    if st != OK:
        return st
    n = block[3]
    if x[D_NUMEL] % max(n, 1) != 0:
        return INVALID_ARGUMENT
    xs, zx = np.float32(bits_to_f64(block[4])), np.float32(block[5])
    eps, zo = np.float32(bits_to_f64(block[6])), np.float32(block[7])
    inv = np.float32(bits_to_f64(block[8]))
    wf = ptr_like(desc(block[9])[D_DATA] if block[9] else x[D_DATA], np.float32(0))
    bf = ptr_like(desc(block[10])[D_DATA] if block[10] else x[D_DATA], np.float32(0))
    qmin, qmax = block[12], block[13]
    xp = ptr_like(x[D_DATA], marker)
    op = ptr_like(o[D_DATA], marker)
    f = np.empty(n, np.float32)
    c2 = np.empty(n, np.float32)
    for r in range(x[D_NUMEL] // max(n, 1)):
        b = r * n
        for i in range(n):
            f[i] = (np.float32(xp[b + i]) - zx) * xs
        mu = _mean(f, n)
        for i in range(n):
            f[i] = f[i] - mu
            c2[i] = f[i] * f[i]
        var = _mean(c2, n)
        # float32 sqrt, correctly rounded from the float64 one
        rs = np.float32(1.0) / np.float32(np.sqrt(np.float64(var + eps)))
        for i in range(n):
            y = f[i] * rs
            if block[9]:
                y = y * wf[i]
            if block[10]:
                y = y + bf[i]
            op[b + i] = _requant(y, inv, zo, qmin, qmax)
    return OK


def layer_norm_kernel(block):
    x, o = descs(block, 1, 2)
    if block[11] == ST_I8:
        return _layer_norm(block, x, o, np.int8(0))
    return _layer_norm(block, x, o, np.uint8(0))


@register_fast("cadence::quantized_layer_norm.per_tensor_out")
def bind_quantized_layer_norm(ctx, X, X_scale, X_zero_point, normalized_shape, weight, bias,
                              eps, output_scale, output_zero_point, out):
    try:
        ns = tuple(int(v) for v in normalized_shape)
    except (TypeError, ValueError):
        return None
    n = int(np.prod(ns)) if ns else 0
    if X.dtype not in _ACT or out.dtype != X.dtype or not _contiguous(X, out, weight, bias) \
            or not ns or tuple(X.sizes[X.ndim - len(ns):]) != ns or not 0 < n <= PW_MAX \
            or any(t is not None and (t.dtype != np.float32 or t.numel != n)
                   for t in (weight, bias)) \
            or not -2**24 <= output_zero_point <= 2**24 or abs(X_zero_point) > 2**24 \
            or float(output_scale) == 0:
        return None
    return ctx.bind(lazy(layer_norm_kernel), [
        0, ctx.desc(X), ctx.desc(out), n, _f32_bits(ctx, X_scale), X_zero_point,
        _f32_bits(ctx, eps), output_zero_point, _inverse(ctx, output_scale),
        0 if weight is None else ctx.desc(weight), 0 if bias is None else ctx.desc(bias),
        _ACT[X.dtype], *ref._limits(X.dtype)])
