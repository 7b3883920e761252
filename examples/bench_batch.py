"""Throughput of batch runs and of the method pool on MobileNetV2 (portable, fast tier).

    python examples/bench_batch.py [--sets 200] [--engines local,ray] [--write BENCHMARKS.md]

Batch: ``pyruntime.batch.run_batch`` with 1 and 2 workers per engine; sets/s is
counted once every worker has loaded the program (the start-up is shown apart).
Pool: ``MethodPool`` called from 1, 2 and 4 threads. Every output is checked equal
to a sequential run in this process (one method, one thread, same tier).
``--write`` puts the table in BENCHMARKS.md between serving-bench markers.
"""
from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("PYRUNTIME_COMPILE", "sync")  # time compiled kernels: compile at load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyruntime  # noqa: E402
from pyruntime.batch import run_batch  # noqa: E402
from pyruntime.pool import MethodPool  # noqa: E402

START, END = "<!-- serving-bench:start -->", "<!-- serving-bench:end -->"


def _spin(seconds, out):
    t, c = time.perf_counter(), time.process_time()
    while time.perf_counter() - t < seconds:
        pass
    out.put(time.process_time() - c)


def free_cores(seconds=2.0) -> float:
    """CPU time two busy processes get per second of wall time: 2.0 on an idle 2-core
    machine, less when other work shares it (the most 2 workers can scale to)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_spin, args=(seconds, q)) for _ in range(2)]
    for p in ps:
        p.start()
    cpu = sum(q.get() for _ in ps)
    for p in ps:
        p.join()
    return cpu / seconds


def sequential(pte, sets):
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="fast", threads=1)
    m.execute(sets[0])
    t = time.perf_counter()
    outs = [m.execute(s) for s in sets]
    return outs, len(sets) / (time.perf_counter() - t)


def same(got: dict, want) -> bool:
    return len(got) == len(want) and all(
        all(np.array_equal(g, w) for g, w in zip(got[k], want[k])) for k in range(len(want)))


def bench_pool(pte, sets, want, threads):
    pool = MethodPool(pte, size=threads, tier="fast")
    for _ in range(threads):
        pool.execute(sets[0])  # load (at most) one copy per thread before timing
    got = [None] * len(sets)
    start = threading.Barrier(threads + 1)

    def worker(t):
        start.wait()
        for k in range(t, len(sets), threads):
            got[k] = pool.execute(sets[k])

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    start.wait()
    t0 = time.perf_counter()
    for th in ts:
        th.join()
    rate = len(sets) / (time.perf_counter() - t0)
    return rate, same(dict(enumerate(got)), want), pool.loaded


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pte", default=None, help="default: the mobilenet_v2 test fixture")
    ap.add_argument("--sets", type=int, default=200)
    ap.add_argument("--engines", default="local,ray")
    ap.add_argument("--write", default=None, help="update this BENCHMARKS.md's section")
    args = ap.parse_args(argv)
    if args.pte is None:
        from tests.programs.fixtures import get_fixture

        args.pte = str(get_fixture("mobilenet_v2").pte_path)
    rng = np.random.default_rng(0)
    sets = [[rng.standard_normal((1, 3, 96, 96)).astype(np.float32)] for _ in range(args.sets)]
    load0, cores0 = os.getloadavg()[0], free_cores()
    want, seq_rate = sequential(args.pte, sets)
    rows = [("sequential, 1 method in 1 process", "-", f"{seq_rate:.1f}", "-", "-", "-")]
    with tempfile.TemporaryDirectory() as d:
        npz = os.path.join(d, "in.npz")
        np.savez(npz, **{f"set{k}_arg0": s[0] for k, s in enumerate(sets)})
        engines = [e for e in args.engines.split(",") if e]
        if "ray" in engines:
            import ray

            ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
        base = {}
        for engine in engines:
            for w in (1, 2):
                r = run_batch(args.pte, npz, workers=w, engine=engine, tier="fast")
                base.setdefault(engine, r.sets_per_s)
                scale = f"{r.sets_per_s / base[engine]:.2f}x"
                ok = "yes" if same(r.outputs, want) and not r.errors else "NO"
                rows.append((f"batch --engine {engine}", str(w), f"{r.sets_per_s:.1f}", scale,
                             f"{r.ready_seconds:.1f} s", ok))
                print(rows[-1], flush=True)
        if "ray" in engines:
            ray.shutdown()
    base = None
    for t in (1, 2, 4):
        rate, ok, loaded = bench_pool(args.pte, sets, want, t)
        base = base or rate
        rows.append((f"MethodPool, {t} calling thread(s)", str(loaded), f"{rate:.1f}",
                     f"{rate / base:.2f}x", "-", "yes" if ok else "NO"))
        print(rows[-1], flush=True)
    load1, cores1 = os.getloadavg()[0], free_cores()
    table = "\n".join(
        [f"MobileNetV2 (portable ExecuTorch export, input 1x3x96x96), fast tier, one "
         f"intra-op thread per worker/method, {args.sets} sets; `python "
         f"examples/bench_batch.py` on {time.strftime('%Y-%m-%d')} ({platform.machine()}, "
         f"{os.cpu_count()} cores, Python {platform.python_version()}). The machine was "
         f"shared: 1-min load average {load0:.1f} before, {load1:.1f} after; two busy "
         f"processes got {cores0:.2f} / {cores1:.2f} cores' worth of CPU before / after "
         "(2.00 when idle), which bounds what 2 workers can gain over 1.",
         "",
         "Batch sets/s counts from the moment every worker has loaded the program; start-up "
         "is spawning the workers (Ray: creating the actors; the Ray instance itself was "
         "started once beforehand), importing pyruntime and loading the program in each. "
         "Pool: executes/s of one process whose threads share a `MethodPool` (the fast "
         "tier's loop runs with the GIL released).",
         "",
         "| run | workers / methods | sets/s | vs 1 | start-up | outputs = sequential |",
         "|---|---|---|---|---|---|"]
        + [f"| {' | '.join(r)} |" for r in rows])
    print(table)
    if args.write:
        path = Path(args.write)
        text = path.read_text() if path.exists() else ""
        section = f"{START}\n## Server-side batch runs and the method pool\n\n{table}\n{END}"
        if START in text and END in text:
            text = text[:text.index(START)] + section + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
