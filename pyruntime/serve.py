"""``pyruntime serve``: one method of a program behind a small HTTP API.

    pyruntime serve model.pte --port 8000            # 127.0.0.1 unless --host says otherwise

    GET  /health     200 {"status": "ok"}
    GET  /metadata   200 JSON: the method's inputs and outputs, planned memory, delegates,
                     the device profile and whether the program fits it
    POST /run        body: an .npz with arg0, arg1, ... (scalars as 0-d arrays)
                     200: an .npz with out0, out1, ...
                     400/413/503 + JSON {"error", "code"} when the request cannot run

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
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.pool import MethodPool, as_program, coerce_inputs
from pyruntime.program import TensorInfo

MAX_BODY = 256 * 2**20
_STATUS = {ErrorCode.InvalidArgument: 400, ErrorCode.InvalidType: 400,
           ErrorCode.NotSupported: 400, ErrorCode.OutOfResources: 503}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every response has a Content-Length
    server: "PteServer"

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
        if n is None or not n.isdigit():
            self._json(411, {"error": "a Content-Length header is required",
                             "code": "InvalidArgument"})
            return
        if int(n) > self.server.max_body:
            self.close_connection = True  # the unread body cannot be skipped safely
            self._json(413, {"error": f"body of {n} bytes is over the limit of "
                                      f"{self.server.max_body}", "code": "InvalidArgument"})
            return
        body = self.rfile.read(int(n))
        try:
            outputs = self.server.run(body)
        except ExecuTorchError as e:
            self._json(_STATUS.get(e.code, 500), {"error": str(e), "code": e.code.name})
            return
        buf = io.BytesIO()
        np.savez(buf, **{f"out{j}": o for j, o in enumerate(outputs)})
        self._send(200, buf.getvalue(), "application/octet-stream")

    def _json(self, status, obj):
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _send(self, status, data: bytes, ctype: str):
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

    def __init__(self, address, program, method="forward", tier="fast", workers=None,
                 profile=None, max_body=MAX_BODY, verbose=False):
        from pyruntime.profiles import get_profile

        prog = as_program(program)
        profile = None if profile is None else get_profile(profile)
        fit = profile.check(prog, method) if profile is not None else None
        if fit is not None:
            fit.raise_if_unfit()
        self.pool = MethodPool(prog, method, size=workers, tier=tier, profile=profile)
        self.meta = self.pool.meta
        self.max_body, self.verbose = max_body, verbose
        self.metadata = {
            "method": method, "tier": tier, "workers": self.pool.size,
            "inputs": [_describe(i) for i in self.meta.inputs],
            "outputs": [_describe(o) for o in self.meta.outputs],
            "planned_bytes": sum(self.meta.planned_buffer_sizes),
            "constant_bytes": prog.constant_bytes, "delegates": list(self.meta.backends),
            "device": None if profile is None else {**profile.to_dict(), "fits": fit.fits},
        }
        super().__init__(address, _Handler)

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
    ps.add_argument("--tier", default="fast", choices=("fast", "reference"))
    ps.add_argument("--device", default=None, help="device profile: built-in name or file")
    ps.add_argument("--verbose", action="store_true", help="log every request")


def cli(args, stderr=None) -> int:
    stderr = stderr or sys.stderr
    if args.device is not None:  # say whether the program fits before serving it
        from pyruntime.profiles import get_profile

        report = get_profile(args.device).check(as_program(args.file), args.method)
        stderr.write(f"{report}\n")
        report.raise_if_unfit()
    srv = PteServer((args.host, args.port), args.file, args.method, args.tier, args.workers,
                    args.device, verbose=args.verbose)
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
