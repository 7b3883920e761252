"""Compiled var, var.correction and var_mean of every float dtype (``var_kernel``): the
reference's numpy arithmetic reproduced bit for bit (pairwise innermost sums).
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_DIMORDER
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.reduce.generic import (inner_run, next_run, ok, out_ndim, plan_kept,
                                              plan_reduced, reduced_mask)
from pyruntime.kernels.fast.reduce_io import (FLOAT_ST, PW_FRAMES, VAR_WORDS, W_WORDS, advance_kept,
                                              ld)
from pyruntime.kernels.fast.nb import (OK, ST_F64, bits_to_f64, cast_like, descs, lazy, ptr_like,
                             scratch, store_f64_call)


# ---- var / var_mean: numpy's reduction order -------------------------------------------------

@njit
def _leaf(sq, xa, st, i, mean, m, am):
    """An addend of var's sums: the element (mean pass) or its squared deviation from
    ``mean``, computed in float64 (``sq``)."""
    if sq:
        d = np.float64(ld(xa, st, i, m) - mean)
        return cast_like(d * d, am)
    return cast_like(ld(xa, st, i, m), am)


@njit
def _pw_leaf(sq, xa, st, b, n, mean, m, am):
    """numpy's pairwise_sum for n <= 128 elements at x offsets b, b+1, ..."""
    if n < 8:
        res = cast_like(0.0, am)
        for i in range(n):
            res += _leaf(sq, xa, st, b + i, mean, m, am)
        return res
    r0 = _leaf(sq, xa, st, b, mean, m, am)
    r1 = _leaf(sq, xa, st, b + 1, mean, m, am)
    r2 = _leaf(sq, xa, st, b + 2, mean, m, am)
    r3 = _leaf(sq, xa, st, b + 3, mean, m, am)
    r4 = _leaf(sq, xa, st, b + 4, mean, m, am)
    r5 = _leaf(sq, xa, st, b + 5, mean, m, am)
    r6 = _leaf(sq, xa, st, b + 6, mean, m, am)
    r7 = _leaf(sq, xa, st, b + 7, mean, m, am)
    i = 8
    end = n - n % 8
    while i < end:
        r0 += _leaf(sq, xa, st, b + i, mean, m, am)
        r1 += _leaf(sq, xa, st, b + i + 1, mean, m, am)
        r2 += _leaf(sq, xa, st, b + i + 2, mean, m, am)
        r3 += _leaf(sq, xa, st, b + i + 3, mean, m, am)
        r4 += _leaf(sq, xa, st, b + i + 4, mean, m, am)
        r5 += _leaf(sq, xa, st, b + i + 5, mean, m, am)
        r6 += _leaf(sq, xa, st, b + i + 6, mean, m, am)
        r7 += _leaf(sq, xa, st, b + i + 7, mean, m, am)
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += _leaf(sq, xa, st, b + i, mean, m, am)
        i += 1
    return res


@njit
def _pw(sq, xa, st, b, n, mean, m, am, stk, stv):
    """numpy's pairwise_sum of a contiguous run (n > 128 splits at n/2 rounded down to a
    multiple of 8, recursively), with an explicit stack."""
    if n <= 128:
        return _pw_leaf(sq, xa, st, b, n, mean, m, am)
    ret = cast_like(0.0, am)
    stk[0] = 0
    stk[1] = n
    stk[2] = 0
    sp = 1
    while sp > 0:
        f = 3 * (sp - 1)
        lo = stk[f]
        nn = stk[f + 1]
        ph = stk[f + 2]
        if nn <= 128:
            ret = _pw_leaf(sq, xa, st, b + lo, nn, mean, m, am)
            sp -= 1
            continue
        n2 = nn // 2
        n2 -= n2 % 8
        if ph == 0:
            stk[f + 2] = 1
            stk[f + 3] = lo
            stk[f + 4] = n2
            stk[f + 5] = 0
            sp += 1
        elif ph == 1:
            stv[sp - 1] = np.float64(ret)
            stk[f + 2] = 2
            stk[f + 3] = lo + n2
            stk[f + 4] = nn - n2
            stk[f + 5] = 0
            sp += 1
        else:
            ret = cast_like(stv[sp - 1], am) + ret
            sp -= 1
    return ret


