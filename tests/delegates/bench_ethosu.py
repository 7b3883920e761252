"""Latency of Ethos-U programs on our NPU model, per operation kind.

    python -m tests.delegates.bench_ethosu [names] [--runs N]

Loads each fixture (``ethosu_fixtures``: exported once, cached), runs the whole
program ``N`` times through pyruntime and prints the median, the load time (the
weight decoding happens there) and where a run's time goes by operation kind.
"""
from __future__ import annotations

import argparse
import statistics
import time

DEFAULT = ("mlp_u55", "cnn_u55", "mnv2_u55", "mlp_u85", "cnn_u85", "mnv2_u85")


def bench(name: str, runs: int = 5) -> dict:
    import pyruntime
    from pyruntime.delegates.ethosu.backend import EthosUBackend
    from tests.delegates.ethosu_fixtures import get_fixture

    fx = get_fixture(name)
    handles = []
    real_init = EthosUBackend.init

    def init(self, *a, **k):
        h = real_init(self, *a, **k)
        handles.append(h)
        return h

    EthosUBackend.init = init
    try:
        t = time.perf_counter()
        m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward")
        load = time.perf_counter() - t
    finally:
        EthosUBackend.init = real_init
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        m.execute(fx.inputs)
        times.append(time.perf_counter() - t)
    per_kind: dict = {}
    h = handles[0]
    for op in h.ops:
        t = time.perf_counter()
        h.executor.run(op, h.regions)
        k = op.kind + (f".{op.attrs['mode']}" if "mode" in op.attrs else "")
        per_kind[k] = per_kind.get(k, 0.0) + time.perf_counter() - t
    return {"median": statistics.median(times), "load": load, "kinds": per_kind}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    for name in args.names:
        r = bench(name, args.runs)
        kinds = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in
                          sorted(r["kinds"].items(), key=lambda kv: -kv[1]))
        print(f"{name:10s} run {r['median'] * 1e3:7.1f} ms   load {r['load']:.2f} s   "
              f"(ms by kind: {kinds})")


if __name__ == "__main__":
    main()
