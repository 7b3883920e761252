"""Batch runs: every input set of an .npz through one method, over worker processes
or Ray actors, with outputs identical to running the sets one by one.

    pyruntime batch model.pte --inputs in.npz --out out.npz --workers 2
    pyruntime batch model.pte --inputs in.npz --out out.npz --engine ray --ray-address auto

``in.npz`` holds ``set{k}_arg{i}`` (scalar inputs as 0-d arrays), ``out.npz`` gets
``set{k}_out{j}`` for every set that ran. Each worker loads the program once and
runs many sets, single-threaded unless the device profile sets ``threads`` (the
outputs equal a sequential run of the same tier and threads). A failing set is
reported with its index; the others still run. Each worker's method keeps its
state between sets, so a stateful method (a KV cache) is not for batch runs.
From Python::

    from pyruntime.batch import run_batch
    result = run_batch("model.pte", "in.npz", workers=2, engine="local")
    result.outputs[0], result.errors          # {k: [outputs]}, {k: message}
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import re
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.batch_worker import Config, Runner, split_sets
from pyruntime.pool import as_program
from pyruntime.method import TIERS

_KEY = re.compile(r"set(\d+)_arg(\d+)")
IN_FLIGHT = 2  # chunks queued per worker, so none waits between chunks


@dataclass
class BatchResult:
    outputs: dict = field(default_factory=dict)  # set index -> list of outputs
    errors: dict = field(default_factory=dict)  # set index -> message
    seconds: float = 0.0  # from the start to the last set's result, start-up included
    ready_seconds: float = 0.0  # until every worker had loaded the program
    workers: int = 0

    @property
    def sets_per_s(self) -> float:
        """Throughput once the workers are up (start-up excluded)."""
        run = self.seconds - self.ready_seconds
        return (len(self.outputs) + len(self.errors)) / run if run > 0 else 0.0


# ---- input sets ----------------------------------------------------------------------
def read_sets(keys) -> dict:
    """``set{k}_arg{i}`` keys -> {k: [key of arg 0, arg 1, ...]}, sorted by k."""
    sets: dict = {}
    for key in keys:
        m = _KEY.fullmatch(key)
        if m is None:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"input .npz key {key!r} is not of the form set{{k}}_arg{{i}}")
        sets.setdefault(int(m.group(1)), {})[int(m.group(2))] = key
    return {k: [args.get(i) for i in range(max(args) + 1)] for k, args in sorted(sets.items())}


# ---- progress ------------------------------------------------------------------------
class Progress:
    """A one-line bar on a terminal; on a pipe, a line every 10%."""

    def __init__(self, total: int, stream=None, label="batch"):
        self.total, self.stream, self.label = total, stream or sys.stderr, label
        self.t0 = time.perf_counter()
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self._last, self._tenth = 0.0, -1

    def update(self, done: int, failed: int, force=False) -> None:
        now = time.perf_counter()
        tenth = done * 10 // max(self.total, 1)
        if self.tty and not force and now - self._last < 0.2 and done < self.total:
            return
        if not self.tty and tenth == self._tenth:
            return
        self._last, self._tenth = now, tenth
        frac = done / max(self.total, 1)
        bar = "#" * int(frac * 30)
        rate = done / max(now - self.t0, 1e-9)
        fail = f", {failed} failed" if failed else ""
        line = f"{self.label} [{bar:<30}] {done}/{self.total} sets{fail}, {rate:.1f} sets/s"
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")


# ---- local engine: spawned worker processes -----------------------------------------
def _worker_main(wid, source, cfg, npz_path, tasks, results):
    try:
        runner = Runner(source, cfg)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the sets
        results.put(("ready", wid, str(e)))
        return
    results.put(("ready", wid, None))
    with np.load(npz_path, allow_pickle=False) as z:
        while True:
            task = tasks.get()
            if task is None:
                return
            cid, items = task
            results.put(("done", wid, cid, [(k, runner.run_keys(z, k, keys))
                                             for k, keys in items]))


def _run_local(source, cfg, npz_path, sets, workers, sink):
    """Workers each get their own task queue, so the parent always knows which chunks
    a worker holds: if it dies, exactly those sets fail and the others go on."""
    ctx = mp.get_context("spawn")  # numba and fork do not mix
    results = ctx.Queue()
    tasks = [ctx.Queue() for _ in range(workers)]
    procs = [ctx.Process(target=_worker_main, daemon=True,
                         args=(w, os.fspath(source), cfg, npz_path, tasks[w], results))
             for w in range(workers)]
    chunks = split_sets(sets, workers)
    todo = list(range(len(chunks)))[::-1]
    held = {w: [] for w in range(workers)}  # chunks sent to each worker, not yet back
    reported, live = set(), set()
    for p in procs:
        p.start()
    try:
        while len(reported) < workers or any(held.values()) or (todo and live):
            try:
                msg = results.get(timeout=0.5)
            except queue.Empty:
                for w, p in enumerate(procs):
                    if p.is_alive() or (w in reported and w not in live):
                        continue
                    if w not in reported:  # died while loading
                        reported.add(w)
                        sink.worker_ready(w, f"worker process died while loading (exit code "
                                             f"{p.exitcode})")
                    for cid in held[w]:
                        for k, _ in chunks[cid]:
                            sink.set_done(k, (False, f"worker {w} died (exit code {p.exitcode}) "
                                                 "while running this set or one in its chunk"))
                    held[w] = []
                    live.discard(w)
            else:
                if msg[0] == "ready":
                    reported.add(msg[1])
                    sink.worker_ready(msg[1], msg[2])
                    if msg[2] is None:
                        live.add(msg[1])
                else:
                    _, w, cid, res = msg
                    held[w].remove(cid)
                    for k, r in res:
                        sink.set_done(k, r)
            if len(reported) < workers:
                continue  # start the clock with every worker loaded
            sink.all_ready()
            for w in sorted(live):
                while todo and len(held[w]) < IN_FLIGHT:
                    cid = todo.pop()
                    held[w].append(cid)
                    tasks[w].put((cid, chunks[cid]))
        return [k for cid in todo for k, _ in chunks[cid]]  # never run: no live worker
    finally:
        for w, q in enumerate(tasks):
            if procs[w].is_alive():
                q.put(None)
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()


# ---- the run -------------------------------------------------------------------------
class _Sink:
    """Where engines report: ``worker_ready`` (w, error or None), ``all_ready()``,
    ``set_done`` (k, (ok, outputs or message))."""

    def __init__(self, result: BatchResult, bar: Progress | None):
        self.result, self.bar = result, bar
        self.t0 = time.perf_counter()
        self.load_errors: dict = {}
        self.started = False
        self.t_last = None  # when the last set finished (teardown is not run time)

    def worker_ready(self, w, err) -> None:
        if err is not None:
            self.load_errors[w] = err

    def all_ready(self) -> None:
        if not self.started:
            self.started = True
            self.result.ready_seconds = time.perf_counter() - self.t0
            if self.bar:
                self.bar.t0 = time.perf_counter()  # the bar's rate counts from here

    def set_done(self, k, r) -> None:
        self.t_last = time.perf_counter()
        ok, val = r
        if ok:
            self.result.outputs[k] = val
        else:
            self.result.errors[k] = f"set {k}: {val}"
        if self.bar:
            n = len(self.result.outputs) + len(self.result.errors)
            self.bar.update(n, len(self.result.errors))


def run_batch(program, inputs, *, method="forward", workers=None, engine="local",
              ray_address=None, tier="fast", profile=None, progress=None,
              math=None) -> BatchResult:
    """Run every set of ``inputs`` (an .npz path) through ``program`` (a .pte path).

    The program is loaded here first, on the profile, so a program that cannot run
    fails before any worker starts. ``progress``: a stream for the bar, or None.
    ``math``: the workers' math mode (``pyruntime.mathmode``; default: this process's).
    """
    from pyruntime.profiles import get_profile

    if engine not in ("local", "ray"):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"engine must be 'local' or 'ray', got {engine!r}")
    profile = None if profile is None else get_profile(profile)
    from pyruntime.mathmode import default_math

    cfg = Config(method, tier, profile, default_math() if math is None else math)
    workers = max(1, os.cpu_count() or 1) if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"workers must be a positive int, got {workers!r}")
    try:
        with np.load(inputs, allow_pickle=False) as z:
            sets = read_sets(z.files)
    except ExecuTorchError:
        raise
    except Exception as e:  # noqa: BLE001 - missing file, not a zip, pickled data, ...
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"cannot read input sets from {os.fspath(inputs)!r}: {e}") from e
    Runner(program, cfg)  # fails here, with the device's error, if the method cannot load
    if not sets:
        return BatchResult(workers=workers)
    sink = _Sink(BatchResult(workers=workers),
                 Progress(len(sets), progress) if progress is not None else None)
    if engine == "local":
        not_run = _run_local(program, cfg, os.fspath(inputs), sets, workers, sink)
    else:
        from pyruntime.batch_ray import run_ray

        not_run = run_ray(program, cfg, inputs, sets, workers, ray_address, sink)
    why = "; ".join(f"worker {w}: {e}" for w, e in sorted(sink.load_errors.items()))
    for k in not_run:
        sink.set_done(k, (False, f"not run: {why or 'no worker left'}"))
    if sink.bar:
        sink.bar.close()
    result = sink.result
    result.seconds = (sink.t_last or time.perf_counter()) - sink.t0
    result.outputs = dict(sorted(result.outputs.items()))
    result.errors = dict(sorted(result.errors.items()))
    return result


def write_outputs(path, outputs: dict) -> None:
    """``set{k}_out{j}`` for each set; written to a temporary name, then renamed."""
    path = os.fspath(path)
    tmp = path + ".partial.npz"
    try:
        np.savez(tmp, **{f"set{k}_out{j}": o for k, outs in outputs.items()
                         for j, o in enumerate(outs)})
        os.replace(tmp, path)
    except OSError as e:
        raise ExecuTorchError(ErrorCode.AccessFailed, f"cannot write {path!r}: {e}") from e


# ---- command line ----------------------------------------------------------------------
def add_parser(sub) -> None:
    pb = sub.add_parser("batch", help="run every input set of an .npz, over workers or Ray")
    pb.add_argument("file")
    pb.add_argument("--inputs", required=True, help=".npz with set{k}_arg{i} arrays")
    pb.add_argument("--out", required=True, help="write set{k}_out{j} arrays to this .npz")
    pb.add_argument("--method", default="forward")
    pb.add_argument("--workers", type=int, default=None, help="default: one per core")
    pb.add_argument("--engine", default="local", choices=("local", "ray"))
    pb.add_argument("--ray-address", default=None,
                    help="a Ray cluster (e.g. auto, ray://host:10001); default: start a local one")
    pb.add_argument("--tier", default="fast", choices=TIERS)
    pb.add_argument("--device", default=None,
                    help="device profile: a built-in name (host, android-xnnpack, "
                         "android-portable, mcu) or a .toml/.json file")


def cli(args, stderr=None) -> int:
    """``pyruntime batch``: 0 when every set ran, 1 otherwise."""
    stderr = stderr or sys.stderr
    if args.workers is not None and args.workers < 1:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"--workers must be at least 1, got {args.workers}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise ExecuTorchError(ErrorCode.AccessFailed,
                              f"--out {args.out!r}: its folder does not exist")
    if args.device is not None:
        from pyruntime.profiles import get_profile

        prof = get_profile(args.device)
        report = prof.check(as_program(args.file), args.method)
        stderr.write(f"{report}\n")
        report.raise_if_unfit()
    r = run_batch(args.file, args.inputs, method=args.method, workers=args.workers,
                  engine=args.engine, ray_address=args.ray_address, tier=args.tier,
                  profile=args.device, progress=stderr)
    write_outputs(args.out, r.outputs)
    for msg in r.errors.values():
        stderr.write(f"error: {msg}\n")
    n = len(r.outputs) + len(r.errors)
    stderr.write(f"batch: {n} sets, {len(r.outputs)} ok, {len(r.errors)} failed in "
                 f"{r.seconds:.2f} s with {r.workers} {args.engine} worker(s), {args.tier} tier: "
                 f"{r.sets_per_s:.2f} sets/s after a {r.ready_seconds:.2f} s start-up "
                 f"({n / r.seconds if r.seconds else 0:.2f} sets/s overall); wrote "
                 f"{args.out}\n")
    return 0 if not r.errors else 1
