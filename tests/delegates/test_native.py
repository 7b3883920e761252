"""NativeBackend-only behaviour: weights from a ``.ptd``, an op without a kernel, malformed
payloads and wrong inputs (the parity tests are in test_graph_delegates.py)."""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.native import native_backend

pytest.importorskip("executorch.backends.native", reason="fixtures need executorch's exporter")

from tests.delegates.graph_fixtures import get_fixture  # noqa: E402


def _load(fx, tier="fast", data=True):
    prog = pyruntime.Runtime.get().load_program(
        fx.pte_path, data_path=[str(fx.ptd_path)] if fx.ptd_path and data else None)
    return prog, prog.load_method("forward", tier=tier)


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
