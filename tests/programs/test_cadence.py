"""Cadence programs (ExecuTorch 1.5.1's DSP flow: ``cadence::*`` int8 kernels between
portable ops) on both tiers, bit for bit equal to the PT2E-converted model they were
made from; and the kernels one by one against torch on the integers (exact sums).
"""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.dtypes import from_numpy_dtype
from pyruntime.cython_ext.errors import ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.cadence import reference as cadence

pytest.importorskip("executorch.backends.cadence", reason="fixtures need executorch's exporter")

from tests.programs.cadence_fixtures import NAMES, get_fixture  # noqa: E402

# the cadence:: kernels each program must use (what the test reaches)
USES = {
    "mlp": {"cadence::quantized_linear.per_tensor_out", "cadence::quantized_relu.per_tensor_out"},
    "cnn": {"cadence::quantized_conv2d_nhwc.per_tensor_out",
            "cadence::quantized_max_pool2d_nhwc.out",
            "cadence::quantized_fully_connected.per_tensor_out"},
    "depthwise": {"cadence::quantized_conv2d_nhwc.per_tensor_out"},
    "block": {"cadence::quantized_layer_norm.per_tensor_out", "cadence::quantized_matmul.out",
              "cadence::quantized_linear.per_tensor_out"},
}


@pytest.mark.parametrize("tier", ["reference", "fast"])
@pytest.mark.parametrize("name", NAMES)
def test_equals_the_pt2e_converted_model(name, tier):
    fx = get_fixture(name)
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    ops = set(prog.metadata("forward").operators)
    assert USES[name] <= ops and {"cadence::quantize_per_tensor.out",
                                  "cadence::dequantize_per_tensor.out"} <= ops
    m = prog.load_method("forward", tier=tier)
    for call, want in zip(fx.calls, fx.expected):
        got = m.execute(call)[0]
        assert got.dtype == want[0].dtype and np.array_equal(got, want[0]), \
            f"{int((got != want[0]).sum())} of {got.size} outputs differ"
    if tier == "fast":  # every cadence:: op compiled (kernels/cadence/typed.py)
        kinds = m._fast.loop.kinds()
        compiled = {ins.name for pc, ins in enumerate(m._fast.flat) if kinds[pc] == 0}
        assert {op for op in ops if op.startswith("cadence::")} <= compiled


def _t(a):
    return ETensor.from_array(np.ascontiguousarray(a))


def _out(shape):
    return ETensor.empty(from_numpy_dtype(np.dtype(np.int8)), shape)


@pytest.mark.parametrize("groups,dilation,stride", [(1, 1, 1), (2, 2, 1), (4, 1, 2)])
def test_conv_accumulates_exactly_as_torch_on_the_integers(groups, dilation, stride):
    import torch

    rng = np.random.default_rng(groups * 10 + dilation)
    x = rng.integers(-128, 128, (1, 9, 9, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 3, 3, 8 // groups), dtype=np.int8)
    bias = rng.integers(-2000, 2000, 8, dtype=np.int32)
    want_acc = torch.nn.functional.conv2d(
        torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2) - 3,
        torch.from_numpy(w.astype(np.float64)).permute(0, 3, 1, 2) + 1,
        torch.from_numpy(bias.astype(np.float64)), stride, 1, dilation, groups).permute(0, 2, 3, 1)
    out = _out(tuple(want_acc.shape))
    cadence.quantized_conv2d_nhwc_per_tensor_out(_t(x), _t(w), _t(bias), [stride] * 2, [1, 1],
                                                 [dilation] * 2, groups, 3, -1, 1e-3, 1.0, 0,
                                                 0, 0, None, out)
    want = cadence.requantize((want_acc.numpy().astype(np.float32) * np.float32(1e-3)), 1.0, 0,
                              -128, 127, np.int8)
    assert np.array_equal(out.numpy(), want)


@pytest.mark.parametrize("ceil", [False, True])
def test_max_pool_matches_torch(ceil):
    import torch

    x = np.random.default_rng(3).integers(-128, 128, (2, 7, 7, 3), dtype=np.int8)
    want = torch.nn.functional.max_pool2d(torch.from_numpy(x).permute(0, 3, 1, 2).float(), 3,
                                          2, 1, ceil_mode=ceil).permute(0, 2, 3, 1).numpy()
    out = _out(want.shape)
    cadence.quantized_max_pool2d_nhwc_out(_t(x), [3, 3], [2, 2], [1, 1], [1, 1], ceil, out)
    assert np.array_equal(out.numpy(), want.astype(np.int8))


def test_the_multiplier_is_read_with_the_sign_the_fusion_pass_stores():
    # scale 2**-4 as (1 << 30, -3): 2**30 * 2**(-3 - 31) = 2**-4; a positive input stays
    # above the zero point (the wheel's reference kernels would mirror it below)
    x = _t(np.array([10, 40, -20], np.int8))
    out = _t(np.zeros(3, np.int8))
    cadence.quantized_relu_per_tensor_out(x, 0, 5, 1 << 30, -3, out)
    assert out.numpy().tolist() == [round(10 / 16) + 5, round(40 / 16) + 5, 5]


def test_bad_arguments_name_the_kernel():
    with pytest.raises(ExecuTorchError, match="quantized_matmul.out: bias"):
        cadence.quantized_matmul_out(_t(np.ones((2, 2), np.int8)), 0,
                                     _t(np.ones((2, 2), np.int8)), 0,
                                     _t(np.ones(2, np.int32)), 1 << 30, 0, 0, False,
                                     _t(np.zeros((2, 2), np.int8)))
    with pytest.raises(ExecuTorchError, match="quantized_linear.per_tensor_out: src"):
        cadence.quantized_linear_per_tensor_out(_t(np.ones((2, 3), np.float32)),
                                                _t(np.ones((4, 3), np.int8)), None, 0, 0,
                                                1 << 30, 0, 0, None, _t(np.zeros((2, 4), np.int8)))
    with pytest.raises(ExecuTorchError, match="do not multiply"):
        cadence.quantized_linear_per_tensor_out(_t(np.ones((2, 3), np.int8)),
                                                _t(np.ones((4, 5), np.int8)), None, 0, 0,
                                                1 << 30, 0, 0, None, _t(np.zeros((2, 4), np.int8)))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_same_bits_at_any_thread_count(threads):
    fx = get_fixture("cnn")
    m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward", threads=threads)
    for _ in range(20):
        assert np.array_equal(m.execute(fx.calls[1])[0], fx.expected[1][0])
