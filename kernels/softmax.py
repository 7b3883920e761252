"""Softmax and log-softmax along one dim, stabilized by subtracting the max."""
from __future__ import annotations

import numpy as np

from cython_ext.errors import ErrorCode, ExecuTorchError
from kernels.promote import compute_dtype
from kernels.registry import register


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
    x, dim = _prepare("aten::_softmax.out", self, dim)
    e = np.exp(x)
    out.write((e / e.sum(axis=dim, keepdims=True)).reshape(self.shape))


@register("aten::_log_softmax.out")
def _log_softmax_out(self, dim, half_to_float, out):
    x, dim = _prepare("aten::_log_softmax.out", self, dim)
    with np.errstate(divide="ignore"):  # empty reductions: log(0) on rows with no elements
        out.write((x - np.log(np.exp(x).sum(axis=dim, keepdims=True))).reshape(self.shape))
