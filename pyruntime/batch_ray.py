"""The Ray engine of ``pyruntime batch``: the workers are Ray actors.

The program's bytes go to the object store once (so a remote node needs no copy of
the file, only pyruntime installed); each chunk of input sets is put there by the
driver when an actor is free to take it, and the outputs come back the same way.
Without ``address`` a local Ray instance is started for the run and stopped after;
if Ray is already initialized in this process (``ray.init`` by the caller), that
instance is used and left running.
"""
from __future__ import annotations

import logging
import os

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.batch_worker import Runner, split_sets

IN_FLIGHT = 2  # chunks queued per actor
READY_TIMEOUT_S = 600  # for an actor to be scheduled and load the program


class _Actor:
    """One worker: loads the method once (errors are kept and reported, not raised,
    so the driver can tell a load failure from a dead actor)."""

    def __init__(self, program: bytes, cfg):
        try:
            self.runner, self.error = Runner(program, cfg), None
        except Exception as e:  # noqa: BLE001 - reported through ready()
            self.runner, self.error = None, str(e)

    def ready(self):
        return self.error

    def run(self, items):
        return [(k, self.runner.run(k, arrays)) for k, arrays in items]


def _start(ray, address, workers) -> bool:
    if ray.is_initialized():
        return False
    kw = {"include_dashboard": False, "logging_level": logging.WARNING}
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=max(workers, os.cpu_count() or 1), **kw)
    except Exception as e:  # noqa: BLE001 - ConnectionError, RuntimeError, ... from Ray
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        raise ExecuTorchError(ErrorCode.AccessFailed,
                              f"cannot start or reach {where}: {type(e).__name__}: {e}") from e
    return True


def run_ray(program, cfg, inputs, sets, workers, address, sink) -> list:
    """Run ``sets`` ({k: [npz keys]}) on ``workers`` actors; report to ``sink`` (see
    ``pyruntime.batch._Sink``); return the set indices that never ran."""
    try:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayError
    except ImportError as e:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"--engine ray needs Ray: pip install 'pyruntime[ray]' ({e})") from e
    if isinstance(program, (bytes, bytearray)):
        data = bytes(program)
    else:
        with open(program, "rb") as f:
            data = f.read()
    started = _start(ray, address, workers)
    actors = []
    try:
        cpus = ray.cluster_resources().get("CPU", 0)
        if workers > cpus:
            raise ExecuTorchError(ErrorCode.OutOfResources,
                                  f"{workers} Ray workers need one CPU each; the cluster has "
                                  f"{cpus:g}")
        actor_cls = ray.remote(num_cpus=1)(_Actor)
        prog_ref = ray.put(data)
        actors = [actor_cls.remote(prog_ref, cfg) for _ in range(workers)]
        live = []
        for w, a in enumerate(actors):
            try:
                err = ray.get(a.ready.remote(), timeout=READY_TIMEOUT_S)
            except GetTimeoutError:
                err = f"actor not started and loaded within {READY_TIMEOUT_S} s (cluster busy?)"
                ray.kill(a)
            except RayError as e:
                err = f"actor died while loading: {e}"
            sink.worker_ready(w, err)
            if err is None:
                live.append(w)
        sink.all_ready()
        chunks = split_sets(sets, workers)
        todo = list(range(len(chunks)))[::-1]
        inflight = {}  # ObjectRef -> (worker, set indices sent)
        held = {w: 0 for w in live}
        with np.load(inputs, allow_pickle=False) as z:
            while (todo and live) or inflight:
                for w in list(live):
                    while todo and held[w] < IN_FLIGHT:
                        cid = todo.pop()
                        items = _read(z, chunks[cid], sink)
                        ref = actors[w].run.remote(ray.put(items))
                        inflight[ref] = (w, [k for k, _ in items])
                        held[w] += 1
                if not inflight:
                    continue
                (ref,), _ = ray.wait(list(inflight), num_returns=1)
                w, sent = inflight.pop(ref)
                held[w] -= 1
                try:
                    for k, (ok, val) in ray.get(ref):
                        sink.set_done(k, (ok, [np.array(o) for o in val] if ok else val))
                except RayError as e:
                    if isinstance(e, RayActorError) and w in live:
                        live.remove(w)
                    for k in sent:
                        sink.set_done(k, (False, f"Ray worker {w} failed on this set's chunk: "
                                                 f"{type(e).__name__}: {e}"))
        return [k for cid in todo for k, _ in chunks[cid]]
    finally:
        if started:
            ray.shutdown()
        else:
            for a in actors:
                ray.kill(a)


def _read(z, chunk, sink) -> list:
    """The chunk's arrays; a set whose arrays cannot be read fails here, alone."""
    items = []
    for k, keys in chunk:
        try:
            items.append((k, [None if key is None else z[key] for key in keys]))
        except Exception as e:  # noqa: BLE001 - a corrupt member fails its set only
            sink.set_done(k, (False, f"cannot read set {k} from the inputs: "
                                     f"{type(e).__name__}: {e}"))
    return items
