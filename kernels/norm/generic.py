"""Compiled batch norm (inference and training), layer norm and group norm of every dtype
(``norm_any_kernel``), with the bodies of ``kernels.norm.typed``.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_NDIM, D_NUMEL, D_CAP, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.conv.generic import G_OFF
from pyruntime.kernels.linalg.generic import compute_codes
from pyruntime.kernels.fast.nn_io import (FAKE_WORDS, SUPPORTED, fake_desc, finish, gather_compute,
                                          scatter_compute)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_F64, ST_I64,
                             bits_to_f64, cast_like, desc, lazy, ptr_like, resize_both, resize_to,
                             scratch, sum_seg)
from pyruntime.kernels.norm.typed import bn_typed, gn_typed, ln_typed


# ---- normalization -----------------------------------------------------------------

N_BN, N_BNTRAIN, N_LN, N_GN = range(4)
# block: op, x, w, b, running_mean, running_var, out0, out1, out2, eps, momentum, mk,
# scratch x, w, b, rm, rv, out0, out1, out2, made-up descriptors, N, C, HxW, group, k, ns...
(B_OP, B_X, B_W, B_B, B_RM, B_RV, B_O0, B_O1, B_O2, B_EPS, B_MOM, B_MK, B_SX, B_SW, B_SB,
 B_SRM, B_SRV, B_SO0, B_SO1, B_SO2, B_FAKE, B_N, B_C, B_HXW, B_G, B_K) = range(26)
B_NS = 26


@njit(inline="always")
def _in(blk, i, fi, stc):
    """Gather optional input ``blk[i]`` (scratch ``blk[i + 11]``) under made-up descriptor
    ``fi``; the made-up descriptor's address, or 0 when absent."""
    if blk[i] == 0:
        return 0
    d = desc(blk[i])
    fa = blk[B_FAKE] + fi * 512
    fake_desc(desc(fa), d, blk[i + 11], stc, d[D_NUMEL])
    return fa


@njit
def _gather_in(blk, i, mk):
    if blk[i] != 0:
        gather_compute(blk[i + 11], desc(blk[i]), mk)


@njit(error_model="numpy")
def _bn_train(x, w_addr, b_addr, rm_addr, rv_addr, o0, o1, o2, eps, mom, sc, m):
    """Training batch norm over contiguous compute-dtype descriptors (reference order of
    operations; statistics summed in float64)."""
    nd = x[D_NDIM]
    if nd < 2:
        return INVALID_ARGUMENT
    N, C = x[D_SIZES], x[D_SIZES + 1]
    inner = 1
    for i in range(2, nd):
        inner *= x[D_SIZES + i]
    cnt = N * inner
    if C == 0 or cnt == 0:
        return INVALID_ARGUMENT  # the reference needs a value per channel
    for a in (w_addr, b_addr, rm_addr, rv_addr):
        if a != 0 and desc(a)[3] != C:
            return INVALID_ARGUMENT
    st = resize_to(o0, x[D_SIZES:D_STRIDES], nd)
    if st != OK:
        return st
    sc[0] = C
    st = resize_both(o1, o2, sc, 1)
    if st != OK:
        return st
    xv = ptr_like(x[D_DATA], m)
    z = ptr_like(o0[D_DATA], m)
    mv = ptr_like(o1[D_DATA], m)
    iv = ptr_like(o2[D_DATA], m)
    wv = ptr_like(desc(w_addr)[0] if w_addr else x[D_DATA], m)
    bv = ptr_like(desc(b_addr)[0] if b_addr else x[D_DATA], m)
    rm = ptr_like(desc(rm_addr)[0] if rm_addr else x[D_DATA], m)
    rv = ptr_like(desc(rv_addr)[0] if rv_addr else x[D_DATA], m)
    xa = carray(xv, max(x[D_NUMEL], 1))
    e = cast_like(eps, m)
    one = cast_like(1.0, m)
    mo = cast_like(mom, m)
    keep = cast_like(1.0 - mom, m)
    corr = cast_like(cnt / (cnt - 1), m) if cnt > 1 else cast_like(math.nan, m)
    for c in range(C):
        s = 0.0
        for n in range(N):
            s += sum_seg(xa, (n * C + c) * inner, inner)
        mean = cast_like(s / cnt, m)
        v = 0.0
        for n in range(N):
            b = (n * C + c) * inner
            for i in range(inner):
                dv = xv[b + i] - mean
                v += dv * dv
        var = cast_like(v / cnt, m)
        inv = one / math.sqrt(var + e)
        mv[c] = mean
        iv[c] = inv
        for n in range(N):
            b = (n * C + c) * inner
            for i in range(inner):
                y = (xv[b + i] - mean) * inv
                if w_addr:
                    y = y * wv[c]
                if b_addr:
                    y = y + bv[c]
                z[b + i] = y
        if rm_addr:
            rm[c] = keep * rm[c] + mo * mean
        if rv_addr:
            rv[c] = keep * rv[c] + mo * (var * corr)
    return OK


