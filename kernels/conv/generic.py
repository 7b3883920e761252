"""Compiled convolution (forward and backward) of every dtype (``conv_any_kernel``), in
ExecuTorch's order, through ``kernels.conv.typed`` on gathered scratch buffers.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.conv.typed import conv_typed, cols_range, int_list
from pyruntime.kernels.conv.typed import conv_scratch as _conv_scratch
from pyruntime.kernels.conv.typed import scratch_elems as conv_scratch_elems
from pyruntime.kernels.fast.deferred import carray, njit, overload, types
from pyruntime.kernels.linalg.generic import compute_codes
from pyruntime.kernels.fast.nn_io import (FAKE_WORDS, SUPPORTED, fake_desc, gather_compute,
                                          scatter_compute, wrap)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_F64, ST_I64,
                                       cast_like, desc, lazy, ptr_like, resize_to, scratch, sum_seg)


# ---- convolution -------------------------------------------------------------------

@njit
def transposed_et(X, Wt, Y, g3):
    """Transposed convolution in ExecuTorch's loop order (op_convolution.cpp), over the
    geometry of ``generic.conv._geom`` (3 spatial dims, leading ones of size 1): ``Y`` already holds
    the bias (or zeros); per output channel, every input position in row-major order, every
    input channel of its group and every kernel tap adds x * w where it lands inside Y."""
    N, C, O, g = g3[0], g3[1], g3[2], g3[3]
    a0, a1, a2, b0, b1, b2 = g3[4], g3[5], g3[6], g3[7], g3[8], g3[9]
    k0, k1, k2, s0, s1, s2 = g3[10], g3[11], g3[12], g3[13], g3[14], g3[15]
    p0, p1, p2, d0, d1, d2 = g3[16], g3[17], g3[18], g3[19], g3[20], g3[21]
    cg, og, LA, LB, K = C // g, O // g, a0 * a1 * a2, b0 * b1 * b2, k0 * k1 * k2
    for n in range(N):
        for gi in range(g):
            for oc in range(og):
                yb = (n * O + gi * og + oc) * LB
                for i0 in range(a0):
                    for i1 in range(a1):
                        for i2 in range(a2):
                            for ic in range(cg):
                                c = gi * cg + ic
                                xv = X[(n * C + c) * LA + (i0 * a1 + i1) * a2 + i2]
                                wb = (c * og + oc) * K
                                for q0 in range(k0):
                                    o0 = s0 * i0 + d0 * q0 - p0
                                    if o0 < 0 or o0 >= b0:
                                        continue
                                    for q1 in range(k1):
                                        o1 = s1 * i1 + d1 * q1 - p1
                                        if o1 < 0 or o1 >= b1:
                                            continue
                                        for q2 in range(k2):
                                            o2 = s2 * i2 + d2 * q2 - p2
                                            if 0 <= o2 < b2:
                                                Y[yb + (o0 * b1 + o1) * b2 + o2] += \
                                                    xv * Wt[wb + (q0 * k1 + q1) * k2 + q2]


# block: mode (0 forward, 1 backward), gemm, x, w, bias (forward) or grad_output
# (backward), out0, out1, out2, stride[3], padding[3], dilation[3], output_padding[3],
# groups, transposed, spatial dims, output mask bits, scratch x, w, bias/go, out0, out1,
# made-up descriptors, im2col scratch + its size, mk, int compute type
C_MODE, C_FN, C_X, C_W, C_B, C_O0, C_O1, C_O2 = range(8)
C_S, C_P, C_D, C_OP = 8, 11, 14, 17
C_G, C_T, C_K, C_MASK, C_SX, C_SW, C_SB, C_SO0, C_SO1, C_FAKE, C_IM, C_IMN, C_MK, C_CT = \
    range(20, 34)
# made-up descriptors (64 words each) in the C_FAKE area, then ints, then a conv block
F_X, F_W, F_B, F_O = 0, 1, 2, 3
G_OFF, CB_OFF = 8 * 64, 9 * 64


@njit
def _corr(A, B, Wt, g3, mode, mk):
    """The one loop of convolution and its gradients. A (N, CA, *a) and B (N, CB, *b) are
    related through weight Wt (CA, CB/g, *k) by b = a * stride - pad + k * dilation:
    mode 0 adds w * B into A, mode 1 adds w * A into B, mode 2 adds sum(A * B) into Wt."""
    N, CA, CB, g = g3[0], g3[1], g3[2], g3[3]
    a0, a1, a2, b0, b1, b2 = g3[4], g3[5], g3[6], g3[7], g3[8], g3[9]
    k0, k1, k2, s0, s1, s2 = g3[10], g3[11], g3[12], g3[13], g3[14], g3[15]
    p0, p1, p2, d0, d1, d2 = g3[16], g3[17], g3[18], g3[19], g3[20], g3[21]
    cag, cbg = CA // g, CB // g
    LA, LB, K = a0 * a1 * a2, b0 * b1 * b2, k0 * k1 * k2
    z = cast_like(0, mk)
    for n in range(N):
        for gi in range(g):
            for ac in range(cag):
                ach = gi * cag + ac
                abase = (n * CA + ach) * LA
                for bc in range(cbg):
                    bbase = (n * CB + gi * cbg + bc) * LB
                    wbase = (ach * cbg + bc) * K
                    for q0 in range(k0):
                        lo0, hi0 = cols_range(q0 * d0 - p0, s0, b0, a0)
                        for q1 in range(k1):
                            lo1, hi1 = cols_range(q1 * d1 - p1, s1, b1, a1)
                            for q2 in range(k2):
                                lo2, hi2 = cols_range(q2 * d2 - p2, s2, b2, a2)
                                wi = wbase + (q0 * k1 + q1) * k2 + q2
                                wv = Wt[wi]
                                acc = z
                                for i0 in range(lo0, hi0):
                                    j0 = i0 * s0 + q0 * d0 - p0
                                    for i1 in range(lo1, hi1):
                                        j1 = i1 * s1 + q1 * d1 - p1
                                        ar = abase + (i0 * a1 + i1) * a2
                                        br = bbase + (j0 * b1 + j1) * b2 + q2 * d2 - p2
                                        if mode == 0:
                                            for i2 in range(lo2, hi2):
                                                A[ar + i2] += wv * B[br + i2 * s2]
                                        elif mode == 1:
                                            for i2 in range(lo2, hi2):
                                                B[br + i2 * s2] += wv * A[ar + i2]
                                        else:
                                            for i2 in range(lo2, hi2):
                                                acc += A[ar + i2] * B[br + i2 * s2]
                                if mode == 2:
                                    Wt[wi] += acc


@njit(inline="always")
def _geom(g3, blk, N, CA, CB, da, db, w):
    """Fill the int geometry of ``_corr``: spatial sizes of A, B and the kernel, padded
    in front to three dims, and the block's stride/padding/dilation."""
    g3[0], g3[1], g3[2], g3[3] = N, CA, CB, blk[C_G]
    k = blk[C_K]
    for i in range(3):
        j = i - (3 - k)
        g3[4 + i] = da[D_SIZES + 2 + j] if j >= 0 else 1
        g3[7 + i] = db[D_SIZES + 2 + j] if j >= 0 else 1
        g3[10 + i] = w[D_SIZES + 2 + j] if j >= 0 else 1
        g3[13 + i] = blk[C_S + i]
        g3[16 + i] = blk[C_P + i]
        g3[19 + i] = blk[C_D + i]


