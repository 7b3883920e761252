"""The NativeBackend bridge: programs lowered by ExecuTorch 1.5.1's own ``NativePartitioner``
run in pyruntime on the registry's portable kernels, on both tiers.

``executorch.runtime`` refuses these programs (no NativeBackend in its wheel), so the
oracle is torch eager on the same inputs: every output within 1e-4 x max(1, max |ref|)
(the issue's bound; measured: at most 5e-7 on these programs). Also: weights from a
``.ptd``, buffer state across executes, dynamic shapes, the ops the portable library
lacks (sdpa, matmul), and malformed payloads, unknown ops and missing weights as
ExecuTorchErrors at load.
"""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from cython_ext.errors import ErrorCode, ExecuTorchError
from delegates import backend_registry
from delegates.native import native_backend

pytest.importorskip("executorch.backends.native", reason="fixtures need executorch's exporter")

from tests.delegates.native_fixtures import MODELS, NAMES, get_fixture  # noqa: E402

TOL = 1e-4


def _load(fx, tier="fast", data=True):
    prog = pyruntime.Runtime.get().load_program(
        fx.pte_path, data_path=[str(fx.ptd_path)] if fx.ptd_path and data else None)
    return prog, prog.load_method("forward", tier=tier)


def test_registered_under_the_id_executorch_writes():
    prog, _ = _load(get_fixture("mlp"))
    assert prog.metadata("forward").backends == ["NativeBackend"]
    assert backend_registry.get("NativeBackend") is native_backend
    assert native_backend.is_available()


@pytest.mark.parametrize("tier", ["reference", "fast"])
@pytest.mark.parametrize("name", NAMES)
def test_matches_torch_eager(name, tier):
    fx = get_fixture(name)
    _, m = _load(fx, tier)
    for i, (call, want) in enumerate(zip(fx.calls, fx.expected)):
        got = m.execute(call)
        assert len(got) == len(want)
        for j, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (i, j, g.shape, w.shape)
            err = float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
            bound = TOL * max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
            assert err <= bound, f"{name} call {i} output {j}: max error {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("name", MODELS)
def test_the_three_models_lower_whole_into_native_delegates(name):
    prog, _ = _load(get_fixture(name))
    meta = prog.metadata("forward")
    assert meta.backends and set(meta.backends) == {"NativeBackend"}
    # what stays outside the delegates is at most a layout copy ExecuTorch inserts
    assert set(meta.operators) <= {"dim_order_ops::_clone_dim_order.out"}


def test_buffer_state_carries_over_and_a_new_load_starts_from_the_saved_value():
    fx = get_fixture("state")
    _, m = _load(fx)
    first = [m.execute(c)[0] for c in fx.calls]
    for got, want in zip(first, fx.expected):
        np.testing.assert_allclose(got, want[0], rtol=0, atol=TOL)
    assert not np.allclose(first[0], first[1])  # the accumulated buffer changed the result
    _, fresh = _load(fx)
    np.testing.assert_allclose(fresh.execute(fx.calls[0])[0], fx.expected[0][0], atol=TOL)


def test_weights_missing_from_the_data_map_name_the_key():
    fx = get_fixture("mlp")
    with pytest.raises(ExecuTorchError) as e:
        _load(fx, data=False)
    assert e.value.code == ErrorCode.NotFound
    assert "NativeBackend" in str(e.value) and ".ptd" in str(e.value)


def test_an_operator_without_a_kernel_fails_at_load_naming_it(tmp_path):
    fx = get_fixture("cnn_bn")
    data = fx.pte_path.read_bytes()
    assert b"torch.ops.aten.relu_.default" in data
    bad = tmp_path / "bad.pte"
    bad.write_bytes(data.replace(b"torch.ops.aten.relu_.default", b"torch.ops.aten.relx_.default"))
    with pytest.raises(ExecuTorchError) as e:
        pyruntime.Runtime.get().load_program(bad).load_method("forward")
    assert e.value.code == ErrorCode.NotSupported
    assert "torch.ops.aten.relx_.default" in str(e.value) and "delegate" in str(e.value)


def test_a_wrong_identifier_or_truncated_payload_is_a_clear_error():
    for blob in (b"\x00" * 3, b"\x0c\x00\x00\x00XN01" + b"\x00" * 24,
                 get_fixture("mlp_dynamic").pte_path.read_bytes()[:40]):
        with pytest.raises(ExecuTorchError) as e:
            native_backend.init(blob, [], None)
        assert e.value.code == ErrorCode.InvalidProgram and "NativeBackend" in str(e.value)


def test_a_wrong_input_is_an_invalid_argument_naming_it():
    fx = get_fixture("mlp_dynamic")
    _, m = _load(fx, "reference")
    with pytest.raises(ExecuTorchError) as e:
        m.execute([np.zeros((17, 16), np.float32)])  # the batch is at most 16
    assert e.value.code == ErrorCode.InvalidArgument


def test_repeated_executes_are_bit_identical():
    fx = get_fixture("vit_tiny")
    _, m = _load(fx)
    first = m.execute(fx.calls[0])[0].copy()
    for _ in range(5):
        assert np.array_equal(m.execute(fx.calls[0])[0], first)
