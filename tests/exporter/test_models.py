"""Programs from our exporter run in executorch.runtime and in pyruntime with
torch eager's outputs (float: max abs error <= 1e-4 x max(1, max |ref|)).
Calls run in order on one loaded method, so KV-cache state carries over."""
from __future__ import annotations

import pytest

from tests.exporter.helpers import (MODEL_NAMES, assert_close, eager_outputs,
                                    export_fixture_model, run_executorch, run_pyruntime)
from tests.programs import fixtures

# int8 PT2E: the runtimes' quantized kernels and torch's fake-quant reference may
# round a value to the neighbouring step, so compare to eager more loosely.
TOLERANCE = {"quant_cnn": 2e-2}


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_runs_in_both_runtimes(name):
    result = export_fixture_model(name)
    calls = fixtures.SPECS[name].calls()
    want = eager_outputs(name)
    rel = TOLERANCE.get(name, 1e-4)
    et = run_executorch(result.buffer, calls)
    ours = run_pyruntime(result.buffer, calls)
    for step, (e, o, w) in enumerate(zip(et, ours, want)):
        assert_close(e, w, f"{name} executorch.runtime call {step}", rel)
        assert_close(o, w, f"{name} pyruntime call {step}", rel)
        assert_close(o, e, f"{name} pyruntime vs executorch.runtime call {step}")
