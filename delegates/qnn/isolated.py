"""Running QNN graphs in a worker process, so that a binary the library crashes on cannot
take the caller down (opt-in: ``$PYRUNTIME_QNN_ISOLATE=1`` or
``QnnBackend.set_option("isolate", True)``).

Qualcomm's libraries parse and run the context binary; on some corrupt binaries they
write where the binary tells them (the HTP simulator's DMA engine: see ``verify.py``),
which no check in the process can stop. Isolated, every QNN call happens in a worker
process (one per library folder, started on first use): ``init`` sends it the payload
and the compile specs, and each ``execute`` sends the arguments' bytes and gets the
outputs' bytes and sizes back (one copy each way, through a pipe: for small and
untrusted programs, not for speed). The worker runs the ordinary in-process bridge, so
results are bit for bit the same. A worker that dies (a signal, or no answer within
``$PYRUNTIME_QNN_ISOLATE_TIMEOUT`` seconds, default 300) turns that call into an
``ExecuTorchError`` naming the signal; its handles (and their mutable-buffer state)
are gone, and later calls on them say so; the next ``init`` starts a new worker.

    python -m pyruntime.delegates.qnn.isolated <library folder>   # a worker by hand (see _serve)
"""
from __future__ import annotations

import atexit
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.qnn.payload import BACKEND
from pyruntime.delegates.qnn.verify import env_flag, env_seconds

ENV = "PYRUNTIME_QNN_ISOLATE"
TIMEOUT_ENV = "PYRUNTIME_QNN_ISOLATE_TIMEOUT"
_HEADER = struct.Struct("<Q")
# (not ``-m``: this module is imported with the package, and runpy warns about that)
_WORKER_MAIN = ("import sys; from pyruntime.delegates.qnn.isolated_worker import serve; "
                "sys.exit(serve(sys.argv[1]))")


def enabled() -> bool:
    return env_flag(ENV)


def _timeout() -> float:
    return env_seconds(TIMEOUT_ENV)


def _send(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEADER.pack(len(data)))
    f.write(data)
    f.flush()


