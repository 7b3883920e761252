"""Compiled complex kernels (kernels/complex/typed.py) against the reference tier, bit for bit:
the conjugate of ComplexHalf/Float/Double tensors and view_as_complex_copy."""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, ScalarType
from tests.kernels.helpers import call, call_fast, static_out


def _words(e: ETensor) -> np.ndarray:
    return e.numpy().view(np.uint8)


@pytest.mark.parametrize("st,parts", [(ScalarType.COMPLEX64, np.float32),
                                      (ScalarType.COMPLEX128, np.float64),
                                      (ScalarType.COMPLEX32, np.float16)])
def test_conj_and_view_as_complex(st, parts):
    pairs = np.random.default_rng(0).standard_normal((3, 5, 2)).astype(parts)
    pairs[0, 0] = [-0.0, 0.0]
    pairs[0, 1, 1] = np.nan
    z = ETensor.empty(st, (3, 5))
    call("aten::view_as_complex_copy.out", pairs, z)
    for dyn in (Dynamism.STATIC, Dynamism.DYNAMIC_BOUND):
        shape = (3, 5) if dyn == Dynamism.STATIC else (4, 6)
        got = ETensor.empty(st, shape, dynamism=dyn)
        assert call_fast("aten::view_as_complex_copy.out", pairs, got) == 0
        assert got.shape == (3, 5)
        np.testing.assert_array_equal(_words(got), _words(z))
        ref, out = ETensor.empty(st, (3, 5)), ETensor.empty(st, shape, dynamism=dyn)
        call("aten::_conj_physical.out", z, ref)
        assert call_fast("aten::_conj_physical.out", z, out) == 0
        np.testing.assert_array_equal(_words(out), _words(ref))


def test_declines_other_layouts():
    z = ETensor.empty(ScalarType.COMPLEX64, (2, 3), dim_order=(1, 0))
    assert call_fast("aten::_conj_physical.out", z, ETensor.empty(ScalarType.COMPLEX64, (2, 3),
                                                                   dim_order=(1, 0))) is None
    assert call_fast("aten::view_as_complex_copy.out", np.ones((2, 2), np.float32),
                     static_out((2,), np.complex128)) is None  # out of the wrong type
