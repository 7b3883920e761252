"""The verification server and its children (``verify.py`` is the client): each child
opens a context binary, runs every graph once on zeros with canaried buffers and frees
everything, so that a crash, a hang or heap damage happens there, not in the process
that asked.

    python -m pyruntime.delegates.qnn.verify_child <library folder> <binary file> [soc model]
    python -m pyruntime.delegates.qnn.verify_child --serve <library folder>
"""
from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import signal
import sys
import tempfile
import time
import traceback

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.qnn.payload import BACKEND
from pyruntime.delegates.qnn.verify import ENV, REFUSED


def _child(folder: str, path: str, soc_model: int) -> int:
    from pyruntime.cython_ext.tensor import ETensor
    from pyruntime.delegates.qnn import context, ctypes_api as api, library
    from pyruntime.delegates.qnn.backend import QnnBackend, QnnHandle
    from pyruntime.delegates.qnn.payload import QnnOptions

    binary = np.fromfile(path, np.uint8)
    lib = library.load_library(folder, "verify")
    try:
        ctx = context.acquire(lib, 0, binary, "verification", soc_model)
        backend = QnnBackend()
        for name in ctx.info.graphs:
            h = QnnHandle(lib, ctx, QnnOptions(soc_model=soc_model), name)
            args, guards = [None] * h.n_args, []
            for s in h.inputs + h.outputs:
                if s.arg is not None:
                    st = api.DATATYPES[s.info.data_type][2][0]
                    args[s.arg] = _guarded_tensor(ETensor(st, s.info.dims), guards)
            backend.execute(h, args)
            k = _overwritten(guards)
            if k is not None:
                raise ExecuTorchError(
                    ErrorCode.InvalidProgram,
                    f"{BACKEND}: graph {name!r} of this context binary wrote outside the bytes "
                    f"of its tensor {k} in a verification process (${ENV}); not loaded")
        # free what QNN allocated: glibc's checks on free find heap damage a run did
        # (the child then dies of SIGABRT); otherwise it would surface in this
        # process's later frees, far from its cause
        lib.shutdown()
    except ExecuTorchError as e:
        print(json.dumps({"code": int(e.code), "message": e.message}), file=sys.stderr)
        return REFUSED
    return 0


_CANARY, _CANARY_BYTE = 4096, 0xA5


def _overwritten(guards):
    """The index of the first guarded buffer whose canaries changed, or None."""
    for k, (buf, lo, hi) in enumerate(guards):
        if (buf[:lo] != _CANARY_BYTE).any() or (buf[hi:] != _CANARY_BYTE).any():
            return k
    return None


def _guarded_tensor(t, guards):
    """``t`` over a zeroed buffer with canary bytes before and after it."""
    n = t.capacity * t.dtype.itemsize
    buf = np.full(n + 2 * _CANARY, _CANARY_BYTE, np.uint8)
    buf[_CANARY:_CANARY + n] = 0
    t.storage = buf[_CANARY:_CANARY + n]
    guards.append((buf, _CANARY, _CANARY + n))
    return t


def _serve(folder: str) -> int:
    """Answer each request line ``[binary file, soc model, timeout]`` with
    ``{"rc": exit status or null, "stderr": ...}`` from a child forked for it."""
    # the answers get a descriptor of their own: the libraries print to stdout
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    from pyruntime.cython_ext.tensor import ETensor  # noqa: F401 - imported once, here
    from pyruntime.delegates.qnn import backend, context, library  # noqa: F401

    for name in (library.HTP, library.SYSTEM):
        try:
            ctypes.CDLL(os.path.join(folder, name))
        except OSError:
            pass  # the child reports it
    for line in sys.stdin:
        path, soc_model, timeout = json.loads(line)
        rc, err = _fork_child(folder, path, int(soc_model), float(timeout))
        answers.write(json.dumps({"rc": rc, "stderr": err}) + "\n")
        answers.flush()
    return 0


def _fork_child(folder: str, path: str, soc_model: int, timeout: float) -> tuple:
    with tempfile.TemporaryFile() as log:
        pid = os.fork()
        if pid == 0:  # the child: its output goes to the log, never to the server's pipe
            code = 1
            try:
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
                sys.stdout = sys.stderr = open(2, "w", closefd=False)
                # a crash's Python trace belongs in the log too, not on a descriptor the
                # parent enabled faulthandler on (its terminal, under pytest)
                faulthandler.enable(file=sys.stderr)
                code = _child(folder, path, soc_model)
            except BaseException:  # noqa: BLE001 - reported as the child's failure
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        deadline, delay = time.monotonic() + timeout, 0.0005
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                rc = None
                break
            time.sleep(delay)
            delay = min(2 * delay, 0.01)
        log.seek(0)
        out = log.read()
        if len(out) > 4000:  # a crash's trace starts it, a refusal's JSON ends it: keep both
            out = out[:2000] + b"\n...\n" + out[-2000:]
        return rc, out.decode("utf-8", "replace")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        sys.exit(_serve(sys.argv[2]))
    sys.exit(_child(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0))
