"""A method on a dedicated thread, fed and read without blocking: what an rclpy callback
or a 1 kHz control loop wants.

``submit(inputs)`` copies the inputs straight into a loaded copy of the method's input
memory (one copy, from numpy arrays, ``array.array`` or ``memoryview`` alike) and
returns at once; the worker thread runs it (the fast tier releases the GIL for the
whole run) and publishes the outputs; ``latest()`` returns the newest finished ones
without waiting. Two copies of the method take turns, so a submit never waits for a
run: while one runs, the next inputs go into the other (a newer submit replaces one
not yet started: a control loop wants the newest sensor reading). Outputs are
published through three buffers, so the arrays ``latest()`` returned stay intact
until the caller asks again. A method with state carried between runs (an RNN's
hidden state, a KV cache) must be run by one copy: ``stateful=True`` (the inputs
are then staged, a second copy per run).

    with RealtimeRunner("policy.pte", cpu=1) as rt:    # warmed up, gc frozen
        while True:                                    # the control loop
            rt.submit([joint_state])
            r = rt.latest()                            # None before the first result
            if r is not None:
                command(r.outputs[0])

``cpu`` pins the worker with ``os.sched_setaffinity``; ``priority`` asks for
``SCHED_FIFO`` at that priority, which needs ``CAP_SYS_NICE`` or an ``rtprio`` limit:
where the OS refuses, ``start()`` raises with what to change.
"""
from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import Dynamism, ETensor


@dataclass(frozen=True)
class Result:
    """One finished run: ``outputs`` (read-only arrays, intact until the next
    ``latest()``), the ``seq`` number ``submit`` returned for its inputs, and
    ``latency_s`` from that submit to the outputs being published."""
    seq: int
    outputs: list
    latency_s: float
    finished: float  # time.monotonic() when published


def _as_input(x, want: np.ndarray, where: str) -> np.ndarray:
    """``x`` as an array to copy into ``want`` (no copy of its own)."""
    if isinstance(x, np.ndarray):
        a = x
    elif isinstance(x, memoryview) or hasattr(x, "buffer_info"):  # array.array
        a = np.frombuffer(x, dtype=want.dtype)
    else:
        a = np.asarray(x)
    if a.dtype != want.dtype or a.size != want.size:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{where}: expected {want.size} {want.dtype} values "
                              f"{list(want.shape)}, got {a.size} {a.dtype}")
    return a.reshape(want.shape)


