"""Opening an untrusted context binary in a child process first (opt-in).

pyruntime checks every byte it reads itself, but a QNN context binary is parsed
and run by Qualcomm's libraries, and some corruptions crash them: the metadata
parser of ``libQnnSystem.so`` (``QnnSystemContext_getBinaryInfo``) and the HTP
simulator running a damaged graph take the process down with a segfault, as
they do under ExecuTorch's own runtime. With ``PYRUNTIME_QNN_VERIFY=1`` (or
``QnnBackend.set_option("verify", True)``) each binary not seen before in this
process is first read, turned into a context and run once on zeros in a child
process; a child killed by a signal, or not done within
``$PYRUNTIME_QNN_VERIFY_TIMEOUT`` seconds (default 300: a damaged graph can keep the
simulator spinning), makes the load an ``ExecuTorchError`` instead of a crash or a
hang. A binary QNN refuses in the child is refused with the child's error, without
this process ever parsing it: on some corruptions ``QnnSystemContext_getBinaryInfo``
returns uninitialized memory and a later free corrupts the heap, a crash or not
depending on the process's heap (a 10,000-case fuzz campaign found two such binaries:
refused cleanly in the child, ``free(): invalid pointer`` in the parent). The child
runs with glibc's ``MALLOC_PERTURB_`` so that uninitialized heap memory is never
zero there, which turns more of those into a crash in the child. It costs one process
start and one execution per new binary.

    python -m delegates.qnn.verify <library folder> <binary file> [soc model]
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading

import numpy as np

from cython_ext.errors import ErrorCode, ExecuTorchError
from delegates.qnn.payload import BACKEND

ENV = "PYRUNTIME_QNN_VERIFY"
TIMEOUT_ENV = "PYRUNTIME_QNN_VERIFY_TIMEOUT"
REFUSED = 10  # the child's exit status when QNN returned an error
_verified: set = set()
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _timeout() -> float:
    try:
        return max(1.0, float(os.environ.get(TIMEOUT_ENV, "300")))
    except ValueError:
        return 300.0


def verify(folder: str, binary: np.ndarray, soc_model: int = 0) -> None:
    """Raise ExecuTorchError if opening or running ``binary`` kills a child process."""
    digest = hashlib.blake2b(memoryview(np.ascontiguousarray(binary)), digest_size=16).digest()
    with _lock:
        if (folder, digest, soc_model) in _verified:
            return
    with tempfile.NamedTemporaryFile(prefix="qnn_verify_", suffix=".bin") as f:
        f.write(memoryview(np.ascontiguousarray(binary)))
        f.flush()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
                   MALLOC_PERTURB_="165")
        env.pop(ENV, None)
        timeout = _timeout()
        try:
            r = subprocess.run([sys.executable, "-m", "delegates.qnn.verify", folder, f.name,
                                str(soc_model)], env=env, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ExecuTorchError(
                ErrorCode.InvalidProgram,
                f"{BACKEND}: the QNN library did not finish opening and running this context "
                f"binary within {timeout:.0f} s in a verification process "
                f"(${ENV}); not loaded") from None
    if r.returncode < 0:
        try:
            sig = signal.Signals(-r.returncode).name
        except ValueError:
            sig = f"signal {-r.returncode}"
        raise ExecuTorchError(
            ErrorCode.InvalidProgram,
            f"{BACKEND}: the QNN library crashed ({sig}) opening or running this context binary "
            f"in a verification process (${ENV}); not loaded")
    if r.returncode == REFUSED:  # QNN refused it: say why, never parse it here
        raise _refusal(r.stderr)
    if r.returncode != 0:
        raise ExecuTorchError(ErrorCode.Internal,
                              f"{BACKEND}: the verification process failed (exit "
                              f"{r.returncode}): {r.stderr[-500:]}")
    with _lock:
        _verified.add((folder, digest, soc_model))


def _refusal(stderr: str) -> ExecuTorchError:
    for line in reversed(stderr.strip().splitlines()):
        try:
            got = json.loads(line)
            return ExecuTorchError(ErrorCode(int(got["code"])), str(got["message"]))
        except (ValueError, KeyError, TypeError):
            continue
    return ExecuTorchError(ErrorCode.InvalidProgram,
                           f"{BACKEND}: the QNN library refused this context binary in a "
                           f"verification process (${ENV}): {stderr[-300:]}")


def _child(folder: str, path: str, soc_model: int) -> int:
    from cython_ext.tensor import ETensor
    from delegates.qnn import context, ctypes_api as api, library
    from delegates.qnn.backend import QnnBackend, QnnHandle
    from delegates.qnn.payload import QnnOptions

    binary = np.fromfile(path, np.uint8)
    lib = library.load_library(folder, "verify")
    try:
        ctx = context.acquire(lib, 0, binary, "verification", soc_model)
        backend = QnnBackend()
        for name in ctx.info.graphs:
            h = QnnHandle(lib, ctx, QnnOptions(soc_model=soc_model), name)
            args = [None] * h.n_args
            for s in h.inputs + h.outputs:
                if s.arg is not None:
                    st = api.DATATYPES[s.info.data_type][2][0]
                    args[s.arg] = ETensor.empty(st, s.info.dims)
            backend.execute(h, args)
    except ExecuTorchError as e:
        print(json.dumps({"code": int(e.code), "message": e.message}), file=sys.stderr)
        return REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0))
