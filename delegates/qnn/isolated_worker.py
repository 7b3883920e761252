"""The worker process of ``isolated.py`` (the client the bridge imports): it runs the
in-process bridge on the requests it reads, so that a binary the QNN library crashes on
takes this process down, not the caller."""
from __future__ import annotations

import os
import sys

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.qnn.isolated import _recv, _send
from pyruntime.delegates.qnn.payload import BACKEND


def serve(folder: str) -> int:
    """Answer requests on stdin with the in-process bridge: ("init", payload, specs,
    options) -> handle id, ("execute", id, [(scalar type, sizes, dynamism, storage
    bytes, data)]) -> the
    outputs [(argument index, sizes, bytes)], ("destroy", id)."""
    out = os.fdopen(os.dup(1), "wb")  # answers get a descriptor of their own:
    os.dup2(2, 1)  # the libraries print to stdout
    inp = os.fdopen(0, "rb")
    os.environ["PYRUNTIME_QNN_LIB_DIR"] = folder
    from pyruntime.delegates.qnn.backend import QnnBackend

    backend = QnnBackend()
    handles, next_id = {}, 1
    while True:
        try:
            msg = _recv(inp)
        except EOFError:
            return 0
        try:
            if msg[0] == "init":
                _, processed, specs, opts = msg
                opts.pop("isolate", None)
                opts["verify"] = False
                h = backend.init(np.frombuffer(processed, np.uint8), specs, None, opts)
                handles[next_id] = h
                answer = ("ok", (next_id, h.describe() if h.graph_name else "QNN graph"))
                next_id += 1
            elif msg[0] == "execute":
                h = handles[msg[1]]
                args = []
                for st, sizes, dynamism, nbytes, data in msg[2]:
                    t = ETensor(st, sizes, dynamism=dynamism)
                    t.storage = np.zeros(nbytes, np.uint8)
                    if data:
                        t.numpy()[...] = np.frombuffer(data, t.dtype).reshape(t.shape)
                    args.append(t)
                backend.execute(h, args)
                slots = [s for s in h.outputs if s.arg is not None]
                answer = ("ok", [(s.arg, tuple(args[s.arg].sizes),
                                  np.ascontiguousarray(args[s.arg].numpy()).tobytes())
                                 for s in slots])
            elif msg[0] == "destroy":
                backend.destroy(handles.pop(msg[1], None))
                answer = ("ok", None)
            else:
                answer = ("error", int(ErrorCode.Internal), f"{BACKEND}: bad request {msg[0]!r}")
        except ExecuTorchError as e:
            answer = ("error", int(e.code), e.message)
        except Exception as e:  # noqa: BLE001 - reported to the caller, the worker lives on
            answer = ("error", int(ErrorCode.Internal), f"{BACKEND}: {type(e).__name__}: {e}")
        _send(out, answer)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
