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

    python -m delegates.qnn.verify <library folder> <binary file> [soc model]
    python -m delegates.qnn.verify --serve <library folder>   # the server (see _serve)
"""
from __future__ import annotations

import atexit
import ctypes
import faulthandler
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import numpy as np

from cython_ext.errors import ErrorCode, ExecuTorchError
from delegates.qnn.payload import BACKEND

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
        self.proc = subprocess.Popen([sys.executable, "-m", "delegates.qnn.verify", "--serve",
                                      self.folder], stdin=subprocess.PIPE,
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
    from cython_ext.tensor import ETensor  # noqa: F401 - imported once, here
    from delegates.qnn import backend, context, library  # noqa: F401

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
