"""Creation ops: arange, full/zeros/ones, scalar_tensor, rand/randn, native_dropout, linspace/logspace.

These take their dtype from the out tensor (ExecuTorch emits the out with the
dtype the graph asked for). Random ops draw from one module-level numpy
Generator; ``seed()`` resets it for reproducible runs.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.promote import compute_dtype
from pyruntime.kernels.registry import register

_rng = np.random.default_rng()


def seed(value: int) -> None:
    """Reseed the generator behind rand/randn/native_dropout."""
    global _rng
    _rng = np.random.default_rng(value)


def _bad(op, msg):
    return ExecuTorchError(ErrorCode.InvalidArgument, f"{op}: {msg}")


def _size(op, size):
    if any(s < 0 for s in size):
        raise _bad(op, f"size: expected non-negative sizes, got {list(size)}")
    return tuple(size)


# ---- ranges ---------------------------------------------------------------------------

def _arange(op, start, end, step, out):
    # As ATen: values are start + i * step in the accumulate type (int64 for
    # integer outs, the Scalars truncated first; double for float32/64; float
    # for half types). The length comes from the double values, except that an
    # int64 out sizes from the truncated ones.
    dt = out.dtype
    integral = dt.kind in "iub"
    acc = np.int64 if integral else (np.float64 if dt.itemsize >= 4 else np.float32)
    xstart, xend, xstep = (int(v) for v in (start, end, step)) if integral else (start, end, step)
    if xstep == 0:
        raise _bad(op, "step: expected a non-zero value, got 0")
    if (xend - xstart) * xstep < 0:
        raise _bad(op, f"upper bound and larger bound inconsistent with step sign "
                       f"(start={start}, end={end}, step={step})")
    n = math.ceil((xend - xstart) / xstep if dt == np.int64 else (end - start) / step)
    out.write(acc(xstart) + acc(xstep) * np.arange(n, dtype=acc))


@register("aten::arange.out")
def arange_out(end, out):
    _arange("arange.out", 0, end, 1, out)


@register("aten::arange.start_out")
def arange_start_out(start, end, step, out):
    _arange("arange.start_out", start, end, step, out)


def _linspace(start, end, steps, dtype):
    # As ATen: integer outs truncate start/end and step in double; float outs
    # compute in their own dtype. The first half runs forward from start, the
    # second backward from end, so both endpoints are exact.
    if steps < 0:
        raise _bad("linspace.out", f"steps: expected a non-negative value, got {steps}")
    if dtype.kind in "iub":
        # the Scalars convert to the out dtype first (wrapping, as C++ casts do)
        acc = np.float64
        start, end = (int(np.asarray(int(v)).astype(dtype)) for v in (start, end))
    else:
        acc = dtype.type
    if steps <= 1:
        return np.full(steps, start, np.float64)
    s0, s1 = acc(start), acc(end)
    step = (s1 - s0) / acc(steps - 1)
    i = np.arange(steps)
    fwd = i < steps // 2
    return np.where(fwd, s0 + step * i.astype(acc), s1 - step * (steps - 1 - i).astype(acc))


@register("aten::linspace.out")
def linspace_out(start, end, steps, out):
    out.write(_linspace(start, end, steps, out.dtype))


@register("aten::logspace.out")
def logspace_out(start, end, steps, base, out):
    exps = _linspace(start, end, steps, np.dtype(np.float64))
    out.write(np.power(np.float64(base), exps))


# ---- constants ------------------------------------------------------------------------

@register("aten::full.out")
def full_out(size, fill_value, out):
    # np.asarray: a Python int out of the dtype's range wraps (as in C++) rather than raising
    out.write(np.full(_size("full.out", size), np.asarray(fill_value), compute_dtype(out.dtype)))


@register("aten::full_like.out")
def full_like_out(self, fill_value, memory_format, out):
    out.write(np.full(self.shape, np.asarray(fill_value), compute_dtype(out.dtype)))


def sized(name: str, make):
    """Registers ``aten::<name>.out(size, out)``, writing ``make(size, out.dtype)`` to ``out``."""
    op = f"{name}.out"

    @register(f"aten::{op}")
    def kernel(size, out):
        out.write(make(_size(op, size), out.dtype))

    kernel.__name__ = f"{name}_out"
    return kernel


sized("zeros", np.zeros)
sized("ones", np.ones)


@register("aten::scalar_tensor.out")
def scalar_tensor_out(s, out):
    out.write(np.asarray(s))


# ---- random ---------------------------------------------------------------------------

# float32 draws (out casts them), from the generator ``seed`` last set
sized("rand", lambda shape, _dt: _rng.random(shape, np.float32))
sized("randn", lambda shape, _dt: _rng.standard_normal(shape, np.float32))


@register("aten::native_dropout.out")
def native_dropout_out(input, p, train, out0, out1):  # noqa: A002 (schema name)
    # As ATen: train=None means training; p == 1 zeroes everything (scale 0).
    x = input.numpy()
    if not 0 <= p <= 1:
        raise _bad("native_dropout.out", f"p: expected a probability in [0, 1], got {p}")
    if train is False or x.size == 0:
        out0.write(x)
        out1.write(np.ones(x.shape, bool))
        return
    keep = _rng.random(x.shape) < 1 - p
    scale = 0.0 if p == 1 else 1.0 / (1 - p)
    xc = x.astype(compute_dtype(x.dtype), copy=False)
    out0.write(xc * keep * xc.dtype.type(scale))
    out1.write(keep)