class RealtimeRunner:
    """See the module docstring. ``program``: a path, bytes or ``Program``."""

    def __init__(self, program, method: str = "forward", *, cpu: int | None = None,
                 priority: int | None = None, threads: int = 1, tier: str = "fast",
                 stateful: bool = False, warmup: int = 20, freeze_gc: bool = True):
        from pyruntime.pool import as_program

        prog = as_program(program)
        self.method_name = method
        self.cpu, self.priority, self.warmup = cpu, priority, warmup
        self.stateful = stateful
        self.freeze_gc, self._froze = freeze_gc, False
        self.methods = [prog.load_method(method, tier=tier, threads=threads)
                        for _ in range(1 if stateful else 2)]
        where = f"RealtimeRunner({method!r})"
        m0 = self.methods[0]
        for i, idx in enumerate(m0.inputs):
            t = m0.values[idx]
            if not isinstance(t, ETensor) or t.dynamism != Dynamism.STATIC:
                raise ExecuTorchError(ErrorCode.NotSupported,
                                      f"{where}: input {i} is not a static tensor; the runner "
                                      "preallocates every buffer")
        self._views = [[m.input_view(i) for i in range(len(m.inputs))] for m in self.methods]
        if stateful:  # inputs staged here, moved into the method by the worker
            self._staged = [np.empty_like(v) for v in self._views[0]]
        outs = []
        for j, idx in enumerate(m0.outputs):
            t = m0.values[idx]
            if not isinstance(t, ETensor) or t.dynamism != Dynamism.STATIC:
                raise ExecuTorchError(ErrorCode.NotSupported,
                                      f"{where}: output {j} is not a static tensor")
            outs.append(t)
        self._pub = [[np.empty(t.sizes, t.dtype) for t in outs] for _ in range(3)]
        self._ro = []
        for bufs in self._pub:
            views = []
            for b in bufs:
                v = b.view()
                v.flags.writeable = False
                views.append(v)
            self._ro.append(views)
        self._cond = threading.Condition(threading.Lock())
        self._pending = None  # copy index with inputs not yet run
        self._running = None  # copy index the worker runs now
        self._seq = 0
        self._submitted = [0.0] * len(self.methods)  # submit time per copy
        self._seqs = [0] * len(self.methods)
        self._front = None  # publish buffer of the newest result
        self._held = None  # publish buffer the caller's last latest() returned
        self._results = [None, None, None]
        self._stop = False
        self._thread = None
        self._error = None
        self.runs = 0
        self.replaced = 0  # submits whose inputs a newer submit replaced before they ran

    # ---- control ----------------------------------------------------------------
    def start(self) -> "RealtimeRunner":
        """Warm up, freeze the garbage collector's current objects (``gc.freeze``, undone
        by ``stop``; ``freeze_gc=False`` leaves the collector alone), start the worker
        (pinned and prioritized as asked); raises if the OS refuses those."""
        for m in self.methods:
            for _ in range(self.warmup):
                for i in range(len(m.inputs)):
                    m.input_view(i)[...] = 0  # (a run may consume its inputs)
                m.run()
        if self.freeze_gc:  # what exists now is never scanned again: collections stay short
            gc.collect()
            gc.freeze()
            self._froze = True
        ready = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(ready,), daemon=True,
                                        name=f"pyruntime-realtime-{self.method_name}")
        self._thread.start()
        ready.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            self.stop()
            raise self._error
        return self

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._froze:
            gc.unfreeze()
            self._froze = False

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- the caller's side ------------------------------------------------------
    def submit(self, inputs) -> int:
        """Copy ``inputs`` (one per method input: numpy arrays, ``array.array``,
        ``memoryview``s of the input's dtype and size) into the method and return at once;
        the number returned is the result's ``seq``."""
        if len(inputs) != len(self._views[0]):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"RealtimeRunner: {len(inputs)} inputs, the method takes "
                                  f"{len(self._views[0])}")
        with self._cond:
            if self._error is not None:
                raise self._error
            if self._thread is None:
                raise ExecuTorchError(ErrorCode.InvalidState, "RealtimeRunner: not started")
            if self.stateful:
                k, dst = 0, self._staged
            else:  # the copy that is not running (either, when none runs)
                k = 1 if self._running == 0 else 0
                m = self.methods[k]
                dst = [m.input_view(i) for i in range(len(inputs))]  # (marks them written)
            for i, (x, v) in enumerate(zip(inputs, dst)):
                np.copyto(v, _as_input(x, v, f"RealtimeRunner input {i}"))
            if self._pending is not None:
                self.replaced += 1
            self._seq += 1
            self._pending, self._seqs[k], self._submitted[k] = k, self._seq, time.monotonic()
            self._cond.notify()
            return self._seq

    def latest(self) -> Result | None:
        """The newest finished result (None before the first), without waiting."""
        with self._cond:
            if self._error is not None:
                raise self._error
            f = self._front
            if f is None:
                return None
            self._held = f
            return self._results[f]

    def wait(self, seq: int, timeout: float | None = None) -> Result:
        """Block until the result of submit ``seq`` (or a newer one) is published (for
        tests and start-up, not for a control loop)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._error is None and (self._front is None
                                           or self._results[self._front].seq < seq):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise ExecuTorchError(ErrorCode.OutOfResources,
                                          f"RealtimeRunner: no result for submit {seq} within "
                                          f"{timeout} s")
                self._cond.wait(left)
            if self._error is not None:
                raise self._error
            self._held = self._front
            return self._results[self._front]

    # ---- the worker ---------------------------------------------------------------
    def _setup_thread(self) -> None:
        if self.cpu is not None:
            try:
                os.sched_setaffinity(0, {self.cpu})
            except (OSError, ValueError) as e:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"RealtimeRunner: cannot pin the worker to CPU {self.cpu} "
                                      f"(allowed: {sorted(os.sched_getaffinity(0))}): {e}") from e
        if self.priority is not None:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))
            except (OSError, AttributeError, ValueError) as e:
                raise ExecuTorchError(
                    ErrorCode.NotSupported,
                    f"RealtimeRunner: the OS refuses SCHED_FIFO priority {self.priority} ({e}); "
                    "it needs CAP_SYS_NICE or an rtprio limit (ulimit -r, or rtprio in "
                    "/etc/security/limits.conf); run without priority= otherwise") from e

    def _work(self, ready) -> None:
        try:
            self._setup_thread()
        except ExecuTorchError as e:
            self._error = e
            ready.set()
            return
        ready.set()
        cond, pub = self._cond, self._pub
        write = 0
        while True:
            with cond:
                while self._pending is None and not self._stop:
                    cond.wait()
                if self._stop:
                    return
                k, self._pending, self._running = self._pending, None, self._pending
                seq, t_sub = self._seqs[k], self._submitted[k]
                if self.stateful:
                    m = self.methods[0]
                    for i, staged in enumerate(self._staged):
                        np.copyto(m.input_view(i), staged)
            m = self.methods[k]
            try:
                m.run()
                for dst, idx in zip(pub[write], m.outputs):
                    np.copyto(dst, m.values[idx].numpy())
            except Exception as e:  # noqa: BLE001 - reported to the caller's next call
                with cond:
                    self._error = e if isinstance(e, ExecuTorchError) else ExecuTorchError(
                        ErrorCode.Internal, f"RealtimeRunner: {type(e).__name__}: {e}")
                    self._running = None
                    cond.notify_all()
                return
            done = time.monotonic()
            with cond:
                self._results[write] = Result(seq, self._ro[write], done - t_sub, done)
                self._front, self._running = write, None
                self.runs += 1
                write = next(b for b in range(3) if b != write and b != self._held)
                cond.notify_all()