def _read_exact(f, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = f.read(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return bytes(out)


def _recv(f):
    (n,) = _HEADER.unpack(_read_exact(f, _HEADER.size))
    return pickle.loads(_read_exact(f, n))


class _Worker:
    """The parent's side of one worker process: one request at a time."""

    def __init__(self, folder: str):
        self.folder = folder
        self.lock = threading.Lock()
        self.proc = None
        self.owner = 0  # the process that started it (a forked child starts its own)
        self.generation = 0  # bumped on every start: handles of a dead worker are stale
        self.death = ""  # how the last worker ended, for later calls on its handles
        # handles closed while a request was in flight (a finalizer run by the garbage
        # collector inside ``request``): destroyed before the next request, never from
        # inside one (the lock is held, and the pipe is mid-answer)
        self.pending = []

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        env.pop(ENV, None)
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER_MAIN, self.folder],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.owner = os.getpid()
        self.generation += 1

    def alive(self) -> bool:
        return self.proc is not None and self.owner == os.getpid() and self.proc.poll() is None

    def gone(self) -> ExecuTorchError:
        """The error of a call on a handle whose worker is no more."""
        return ExecuTorchError(ErrorCode.DelegateInvalidHandle,
                               f"{BACKEND}: the QNN worker process of this handle is gone "
                               f"({self.death or 'stopped'}); load the method again")

    def _died(self, rc, when: str) -> ExecuTorchError:
        """The error of a worker that ended on its own (``rc``: its exit status)."""
        self.death = _describe_exit(rc)
        self.stop()
        return ExecuTorchError(ErrorCode.Internal,
                               f"{BACKEND}: the QNN worker process died ({self.death}) {when}; "
                               "this process is unharmed; the program's QNN handles are gone")

    def _exchange(self, msg, timeout: float):
        _send(self.proc.stdin, msg)
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError
        return _recv(self.proc.stdout)

    def _take_pending(self) -> list:
        out = []
        while self.pending:
            out.append(self.pending.pop())
        return out

    def close_handle(self, hid: int, generation: int) -> None:
        """Destroy handle ``hid`` in the worker now, or before the next request when one
        is in flight (never blocks on it)."""
        if generation != self.generation or not self.alive():
            return
        if not self.lock.acquire(blocking=False):
            self.pending.append(hid)
            return
        self.lock.release()
        try:
            self.request(("destroy", hid))
        except ExecuTorchError:
            pass  # a worker that died on the way out: nothing left to free

    def stop(self) -> None:
        if self.proc is not None and self.owner == os.getpid():
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
        self.proc = None

    def request(self, msg, start: bool = False):
        """Send ``msg``, return the answer; ``start``: (re)start a worker that is not
        running. A worker that dies or hangs becomes an ExecuTorchError."""
        with self.lock:
            if not self.alive():
                if self.proc is not None and self.owner == os.getpid() and not start:
                    # it died between two requests (a signal from outside): said as such
                    raise self._died(self.proc.returncode, "between calls")
                if not start:
                    raise self.gone()
                self.stop()
                self._start()
            timeout = _timeout()
            try:
                for hid in self._take_pending():  # their answers do not matter
                    self._exchange(("destroy", hid), timeout)
                answer = self._exchange(msg, timeout)
            except TimeoutError:
                self.death = f"no answer within {timeout:.0f} s, killed"
                self.stop()
                raise ExecuTorchError(ErrorCode.Internal,
                                      f"{BACKEND}: the QNN worker process gave no answer "
                                      f"within {timeout:.0f} s ({msg[0]}); killed") from None
            except (EOFError, OSError, pickle.UnpicklingError):
                try:
                    rc = self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:  # closed its end but lives on: killed
                    rc = None
                raise self._died(rc, f"in {msg[0]}") from None
        if answer[0] == "error":
            raise ExecuTorchError(ErrorCode(answer[1]), answer[2])
        return answer[1]


def _describe_exit(rc) -> str:
    if rc is None:
        return "closed its pipe without exiting, killed"
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


_workers: dict = {}
_workers_lock = threading.Lock()


@atexit.register
def _stop_workers() -> None:
    for w in list(_workers.values()):
        w.stop()


def _worker(folder: str) -> _Worker:
    with _workers_lock:
        w = _workers.get(folder)
        if w is None:
            w = _workers[folder] = _Worker(folder)
        return w


class IsolatedHandle:
    """A QNN delegate handle that lives in a worker process."""

    def __init__(self, worker: _Worker, hid: int, describe: str):
        self.worker, self.hid, self.generation = worker, hid, worker.generation
        self.description = describe
        self.closed = False

    def describe(self) -> str:
        return f"{self.description} (in a worker process)"

    def _live(self) -> None:
        if self.closed:
            raise ExecuTorchError(ErrorCode.DelegateInvalidHandle, f"{BACKEND}: handle destroyed")
        if self.generation != self.worker.generation:
            raise self.worker.gone()

    def execute(self, args) -> None:
        self._live()
        sent = []
        for i, t in enumerate(args):
            if not isinstance(t, ETensor):
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{BACKEND}: argument {i} must be a tensor, got "
                                      f"{type(t).__name__}")
            if t.storage is None:
                raise ExecuTorchError(ErrorCode.InvalidState,
                                      f"{BACKEND}: argument {i} has no data")
            sent.append((int(t.scalar_type), tuple(t.sizes), int(t.dynamism), t.storage.nbytes,
                         np.ascontiguousarray(t.numpy()).tobytes()))
        outs = self.worker.request(("execute", self.hid, sent))
        for i, sizes, data in outs:
            t = args[i]
            if tuple(sizes) != tuple(t.sizes):
                t.resize(tuple(sizes))
            t.numpy()[...] = np.frombuffer(data, t.dtype).reshape(t.shape)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.worker.close_handle(self.hid, self.generation)


def init(folder: str, processed: bytes, compile_specs, runtime_options) -> IsolatedHandle:
    """The QnnBackend ``init`` of this payload, done in the folder's worker."""
    w = _worker(folder)
    specs = [(str(k), bytes(v)) for k, v in compile_specs]
    hid, describe = w.request(("init", processed, specs, dict(runtime_options or {})),
                              start=True)
    return IsolatedHandle(w, hid, describe)
