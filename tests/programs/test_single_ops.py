"""Single-op programs exported by ExecuTorch: executorch.runtime vs pyruntime, both tiers.

A sample of the operator set over Half, BFloat16, integer, Bool and
channels-last inputs (tests/programs/single_ops.py). Float outputs agree to
1e-5 relative (Half/BFloat16: about one unit in the last place of the type;
Half convolution 1e-2, see LOOSE), integers and bools exactly; the ``*_exact`` cases
(convolutions and matrix products, whose sums both tiers add in ExecuTorch's order;
transcendental ops, which both tiers compute with the C library's functions, as
ExecuTorch) bit for bit. The fast tier must also run the op compiled.
"""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from tests.kernels.helpers import to_np
from tests.programs.single_ops import cases, make_inputs, single_op_program

NAMES = sorted(cases())


@pytest.fixture(scope="module")
def et_runtime():
    from executorch.runtime import Runtime
    return Runtime.get()


# ExecuTorch's portable Half convolution rounds to Half at every step; the reference does
# too, the compiled kernel accumulates in float32: a few units in the last place.
LOOSE = {"conv2d_f16": 1e-2}
# Float accumulations both tiers add in ExecuTorch's order, FFTs: equal bit for bit.
EXACT = {n for n in NAMES if n.endswith("_exact")}
# Ops the fast tier runs on the reference kernel by design (tests/kernels/test_coverage.py).
REFERENCE_IN_FAST = {"aten::_fft_r2c.out", "aten::_fft_c2r.out", "aten::_fft_c2c.out"}


def _tolerance(dtype):
    if dtype == np.float16:
        return 1e-3
    if dtype.name == "bfloat16":
        return 8e-3
    return 1e-5


@pytest.mark.parametrize("name", NAMES)
def test_single_op_program_matches_executorch(name, et_runtime):
    kernel = cases()[name][0]
    path = single_op_program(name)
    inputs = make_inputs(name)
    want = [to_np(t) for t in et_runtime.load_program(path).load_method("forward").execute(inputs)]
    program = pyruntime.Runtime.get().load_program(path)
    ops = program.metadata("forward").operator_counts
    assert kernel in ops, f"{name}: the program calls {sorted(ops)}, not {kernel}"
    for tier in ("reference", "fast"):
        method = program.load_method("forward", tier=tier)
        got = method.execute([np.ascontiguousarray(to_np(t)) for t in inputs])
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            where = f"{name} [{tier}] output {i}"
            assert g.shape == w.shape and g.dtype == w.dtype, \
                f"{where}: {g.dtype}{list(g.shape)} != {w.dtype}{list(w.shape)}"
            if name in EXACT:  # the bytes: NaN payloads and signs count (bfloat16 NaN too)
                if np.ascontiguousarray(g).tobytes() != np.ascontiguousarray(w).tobytes():
                    np.testing.assert_array_equal(g, w, err_msg=f"{where}: not bit-identical")
                    pytest.fail(f"{where}: equal values, different bytes (NaN or -0.0)")
            elif w.dtype.kind == "f" or w.dtype.name == "bfloat16":
                w64, g64 = w.astype(np.float64), g.astype(np.float64)
                tol = LOOSE.get(name, _tolerance(w.dtype)) * np.maximum(1.0, np.abs(w64))
                bad = ~((np.abs(g64 - w64) <= tol) | (np.isnan(g64) & np.isnan(w64)))
                assert not bad.any(), f"{where}: got {g64[bad][:4]}, want {w64[bad][:4]}"
            else:
                np.testing.assert_array_equal(g, w, err_msg=where)
        if tier == "fast" and kernel not in REFERENCE_IN_FAST:
            compiled = {ins.name for pc, ins in enumerate(method._fast.flat)
                        if method._fast.loop.kinds()[pc] == 0}
            assert kernel in compiled, f"{name}: {kernel} did not run compiled"
