"""The TOSA bridge: programs lowered by ExecuTorch's own ``TOSAPartitioner`` (TOSA-1.0+INT
after ``TOSAQuantizer``, and TOSA-1.0+FP) run in pyruntime through the TOSA reference model.

* FP graphs: within 1e-5 x max(1, max |ref|) of torch's float model.
* INT graphs: the program (quantize, delegate, dequantize) equals the reference model
  fed the same int8 input directly (the bridge binds inputs and outputs correctly), and
  stays within a few output quantisation steps of torch's float model.
Also: malformed payloads and a missing ``tosa_reference_model`` are clear errors.
"""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from tests import parts
from tests.delegates.ethosu_fixtures import (delegate_blob, get_fixture, make_model,
                                             unavailable_reason)

_why = unavailable_reason()
parts.need("arm", None if _why is None else f"TOSABackend tests need the Arm flow: {_why}")

from pyruntime.delegates import backend_registry  # noqa: E402
from pyruntime.delegates.tosa import tosa_backend  # noqa: E402
from pyruntime.delegates.tosa.graph import read_graph  # noqa: E402

tosa_reference_model = parts.importorskip("tosa_reference_model", "arm")


def torch_ref(fx):
    import torch

    with torch.no_grad():
        return make_model(fx.spec.model)(torch.from_numpy(fx.inputs[0])).numpy()


def run_program(fx):
    m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward")
    return np.asarray(m.execute(fx.inputs)[0])


def test_registered_under_the_id_executorch_writes():
    fx = get_fixture("mlp_tosa_fp")
    _, _, bid = delegate_blob(fx.pte_path)
    assert bid == "TOSABackend"
    assert backend_registry.get("TOSABackend") is tosa_backend and tosa_backend.is_available()


@pytest.mark.parametrize("name", ["mlp_tosa_fp", "cnn_tosa_fp"])
def test_fp_graph_matches_torch(name):
    fx = get_fixture(name)
    ref = torch_ref(fx)
    got = run_program(fx)
    err = float(np.max(np.abs(got - ref)))
    print(f"{name}: max err {err:.2e}")
    assert err <= 1e-5 * max(1.0, float(np.max(np.abs(ref))))


@pytest.mark.parametrize("name", ["mlp_tosa_int", "cnn_tosa_int"])
def test_int_graph_is_the_reference_model(name):
    fx = get_fixture(name)
    blob, _, _ = delegate_blob(fx.pte_path)
    graph = read_graph(blob)
    assert [t.dtype_name for t in graph.inputs] == ["INT8"]
    got = run_program(fx)
    (si, zi), (so, zo) = fx.meta["input_q"], fx.meta["output_q"]
    x = fx.inputs[0]
    xq = np.clip(np.round(x / np.float32(si)) + zi, -128, 127).astype(np.int8)
    outs, status = tosa_reference_model.run(blob, [xq.reshape(graph.inputs[0].shape)])
    assert status.name == "TOSA_VALID"
    want = (outs[0].astype(np.float32) - zo) * np.float32(so)
    assert np.allclose(got.reshape(-1), want.reshape(-1), rtol=0, atol=1e-6 * so)
    err = float(np.max(np.abs(got - torch_ref(fx))))
    print(f"{name}: max err vs torch float {err:.4f} ({err / so:.1f} output steps)")
    assert err < 12 * so


def test_nchw_inputs_as_the_delegate_receives_them():
    fx = get_fixture("cnn_tosa_fp")
    blob, _, _ = delegate_blob(fx.pte_path)
    assert read_graph(blob).inputs[0].shape == (1, 3, 32, 32)


def _init(blob):
    return tosa_backend.init(np.frombuffer(blob, np.uint8), [], None)


def test_malformed_payloads_are_errors():
    blob, _, _ = delegate_blob(get_fixture("mlp_tosa_int").pte_path)
    with pytest.raises(ExecuTorchError, match="TOSABackend payload: not a TOSA flatbuffer"):
        _init(b"\x08\x00\x00\x00XXXX" + blob[8:])
    for n in (0, 7, 12, 40, 200):
        with pytest.raises(ExecuTorchError, match="TOSABackend"):
            _init(blob[:n])
    bad = bytearray(blob)
    bad[0:4] = (len(blob) + 100).to_bytes(4, "little")  # root table past the end
    with pytest.raises(ExecuTorchError, match="outside"):
        _init(bytes(bad))


def test_wrong_input_is_an_error():
    fx = get_fixture("mlp_tosa_int")
    blob, specs, _ = delegate_blob(fx.pte_path)
    h = tosa_backend.init(np.frombuffer(blob, np.uint8), specs, None)
    from pyruntime.cython_ext.tensor import ETensor

    x = ETensor.from_array(np.zeros((2, 32), np.float32))  # float where int8 is expected
    out = ETensor.from_array(np.zeros((2, 10), np.int8))
    with pytest.raises(ExecuTorchError, match="TOSABackend: input 0") as e:
        tosa_backend.execute(h, [x, out])
    assert e.value.code == ErrorCode.InvalidArgument


def test_missing_reference_model_is_not_found_and_unavailable(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tosa_reference_model", None)
    assert not tosa_backend.is_available()
    assert "tosa-tools" in tosa_backend.unavailable_reason()
    blob, _, _ = delegate_blob(get_fixture("mlp_tosa_fp").pte_path)
    with pytest.raises(ExecuTorchError) as e:
        _init(blob)
    assert e.value.code == ErrorCode.NotFound and "TOSABackend" in str(e.value)
    with pytest.raises(ExecuTorchError, match="tosa-tools") as e:
        pyruntime.Runtime.get().load_program(get_fixture("mlp_tosa_fp").pte_path) \
            .load_method("forward")
    assert e.value.code == ErrorCode.NotFound
