"""Activation kernels (hardtanh, gelu, elu, leaky_relu, glu, logit) against torch.ops.aten."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests.kernels.helpers import bound_out, call, static_out
from tests.kernels.elementwise.test_elementwise import DTYPES, SHAPES, check, dim_ordered, make

A = torch.ops.aten
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-3, -1e-3, 0.5, -0.5, 20.0, -20.0])

# (kernel, torch reference, extra schema args after self)
OPS = [
    ("hardtanh.out", A.hardtanh, (-1, 1)),
    ("hardtanh.out", A.hardtanh, (-0.25, 2.5)),
    ("gelu.out", lambda x, a: A.gelu(x, approximate=a), ("none",)),
    ("gelu.out", lambda x, a: A.gelu(x, approximate=a), ("tanh",)),
    ("elu.out", A.elu, (1, 1, 1)),
    ("elu.out", A.elu, (0.5, 2.0, 1.5)),
    ("leaky_relu.out", A.leaky_relu, (0.01,)),
    ("leaky_relu.out", A.leaky_relu, (-0.2,)),
    ("glu.out", A.glu, (-1,)),
    ("glu.out", A.glu, (1,)),
    ("logit.out", A.logit, (None,)),
    ("logit.out", A.logit, (0.1,)),
    ("logit.out", A.logit, (-1.0,)),
]
IDS = [f"{n.split('.')[0]}{list(e)}" for n, _, e in OPS]


def _input(name, shape, dtype, seed=0):
    low, high = (0.0, 1.0) if name.startswith("logit") else (-4.0, 4.0)
    return make(shape, dtype, seed=seed, low=low, high=high)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name,fn,extra", OPS, ids=IDS)
def test_dtypes(name, fn, extra, dtype):
    check(f"aten::{name}", fn, _input(name, (2, 3, 4), dtype), *extra)


@pytest.mark.parametrize("shape", SHAPES + [(4, 2)], ids=str)
@pytest.mark.parametrize("name,fn,extra", OPS, ids=IDS)
def test_shapes(name, fn, extra, shape):
    # glu halves a dim; a rank-0 or odd-sized input must be refused like ATen does
    check(f"aten::{name}", fn, _input(name, shape, "float32"), *extra)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name,fn,extra", [o for o in OPS if not o[0].startswith("glu")],
                         ids=[i for i, o in zip(IDS, OPS) if not o[0].startswith("glu")])
def test_special_values(name, fn, extra, dtype):
    x = SPECIAL.astype(DTYPES[dtype])
    if extra == ("none",) and dtype != "float64":
        x = x[np.isfinite(x) | np.isnan(x)]  # ATen's vectorized float gelu gives NaN at +-inf
    check(f"aten::{name}", fn, x, *extra)


def test_gelu_infinities():
    out = static_out((2,), np.float32)
    call("aten::gelu.out", np.array([np.inf, -np.inf], np.float32), "none", out)
    # the formula's values, as float64 ATen (and ExecuTorch's portable kernel) give them
    assert out.numpy()[0] == np.inf and np.isnan(out.numpy()[1])


def test_logit_edges():
    x = np.array([0.0, 1.0, -0.5, 1.5, 0.05, 0.95], np.float32)
    for eps in (None, 0.1, 0.0, -1.0):
        check("aten::logit.out", A.logit, x, eps)


def test_gelu_refuses_unknown_approximation():
    with pytest.raises(ExecuTorchError, match="approximate"):
        call("aten::gelu.out", np.ones(3, np.float32), "fast", static_out((3,), np.float32))


@pytest.mark.parametrize("dim", [0, 2, -3, 3])
def test_glu_dims(dim):
    x = make((4, 3, 2), "float32", seed=1)
    check("aten::glu.out", A.glu, x, dim)


def test_glu_resizes_bound_out_and_reads_dim_order():
    x = make((2, 3, 4), "float32", seed=2)
    want = A.glu(torch.from_numpy(x), 2).numpy()
    out = bound_out((2, 3, 4), np.float32)
    call("aten::glu.out", dim_ordered(x, (2, 1, 0)), 2, out)
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-6)


def test_gelu_float32_matches_closely():
    x = np.linspace(-10, 10, 4001, dtype=np.float32)
    check("aten::gelu.out", lambda t, a: A.gelu(t, approximate=a), x, "none", rtol=1e-6, atol=1e-6)
