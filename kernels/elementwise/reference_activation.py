"""Activation kernels: hardtanh, gelu, elu, leaky_relu, glu, logit.

(``relu`` and ``sigmoid`` are plain unary table rows in ``elementwise.py``.)
ATen accepts only floating inputs here except for ``hardtanh`` (integers too)
and ``logit`` (integers promote to float32).
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.elementwise.reference import (
    BOOL, cast, check_out, emit, float_input, float_result, invalid, require_float, sigmoid)
from pyruntime.kernels.promote import compute_dtype
from pyruntime.kernels.registry import register


@register("aten::hardtanh.out")
def hardtanh_out(self, min_val, max_val, out):
    op = "aten::hardtanh.out"
    dt = self.dtype
    if dt == BOOL:
        raise invalid(op, "self", "a numeric (non-bool) tensor", "bool")
    if dt.kind == "u" and (int(min_val) < 0 or int(max_val) < 0):
        raise invalid(op, "min_val/max_val", "non-negative limits for an unsigned tensor",
                      (min_val, max_val))
    check_out(op, dt, out)
    ct = compute_dtype(dt)
    # Bounds are cast to the tensor's dtype first (an int tensor clamps to int(-1.5) == -1).
    x = np.maximum(cast(self, ct), cast(min_val, ct))
    emit(out, np.minimum(x, cast(max_val, ct)), dt)


@register("aten::gelu.out")
def gelu_out(self, approximate, out):
    op = "aten::gelu.out"
    require_float(op, self)
    if approximate not in ("none", "tanh"):
        raise invalid(op, "approximate", "'none' or 'tanh'", repr(approximate))
    dt = self.dtype
    check_out(op, dt, out)
    x = cast(self, compute_dtype(dt))
    from pyruntime.kernels import libm  # ATen's formulas, libm's erf/tanh, as ExecuTorch's gelu
    with np.errstate(all="ignore"):
        r = libm.ufunc("gelu_tanh" if approximate == "tanh" else "gelu", x.dtype)(x)
    emit(out, r, dt)


@register("aten::elu.out")
def elu_out(self, alpha, scale, input_scale, out):
    x, dt = float_input("aten::elu.out", self, out)
    with np.errstate(all="ignore"):
        neg = np.expm1(x * x.dtype.type(input_scale)) * x.dtype.type(alpha * scale)
        emit(out, np.where(x > 0, x * x.dtype.type(scale), neg), dt)


@register("aten::leaky_relu.out")
def leaky_relu_out(self, negative_slope, out):
    x, dt = float_input("aten::leaky_relu.out", self, out)
    emit(out, np.where(x > 0, x, x * x.dtype.type(negative_slope)), dt)


@register("aten::glu.out")
def glu_out(self, dim, out):
    op = "aten::glu.out"
    require_float(op, self)
    if self.ndim == 0:
        raise invalid(op, "self", "a tensor with at least one dimension", "a 0-dim tensor")
    if not -self.ndim <= dim < self.ndim:
        raise invalid(op, "dim", f"a dim in [{-self.ndim}, {self.ndim})", dim)
    dim %= self.ndim
    if self.shape[dim] % 2:
        raise invalid(op, "self", f"an even size in dim {dim}", self.shape[dim])
    dt = self.dtype
    check_out(op, dt, out)
    a, b = np.split(cast(self, compute_dtype(dt)), 2, axis=dim)
    emit(out, a * sigmoid(b), dt)


@register("aten::logit.out")
def logit_out(self, eps, out):
    op = "aten::logit.out"
    dt = float_result(self.dtype)
    check_out(op, dt, out)
    x = cast(self, compute_dtype(dt))
    if eps is not None and eps >= 0:  # ATen ignores a negative eps
        x = np.clip(x, x.dtype.type(eps), x.dtype.type(1.0 - eps))
    with np.errstate(all="ignore"):
        emit(out, np.log(x / (1.0 - x)), dt)