@njit(inline="always")
def conv_geom(g3, blk, N, C, O, x, y, w, tr):
    """``_geom`` of input side ``x`` and output side ``y``: x is A when transposed, else B."""
    if tr:
        _geom(g3, blk, N, C, O, x, y, w)
    else:
        _geom(g3, blk, N, O, C, y, x, w)


@njit(inline="always")
def _zero(addr, n, mk):
    z = ptr_like(addr, mk)
    for i in range(n):
        z[i] = cast_like(0, mk)


def _float_conv(cb, mk, item):
    """conv.py's float convolution over block ``cb`` (numba only; floats only)."""
    raise NotImplementedError


@overload(_float_conv)
def _ov_float_conv(cb, mk, item):
    if isinstance(mk, types.Integer):
        return lambda cb, mk, item: NOT_SUPPORTED  # integer inputs take the direct loop
    return lambda cb, mk, item: conv_typed(cb, cast_like(0, mk), item)


@njit
def _out_channels(w, C, g, tr):
    """Output channels from the weight's sizes, or -1 if they do not fit C and groups."""
    if tr:
        return w[9] * g if w[8] == C and C % g == 0 else -1
    return w[8] if w[9] * g == C and w[8] % g == 0 else -1


@njit(inline="always")
def conv_operands(blk, t_at):
    """(x, weight, ``blk[t_at]``'s descriptor, out channels; -1 where they do not fit)."""
    x, w, t = desc(blk[C_X]), desc(blk[C_W]), desc(blk[t_at])
    nd = x[2]
    if w[2] != nd or t[2] != nd:
        return x, w, t, -1
    return x, w, t, _out_channels(w, x[9], blk[C_G], blk[C_T] != 0)


