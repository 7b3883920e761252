"""Convolution kernels: 1-D/2-D/3-D, grouped, depthwise and transposed.

Every output is accumulated in ExecuTorch's portable loop order, bit for bit:
from zero, in the tensor's own type (float16 rounds at every step), over input
channel, then kernel row, then kernel column; the bias is added last. A direct
convolution is im2col (a zero-copy ``as_strided`` window view of the padded
input, copied into a ``(C*k, L)`` column matrix per batch/group) and
``ordered_matmul`` (padding adds exact zeros: the same sums). A transposed
convolution starts from the bias and scatters each input pixel's products in
ExecuTorch's order (input row, column, channel), one kernel tap at a time.
"""
from __future__ import annotations

from math import prod

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.linalg.reference import ordered_matmul
from pyruntime.kernels.promote import compute_dtype
from pyruntime.kernels.registry import register


def _bad(op, arg, expected, got):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{op}: {arg}: expected {expected}, got {got}")


def _expand(op, name, values, k):
    """ATen's expand_param_if_needed: a one-element list applies to every spatial dim."""
    values = [int(v) for v in values]
    if len(values) == 1:
        return values * k
    if len(values) != k:
        raise _bad(op, name, f"{k} values (or 1)", values)
    return values


def _windows(xp, kernel, stride, dilation, out_sp):
    """Read-only view (N, C, *kernel, *out_sp) of the padded input ``xp`` (N, C, *spatial)."""
    s = xp.strides
    shape = xp.shape[:2] + tuple(kernel) + tuple(out_sp)
    strides = (s[:2] + tuple(s[2 + i] * dilation[i] for i in range(len(kernel)))
               + tuple(s[2 + i] * stride[i] for i in range(len(kernel))))
    return as_strided(xp, shape, strides, writeable=False)


def _pad(x, lo, hi, value=0):
    k = len(lo)
    if not any(lo) and not any(hi):
        return np.ascontiguousarray(x)
    return np.pad(x, [(0, 0)] * (x.ndim - k) + list(zip(lo, hi)), constant_values=value)


