"""``pyruntime serve``: one method of a program behind a small HTTP API.

    pyruntime serve model.pte --port 8000            # 127.0.0.1 unless --host says otherwise

    GET  /health     200 {"status": "ok"}
    GET  /metadata   200 JSON: the method's inputs and outputs, planned memory, delegates,
                     the device profile and whether the program fits it
    POST /run        body: an .npz with arg0, arg1, ... (scalars as 0-d arrays)
                     200: an .npz with out0, out1, ...
                     400/408/411/413/503 + JSON {"error", "code"} when the request
                     cannot run

Hostile or broken clients cost bounded time and threads: a connection that sends
nothing, or stops sending, for ``idle_timeout`` seconds (``--idle-timeout``, default
20) is closed; a request whose headers and body have not all arrived
``request_timeout`` seconds (``--request-timeout``, default 30) after its first byte
is answered 408 and closed (a slow sender cannot hold a thread); beyond
``max_connections`` open connections (``--max-connections``, default 256) a new one is
answered 503 at once and closed.

Client side, with any HTTP client::

    import io, numpy as np, urllib.request
    buf = io.BytesIO(); np.savez(buf, arg0=x)
    req = urllib.request.Request("http://127.0.0.1:8000/run", data=buf.getvalue())
    out0 = np.load(io.BytesIO(urllib.request.urlopen(req).read()))["out0"]

The server is the standard library's ``ThreadingHTTPServer`` (a thread per
connection, no dependency to install); each request runs on a free method of a
``MethodPool``, so concurrent requests run in parallel up to ``--workers``
methods. It speaks plain HTTP with no authentication: keep it on loopback or a
private network, behind a reverse proxy for anything else.
"""
from __future__ import annotations

import io
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.pool import MethodPool, as_program, coerce_inputs
from pyruntime.program import TensorInfo
from pyruntime.method import TIERS

MAX_BODY = 256 * 2**20
IDLE_TIMEOUT = 20.0  # s without a byte from the client
REQUEST_TIMEOUT = 30.0  # s from a request's first byte to its last
MAX_CONNECTIONS = 256
MAX_REFUSING = 64  # connections being answered 503 at once; beyond, closed unanswered


class _DeadlineReader(io.RawIOBase):
    """The connection's reads, each bounded by the idle timeout and by the deadline of
    the request being read (``start_request``): a client sending a byte every few
    seconds still runs out of time (a socket timeout alone bounds each wait only)."""

    def __init__(self, sock, idle: float, per_request: float):
        self.sock, self.idle, self.per_request = sock, idle, per_request
        self.deadline = None

    def start_request(self) -> None:
        self.deadline = None  # set by the request's first byte

    def readable(self):
        return True

    def readinto(self, b):
        now = time.monotonic()
        wait = self.idle if self.deadline is None else min(self.idle, self.deadline - now)
        if wait <= 0:
            raise TimeoutError(f"request not complete after {self.per_request:g} s")
        self.sock.settimeout(wait)
        n = self.sock.recv_into(b)
        if n and self.deadline is None:
            self.deadline = time.monotonic() + self.per_request
        return n
_STATUS = {ErrorCode.InvalidArgument: 400, ErrorCode.InvalidType: 400,
           ErrorCode.NotSupported: 400, ErrorCode.OutOfResources: 503}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every response has a Content-Length
    server: "PteServer"

    def setup(self):
        super().setup()
        self.rfile.close()  # the socket's own reader: it would keep the socket open
        self._reader = _DeadlineReader(self.connection, self.server.idle_timeout,
                                       self.server.request_timeout)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self):
        self._reader.start_request()
        super().handle_one_request()

    def do_GET(self):
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/metadata":
            self._json(200, self.server.metadata)
        else:
            self._json(404, {"error": f"no endpoint {self.path}; try /health, /metadata, "
                                      "POST /run", "code": "NotFound"})

    def do_POST(self):
        if self.path != "/run":
            self._json(404, {"error": f"no endpoint POST {self.path}; try POST /run",
                             "code": "NotFound"})
            return
        n = self.headers.get("Content-Length")
        if n is None:
            self._json(411, {"error": "a Content-Length header is required",
                             "code": "InvalidArgument"})
            return
        if not n.strip().isdigit() or not n.strip().isascii():
            self.close_connection = True  # where the body ends is unknown
            self._json(400, {"error": f"Content-Length {n[:40]!r} is not a number of bytes",
                             "code": "InvalidArgument"})
            return
        n = int(n)
        if n > self.server.max_body:
            self.close_connection = True  # the unread body cannot be skipped safely
            self._json(413, {"error": f"body of {n} bytes is over the limit of "
                                      f"{self.server.max_body}", "code": "InvalidArgument"})
            return
        try:
            body = self.rfile.read(n)
        except TimeoutError as e:
            body, why = None, str(e) or f"no byte for {self.server.idle_timeout:g} s"
        else:
            why = f"the body ended after {len(body)} of {n} bytes"
        if body is None or len(body) < n:
            self.close_connection = True
            self._json(408, {"error": f"request body not received: {why}",
                             "code": "InvalidArgument"})
            return
        try:
            outputs = self.server.run(body)
        except ExecuTorchError as e:
            self._json(_STATUS.get(e.code, 500), {"error": str(e), "code": e.code.name})
            return
        buf = io.BytesIO()
        np.savez(buf, **{f"out{j}": o for j, o in enumerate(outputs)})
        self._send(200, buf.getvalue(), "application/octet-stream")

    def send_error(self, code, message=None, explain=None):
        """What the request parser refuses (a malformed request line or header, an
        unsupported method), as JSON like every other answer, on an HTTP/1.1 status line
        (HTTP/0.9 is not spoken); the connection is closed after it."""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.1"
        self._json(code, {"error": message or self.responses.get(code, ("error",))[0],
                          "code": "InvalidArgument" if code < 500 else "NotSupported"})

    def _json(self, status, obj):
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _send(self, status, data: bytes, ctype: str):
        # a client that does not read its answer is given the idle timeout, then dropped
        self.connection.settimeout(self.server.idle_timeout)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        if self.server.verbose:
            super().log_message(fmt, *args)


class PteServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer with a MethodPool; ``serve_forever()`` to run it,
    ``shutdown()`` from another thread to stop it.

    >>> # srv = PteServer(("127.0.0.1", 0), "model.pte", workers=2)
    >>> # threading.Thread(target=srv.serve_forever, daemon=True).start()
    >>> # srv.server_address          # the port actually bound
    """

    daemon_threads = True
    request_queue_size = 128  # the listen backlog: bursts of clients wait, not refused

    def __init__(self, address, program, method="forward", tier="fast", workers=None,
                 profile=None, max_body=MAX_BODY, verbose=False, idle_timeout=IDLE_TIMEOUT,
                 request_timeout=REQUEST_TIMEOUT, max_connections=MAX_CONNECTIONS, math=None):
        from pyruntime.profiles import get_profile

        for name, v in (("idle_timeout", idle_timeout), ("request_timeout", request_timeout),
                        ("max_connections", max_connections)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"serve: {name} must be a positive number, got {v!r}")
        prog = as_program(program)
        profile = None if profile is None else get_profile(profile)
        fit = profile.check(prog, method) if profile is not None else None
        if fit is not None:
            fit.raise_if_unfit()
        self.pool = MethodPool(prog, method, size=workers, tier=tier, profile=profile,
                               math=math)
        self.meta = self.pool.meta
        self.max_body, self.verbose = max_body, verbose
        self.idle_timeout, self.request_timeout = float(idle_timeout), float(request_timeout)
        self.max_connections = int(max_connections)
        self._open = 0  # connections with a handler thread
        self._open_lock = threading.Lock()
        self.refused = 0  # connections refused for the bound
        self._refusing = 0  # of them, being answered 503 now
        self.metadata = {
            "method": method, "tier": tier, "workers": self.pool.size,
            "math": self.pool.math,
            "inputs": [_describe(i) for i in self.meta.inputs],
            "outputs": [_describe(o) for o in self.meta.outputs],
            "planned_bytes": sum(self.meta.planned_buffer_sizes),
            "constant_bytes": prog.constant_bytes, "delegates": list(self.meta.backends),
            "device": None if profile is None else {**profile.to_dict(), "fits": fit.fits},
        }
        super().__init__(address, _Handler)

    def process_request(self, request, client_address):
        with self._open_lock:
            full = self._open >= self.max_connections
            if not full:
                self._open += 1
        if not full:
            try:
                super().process_request(request, client_address)  # a thread of its own
            except BaseException:
                self._closed_one()
                raise
            return
        self.refused += 1
        with self._open_lock:
            answer = self._refusing < MAX_REFUSING
            self._refusing += answer
        if not answer:  # a flood: no thread even to say so
            self.shutdown_request(request)
            return
        threading.Thread(target=self._refuse, args=(request,), daemon=True).start()

    def _refuse(self, request) -> None:
        """Answer 503 and close; the request is read first (for a second at most), so the
        client gets the answer instead of a reset for writing to a closed socket."""
        body = json.dumps({"error": f"the server has {self.max_connections} connections open; "
                                    "retry later", "code": "OutOfResources"}).encode()
        try:
            request.settimeout(1.0)
            request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
                            b"application/json\r\nConnection: close\r\nRetry-After: 1\r\n"
                            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            request.shutdown(socket.SHUT_WR)
            deadline, left = time.monotonic() + 1.0, 1 << 16
            while left > 0 and time.monotonic() < deadline:
                chunk = request.recv(min(left, 4096))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass
        finally:
            request.close()
            with self._open_lock:
                self._refusing -= 1

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed_one()

    def _closed_one(self) -> None:
        with self._open_lock:
            self._open -= 1

    def handle_error(self, request, client_address):
        """A client that went away (reset, broken pipe) is no error worth a traceback."""
        if self.verbose or not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    @property
    def open_connections(self) -> int:
        return self._open

    def run(self, body: bytes) -> list:
        """An .npz request body -> the method's outputs (as .npz-storable arrays)."""
        n = self.meta.num_inputs()
        try:
            with np.load(io.BytesIO(body), allow_pickle=False) as z:
                files = set(z.files)
                want = {f"arg{i}" for i in range(n)}
                if files != want:
                    raise ExecuTorchError(
                        ErrorCode.InvalidArgument,
                        f"the request has {sorted(files)}; method {self.meta.name!r} takes "
                        f"{sorted(want, key=lambda s: int(s[3:]))}")
                args = [z[f"arg{i}"] for i in range(n)]
        except ExecuTorchError:
            raise
        except Exception as e:  # noqa: BLE001 - not an .npz (BadZipFile, ValueError, ...)
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"the request body is not a readable .npz: {e}") from e
        try:
            outs = self.pool.execute(coerce_inputs(self.meta, args), timeout=60)
        except ExecuTorchError:
            raise
        except Exception as e:  # noqa: BLE001 - a kernel bug answers 500, the server lives on
            raise ExecuTorchError(ErrorCode.Internal, f"{type(e).__name__}: {e}") from e
        for j, o in enumerate(outs):
            if not isinstance(o, (np.ndarray, bool, int, float)):
                raise ExecuTorchError(ErrorCode.NotSupported,
                                      f"output {j} is a {type(o).__name__}; .npz responses hold "
                                      "tensors and scalars only")
        return [np.asarray(o) for o in outs]

    def server_close(self):
        super().server_close()
        self.pool.close()