@njit
def _out_len(blk, j, sp, kk, tr):
    """Output length of padded spatial dim ``j`` (input length ``sp``, kernel ``kk``)."""
    s, p, dl = blk[C_S + j], blk[C_P + j], blk[C_D + j]
    if tr:
        return (sp - 1) * s - 2 * p + dl * (kk - 1) + 1 + blk[C_OP + j]
    return (sp + 2 * p - dl * (kk - 1) - 1) // s + 1


@njit
def _conv_fwd(blk, mk, item):
    x, w, o, O = conv_operands(blk, C_O0)
    if O < 0:
        return INVALID_ARGUMENT
    nd = x[2]
    k = blk[C_K]
    g = blk[C_G]
    tr = blk[C_T] != 0
    N, C = x[8], x[9]
    fa = blk[C_FAKE]
    sz = scratch(fa + G_OFF * 8, 16)
    sz[0], sz[1] = N, O
    for i in range(k):
        j = 3 - k + i
        sp, kk, p, dl = x[10 + i], w[10 + i], blk[C_P + j], blk[C_D + j]
        if not tr and sp + 2 * p < dl * (kk - 1) + 1:
            return INVALID_ARGUMENT
        v = _out_len(blk, j, sp, kk, tr)
        if v < 0:
            return INVALID_ARGUMENT
        sz[2 + i] = v
    st = resize_to(o, sz, nd)
    if st != OK:
        return st
    hasb = blk[C_B] != 0
    if hasb and desc(blk[C_B])[3] != O:
        return INVALID_ARGUMENT
    if o[3] == 0:
        return OK
    isint = blk[C_CT] != 0
    gather_compute(blk[C_SX], x, mk)
    gather_compute(blk[C_SW], w, mk)
    if isint or tr or k > 2 or blk[C_FN] == 0:
        L = o[3] // (N * O)
        ov = ptr_like(blk[C_SO0], mk)
        if hasb:
            gather_compute(blk[C_SB], desc(blk[C_B]), mk)
            bv = ptr_like(blk[C_SB], mk)
            for r in range(N * O):
                for i in range(L):
                    ov[r * L + i] = bv[r % O]
        else:
            _zero(blk[C_SO0], o[3], mk)
        g3 = scratch(fa + G_OFF * 8 + 16 * 8, 24)
        conv_geom(g3, blk, N, C, O, x, o, w, tr)
        if tr:  # ExecuTorch's loop order, bias first (as above)
            transposed_et(ptr_like(blk[C_SX], mk), ptr_like(blk[C_SW], mk), ov, g3)
        else:
            _corr(ov, ptr_like(blk[C_SX], mk), ptr_like(blk[C_SW], mk), g3, 0, mk)
    else:  # float 1-D/2-D: conv.py's im2col + gemm over made-up descriptors
        stc = ST_F32 if item == 4 else ST_F64
        fx = desc(fa + F_X * 512)
        fw = desc(fa + F_W * 512)
        fo = desc(fa + F_O * 512)
        fake_desc(fx, x, blk[C_SX], stc, x[3])
        fake_desc(fw, w, blk[C_SW], stc, w[3])
        fake_desc(fo, o, blk[C_SO0], stc, o[3])
        cb = scratch(fa + CB_OFF * 8, 23)  # every word conv_typed reads (zero past 14: no parts,
        # epilogue or FMA)
        cb[0], cb[14] = blk[C_FN], 0  # no packed weight: it is gathered on every run
        cb[1], cb[2], cb[4] = fa + F_X * 512, fa + F_W * 512, fa + F_O * 512
        cb[3] = 0
        if hasb:
            fb = desc(fa + F_B * 512)
            bd = desc(blk[C_B])
            fake_desc(fb, bd, blk[C_SB], stc, bd[D_NUMEL])
            gather_compute(blk[C_SB], bd, mk)
            cb[3] = fa + F_B * 512
        # (sh, sw, ph, pw, dh, dw): the last two of the three padded spatial dims
        cb[5], cb[6] = blk[C_S + 1], blk[C_S + 2]
        cb[7], cb[8] = blk[C_P + 1], blk[C_P + 2]
        cb[9], cb[10] = blk[C_D + 1], blk[C_D + 2]
        cb[11], cb[12], cb[13] = g, blk[C_IM], blk[C_IMN]
        st = _float_conv(cb, mk, item)
        if st != OK:
            return st
    if isint:
        wrap(blk[C_SO0], o[3], blk[C_CT])
    scatter_compute(blk[C_SO0], o, mk, isint)
    return OK