@njit
def _var_sum(sq, xa, st, xb, sc, nr, pw, mean, m, am, stk, stv):
    """numpy's add.reduce of leaf values over one slot: 0.0, plus each innermost run's
    pairwise sum (``pw``) or each element in turn, in memory order."""
    acc = cast_like(0.0, am)
    inner_n, inner_s, n_outer = inner_run(sc, nr)
    off = xb
    for t in range(n_outer):
        if pw:
            acc += _pw(sq, xa, st, off, inner_n, mean, m, am, stk, stv)
        else:
            for k in range(inner_n):
                acc += _leaf(sq, xa, st, off + k * inner_s, mean, m, am)
        off = next_run(sc, nr, off)
    return acc


@njit
def _var_typed(x, o, o1, sc, nk, nr, pw, cnt, ddof, has_mean, stk, stv, m):
    xa = x[D_DATA]
    st = x[D_DTYPE]
    denom = max(np.float64(cnt) - ddof, 0.0)
    xb = 0
    ob = 0
    ob1 = 0
    for s in range(o[D_NUMEL]):
        sm = _var_sum(False, xa, st, xb, sc, nr, pw, m, m, m, stk, stv)
        mean = sm / cast_like(cnt, m)
        ss = _var_sum(True, xa, st, xb, sc, nr, pw, mean, m, np.float64(0), stk, stv)
        store_f64_call(o[D_DATA], o[D_DTYPE], ob, ss / denom)
        if has_mean:
            store_f64_call(o1[D_DATA], o1[D_DTYPE], ob1, np.float64(mean))
        xb, ob, ob1 = advance_kept(sc, nk, xb, ob, ob1)
    return OK


def var_kernel(block):
    x, o, o1 = descs(block, 0, 3)
    mask = block[3]
    keep = block[4] != 0
    ddof = bits_to_f64(block[5])
    wide = block[6] != 0
    has_mean = block[7] != 0
    sc = scratch(block[8], VAR_WORDS)
    stk = sc[W_WORDS:W_WORDS + 3 * PW_FRAMES]
    stv = carray(ptr_like(block[8] + 8 * (W_WORDS + 3 * PW_FRAMES), np.float64(0)), PW_FRAMES)
    nr, cnt, empty = plan_reduced(x, mask, True, sc)
    # numpy sums the innermost run pairwise when the innermost non-unit memory dim is reduced
    pw = False
    for k in range(x[D_NDIM] - 1, -1, -1):
        i = x[D_DIMORDER + k]
        if x[D_SIZES + i] != 1:
            pw = ((mask >> i) & 1) != 0
            break
    st, nk = plan_kept(x, o, o1, mask, keep, sc)
    if st != OK:
        return st
    if wide:
        return _var_typed(x, o, o1, sc, nk, nr, pw, cnt, ddof, has_mean, stk, stv,
                          np.float64(0))
    return _var_typed(x, o, o1, sc, nk, nr, pw, cnt, ddof, has_mean, stk, stv, np.float32(0))


def _bind_var(ctx, self, dim, ddof, keepdim, out, out1=None):
    outs = (out,) if out1 is None else (out, out1)
    if not ok(self, *outs) or self.scalar_type not in FLOAT_ST:
        return None  # the reference refuses non-float inputs
    if isinstance(ddof, bool) or not isinstance(ddof, (int, float, np.integer, np.floating)):
        return None
    mask = reduced_mask(dim, self.ndim)
    if mask is None:
        return None
    nd = out_ndim(self.ndim, mask, keepdim)
    if any(t.ndim != nd for t in outs):
        return None
    o1 = out if out1 is None else out1
    return ctx.bind(lazy(var_kernel), [ctx.desc(self), ctx.desc(out), ctx.desc(o1), mask,
                                       int(bool(keepdim)), ctx.f64(ddof),
                                       int(self.scalar_type == ST_F64), int(out1 is not None),
                                       ctx.buffer(VAR_WORDS * 8)])


@register_fast("aten::var.correction_out")
def bind_var_correction(ctx, self, dim, correction, keepdim, out):
    return _bind_var(ctx, self, dim, 1 if correction is None else correction, keepdim, out)


@register_fast("aten::var.out")
def bind_var(ctx, self, dim, unbiased, keepdim, out):
    return _bind_var(ctx, self, dim, 1 if unbiased else 0, keepdim, out)


@register_fast("aten::var_mean.correction_out")
def bind_var_mean(ctx, self, dim, correction, keepdim, out0, out1):
    return _bind_var(ctx, self, dim, 1 if correction is None else correction, keepdim, out0,
                     out1)