@njit
def _norm_run(blk, mk, item):
    op = blk[B_OP]
    stc = ST_F32 if item == 4 else ST_F64
    x = desc(blk[B_X])
    fa = blk[B_FAKE]
    sc = scratch(fa + G_OFF * 8, 16)
    eps = bits_to_f64(blk[B_EPS])
    for i in (B_X, B_W, B_B, B_RM, B_RV):
        _gather_in(blk, i, mk)
    fx = _in(blk, B_X, 0, stc)
    fw = _in(blk, B_W, 1, stc)
    fb = _in(blk, B_B, 2, stc)
    frm = _in(blk, B_RM, 3, stc)
    frv = _in(blk, B_RV, 4, stc)
    fo = (desc(fa + 5 * 512), desc(fa + 6 * 512), desc(fa + 7 * 512))
    for j in range(3):
        if blk[B_O0 + j] != 0:
            od = desc(blk[B_O0 + j])
            fake_desc(fo[j], od, blk[B_SO0 + j], stc, od[D_CAP])
    if op == N_BN:
        st = bn_typed(desc(fx), fw, fb, desc(frm), desc(frv), eps, fo[0], fo[1], fo[2], sc, mk)
    elif op == N_BNTRAIN:
        st = _bn_train(desc(fx), fw, fb, frm, frv, fo[0], fo[1], fo[2], eps,
                       bits_to_f64(blk[B_MOM]), sc, mk)
    elif op == N_LN:
        kk = blk[B_K]
        ns = blk[B_NS:B_NS + kk]
        st = ln_typed(desc(fx), fw, fb, eps, fo[0], fo[1], fo[2], kk, ns, sc, mk)
    else:
        if x[D_NUMEL] != blk[B_N] * blk[B_C] * blk[B_HXW]:
            return INVALID_ARGUMENT
        st = gn_typed(desc(fx), fw, fb, blk[B_N], blk[B_C], blk[B_HXW], blk[B_G], eps,
                       fo[0], fo[1], fo[2], sc, mk)
    if st != OK:
        return st
    for j in range(3):
        st = finish(blk[B_SO0 + j], fo[j], desc(blk[B_O0 + j]), mk, False)
        if st != OK:
            return st
    if op == N_BNTRAIN:  # running statistics are updated in place
        for i in (B_RM, B_RV):
            if blk[i] != 0:
                scatter_compute(blk[i + 11], desc(blk[i]), mk, False)
    return OK


def norm_any_kernel(block):
    blk = carray(block, B_NS + 16)
    if blk[B_MK] == ST_F32:
        return _norm_run(blk, np.float32(0), 4)
    if blk[B_MK] == ST_F64:
        return _norm_run(blk, np.float64(0), 8)
    return NOT_SUPPORTED


def _bind_norm(ctx, op, x, w, b, rm, rv, outs, eps, momentum=0.0, ints=()):
    comp = compute_codes(x)
    if comp is None or comp[0] == ST_I64 or x.ndim > 16:
        return None  # normalization of integer tensors: torch rejects them
    if any(t is not None and t.scalar_type not in SUPPORTED for t in (w, b, rm, rv) + outs):
        return None
    if not isinstance(eps, (int, float)) or not isinstance(momentum, (int, float)):
        return None
    mk, _, item = comp
    ins = (x, w, b, rm, rv)
    return ctx.bind(lazy(norm_any_kernel), [
        op] + [0 if t is None else ctx.desc(t) for t in ins + outs] + [
        ctx.f64(eps), ctx.f64(momentum), mk] + [
        0 if t is None else ctx.buffer(t.capacity * item) for t in ins + outs] + [
        ctx.buffer(FAKE_WORDS * 8)] + list(ints) + [0] * (16 + 5 - len(ints)))


