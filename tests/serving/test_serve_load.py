"""`pyruntime serve` under hostile load on loopback: many concurrent clients beside silent
connections, slow senders and malformed requests. Every good request gets the sequential
run's outputs, every bad one its 4xx, every silent or slow connection is closed within its
timeout, the connection bound answers 503 and recovers, and nothing leaks (threads,
descriptors, the open-connection count)."""
from __future__ import annotations

import io
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from pyruntime.serve import serve_in_thread
from tests.serving.common import program, sequential

IDLE, REQUEST = 1.0, 2.0  # the servers' timeouts here (defaults: 20 s and 30 s)
SLACK = 3.0  # s beyond a timeout allowed for a close to be seen on a busy 2-core machine


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _post(url, body, timeout=60):
    req = urllib.request.Request(url + "/run", data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _connect(port) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.settimeout(30)
    return s


def _wait_closed(s: socket.socket) -> tuple[float, bytes]:
    """(seconds until the server closed ``s``, what it sent before)."""
    t0, got = time.monotonic(), b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    s.close()
    return time.monotonic() - t0, got


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.") else 0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def server():
    srv = serve_in_thread(("127.0.0.1", 0), str(program("mlp_dynamic").pte_path), workers=2,
                          idle_timeout=IDLE, request_timeout=REQUEST, max_connections=128)
    yield srv
    srv.shutdown()
    srv.server_close()


def test_good_clients_are_served_right_beside_silent_slow_and_malformed_ones(server):
    port = server.server_address[1]
    url = f"http://127.0.0.1:{port}"
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((1 + k % 16, 16)).astype(np.float32) for k in range(64)]
    want = sequential(program("mlp_dynamic").pte_path, [[x] for x in xs], "fast")
    fds, threads = _fds(), threading.active_count()
    results, closes, errors = {}, {}, []

    def good(k):
        try:
            for r in range(3):  # each client several requests, in turn
                j = (k + 17 * r) % len(xs)
                status, body = _post(url, _npz(arg0=xs[j]))
                results[(k, r)] = (j, status, body)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    def silent(k):
        s = _connect(port)
        closes[("silent", k)] = _wait_closed(s)

    def slow_headers(k):  # a byte of the request line every 0.25 s, never finishing
        s = _connect(port)
        t0 = time.monotonic()
        try:
            for b in b"POST /run HTTP/1.1\r\nContent-Length: 10\r\nX-Pad: " + b"a" * 200:
                s.sendall(bytes([b]))
                time.sleep(0.25)
        except OSError:
            pass  # closed by the server: what is asked
        dt, got = _wait_closed(s)
        closes[("slow_headers", k)] = (time.monotonic() - t0, got)

    def slow_body(k):  # headers at once, then the body a byte at a time
        s = _connect(port)
        t0 = time.monotonic()
        try:
            s.sendall(b"POST /run HTTP/1.1\r\nContent-Length: 1000\r\n\r\n")
            for _ in range(1000):
                s.sendall(b"x")
                time.sleep(0.25)
        except OSError:
            pass
        dt, got = _wait_closed(s)
        closes[("slow_body", k)] = (time.monotonic() - t0, got)

    malformed = {
        "length-not-a-number": b"POST /run HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        "length-missing": b"POST /run HTTP/1.1\r\n\r\n",
        "negative-length": b"POST /run HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "not-npz": b"POST /run HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
        "garbage": b"\x00\x01\x02 not http\r\n\r\n",
        "short-body": b"POST /run HTTP/1.1\r\nContent-Length: 50\r\n\r\nonly this",
    }
    expect = {"length-not-a-number": 400, "length-missing": 411, "negative-length": 400,
              "not-npz": 400, "garbage": 400, "short-body": 408}

    def bad(name):
        s = _connect(port)
        s.sendall(malformed[name])
        if name == "short-body":
            s.shutdown(socket.SHUT_WR)  # the body ends early: the server sees its end
        closes[("bad", name)] = _wait_closed(s)

    workers = [threading.Thread(target=good, args=(k,)) for k in range(32)]
    workers += [threading.Thread(target=silent, args=(k,)) for k in range(24)]
    workers += [threading.Thread(target=slow_headers, args=(k,)) for k in range(4)]
    workers += [threading.Thread(target=slow_body, args=(k,)) for k in range(4)]
    workers += [threading.Thread(target=bad, args=(n,)) for n in malformed]
    t0 = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not any(w.is_alive() for w in workers), "a client thread did not finish"
    assert time.monotonic() - t0 < 60
    assert not errors, errors[:5]

    assert len(results) == 32 * 3  # nothing lost
    for (k, r), (j, status, body) in results.items():
        assert status == 200, body[:300]
        np.testing.assert_array_equal(np.load(io.BytesIO(body))["out0"], want[j][0])
    for k in range(24):
        dt, got = closes[("silent", k)]
        assert got == b"" and dt < IDLE + SLACK, (k, dt, got)
    for kind in ("slow_headers", "slow_body"):
        for k in range(4):
            dt, got = closes[(kind, k)]
            assert dt < REQUEST + SLACK, (kind, k, dt)
            if kind == "slow_body":  # the headers were read: it gets its answer
                assert _status(got) == 408 and b"not received" in got, got[:300]
    for name, code in expect.items():
        dt, got = closes[("bad", name)]
        assert _status(got) == code and b'"code"' in got, (name, got[:300])

    deadline = time.monotonic() + 10
    while (server.open_connections or threading.active_count() > threads) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.open_connections == 0
    assert threading.active_count() <= threads
    assert _fds() <= fds + 2  # (the interpreter may keep a descriptor or two of its own)


