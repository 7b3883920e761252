"""Reduction MIL ops (``reduce_*``): over ``axes`` (None: all), ``keep_dims`` optional.

Float reductions accumulate in float32 (float16 operands are widened first) and
round once, like the other ops.
"""
from __future__ import annotations

import numpy as np

from pyruntime.delegates.coreml.ops import axes_of, axis_of, dtype_of_string, mil_op, op_error


def _reduce(name, f):
    def op(x, axes=None, keep_dims=False):
        x = np.asarray(x)
        ax = axes_of(axes, x.ndim)
        if x.size == 0 and name in ("reduce_max", "reduce_min"):
            raise op_error(f"{name} of an empty tensor")
        with np.errstate(all="ignore"):
            return f(x, ax, bool(keep_dims))
    op.__name__ = name
    mil_op(name)(op)


_REDUCE = {
    "reduce_sum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "reduce_mean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "reduce_max": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "reduce_min": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "reduce_prod": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "reduce_l1_norm": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "reduce_l2_norm": lambda x, a, k: np.sqrt(np.sum(np.square(x), axis=a, keepdims=k)),
    "reduce_sum_square": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k),
    "reduce_log_sum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "reduce_log_sum_exp": lambda x, a, k: _logsumexp(x, a, k),
}


def _logsumexp(x, a, k):
    m = np.max(x, axis=a, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    r = np.log(np.sum(np.exp(x - m), axis=a, keepdims=True)) + m
    return r if k else np.squeeze(r, a)


for _n, _f in _REDUCE.items():
    _reduce(_n, _f)


def _arg(name, f):
    def op(x, axis=-1, keep_dims=False, output_dtype="int32"):
        x = np.asarray(x)
        ax = axis_of(axis, x.ndim)
        if x.shape[ax] == 0:
            raise op_error(f"{name} over an empty dimension")
        r = f(x, axis=ax)
        if bool(keep_dims):
            r = np.expand_dims(r, ax)
        return r.astype(dtype_of_string(output_dtype))
    op.__name__ = name
    mil_op(name, upcast=False)(op)


_arg("reduce_argmax", np.argmax)
_arg("reduce_argmin", np.argmin)