def _bind_bn_inference(ctx, input, weight, bias, running_mean, running_var, eps, outs):
    from pyruntime.kernels.norm.typed import bind_batch_norm_no_training
    r = bind_batch_norm_no_training(ctx, input, weight, bias, running_mean, running_var, 0.0,
                                    eps, *outs)
    if r is not None:
        return r
    if input.ndim < 2 or running_mean is None or running_var is None \
            or outs[1].ndim != 1 or outs[2].ndim != 1:
        return None
    return _bind_norm(ctx, N_BN, input, weight, bias, running_mean, running_var, outs, eps)


def bind_batch_norm_no_training_any(ctx, input, weight, bias, running_mean, running_var,
                                    momentum, eps, out0, out1, out2):  # noqa: A002
    if input.ndim < 2 or out1.ndim != 1 or out2.ndim != 1 or running_mean is None \
            or running_var is None:
        return None
    return _bind_norm(ctx, N_BN, input, weight, bias, running_mean, running_var,
                      (out0, out1, out2), eps)


def _bind_bn_train(ctx, input, weight, bias, running_mean, running_var, momentum, eps, outs):
    if input.ndim < 2 or outs[0].ndim != input.ndim or outs[1].ndim != 1 or outs[2].ndim != 1:
        return None
    for t in (running_mean, running_var):  # written back in place, with their own sizes
        if t is not None and t.ndim != 1:
            return None
    return _bind_norm(ctx, N_BNTRAIN, input, weight, bias, running_mean, running_var, outs,
                      eps, momentum)


@register_fast("aten::_native_batch_norm_legit.out")
def bind_batch_norm_legit(ctx, input, weight, bias, running_mean, running_var, training,
                          momentum, eps, out, save_mean, save_invstd):  # noqa: A002
    outs = (out, save_mean, save_invstd)
    if not isinstance(training, bool):
        return None
    if not training:
        return _bind_bn_inference(ctx, input, weight, bias, running_mean, running_var, eps,
                                  outs)
    return _bind_bn_train(ctx, input, weight, bias, running_mean, running_var, momentum, eps,
                          outs)


@register_fast("aten::_native_batch_norm_legit.no_stats_out")
def bind_batch_norm_legit_no_stats(ctx, input, weight, bias, training, momentum, eps, out,
                                   save_mean, save_invstd):  # noqa: A002
    if training is not True:
        return None  # the reference raises: inference needs running statistics
    return _bind_bn_train(ctx, input, weight, bias, None, None, momentum, eps,
                          (out, save_mean, save_invstd))


def bind_layer_norm_any(ctx, input, normalized_shape, weight, bias, eps, out0, out1,
                        out2):  # noqa: A002
    ns = [int(s) for s in normalized_shape]
    k = len(ns)
    if k == 0 or k > 16 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != tuple(ns):
        return None
    if out0.ndim != input.ndim or out1.ndim != input.ndim or out2.ndim != input.ndim:
        return None
    return _bind_norm(ctx, N_LN, input, weight, bias, None, None, (out0, out1, out2), eps,
                      ints=[0, 0, 0, 0, k] + ns)


def bind_group_norm_any(ctx, input, weight, bias, N, C, HxW, group, eps, out0, out1,
                        out2):  # noqa: A002
    N, C, HxW, group = int(N), int(C), int(HxW), int(group)
    if group < 1 or C % group or min(N, C, HxW) < 0:
        return None
    if out0.ndim != input.ndim or out1.ndim != 2 or out2.ndim != 2:
        return None
    return _bind_norm(ctx, N_GN, input, weight, bias, None, None, (out0, out1, out2), eps,
                      ints=[N, C, HxW, group])
