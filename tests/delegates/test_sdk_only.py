"""Programs delegated to a backend that runs only on its vendor's device (MediaTek, NXP,
Metal, CUDA): a clear NotFound at load naming the backend and what would run it, and
``pyruntime inspect`` showing the delegate without running it.

None of the four can be lowered on this host (each partitioner needs its vendor SDK),
so the programs are a real XNNPACK-delegated program with its backend id rewritten to
another id of the same length: the payload, compile specs and plan stay real.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.registry import SDK_ONLY

pytest.importorskip("executorch", reason="the source program is an ExecuTorch export")

_REPO = Path(__file__).resolve().parents[2]


def _program(tmp_path, backend: str) -> Path:
    from tests.delegates.xnnpack_fixtures import get_fixture

    data = get_fixture("mlp").pte_path.read_bytes()
    source = b"XnnpackBackend"
    new = backend.encode().ljust(len(source), b"\0")[:len(source)]
    assert data.count(source) >= 1 and len(backend) <= len(source)
    # the id is a length-prefixed string: keep the length field consistent
    i = data.index(source)
    out = bytearray(data)
    out[i - 4:i] = len(backend).to_bytes(4, "little")
    out[i:i + len(source)] = new
    p = tmp_path / f"{backend}.pte"
    p.write_bytes(bytes(out))
    return p


@pytest.mark.parametrize("backend", sorted(SDK_ONLY))
def test_the_registry_names_what_would_run_each(backend):
    from pyruntime.delegates import backend_registry

    with pytest.raises(ExecuTorchError) as e:
        backend_registry.get(backend, "method 'forward' delegate 0")
    assert e.value.code == ErrorCode.NotFound and SDK_ONLY[backend] in str(e.value)
    assert backend_registry.where_it_runs(backend) == f"runs only on {SDK_ONLY[backend]}"


# ids no longer than the source's "XnnpackBackend" (NeuropilotBackend is checked above)
@pytest.mark.parametrize("backend", ["NeutronBackend", "MetalBackend", "CudaBackend"])
def test_loading_says_which_device_and_sdk_would_run_it(tmp_path, backend):
    path = _program(tmp_path, backend)
    prog = pyruntime.Runtime.get().load_program(path)
    assert prog.metadata("forward").backends == [backend]
    with pytest.raises(ExecuTorchError) as e:
        prog.load_method("forward")
    assert e.value.code == ErrorCode.NotFound
    msg = str(e.value)
    assert backend in msg and SDK_ONLY[backend] in msg and "delegate 0" in msg


def test_inspect_shows_the_delegate_payload_and_compile_specs(tmp_path):
    path = _program(tmp_path, "CudaBackend")
    r = subprocess.run([sys.executable, "-m", "pyruntime", "inspect", str(path)],
                       capture_output=True, text=True, cwd=_REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "[0] CudaBackend: payload " in r.stdout and "compile specs:" in r.stdout
    assert "not runnable here: runs only on an NVIDIA GPU" in r.stdout