def conv_nd(x, w, stride, padding, dilation, groups):
    """Direct convolution: x (N, C, *sp), w (O, C/groups, *k) -> (N, O, *out), no bias."""
    n = x.shape[0]
    o, cg = w.shape[:2]
    kernel = w.shape[2:]
    out_sp = [(x.shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
              for i in range(len(kernel))]
    xp = _pad(x, padding, padding)
    win = _windows(xp, kernel, stride, dilation, out_sp)
    g, og, ktot, L = groups, o // groups, prod(kernel), prod(out_sp)
    cols = win.reshape(n, g, cg * ktot, L)  # the im2col copy, rows in (channel, tap) order
    res = ordered_matmul(w.reshape(g, og, cg * ktot), cols)  # (N, G, Og, L)
    return res.reshape((n, o) + tuple(out_sp))


def conv_transpose_nd(x, w, stride, padding, dilation, output_padding, groups, bias=None):
    """Transposed convolution: x (N, C, *sp), w (C, O/groups, *k) -> (N, O, *out).

    ExecuTorch starts each output from its bias and adds the products of the input
    pixels that reach it in (row, column, channel) order: a later input row meets an
    earlier kernel row, so the taps run last to first, the channels innermost."""
    n, c = x.shape[:2]
    _, og = w.shape[:2]
    kernel = w.shape[2:]
    k = len(kernel)
    sp = x.shape[2:]
    g, cg = groups, c // groups
    full = [(sp[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 + output_padding[i]
            for i in range(k)]
    acc = np.zeros((n, g, og) + tuple(full), x.dtype)
    if bias is not None:
        acc[...] = bias.reshape((1, g, og) + (1,) * k)
    xg = x.reshape((n, g, cg, 1) + tuple(sp))
    wg = w.reshape((g, cg, og) + tuple(kernel))
    for idx in reversed(list(np.ndindex(*kernel))):
        sl = tuple(slice(idx[i] * dilation[i], idx[i] * dilation[i] + stride[i] * (sp[i] - 1) + 1,
                         stride[i]) for i in range(k))
        region = acc[(slice(None),) * 3 + sl]
        for ci in range(cg):
            region += xg[:, :, ci] * wg[(slice(None), ci, slice(None)) + idx + (None,) * k]
    crop = tuple(slice(padding[i], full[i] - padding[i]) for i in range(k))
    return acc.reshape((n, g * og) + tuple(full))[(slice(None), slice(None)) + crop]


def _conv_params(op, input, weight, stride, padding, dilation, transposed, output_padding, groups):
    k = weight.ndim - 2
    if k < 1 or k > 3:
        raise _bad(op, "weight", "a 3-D, 4-D or 5-D tensor", weight.describe())
    if input.ndim != k + 2:  # ATen's convolution has no unbatched form (F.conv2d adds the dim)
        raise _bad(op, "input", f"a {k + 2}-D tensor like weight", input.describe())
    stride = _expand(op, "stride", stride, k)
    padding = _expand(op, "padding", padding, k)
    dilation = _expand(op, "dilation", dilation, k)
    output_padding = _expand(op, "output_padding", output_padding or [0], k)
    groups = int(groups)
    if groups < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise _bad(op, "stride/padding/dilation/groups", "positive values (padding >= 0)",
                   (stride, padding, dilation, groups))
    c_in = input.shape[-k - 1]
    if transposed:
        ok = weight.shape[0] == c_in and c_in % groups == 0
        want = f"weight.shape[0] == input channels ({c_in}) divisible by groups={groups}"
    else:
        ok = weight.shape[1] * groups == c_in and weight.shape[0] % groups == 0
        want = f"weight of shape [O % {groups} == 0, {c_in // max(groups, 1)}, ...]"
    if not ok:
        raise _bad(op, "weight", want, weight.describe())
    return k, stride, padding, dilation, output_padding, groups


@register("aten::convolution.out")
def convolution_out(input, weight, bias, stride, padding, dilation, transposed,
                    output_padding, groups, out):
    op = "aten::convolution.out"
    k, stride, padding, dilation, output_padding, groups = _conv_params(
        op, input, weight, stride, padding, dilation, transposed, output_padding, groups)
    ct = input.dtype  # ExecuTorch accumulates in the input's own type, even float16
    x = input.numpy()
    w = weight.numpy().astype(ct, copy=False)
    b = None if bias is None else bias.numpy().astype(ct, copy=False)
    sp = x.shape[2:]
    if not transposed and any(sp[i] + 2 * padding[i] < dilation[i] * (w.shape[2 + i] - 1) + 1
                              for i in range(k)):
        raise _bad(op, "weight", f"a dilated kernel no larger than the padded input {list(sp)}",
                   weight.describe())
    if transposed:
        y = conv_transpose_nd(x, w, stride, padding, dilation, output_padding, groups, b)
    else:
        y = conv_nd(x, w, stride, padding, dilation, groups)
        if b is not None:
            y = y + b.reshape((-1,) + (1,) * k)
    out.write(y)


@register("aten::convolution_backward.out")
def convolution_backward_out(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                             transposed, output_padding, groups, output_mask, out0, out1, out2):
    op = "aten::convolution_backward.out"
    k, stride, padding, dilation, output_padding, groups = _conv_params(
        op, input, weight, stride, padding, dilation, transposed, output_padding, groups)
    ct = compute_dtype(input.dtype)
    x = input.numpy().astype(ct, copy=False)
    go = grad_output.numpy().astype(ct, copy=False)
    w = weight.numpy().astype(ct, copy=False)
    n, g = x.shape[0], groups
    kernel = w.shape[2:]
    if output_mask[0]:
        if transposed:
            gi = conv_nd(go, w, stride, padding, dilation, g)
        else:
            # The transposed conv of grad_output, padded at the end to reach the input size.
            extra = [x.shape[2 + i] - ((go.shape[2 + i] - 1) * stride[i] - 2 * padding[i]
                                       + dilation[i] * (kernel[i] - 1) + 1) for i in range(k)]
            gi = conv_transpose_nd(go, w, stride, padding, dilation, extra, g)
        out0.write(gi.reshape(input.shape))
    if output_mask[1]:
        # Correlate the "input" side with windows of the other side: for a direct conv the
        # windows are over the padded input; for a transposed conv over the padded grad_output.
        a, b = (x, go) if transposed else (go, x)  # a: (N, A, *la); b windows: (N, B, *k, *la)
        la = a.shape[2:]
        need = [(la[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 for i in range(k)]
        bp = _pad(b, padding, [max(0, need[i] - padding[i] - b.shape[2 + i]) for i in range(k)])
        win = _windows(bp, kernel, stride, dilation, la)
        A, B = a.shape[1], b.shape[1]
        cols = win.reshape(n, g, B // g, prod(kernel), prod(la))
        av = a.reshape(n, g, A // g, prod(la))
        gw = np.einsum("ngal,ngbkl->gabk", av, cols, optimize=True)  # (G, A/g, B/g, k)
        out1.write(gw.reshape(A, B // g, *kernel))  # matches weight's layout in both cases
    if output_mask[2]:
        out2.write(go.sum(axis=(0,) + tuple(range(2, go.ndim))))