@njit
def _conv_bwd(blk, mk, item):
    x, w, go, O = conv_operands(blk, C_B)
    if O < 0:
        return INVALID_ARGUMENT
    nd = x[2]
    k = blk[C_K]
    tr = blk[C_T] != 0
    mask = blk[C_MASK]
    N, C = x[8], x[9]
    if go[8] != N or go[9] != O:
        return INVALID_ARGUMENT
    for i in range(k):  # grad_output must have the forward output's sizes
        j = 3 - k + i
        if go[10 + i] != _out_len(blk, j, x[10 + i], w[10 + i], tr):
            return INVALID_ARGUMENT
    fa = blk[C_FAKE]
    g3 = scratch(fa + G_OFF * 8 + 16 * 8, 24)
    gather_compute(blk[C_SX], x, mk)
    gather_compute(blk[C_SW], w, mk)
    gather_compute(blk[C_SB], go, mk)
    xs, ws, gs = ptr_like(blk[C_SX], mk), ptr_like(blk[C_SW], mk), ptr_like(blk[C_SB], mk)
    for q in range(2):  # grad_input (out0), then grad_weight (out1)
        if not mask & (1 << q):
            continue
        like = x if q == 0 else w
        o = desc(blk[C_O0 + q])
        st = resize_to(o, like[D_SIZES:D_STRIDES], nd)
        if st != OK:
            return st
        _zero(blk[C_SO0 + q], like[D_NUMEL], mk)
        gq = ptr_like(blk[C_SO0 + q], mk)
        conv_geom(g3, blk, N, C, O, x, go, w, tr)
        xq = gq if q == 0 else xs  # the input side: A when transposed, else B
        a, b = (xq, gs) if tr else (gs, xq)
        if q == 0:  # mode 0 adds into A, mode 1 into B
            _corr(a, b, ws, g3, 0 if tr else 1, mk)
        else:
            _corr(a, b, gq, g3, 2, mk)
        scatter_compute(blk[C_SO0 + q], o, mk, False)
    if mask & 4:
        o = desc(blk[C_O2])
        sz = scratch(fa + G_OFF * 8, 16)
        sz[0] = O
        st = resize_to(o, sz, 1)
        if st != OK:
            return st
        L = go[3] // (N * O) if N * O else 0
        gb = ptr_like(blk[C_SO1], mk)  # grad_weight is already written out
        for c in range(O):
            t = 0.0
            for n in range(N):
                t += sum_seg(gs, (n * O + c) * L, L)
            gb[c] = cast_like(t, mk)
        scatter_compute(blk[C_SO1], o, mk, False)
    return OK


def conv_any_kernel(block):
    blk = carray(block, 34)
    mk = blk[C_MK]
    if blk[C_MODE] != 0:  # backward: floats only
        if mk == ST_F32:
            return _conv_bwd(blk, np.float32(0), 4)
        return _conv_bwd(blk, np.float64(0), 8)
    if mk == ST_F32:
        return _conv_fwd(blk, np.float32(0), 4)
    if mk == ST_F64:
        return _conv_fwd(blk, np.float64(0), 8)
    return _conv_fwd(blk, np.int64(0), 8)


