"""Complex tensors: the conjugate and the real <-> complex views, for ComplexHalf,
ComplexFloat and ComplexDouble.

ComplexHalf has no numpy dtype: its tensors hold one uint32 word per element,
the float16 bit patterns of the real part (low half) and the imaginary part
(high half), as ``c10::complex<Half>`` lays them out. Data movement kernels
copy those words like any 4-byte type; the kernels here read the halves.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.registry import register

COMPLEX_HALF = 8
_SIGN_OF_IMAG = np.uint32(0x80000000)
_OF_REAL = {np.dtype(np.float16): None, np.dtype(np.float32): np.dtype(np.complex64),
            np.dtype(np.float64): np.dtype(np.complex128)}


def _bad(op, arg, expected, got):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{op}: {arg}: expected {expected}, got {got}")


def is_complex(t) -> bool:
    return t.scalar_type == COMPLEX_HALF or t.dtype.kind == "c"


def complex_half_parts(t) -> np.ndarray:
    """A ComplexHalf tensor's values as float16 pairs, shape ``t.shape + (2,)``."""
    return np.ascontiguousarray(t.numpy()).view(np.float16).reshape(tuple(t.shape) + (2,))


@register("aten::_conj_physical.out")
def conj_physical_out(self, out):
    x = self.numpy()
    if self.scalar_type == COMPLEX_HALF:
        out.write(x ^ _SIGN_OF_IMAG)  # flip the imaginary part's sign bit
    else:
        out.write(np.conj(x) if x.dtype.kind == "c" else x)  # real input: a copy, as ATen


@register("aten::view_as_real_copy.out")
def view_as_real_copy_out(self, out):
    op = "aten::view_as_real_copy.out"
    if not is_complex(self):
        raise _bad(op, "self", "a complex tensor", self.describe())
    if self.scalar_type == COMPLEX_HALF:
        out.write(complex_half_parts(self))
        return
    x = self.numpy()
    out.write(np.stack([x.real, x.imag], axis=-1))


@register("aten::view_as_complex_copy.out")
def view_as_complex_copy_out(self, out):
    op = "aten::view_as_complex_copy.out"
    x = self.numpy()
    if x.dtype not in _OF_REAL or x.ndim < 1 or x.shape[-1] != 2:
        raise _bad(op, "self", "a float16/32/64 tensor whose last dim has size 2",
                   self.describe())
    # (real, imag) pairs are a complex number's bytes: reinterpret them (-0.0 and NaN kept)
    words = np.uint32 if x.dtype == np.float16 else _OF_REAL[x.dtype]  # ComplexHalf: uint32
    out.write(np.ascontiguousarray(x).view(words)[..., 0])
