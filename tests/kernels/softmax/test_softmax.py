import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 2e-2}
OPS = [("aten::_softmax.out", torch.ops.aten._softmax),
       ("aten::_log_softmax.out", torch.ops.aten._log_softmax)]


@pytest.mark.parametrize("name,ref", OPS)
@pytest.mark.parametrize("shape,dim", [((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1), ((2, 3, 4), 1),
                                       ((7,), 0), ((), 0), ((), -1), ((0, 4), 1), ((2, 0), 1)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(name, ref, shape, dim, dtype):
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    want = ref(x, dim, False)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call(name, to_np(x), dim, False, out)
    assert_close(out.numpy(), to_np(want), rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("name,ref", OPS)
def test_softmax_large_values_are_stable(name, ref):
    x = torch.tensor([[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4]])
    want = ref(x, 1, False)
    out = bound_out((4, 3), np.float32)
    call(name, to_np(x), 1, False, out)
    assert np.isfinite(out.numpy()).all()
    assert_close(out.numpy(), to_np(want), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name,ref", OPS)
def test_softmax_neg_inf(name, ref):
    x = torch.tensor([[float("-inf"), 0.0, 1.0], [float("-inf")] * 3])
    want = ref(x, -1, False)
    out = static_out((2, 3), np.float32)
    call(name, to_np(x), -1, False, out)
    assert_close(out.numpy(), to_np(want))


@pytest.mark.parametrize("name,ref", OPS)
def test_softmax_half_to_float_writes_float32(name, ref):
    x = torch.randn(3, 4).half()
    want = ref(x.float(), 1, False)
    out = static_out((3, 4), np.float32)
    call(name, to_np(x), 1, True, out)
    assert_close(out.numpy(), to_np(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,ref", OPS)
def test_softmax_bad_dim_raises(name, ref):
    with pytest.raises(ExecuTorchError, match="dim"):
        call(name, np.zeros((2, 3), np.float32), 2, False, static_out((2, 3), np.float32))
