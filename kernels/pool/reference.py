"""2-D pooling kernels over (N, C, H, W) or unbatched (C, H, W) inputs.

Windows are zero-copy ``as_strided`` views of a padded input, reduced over
their last two axes; the extra right/bottom padding covers ceil_mode windows.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.promote import compute_dtype
from pyruntime.kernels.registry import register


def _bad(op, arg, expected, got):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{op}: {arg}: expected {expected}, got {got}")


def _pair(op, name, v, default=None):
    v = list(v) if v is not None else []
    if not v and default is not None:
        return list(default)
    if len(v) == 1:
        return [int(v[0])] * 2
    if len(v) != 2:
        raise _bad(op, name, "1 or 2 values", v)
    return [int(e) for e in v]


def _out_size(size, k, s, p, d, ceil_mode):
    """ATen's pooling_output_shape: the last window must start inside the input or left padding."""
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _check_input(op, x):
    if x.ndim not in (3, 4):
        raise _bad(op, "self", "a 3-D (C, H, W) or 4-D (N, C, H, W) tensor", x.describe())


def _params(op, self, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(op, self)
    k = _pair(op, "kernel_size", kernel_size)
    s = _pair(op, "stride", stride, default=k)
    p = _pair(op, "padding", padding)
    d = _pair(op, "dilation", dilation)
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise _bad(op, "kernel_size/stride/dilation/padding", "positive (padding >= 0)",
                   (k, s, d, p))
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise _bad(op, "padding", f"at most half the kernel size {k}", p)
    H, W = self.shape[-2:]
    out = [_out_size(H, k[0], s[0], p[0], d[0], ceil_mode),
           _out_size(W, k[1], s[1], p[1], d[1], ceil_mode)]
    if min(out) < 1:
        raise _bad(op, "self", f"spatial size large enough for kernel {k}", self.describe())
    return k, s, p, d, out


def _windows(x, k, s, p, d, out, fill):
    """View (..., oh, ow, kh, kw) of ``x`` padded with ``fill`` (enough for every window)."""
    H, W = x.shape[-2:]
    hi = [max(0, (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - (x.shape[-2 + i] + p[i]))
          for i in range(2)]
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(p[0], hi[0]), (p[1], hi[1])], constant_values=fill)
    st = xp.strides
    return as_strided(xp, xp.shape[:-2] + tuple(out) + tuple(k),
                      st[:-2] + (st[-2] * s[0], st[-1] * s[1], st[-2] * d[0], st[-1] * d[1]),
                      writeable=False)


@register("aten::max_pool2d_with_indices.out")
def max_pool2d_with_indices_out(self, kernel_size, stride, padding, dilation, ceil_mode,
                                out, indices):
    op = "aten::max_pool2d_with_indices.out"
    k, s, p, d, osz = _params(op, self, kernel_size, stride, padding, dilation, ceil_mode)
    x = self.numpy()
    if x.dtype.kind == "f" or compute_dtype(x.dtype) != x.dtype:
        x = x.astype(compute_dtype(x.dtype), copy=False)
        fill = -np.inf
    else:
        fill = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else False
    win = _windows(x, k, s, p, d, osz, fill)
    # Scan the taps in order with ATen's update rule (val > max || isnan(val)): the first
    # maximum wins and a NaN anywhere propagates.
    vals = win[..., 0, 0].copy()
    arg = np.zeros(vals.shape, np.int64)
    for t in range(1, k[0] * k[1]):
        v = win[..., t // k[1], t % k[1]]
        take = v > vals
        if v.dtype.kind == "f":
            take |= np.isnan(v)
        np.copyto(vals, v, where=take)
        arg[take] = t
    W = self.shape[-1]
    oh = np.arange(osz[0])[:, None] * s[0] - p[0]
    ow = np.arange(osz[1])[None, :] * s[1] - p[1]
    idx = (oh + (arg // k[1]) * d[0]) * W + (ow + (arg % k[1]) * d[1])
    out.write(vals)
    indices.write(idx)


@register("aten::max_pool2d_with_indices_backward.grad_input")
def max_pool2d_with_indices_backward_grad_input(grad_output, self, kernel_size, stride, padding,
                                                dilation, ceil_mode, indices, grad_input):
    op = "aten::max_pool2d_with_indices_backward.grad_input"
    _check_input(op, self)
    ct = compute_dtype(grad_output.dtype)
    g = grad_output.numpy().astype(ct, copy=False)
    H, W = self.shape[-2:]
    planes = int(np.prod(self.shape[:-2]))
    idx = indices.numpy().reshape(planes, -1).astype(np.int64)
    flat = (idx + np.arange(planes)[:, None] * (H * W)).ravel()
    res = np.zeros(planes * H * W, ct)
    np.add.at(res, flat, g.reshape(-1))  # overlapping windows accumulate
    grad_input.write(res.reshape(self.shape))


@register("aten::avg_pool2d.out")
def avg_pool2d_out(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   divisor_override, out):
    op = "aten::avg_pool2d.out"
    k, s, p, d, osz = _params(op, self, kernel_size, stride, padding, [1, 1], ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise _bad(op, "divisor_override", "a non-zero value", divisor_override)
    x = self.numpy()
    integer = x.dtype.kind in "iub"
    ct = np.dtype(np.int64) if integer else compute_dtype(x.dtype)
    sums = _windows(x.astype(ct, copy=False), k, s, p, d, osz, 0).sum(axis=(-2, -1), dtype=ct)
    # Per-axis window extents: clipped to input+padding (pool size) and to the input (valid).
    div = []
    for i, size in enumerate(self.shape[-2:]):
        start = np.arange(osz[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], size + p[i])
        pool = end - start
        valid = np.minimum(end, size) - np.maximum(start, 0)
        div.append(pool if count_include_pad else valid)
    if divisor_override is not None:
        divisor = np.full(osz, int(divisor_override), np.int64)
    else:
        divisor = div[0][:, None] * div[1][None, :]
    if integer:  # C++ integer division truncates toward zero
        res = np.trunc(sums / divisor).astype(np.int64)
    else:
        res = sums / divisor.astype(ct)
    out.write(res)


def _adaptive_matrix(in_size, out_size, dtype):
    """(out, in) averaging matrix with ATen's bins [floor(i*I/O), ceil((i+1)*I/O))."""
    i = np.arange(out_size)
    start = (i * in_size) // out_size
    end = -((-(i + 1) * in_size) // out_size)
    cols = np.arange(in_size)
    m = (cols >= start[:, None]) & (cols < end[:, None])
    return (m / (end - start)[:, None]).astype(dtype)


@register("aten::_adaptive_avg_pool2d.out")
def _adaptive_avg_pool2d_out(self, output_size, out):
    op = "aten::_adaptive_avg_pool2d.out"
    _check_input(op, self)
    oh, ow = _pair(op, "output_size", output_size)
    if oh < 0 or ow < 0:
        raise _bad(op, "output_size", "non-negative sizes", output_size)
    ct = compute_dtype(self.dtype)
    x = self.numpy().astype(ct, copy=False)
    H, W = x.shape[-2:]
    if (oh, ow) == (1, 1):
        res = x.mean(axis=(-2, -1), keepdims=True, dtype=ct)
    elif oh and ow and H % oh == 0 and W % ow == 0:
        res = x.reshape(x.shape[:-2] + (oh, H // oh, ow, W // ow)).mean(axis=(-3, -1), dtype=ct)
    else:
        res = _adaptive_matrix(H, oh, ct) @ x @ _adaptive_matrix(W, ow, ct).T
    out.write(res)
