"""FFT kernels: ``_fft_r2c``, ``_fft_c2r``, ``_fft_c2c``, computed as ExecuTorch computes them.

ExecuTorch's FFT ops run pocketfft, and so does numpy: handed the normalization
factor in the data's own precision, numpy's pocketfft ufuncs transform float32
in float32 and give ExecuTorch's results bit for bit (``np.fft.rfft`` with the
default norm passes an integer factor and computes float32 data in float64).
Several dims compose as pocketfft composes them:

* r2c: r2c over the last listed dim, with the factor, then forward c2c over the
  others in the order listed;
* c2r: backward c2c over all but the last listed dim, then c2r over the last,
  with the factor;
* c2c: each dim in the order listed, the factor applied on the first.

The factor is 1, 1/sqrt(n) or 1/n (``normalization`` 0, 1, 2) in the data's
precision, n the product of the signal sizes (c2r: of the output). ExecuTorch
has r2c (one-sided) and c2r for Float and Double; c2c and the two-sided r2c are
here for programs from other exporters, with ATen's semantics.
"""
from __future__ import annotations

from math import prod

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.args import wrap_dim
from pyruntime.kernels.registry import register

try:  # numpy >= 2: the gufuncs behind np.fft, which take the factor in any precision
    from numpy.fft import _pocketfft_umath as _pfu
except ImportError:  # pragma: no cover - older numpy: float64 transforms, rounded
    _pfu = None

_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64),
            np.dtype(np.float64): np.dtype(np.complex128)}


def _bad(op, arg, expected, got):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{op}: {arg}: expected {expected}, got {got}")


def _dims(op, dim, ndim):
    dims = [wrap_dim(op, d, ndim, "dim") for d in dim]
    if not dims or len(set(dims)) != len(dims):
        raise _bad(op, "dim", "one or more distinct dims", list(dim))
    return dims


def fft_input(op, self, dim, complex_in: bool):
    """``self``'s array and its wrapped ``dim`` list; ``self`` must be complex64/128 if
    ``complex_in``, else float32/64."""
    x = self.numpy()
    if complex_in and x.dtype.kind != "c":
        raise _bad(op, "self", "a complex64 or complex128 tensor", self.describe())
    if not complex_in and x.dtype not in _COMPLEX:
        raise _bad(op, "self", "a float32 or float64 tensor", self.describe())
    return x, _dims(op, dim, x.ndim)


def _factor(n, normalization, real):
    """pocketfft's normalization factor in the data's precision (``real``: a numpy dtype)."""
    one = real.type(1)
    if normalization == 0:
        return one
    if normalization == 1:
        return one / np.sqrt(real.type(n))
    if normalization == 2:
        return one / real.type(n)
    raise _bad("fft", "normalization", "0 (none), 1 (1/sqrt(n)) or 2 (1/n)", normalization)


def _apply(kind, x, axis, fct, n_out=None):
    """One 1-D transform along ``axis``: kind 'fft', 'ifft', 'rfft' or 'irfft'."""
    shape = list(x.shape)
    if kind == "rfft":
        shape[axis] = x.shape[axis] // 2 + 1
        out = np.empty(shape, _COMPLEX[x.dtype])
    elif kind == "irfft":
        shape[axis] = n_out
        out = np.empty(shape, x.real.dtype)
    else:
        out = np.empty(shape, x.dtype)
    if _pfu is None:
        raw = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft}.get(kind)
        res = raw(x, axis=axis, norm="forward" if kind == "ifft" else "backward") \
            if raw else np.fft.irfft(x, n_out, axis=axis, norm="forward")
        out[...] = res * fct
        return out
    if kind == "rfft":
        uf = _pfu.rfft_n_even if x.shape[axis] % 2 == 0 else _pfu.rfft_n_odd
    else:
        uf = getattr(_pfu, kind)
    if x.shape[axis] == 0 or out.size == 0:
        out[...] = 0
        return out
    return uf(x, fct, axes=[(axis,), (), (axis,)], out=out)


def _c2c(x, dims, fct, forward):
    one = x.real.dtype.type(1)
    for i, d in enumerate(dims):
        x = _apply("fft" if forward else "ifft", x, d, fct if i == 0 else one)
    return x


@register("aten::_fft_r2c.out")
def _fft_r2c_out(self, dim, normalization, onesided, out):
    x, dims = fft_input("aten::_fft_r2c.out", self, dim, False)
    fct = _factor(prod(x.shape[d] for d in dims), normalization, x.dtype)
    if not onesided:  # ATen: the full spectrum of the real signal
        out.write(_c2c(x.astype(_COMPLEX[x.dtype]), dims, fct, True))
        return
    y = _apply("rfft", x, dims[-1], fct)
    out.write(_c2c(y, dims[:-1], fct.dtype.type(1), True))


@register("aten::_fft_c2r.out")
def _fft_c2r_out(self, dim, normalization, last_dim_size, out):
    op = "aten::_fft_c2r.out"
    x, dims = fft_input(op, self, dim, True)
    n_last = int(last_dim_size)
    if n_last < 1 or x.shape[dims[-1]] < n_last // 2 + 1:
        raise _bad(op, "last_dim_size", f"1 .. {2 * x.shape[dims[-1]] - 1} for input "
                   f"{self.describe()}", last_dim_size)
    sizes = [n_last if d == dims[-1] else x.shape[d] for d in dims]
    fct = _factor(prod(sizes), normalization, x.real.dtype)
    y = _c2c(x, dims[:-1], x.real.dtype.type(1), False)
    y = np.take(y, np.arange(n_last // 2 + 1), axis=dims[-1])  # the half spectrum c2r reads
    out.write(_apply("irfft", y, dims[-1], fct, n_last))


@register("aten::_fft_c2c.out")
def _fft_c2c_out(self, dim, normalization, forward, out):
    x, dims = fft_input("aten::_fft_c2c.out", self, dim, True)
    fct = _factor(prod(x.shape[d] for d in dims), normalization, x.real.dtype)
    out.write(_c2c(x, dims, fct, bool(forward)))