def test_the_connection_bound_answers_503_and_recovers():
    srv = serve_in_thread(("127.0.0.1", 0), str(program("mlp_dynamic").pte_path), workers=1,
                          idle_timeout=IDLE, request_timeout=REQUEST, max_connections=8)
    try:
        port = srv.server_address[1]
        url = f"http://127.0.0.1:{port}"
        held = [_connect(port) for _ in range(8)]
        deadline = time.monotonic() + 10
        while srv.open_connections < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        x = np.ones((2, 16), np.float32)
        status, body = _post(url, _npz(arg0=x))
        assert status == 503 and json.loads(body)["code"] == "OutOfResources", body
        assert srv.refused >= 1
        for s in held:  # the idle timeout frees them
            dt, _ = _wait_closed(s)
            assert dt < IDLE + SLACK
        status, body = _post(url, _npz(arg0=x))
        want = sequential(program("mlp_dynamic").pte_path, [[x]], "fast")[0][0]
        assert status == 200
        np.testing.assert_array_equal(np.load(io.BytesIO(body))["out0"], want)
    finally:
        srv.shutdown()
        srv.server_close()


def test_keep_alive_connections_are_closed_when_idle(server):
    port = server.server_address[1]
    s = _connect(port)
    body = _npz(arg0=np.ones((3, 16), np.float32))
    for _ in range(3):  # several requests on one connection, then silence
        s.sendall(b"POST /run HTTP/1.1\r\nContent-Length: " + str(len(body)).encode()
                  + b"\r\n\r\n" + body)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        n = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        rest = b""
        while len(rest) < n:
            rest += s.recv(n - len(rest))
        assert _status(head) == 200
    dt, got = _wait_closed(s)
    assert got == b"" and dt < IDLE + SLACK


def test_timeouts_and_the_bound_must_be_positive():
    from pyruntime.cython_ext.errors import ExecuTorchError

    for kw in ({"idle_timeout": 0}, {"request_timeout": -1}, {"max_connections": 0},
               {"idle_timeout": True}):
        with pytest.raises(ExecuTorchError, match="must be a positive number"):
            serve_in_thread(("127.0.0.1", 0), str(program("mlp").pte_path), **kw)
