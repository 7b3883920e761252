"""Complex kernels (kernels/complex/reference.py, complex abs in kernels/elementwise/reference.py) against
torch.ops.aten, for ComplexHalf, ComplexFloat and ComplexDouble."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ETensor, ExecuTorchError, ScalarType
from tests.kernels.helpers import call, static_out, to_np


def _chalf(t: torch.Tensor) -> ETensor:
    """A torch.complex32 tensor as a ComplexHalf ETensor (uint32 words of float16 pairs)."""
    pairs = to_np(torch.view_as_real(t)).astype(np.float16)
    return ETensor(ScalarType.COMPLEX32, tuple(t.shape),
                   storage=np.ascontiguousarray(pairs).reshape(-1).view(np.uint8))


def _pairs(e: ETensor) -> np.ndarray:
    return e.numpy().view(np.float16).reshape(tuple(e.shape) + (2,))


def _z(dtype, shape=(3, 4)):
    g = torch.Generator().manual_seed(0)
    z = torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g))
    z[0, 0] = complex(-0.0, 0.0)  # signed zeros survive the copies
    return z.to(dtype)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_conj_views_abs(dtype):
    z = _z(dtype)
    zn = to_np(z)
    out = static_out(zn.shape, zn.dtype)
    call("aten::_conj_physical.out", zn, out)
    np.testing.assert_array_equal(out.numpy(), to_np(torch.ops.aten._conj_physical(z)))
    real = to_np(torch.view_as_real(z))
    out = static_out(real.shape, real.dtype)
    call("aten::view_as_real_copy.out", zn, out)
    np.testing.assert_array_equal(out.numpy().view(np.uint8), real.view(np.uint8))
    back = static_out(zn.shape, zn.dtype)
    call("aten::view_as_complex_copy.out", real, back)
    np.testing.assert_array_equal(back.numpy().view(np.uint8), zn.view(np.uint8))
    mag = static_out(real.shape[:-1], real.dtype)
    call("aten::abs.out", zn, mag)  # ExecuTorch: sqrt(re*re + im*im), not hypot
    np.testing.assert_allclose(mag.numpy(), to_np(z.abs()), rtol=1e-6)


def test_complex_half():
    z = _z(torch.complex32)
    e = _chalf(z)
    out = ETensor.empty(ScalarType.COMPLEX32, tuple(z.shape))
    call("aten::_conj_physical.out", e, out)
    np.testing.assert_array_equal(_pairs(out), to_np(torch.view_as_real(z.conj_physical())))
    real = static_out(tuple(z.shape) + (2,), np.float16)
    call("aten::view_as_real_copy.out", e, real)
    np.testing.assert_array_equal(real.numpy(), to_np(torch.view_as_real(z)))
    back = ETensor.empty(ScalarType.COMPLEX32, tuple(z.shape))
    call("aten::view_as_complex_copy.out", real.numpy(), back)
    np.testing.assert_array_equal(back.numpy(), e.numpy())
    mag = static_out(tuple(z.shape), np.float16)
    call("aten::abs.out", e, mag)
    np.testing.assert_allclose(mag.numpy(), to_np(z.abs()), rtol=2e-3)
    copy = ETensor.empty(ScalarType.COMPLEX32, (4, 3))  # data movement: 4-byte words
    call("aten::permute_copy.out", e, [1, 0], copy)
    np.testing.assert_array_equal(_pairs(copy), to_np(torch.view_as_real(z.permute(1, 0))))


def test_views_refuse_the_wrong_dtype():
    with pytest.raises(ExecuTorchError, match="complex"):
        call("aten::view_as_real_copy.out", np.ones(3, np.float32),
             static_out((3, 2), np.float32))
    with pytest.raises(ExecuTorchError, match="size 2"):
        call("aten::view_as_complex_copy.out", np.ones((3, 3), np.float32),
             static_out((3,), np.complex64))
