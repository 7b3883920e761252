"""Parity: programs exported by ExecuTorch run in pyruntime with the outputs
executorch.runtime gives on the same inputs (float: max abs error <= 1e-4 x
max(1, max |ref|); integers and bools exact). Calls run in order on one loaded
method, so mutable state (KV caches) is compared step by step.

Programs whose float work is convolutions, addmm, batch norm, bilinear resampling,
sums and means (ExecuTorch's plain loops, reproduced in their order) must match bit
for bit, int8 programs above all: there a last-bit difference flips whole
quantization steps (``python -m tests.programs.bitexact`` measures every fixture)."""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from tests.programs.fixtures import FIXTURE_NAMES, get_fixture


def assert_output_parity(got, want, where):
    if not isinstance(want, np.ndarray):
        assert got == want, where
        return
    got = np.asarray(got)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "fc":
        tol = 1e-4 * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
        assert err <= tol, f"{where}: max abs error {err:.3g} > {tol:.3g}"
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


@pytest.mark.parametrize("tier", ["reference", "fast"])
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_parity_with_executorch_runtime(name, tier):
    fx = get_fixture(name)
    program = pyruntime.Runtime.get().load_program(fx.pte_path, data_path=fx.ptd_path)
    method = program.load_method(fx.method, tier=tier)
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        got = method.execute(inputs)
        assert len(got) == len(expected), f"call {step}: {len(got)} outputs, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_output_parity(g, e, f"{name} call {step} output {i}")


# Bit for bit on both tiers: ExecuTorch's accumulation order reproduced (issue 17).
BIT_IDENTICAL = ("mlp", "cnn_bn", "mobilenet_v2", "resnet18", "deeplabv3", "quant_cnn",
                 "quant_cnn_bn", "quant_mobilenet_v2", "yolo", "llama_kv")


@pytest.mark.parametrize("tier", ["reference", "fast"])
@pytest.mark.parametrize("name", BIT_IDENTICAL)
def test_bit_identical_with_executorch_runtime(name, tier):
    from tests.programs.bitexact import measure

    same, total, worst = measure(get_fixture(name), tier)
    assert same == total, f"{name} [{tier}]: {total - same} of {total} outputs differ " \
                          f"(max {worst:.3g})"
