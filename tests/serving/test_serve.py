"""`pyruntime serve` over loopback with a real HTTP client (urllib): health, metadata,
.npz in and out equal to a sequential run, concurrent requests, and errors as JSON."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.serve import serve_in_thread
from tests.serving.common import assert_output_parity, program, sequential


@pytest.fixture(scope="module")
def server():
    srv = serve_in_thread(("127.0.0.1", 0), str(program("mlp_dynamic").pte_path), workers=2)
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _post(url, body):
    req = urllib.request.Request(url + "/run", data=body, method="POST",
                                 headers={"Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


def test_health_and_metadata(server):
    with urllib.request.urlopen(server + "/health", timeout=30) as r:
        assert r.status == 200 and json.loads(r.read()) == {"status": "ok"}
    with urllib.request.urlopen(server + "/metadata", timeout=30) as r:
        meta = json.loads(r.read())
    assert meta["method"] == "forward" and meta["workers"] == 2 and meta["tier"] == "fast"
    assert meta["inputs"] == [{"kind": "Tensor", "dtype": "float32", "sizes": [16, 16],
                               "dynamic": True, "text": meta["inputs"][0]["text"]}]
    assert meta["outputs"][0]["kind"] == "Tensor" and meta["outputs"][0]["dynamic"]
    assert meta["planned_bytes"] > 0 and meta["delegates"] == [] and meta["device"] is None


def test_run_matches_sequential_and_executorch(server):
    fx = program("mlp_dynamic")
    want = sequential(fx.pte_path, fx.calls, "fast")
    for k, (call, ref) in enumerate(zip(fx.calls, fx.expected)):
        status, ctype, body = _post(server, _npz(arg0=call[0]))
        assert status == 200 and ctype == "application/octet-stream"
        with np.load(io.BytesIO(body)) as z:
            assert z.files == ["out0"]
            np.testing.assert_array_equal(z["out0"], want[k][0])
            assert_output_parity(z["out0"], ref[0], f"call {k}")


def test_concurrent_requests(server):
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((b, 16)).astype(np.float32) for b in (1, 4, 9, 16, 2, 7, 3, 12)]
    want = sequential(program("mlp_dynamic").pte_path, [[x] for x in xs], "fast")
    got = [None] * len(xs)

    def client(k):
        got[k] = _post(server, _npz(arg0=xs[k]))

    ts = [threading.Thread(target=client, args=(k,)) for k in range(len(xs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k, (status, _, body) in enumerate(got):
        assert status == 200, body
        np.testing.assert_array_equal(np.load(io.BytesIO(body))["out0"], want[k][0])


@pytest.mark.parametrize("body, match", [
    (_npz(arg0=np.ones((17, 16), np.float32)), "dimension 0 is 17, above its upper bound"),
    (_npz(x=np.ones((2, 16), np.float32)), "the request has ['x']; method 'forward' takes "
                                           "['arg0']"),
    (_npz(arg0=np.ones((2, 16), np.int64)), "expected dtype float, got long"),
    (b"not an npz", "not a readable .npz"),
], ids=["too-big", "wrong-key", "wrong-dtype", "not-npz"])
def test_bad_requests_get_json_errors(server, body, match):
    status, ctype, data = _post(server, body)
    err = json.loads(data)
    assert status == 400 and ctype == "application/json"
    assert err["code"] == "InvalidArgument" and match.lower() in err["error"].lower()


def test_unknown_paths(server):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(server + "/nope", timeout=30)
    assert e.value.code == 404 and json.loads(e.value.read())["code"] == "NotFound"


def test_a_device_without_the_backend_refuses_to_serve():
    with pytest.raises(ExecuTorchError, match="does not have") as e:
        serve_in_thread(("127.0.0.1", 0), str(program("xnnpack_mlp").pte_path),
                        profile="android-portable")
    assert e.value.code == ErrorCode.NotFound


def test_cli_serves_until_stopped():
    """`python -m pyruntime serve --port 0`: the real command, found by the port it prints."""
    fx = program("mlp")
    p = subprocess.Popen([sys.executable, "-m", "pyruntime", "serve", str(fx.pte_path),
                          "--port", "0", "--workers", "1", "--tier", "reference"],
                         cwd=Path(__file__).resolve().parents[2], stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stderr.readline()
        m = re.search(r"on http://127\.0\.0\.1:(\d+) ", line)
        assert m, line
        url = f"http://127.0.0.1:{m.group(1)}"
        status, _, body = _post(url, _npz(arg0=fx.calls[0][0]))
        assert status == 200
        assert_output_parity(np.load(io.BytesIO(body))["out0"], fx.expected[0][0], "serve cli")
    finally:
        p.terminate()
        p.wait(timeout=30)
