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


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fast_math_parity_with_executorch_runtime(name):
    """``math="fast"`` (FMA, reassociated sums, vector transcendentals) never changes what
    a result means: floats within the exact tier's bound of executorch.runtime (1e-4 x
    max(1, |ref|)), integers (int8 programs' outputs included) equal: calls feeding a
    quantize op stay exact (``fusion.feeds_quantize``), so int8 programs keep their bits."""
    fx = get_fixture(name)
    program = pyruntime.Runtime.get().load_program(fx.pte_path, data_path=fx.ptd_path)
    method = program.load_method(fx.method, math="fast")
    assert method.math == "fast"
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        got = method.execute(inputs)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_output_parity(g, e, f"{name} [math=fast] call {step} output {i}")


# programs where math="fast" must take fast-math kernels (convolutions, matrix products,
# transcendentals), and the int8 ones where nothing may: every call feeds a quantize op
FAST_MATH_USED = ("mlp", "cnn_bn", "mobilenet_v2", "resnet18", "vit_tiny", "audio_encoder",
                  "llama", "llama_kv", "yolo", "deeplabv3")
FAST_MATH_EXACT = ("quant_cnn", "quant_cnn_bn", "quant_mobilenet_v2")


@pytest.mark.parametrize("name", FAST_MATH_USED + FAST_MATH_EXACT)
def test_fast_math_kernels_are_used_where_allowed(name):
    fx = get_fixture(name)
    program = pyruntime.Runtime.get().load_program(fx.pte_path, data_path=fx.ptd_path)
    fast = program.load_method(fx.method, math="fast")._fast
    if name in FAST_MATH_EXACT:
        assert not fast.fast_math, f"{name}: {len(fast.fast_math)} fast-math calls"
        bits = [e for e in get_fixture(name).expected[0]]
        got = fast.m.execute(fx.calls[0])
        assert all(np.array_equal(np.asarray(g).view(np.uint8), np.asarray(b).view(np.uint8))
                   for g, b in zip(got, bits)), f"{name}: not executorch.runtime's bits"
    else:
        assert fast.fast_math, f"{name}: no fast-math kernel bound"
    exact = program.load_method(fx.method)
    assert exact.math == "exact" and not exact._fast.fast_math


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
