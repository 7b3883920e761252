"""Normalization kernels: batch norm (inference and training), layer norm, group norm.

Statistics are biased variances computed in the compute dtype (float32 for
half types); outputs with ATen's shapes are written to each out tensor.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.promote import BF16, compute_dtype
from pyruntime.kernels.registry import register


def _bad(op, arg, expected, got):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{op}: {arg}: expected {expected}, got {got}")


def _vec(op, name, t, n, ct):
    """An optional per-channel parameter as a float vector of length ``n`` (None if absent)."""
    if t is None:
        return None
    if t.numel != n:
        raise _bad(op, name, f"{n} elements", t.describe())
    return t.numpy().reshape(n).astype(ct, copy=False)


def _affine(y, w, b, shape):
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def _bn_check(op, input):
    if input.ndim < 2:
        raise _bad(op, "input", "a tensor with at least 2 dims (N, C, ...)", input.describe())
    return input.shape[1], (1, -1) + (1,) * (input.ndim - 2)


@register("aten::_native_batch_norm_legit_no_training.out")
def _native_batch_norm_legit_no_training_out(input, weight, bias, running_mean, running_var,
                                             momentum, eps, out0, out1, out2):
    op = "aten::_native_batch_norm_legit_no_training.out"
    C, shape = _bn_check(op, input)
    ct = input.dtype if input.dtype.kind == "f" or input.dtype == BF16 else compute_dtype(
        input.dtype)
    mean = _vec(op, "running_mean", running_mean, C, ct)
    var = _vec(op, "running_var", running_var, C, ct)
    w, b = _vec(op, "weight", weight, C, ct), _vec(op, "bias", bias, C, ct)
    # ExecuTorch's portable loop, rounding as it does: invstd in double, then
    # (x - mean) * invstd * weight + bias in the input's own type, left to right.
    invstd = (1.0 / np.sqrt(var.astype(np.float64) + eps)).astype(ct)
    w = np.ones(C, ct) if w is None else w
    b = np.zeros(C, ct) if b is None else b
    x = input.numpy().astype(ct, copy=False)
    out0.write((x - mean.reshape(shape)) * invstd.reshape(shape) * w.reshape(shape)
               + b.reshape(shape))
    # ExecuTorch's portable kernel (like ATen) returns empty save_mean / save_invstd here.
    out1.write(np.zeros((0,), ct))
    out2.write(np.zeros((0,), ct))


def _bn_train(op, input, weight, bias, running_mean, running_var, momentum, eps,
              out, save_mean, save_invstd):
    C, shape = _bn_check(op, input)
    ct = compute_dtype(input.dtype)
    x = input.numpy().astype(ct, copy=False)
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // C if C else 0
    if n == 0:
        raise _bad(op, "input", "at least one value per channel", input.describe())
    mean = x.mean(axis=axes, dtype=ct)
    centered = x - mean.reshape(shape)
    var = np.mean(centered * centered, axis=axes, dtype=ct)
    invstd = (1 / np.sqrt(var + ct.type(eps))).astype(ct)
    w, b = _vec(op, "weight", weight, C, ct), _vec(op, "bias", bias, C, ct)
    out.write(_affine(centered * invstd.reshape(shape), w, b, shape))
    save_mean.write(mean)
    save_invstd.write(invstd)
    m = float(momentum)
    if running_mean is not None:
        rm = running_mean.numpy().astype(ct, copy=False)
        running_mean.write((1 - m) * rm + m * mean)
    if running_var is not None:
        rv = running_var.numpy().astype(ct, copy=False)
        unbiased = var * (n / (n - 1)) if n > 1 else np.full_like(var, np.nan)
        running_var.write((1 - m) * rv + m * unbiased)


@register("aten::_native_batch_norm_legit.out")
def _native_batch_norm_legit_out(input, weight, bias, running_mean, running_var, training,
                                 momentum, eps, out, save_mean, save_invstd):
    op = "aten::_native_batch_norm_legit.out"
    if not training:
        return _native_batch_norm_legit_no_training_out(
            input, weight, bias, running_mean, running_var, momentum, eps,
            out, save_mean, save_invstd)
    _bn_train(op, input, weight, bias, running_mean, running_var, momentum, eps,
              out, save_mean, save_invstd)


@register("aten::_native_batch_norm_legit.no_stats_out")
def _native_batch_norm_legit_no_stats_out(input, weight, bias, training, momentum, eps,
                                          out, save_mean, save_invstd):
    op = "aten::_native_batch_norm_legit.no_stats_out"
    if not training:
        raise _bad(op, "training", "True (inference needs running_mean and running_var)",
                   training)
    _bn_train(op, input, weight, bias, None, None,
              momentum, eps, out, save_mean, save_invstd)


@register("aten::native_layer_norm.out")
def native_layer_norm_out(input, normalized_shape, weight, bias, eps, out0, out1, out2):
    op = "aten::native_layer_norm.out"
    ns = tuple(int(s) for s in normalized_shape)
    k = len(ns)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != ns:
        raise _bad(op, "normalized_shape", f"the trailing dims of input {input.describe()}",
                   list(ns))
    ct = compute_dtype(input.dtype)
    x = input.numpy().astype(ct, copy=False)
    axes = tuple(range(x.ndim - k, x.ndim))
    n = int(np.prod(ns))
    stat_shape = x.shape[:x.ndim - k] + (1,) * k
    if n == 0:
        mean = np.zeros(stat_shape, ct)
        rstd = np.full(stat_shape, np.nan, ct)
        y = x
    else:
        mean = x.mean(axis=axes, keepdims=True, dtype=ct)
        centered = x - mean
        var = np.mean(centered * centered, axis=axes, keepdims=True, dtype=ct)
        rstd = (1 / np.sqrt(var + ct.type(eps))).astype(ct)
        y = centered * rstd
    w = _vec(op, "weight", weight, n, ct)
    b = _vec(op, "bias", bias, n, ct)
    out0.write(_affine(y, w, b, ns))
    out1.write(mean)
    out2.write(rstd)


@register("aten::native_group_norm.out")
def native_group_norm_out(input, weight, bias, N, C, HxW, group, eps, out0, out1, out2):
    op = "aten::native_group_norm.out"
    N, C, HxW, group = int(N), int(C), int(HxW), int(group)
    if group < 1 or C % group:
        raise _bad(op, "group", f"a positive divisor of C={C}", group)
    if input.numel != N * C * HxW or (input.ndim >= 2 and input.shape[1] != C):
        raise _bad(op, "input", f"N={N}, C={C}, HxW={HxW} elements", input.describe())
    ct = compute_dtype(input.dtype)
    x = input.numpy().astype(ct, copy=False).reshape(N, group, (C // group) * HxW)
    if x.shape[-1] == 0:
        mean = np.zeros((N, group), ct)
        rstd = np.full((N, group), np.nan, ct)
        y = x
    else:
        mean = x.mean(axis=-1, dtype=ct)
        centered = x - mean[..., None]
        var = np.mean(centered * centered, axis=-1, dtype=ct)
        rstd = (1 / np.sqrt(var + ct.type(eps))).astype(ct)
        y = centered * rstd[..., None]
    y = y.reshape(N, C, HxW)
    w, b = _vec(op, "weight", weight, C, ct), _vec(op, "bias", bias, C, ct)
    out0.write(_affine(y, w, b, (1, C, 1)).reshape(input.shape))
    out1.write(mean)
    out2.write(rstd)
