"""Matrix kernels (mm, bmm, addmm, linear) and pairwise distances (cdist, pdist).

Float products add their k terms one at a time, first to last, from zero, as
ExecuTorch's kernels do (``ordered_matmul``): BLAS and numpy's matmul split and
reorder that sum, which moves a result by an ulp, and in a quantized program an
ulp can flip a whole quantization step. mm, bmm and linear accumulate half types
in float32 (ExecuTorch's optimized gemm), addmm in the type itself (its portable
loop). Integer types use ``np.matmul`` (exact and order-free, wrapping like ATen).
"""
from __future__ import annotations

import math
from math import prod

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.promote import compute_dtype, result_type
from pyruntime.kernels.registry import register


def _bad(op, arg, expected, got):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{op}: {arg}: expected {expected}, got {got}")


def _no_bool(op, dt):
    if dt == np.bool_:
        raise _bad(op, "dtype", "a numeric dtype", "bool")


def _mat(op, name, t, rank):
    if t.ndim != rank:
        raise _bad(op, name, f"a {rank}-D tensor", t.describe())


# Below this many outputs one cumsum over all products beats a Python loop over k.
_SMALL_OUT = 4096
_CHUNK = 1 << 22  # products held at once on the small-output path


def ordered_matmul(a, b, dtype=None):
    """``a @ b`` for (..., m, k) x (..., k, n), each output a running sum from zero of its
    k products in order, every product and partial sum rounded to ``dtype`` (default: a's):
    the ``sum += x * y`` loops of ExecuTorch's matmul and convolution kernels, bit for bit."""
    dtype = np.dtype(dtype or a.dtype)
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    if dtype.kind in "iub":
        return np.matmul(a, b)
    k = a.shape[-1]
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    acc = np.zeros(shape, dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN: IEEE, as in C++
        if prod(shape) >= _SMALL_OUT:
            tmp = np.empty(shape, dtype)
            for t in range(k):
                np.multiply(a[..., t, None], b[..., t, None, :], out=tmp)
                acc += tmp
            return acc
        # Few outputs, typically a long k: products laid out along a last axis behind the
        # running value, summed by cumsum (numpy's accumulate is sequential), chunk by chunk.
        bt = np.swapaxes(b, -1, -2)[..., None, :, :]
        at = a[..., :, None, :]
        step = max(1, _CHUNK // max(prod(shape), 1))
        for t0 in range(0, k, step):
            p = at[..., t0:t0 + step] * bt[..., t0:t0 + step]
            acc = np.cumsum(np.concatenate([acc[..., None], p], axis=-1), axis=-1,
                            dtype=dtype)[..., -1]
    return acc


def _scalar(v, ct):
    """A Scalar argument in the compute dtype (ATen casts alpha/beta to the op's dtype)."""
    return ct.type(v)


def check_mm(op, name, a, mat2):
    """Raise as the reference does unless ``a`` (argument ``name``) @ ``mat2`` is a matmul."""
    _mat(op, name, a, 2)
    _mat(op, "mat2", mat2, 2)
    if a.shape[1] != mat2.shape[0]:
        raise _bad(op, "mat2", f"{a.shape[1]} rows to match {name} {a.describe()}",
                   mat2.describe())


@register("aten::mm.out")
def mm_out(self, mat2, out):
    op = "aten::mm.out"
    check_mm(op, "self", self, mat2)
    ct = compute_dtype(result_type(self, mat2))
    _no_bool(op, ct)
    out.write(ordered_matmul(self.numpy(), mat2.numpy(), ct))


@register("aten::bmm.out")
def bmm_out(self, mat2, out):
    op = "aten::bmm.out"
    _mat(op, "self", self, 3)
    _mat(op, "mat2", mat2, 3)
    if self.shape[0] != mat2.shape[0] or self.shape[2] != mat2.shape[1]:
        raise _bad(op, "mat2", f"shape [{self.shape[0]}, {self.shape[2]}, *] for self "
                   f"{self.describe()}", mat2.describe())
    ct = compute_dtype(result_type(self, mat2))
    _no_bool(op, ct)
    out.write(ordered_matmul(self.numpy(), mat2.numpy(), ct))


@register("aten::addmm.out")
def addmm_out(self, mat1, mat2, beta, alpha, out):
    op = "aten::addmm.out"
    check_mm(op, "mat1", mat1, mat2)
    ct = result_type(self, mat1, mat2)
    _no_bool(op, ct)
    # portable addmm: the sum in the tensor's own type, then sum * alpha + self * beta
    res = ordered_matmul(mat1.numpy(), mat2.numpy(), ct)
    if alpha != 1:
        res = res * _scalar(alpha, ct)
    if beta != 0:  # beta == 0 ignores self entirely (NaN/inf in self do not propagate)
        s = self.numpy().astype(ct, copy=False)
        try:
            res = res + (s if beta == 1 else s * _scalar(beta, ct))
        except ValueError:
            raise _bad(op, "self", f"a shape broadcastable to {list(res.shape)}", self.describe())
        if res.shape != (mat1.shape[0], mat2.shape[1]):
            raise _bad(op, "self", f"a shape broadcastable to {[mat1.shape[0], mat2.shape[1]]}",
                       self.describe())
    out.write(res)


@register("aten::linear.out")
def linear_out(input, weight, bias, out):
    op = "aten::linear.out"
    if weight.ndim not in (1, 2) or input.ndim < 1 or input.shape[-1] != weight.shape[-1]:
        raise _bad(op, "weight", f"[out_features, {input.shape[-1] if input.ndim else '?'}]",
                   weight.describe())
    ct = compute_dtype(result_type(input, weight) if bias is None
                       else result_type(input, weight, bias))
    _no_bool(op, ct)
    x, w = input.numpy(), weight.numpy()
    w2 = w.T if w.ndim == 2 else w[:, None]
    res = ordered_matmul(x.reshape(-1, x.shape[-1]), w2, ct)
    res = res.reshape(x.shape[:-1] + w.shape[:-1])
    if bias is not None:
        res = res + bias.numpy().astype(ct, copy=False)
    out.write(res)


def _pnorm(diff, p):
    """p-norm over the last axis of a difference array, with ATen's special cases."""
    a = np.abs(diff)
    if p == 0:
        return np.count_nonzero(a, axis=-1).astype(diff.dtype)
    if p == 1:
        return a.sum(axis=-1)
    if p == 2:
        return np.sqrt((a * a).sum(axis=-1))
    if math.isinf(p):
        return a.max(axis=-1, initial=0)
    return (a ** p).sum(axis=-1) ** (1 / p)


@register("aten::_cdist_forward.out")
def _cdist_forward_out(x1, x2, p, compute_mode, out):
    op = "aten::_cdist_forward.out"
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise _bad(op, "x2", f"[..., R, {x1.shape[-1] if x1.ndim else '?'}] like x1 "
                   f"{x1.describe()}", x2.describe())
    if p < 0:
        raise _bad(op, "p", "a non-negative value", p)
    if x1.dtype.kind != "f":
        raise _bad(op, "x1", "a floating-point tensor", x1.describe())
    ct = compute_dtype(result_type(x1, x2))
    a = x1.numpy().astype(ct, copy=False)
    b = x2.numpy().astype(ct, copy=False)
    P, R = a.shape[-2], b.shape[-2]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    use_mm = p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and (P > 25 or R > 25)))
    if use_mm:
        # ATen's _euclidean_dist: |a|^2 + |b|^2 - 2 a.b through a GEMM, clamped at zero.
        an = (a * a).sum(-1)[..., :, None]
        bn = (b * b).sum(-1)[..., None, :]
        d2 = an + bn - 2 * np.matmul(a, np.swapaxes(b, -1, -2))
        res = np.sqrt(np.maximum(d2, 0))
    else:
        res = _pnorm(a[..., :, None, :] - b[..., None, :, :], p)
    out.write(res.astype(ct, copy=False))


@register("aten::_pdist_forward.out")
def _pdist_forward_out(self, p, out):
    op = "aten::_pdist_forward.out"
    if self.ndim != 2:
        raise _bad(op, "self", "a 2-D tensor", self.describe())
    if p < 0:
        raise _bad(op, "p", "a non-negative value", p)
    if self.dtype.kind != "f":
        raise _bad(op, "self", "a floating-point tensor", self.describe())
    ct = compute_dtype(self.dtype)
    x = self.numpy().astype(ct, copy=False)
    i, j = np.triu_indices(x.shape[0], 1)  # row-major pairs i < j, ATen's order
    out.write(_pnorm(x[i] - x[j], p).astype(ct, copy=False))