def _describe(info) -> dict:
    if isinstance(info, TensorInfo):
        return {"kind": "Tensor", "dtype": str(info.dtype), "sizes": list(info.sizes),
                "dynamic": info.dynamic, "text": str(info)}
    value = info.value if isinstance(info.value, (bool, int, float, str, type(None))) else None
    return {"kind": info.kind, "value": value, "text": str(info)}


def add_parser(sub) -> None:
    ps = sub.add_parser("serve", help="serve a method over HTTP (.npz in, .npz out)")
    ps.add_argument("file")
    ps.add_argument("--port", type=int, default=8000)
    ps.add_argument("--host", default="127.0.0.1")
    ps.add_argument("--method", default="forward")
    ps.add_argument("--workers", type=int, default=None,
                    help="methods loaded for concurrent requests (default: one per core)")
    ps.add_argument("--tier", default="fast", choices=TIERS)
    ps.add_argument("--device", default=None, help="device profile: built-in name or file")
    ps.add_argument("--verbose", action="store_true", help="log every request")
    ps.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT, metavar="S",
                    help=f"close a connection silent for S seconds (default {IDLE_TIMEOUT:g})")
    ps.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT, metavar="S",
                    help="answer 408 to a request not fully received S seconds after its "
                         f"first byte (default {REQUEST_TIMEOUT:g})")
    ps.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS, metavar="N",
                    help=f"answer 503 beyond N open connections (default {MAX_CONNECTIONS})")


def cli(args, stderr=None) -> int:
    stderr = stderr or sys.stderr
    if args.device is not None:  # say whether the program fits before serving it
        from pyruntime.profiles import get_profile

        report = get_profile(args.device).check(as_program(args.file), args.method)
        stderr.write(f"{report}\n")
        report.raise_if_unfit()
    srv = PteServer((args.host, args.port), args.file, args.method, args.tier, args.workers,
                    args.device, verbose=args.verbose, idle_timeout=args.idle_timeout,
                    request_timeout=args.request_timeout,
                    max_connections=args.max_connections)
    host, port = srv.server_address[:2]
    stderr.write(f"serving {args.file} method {args.method!r} on http://{host}:{port} "
                 f"({srv.pool.size} method(s), {args.tier} tier); Ctrl-C stops\n")
    stderr.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


def serve_in_thread(*args, **kwargs) -> PteServer:
    """Start a PteServer on a daemon thread (for tests and notebooks); ``shutdown()``
    and ``server_close()`` it when done."""
    srv = PteServer(*args, **kwargs)
    threading.Thread(target=srv.serve_forever, daemon=True, name="pyruntime-serve").start()
    return srv