def _conv_params(input, weight, stride, padding, dilation, transposed, output_padding,
                 groups):
    """Static arguments padded in front to three spatial dims, or None (reference raises)."""
    k = weight.ndim - 2
    if k < 1 or k > 3 or input.ndim != k + 2 or isinstance(groups, bool) \
            or not isinstance(groups, int) or groups < 1 or not isinstance(transposed, bool):
        return None
    s, p, d = int_list(stride, k, 1), int_list(padding, k, 0), int_list(dilation, k, 1)
    op = int_list(output_padding or [0], k, 0)
    if s is None or p is None or d is None or op is None:
        return None
    f = 3 - k
    return k, [1] * f + s, [0] * f + p, [1] * f + d, [0] * f + op


def bind_convolution_any(ctx, input, weight, bias, stride, padding, dilation, transposed,
                         output_padding, groups, out):  # noqa: A002 - schema names
    prm = _conv_params(input, weight, stride, padding, dilation, transposed, output_padding,
                       groups)
    comp = compute_codes(input)
    if prm is None or comp is None or out.ndim != input.ndim or (bias is not None and (
            bias.ndim != 1 or bias.scalar_type not in SUPPORTED)) \
            or weight.scalar_type not in SUPPORTED or out.scalar_type not in SUPPORTED:
        return None
    k, s, p, d, op = prm
    mk, ct, item = comp
    fn, im, imn = 0, 0, 0
    if mk != ST_I64 and not transposed and k <= 2:
        fn = 1  # conv.py's loops (ExecuTorch's accumulation order), not the direct _corr
        # conv.py's scratch at load-time sizes: the padded depthwise plane or im2col + gemm
        sp = ([1] + list(input.shape[2:]))[-2:]
        kern = ([1] + list(weight.shape[2:]))[-2:]
        nelem = conv_scratch_elems(weight.shape[0] // groups, weight.shape[1], kern, sp, s[1:],
                                   p[1:], d[1:])
        if nelem:
            im, nbytes = _conv_scratch(ctx, nelem * item)
            imn = nbytes // item
    return ctx.bind(lazy(conv_any_kernel), [
        0, fn, ctx.desc(input), ctx.desc(weight), 0 if bias is None else ctx.desc(bias),
        ctx.desc(out), 0, 0] + s + p + d + op + [
        groups, int(transposed), k, 0, ctx.buffer(input.capacity * item),
        ctx.buffer(weight.capacity * item),
        ctx.buffer(bias.capacity * item) if bias is not None else 0,
        ctx.buffer(out.capacity * item), 0, ctx.buffer(FAKE_WORDS * 8), im, imn, mk, ct])


@register_fast("aten::convolution_backward.out")
def bind_convolution_backward(ctx, grad_output, input, weight, bias_sizes, stride, padding,
                              dilation, transposed, output_padding, groups, output_mask, out0,
                              out1, out2):  # noqa: A002 - schema names
    prm = _conv_params(input, weight, stride, padding, dilation, transposed, output_padding,
                       groups)
    comp = compute_codes(input)
    if prm is None or comp is None or comp[0] == ST_I64 or not isinstance(
            output_mask, (list, tuple)) or len(output_mask) != 3:
        return None  # integer convolution has no gradient in ATen
    outs = (out0, out1, out2)
    mask = [bool(m) for m in output_mask]
    if any(t.scalar_type not in SUPPORTED for t in (grad_output, weight)) or any(
            mask[i] and (outs[i] is None or outs[i].scalar_type not in SUPPORTED)
            for i in range(3)):
        return None
    if (mask[0] and out0.ndim != input.ndim) or (mask[1] and out1.ndim != weight.ndim) or (
            mask[2] and out2.ndim != 1):
        return None
    k, s, p, d, op = prm
    mk, _, item = comp
    return ctx.bind(lazy(conv_any_kernel), [
        1, 0, ctx.desc(input), ctx.desc(weight), ctx.desc(grad_output),
        ctx.desc(out0) if mask[0] else 0, ctx.desc(out1) if mask[1] else 0,
        ctx.desc(out2) if mask[2] else 0] + s + p + d + op + [
        groups, int(transposed), k, mask[0] | mask[1] << 1 | mask[2] << 2,
        ctx.buffer(input.capacity * item), ctx.buffer(weight.capacity * item),
        ctx.buffer(grad_output.capacity * item), ctx.buffer(input.capacity * item),
        ctx.buffer(max(weight.capacity, grad_output.shape[1] if grad_output.ndim > 1 else 1)
                   * item),
        ctx.buffer(FAKE_WORDS * 8), 0, 0, mk, 0])
