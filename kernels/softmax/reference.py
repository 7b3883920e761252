"""Softmax and log-softmax along one dim, stabilized by subtracting the max.

``_softmax.out`` is ExecuTorch's portable kernel, reproduced bit for bit: per
row, ``max = x[0]`` then ``max = x[i] < max ? max : x[i]`` (std::max: a NaN is
not sticky), ``sum`` the running sum of ``exp(x[i] - max)`` in order, then
``exp(x[i] - max) / sum``; ``exp`` is the C library's (kernels/libm.py), all in
the tensor's type (float for Half/BFloat16). ``_log_softmax.out`` is an
optimized kernel (vectorized reductions): its order is not reproduced.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.promote import compute_dtype
from pyruntime.kernels.registry import register


def _prepare(op, self, dim):
    nd = max(self.ndim, 1)
    if not -nd <= dim < nd:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{op}: dim: expected a value in [{-nd}, {nd - 1}], got {dim}")
    if self.dtype.kind != "f" and compute_dtype(self.dtype) == self.dtype:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{op}: self: expected a floating-point tensor, "
                              f"got {self.describe()}")
    ct = compute_dtype(self.dtype)
    x = self.numpy().astype(ct, copy=False)
    if x.ndim == 0:
        x = x.reshape(1)
    if not x.size:
        return x, dim % nd
    with np.errstate(invalid="ignore"):  # all -inf rows give NaN, as in ATen
        return x - np.max(x, axis=dim, keepdims=True), dim % nd


@register("aten::_softmax.out")
def _softmax_out(self, dim, half_to_float, out):
    op = "aten::_softmax.out"
    _prepare(op, self, dim)  # validates
    x = self.numpy().astype(compute_dtype(self.dtype), copy=False)
    if x.ndim == 0:
        x = x.reshape(1)
    if not x.size:
        out.write(x.reshape(self.shape))
        return
    from pyruntime.kernels import libm  # imports Numba: only when a program uses softmax
    exp = libm.ufunc("exp", x.dtype)
    x = np.moveaxis(x, dim % x.ndim, 0)
    with np.errstate(all="ignore"):
        mx = x[0].copy()
        for v in x[1:]:
            mx = np.where(v < mx, mx, v)
        e = exp(x - mx)
        total = e[0].copy()
        for v in e[1:]:
            total += v
        r = e / total
    out.write(np.moveaxis(r, 0, dim % x.ndim).reshape(self.shape))


@register("aten::_log_softmax.out")
def _log_softmax_out(self, dim, half_to_float, out):
    x, dim = _prepare("aten::_log_softmax.out", self, dim)
    with np.errstate(divide="ignore"):  # empty reductions: log(0) on rows with no elements
        out.write((x - np.log(np.exp(x).sum(axis=dim, keepdims=True))).reshape(self.shape))
