"""FFT kernels (kernels/complex/reference_fft.py) against torch.ops.aten: _fft_r2c, _fft_c2r, _fft_c2c over
dims, normalizations, float32/float64; bit for bit against pocketfft composed as
ExecuTorch composes it (tests/programs checks executorch.runtime itself)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests import parts
from tests.kernels.helpers import bound_out, call, static_out, to_np

TOL = {torch.float32: 2e-5, torch.float64: 1e-12}
CASES = [((16,), [0]), ((3, 10), [1]), ((2, 9, 12), [1, 2]), ((4, 6, 5), [0, 2]),
         ((2, 7, 8), [2, 1]), ((5, 1), [1])]


def _close(got, want, dtype):
    want = to_np(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * scale)


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("norm", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_r2c_c2r_c2c(shape, dim, norm, dtype):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)), dtype=dtype)
    for onesided in (True, False):
        want = torch.ops.aten._fft_r2c(x, dim, norm, onesided)
        out = static_out(tuple(want.shape), to_np(want).dtype)
        call("aten::_fft_r2c.out", to_np(x), dim, norm, onesided, out)
        _close(out.numpy(), want, dtype)
    spec = torch.ops.aten._fft_r2c(x, dim, 0, True)
    n = shape[dim[-1]]
    want = torch.ops.aten._fft_c2r(spec, dim, norm, n)
    out = bound_out(tuple(want.shape), to_np(want).dtype)
    call("aten::_fft_c2r.out", to_np(spec), dim, norm, n, out)
    _close(out.numpy(), want, dtype)
    z = torch.complex(x, x.flip(-1))
    for forward in (True, False):
        want = torch.ops.aten._fft_c2c(z, dim, norm, forward)
        out = static_out(tuple(want.shape), to_np(want).dtype)
        call("aten::_fft_c2c.out", to_np(z), dim, norm, forward, out)
        _close(out.numpy(), want, dtype)


def test_float32_stays_float32_and_matches_pocketfft_bit_for_bit():
    """numpy's np.fft.rfft computes float32 data in float64 under the default norm;
    ExecuTorch's pocketfft stays in float32, and so do we."""
    x = np.random.default_rng(0).standard_normal((3, 400)).astype(np.float32)
    out = static_out((3, 201), np.complex64)
    call("aten::_fft_r2c.out", x, [1], 0, True, out)
    assert not np.array_equal(out.numpy(), np.fft.rfft(x).astype(np.complex64))
    sp = parts.importorskip("scipy.fft", "scipy")  # pocketfft, the same C++ as ExecuTorch's
    np.testing.assert_array_equal(out.numpy(), sp.rfft(x))
    back = static_out((3, 400), np.float32)
    call("aten::_fft_c2r.out", out.numpy(), [1], 2, 400, back)
    np.testing.assert_array_equal(back.numpy(), sp.irfft(out.numpy(), 400))


def test_odd_output_length_and_errors():
    spec = (np.arange(6) + 1j).astype(np.complex64).reshape(1, 6)
    for n in (10, 11):
        want = torch.ops.aten._fft_c2r(torch.from_numpy(spec), [1], 2, n)
        out = static_out((1, n), np.float32)
        call("aten::_fft_c2r.out", spec, [1], 2, n, out)
        _close(out.numpy(), want, torch.float32)
    with pytest.raises(ExecuTorchError, match="last_dim_size"):
        call("aten::_fft_c2r.out", spec, [1], 2, 20, static_out((1, 20), np.float32))
    with pytest.raises(ExecuTorchError, match="self"):
        call("aten::_fft_r2c.out", np.ones(4, np.int32), [0], 0, True,
             static_out((3,), np.complex64))
    with pytest.raises(ExecuTorchError, match="normalization"):
        call("aten::_fft_r2c.out", np.ones(4, np.float32), [0], 3, True,
             static_out((3,), np.complex64))
    with pytest.raises(ExecuTorchError, match="dim"):
        call("aten::_fft_c2c.out", spec, [1, 1], 0, True, static_out((1, 6), np.complex64))
