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
runs with glibc's malloc perturbation (``MALLOC_PERTURB_``) so that uninitialized heap
memory is never zero there, which turns more of those into a crash in the child, with
large blocks taken from ``mmap`` (``MALLOC_MMAP_THRESHOLD_``). Each input and output
buffer has canary bytes on both sides, checked after the run (a graph writing past its
tensors is refused), and the child frees every context, the device and the backend
before it exits, so that glibc's checks on free meet heap damage there rather than in
this process's later frees.

It is a screen, not a proof: the child runs the graph once, on zeros. In fuzz campaigns
(``python -m tests.fuzz --target qnn``) 2 cases in 100,000 passed it and then crashed
the process that loaded and ran them (without the canaries and the frees it was 3 to 4
in 10,000): one with glibc aborting in a context's free during garbage collection, and
case 77133 (three bytes changed in a graph), where the HTP simulator's DMA engine
(``hnnx::DMA_Manager::wait_desc``, a memmove) writes to an address computed from the
binary, about a gigabyte from any buffer we hand it (valgrind). What that write hits
depends on the process's memory layout: in 20 tries the child crashed and the load was
refused 9 times; the parent then ran cleanly 6 times and died in Python's garbage
collector 5 times. More runs in the child (several inputs, repeated runs compared, a
collection, glibc's checking malloc) did not change those odds, so they are not made.
No screen in a process can stop such a write: a process that must never die should
run untrusted binaries isolated (``isolated.py``: every QNN call in a worker process;
case 77133 then gave an ExecuTorchError or a run in 10 tries out of 10, never a crash
here).

The children are forked by one server process per library folder, started on first
use, that has imported the bridge and opened the libraries (without calling them: no
thread of theirs runs in it), so a new binary costs a fork, one context, one execution
and the frees: about 0.1 s here (0.47 s with a Python start per binary).

    python -m pyruntime.delegates.qnn.verify_child <library folder> <binary file> [soc model]
    python -m pyruntime.delegates.qnn.verify_child --serve <library folder>   # the server

This module is the client side (what the bridge imports); the server and its children
are ``verify_child.py``, which imports the bridge to run the binary.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.qnn.payload import BACKEND

ENV = "PYRUNTIME_QNN_VERIFY"
TIMEOUT_ENV = "PYRUNTIME_QNN_VERIFY_TIMEOUT"
REFUSED = 10  # the child's exit status when QNN returned an error
PERTURB_BYTE = 165  # what the child's heap blocks are filled with (MALLOC_PERTURB_)
_verified: set = set()
_lock = threading.Lock()


def env_flag(name: str) -> bool:
    """Whether environment variable ``name`` says yes (1/true/yes/on)."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def env_seconds(name: str, default: float = 300.0) -> float:
    """Environment variable ``name`` as seconds (at least 1), else ``default``."""
    try:
        return max(1.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


def enabled() -> bool:
    return env_flag(ENV)


def _timeout() -> float:
    return env_seconds(TIMEOUT_ENV)


def verify(folder: str, binary: np.ndarray, soc_model: int = 0) -> None:
    """Raise ExecuTorchError if opening or running ``binary`` kills a child process."""
    digest = hashlib.blake2b(memoryview(np.ascontiguousarray(binary)), digest_size=16).digest()
    with _lock:
        if (folder, digest, soc_model) in _verified:
            return
    with tempfile.NamedTemporaryFile(prefix="qnn_verify_", suffix=".bin") as f:
        f.write(memoryview(np.ascontiguousarray(binary)))
        f.flush()
        timeout = _timeout()
        rc, stderr = _server(folder).check(f.name, soc_model, timeout)
    if rc is None:
        raise ExecuTorchError(
            ErrorCode.InvalidProgram,
            f"{BACKEND}: the QNN library did not finish opening and running this context "
            f"binary within {timeout:.0f} s in a verification process "
            f"(${ENV}); not loaded")
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        raise ExecuTorchError(
            ErrorCode.InvalidProgram,
            f"{BACKEND}: the QNN library crashed ({sig}) opening or running this context binary "
            f"in a verification process (${ENV}); not loaded")
    if rc == REFUSED:  # QNN refused it: say why, never parse it here
        raise _refusal(stderr)
    if rc != 0:
        raise ExecuTorchError(ErrorCode.Internal,
                              f"{BACKEND}: the verification process failed (exit "
                              f"{rc}): {stderr[-500:]}")
    with _lock:
        _verified.add((folder, digest, soc_model))


class _Server:
    """The client side of a verification server: one request at a time, a line of JSON
    each way. A server that died is started again on the next request."""

    def __init__(self, folder: str):
        self.folder = folder
        self.lock = threading.Lock()
        self.proc = None
        self.log = None
        self.owner = 0  # the process that started it (a forked copy of this one starts its own)

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
                   OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",  # a server without threads
                   MALLOC_PERTURB_=str(PERTURB_BYTE), MALLOC_MMAP_THRESHOLD_="131072")
        env.pop(ENV, None)
        self.log = tempfile.TemporaryFile()
        self.owner = os.getpid()
        self.proc = subprocess.Popen([sys.executable, "-m", "pyruntime.delegates.qnn.verify_child",
                                      "--serve", self.folder], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env)

    def stop(self) -> None:
        """Stop this process's server; one inherited through a fork is only forgotten
        (it still serves the process that started it)."""
        if self.proc is not None and self.owner == os.getpid():
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout, self.log):
                f.close()
        self.proc = None

    def check(self, path: str, soc_model: int, timeout: float) -> tuple:
        """(exit status of the child that opened and ran ``path``, or None if it did not
        finish within ``timeout`` s; what it wrote)."""
        with self.lock:
            if self.proc is None or self.owner != os.getpid() or self.proc.poll() is not None:
                self.stop()
                self._start()
            request = json.dumps([path, soc_model, timeout]) + "\n"
            try:
                self.proc.stdin.write(request.encode())
                self.proc.stdin.flush()
                ready, _, _ = select.select([self.proc.stdout], [], [], timeout + 60)
                line = self.proc.stdout.readline() if ready else b""
            except OSError:
                line = b""
            if not line:  # the server itself failed (never seen): say what it wrote
                self.log.seek(0)
                tail = self.log.read()[-500:].decode("utf-8", "replace")
                self.stop()
                raise ExecuTorchError(ErrorCode.Internal,
                                      f"{BACKEND}: the verification server stopped "
                                      f"answering (${ENV}): {tail}")
            got = json.loads(line)
            return got["rc"], got["stderr"]


_servers: dict = {}


def _server(folder: str) -> _Server:
    with _lock:
        if folder not in _servers:
            _servers[folder] = _Server(folder)
        return _servers[folder]


@atexit.register
def _stop_servers() -> None:
    for s in list(_servers.values()):
        s.stop()


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
