"""Latency of XNNPACK-delegated programs: pyruntime vs executorch.runtime, same process.

    python -m tests.delegates.bench_xnnpack [names] [--seconds S]

Both runtimes drive the same XNNPACK library (the executorch wheel's) with the
same thread count; runs are interleaved (ours, theirs, ours, ...) and the table
shows medians and the ratio ours/theirs, plus the time of ours spent inside the
XnnpackBackend calls (the rest is the loop and the non-delegated kernels).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

DEFAULT = ("mobilenet_v2", "resnet18", "vit_tiny")


def bench(name: str, seconds: float = 3.0, tier: str = "reference") -> tuple[float, float, dict]:
    import torch
    from executorch.runtime import Runtime as EtRuntime

    import pyruntime
    from pyruntime.delegates import backend_registry
    from tests.delegates.xnnpack_fixtures import get_fixture

    fx = get_fixture(name)
    ours = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward", tier=tier)
    theirs = EtRuntime.get().load_program(fx.pte_path).load_method("forward")
    x_np = fx.calls[0]
    x_t = [torch.from_numpy(a) for a in x_np]
    for _ in range(3):  # warm up both (weights packed at load; first runs fill caches)
        ours.execute(x_np)
        theirs.execute(x_t)
    backend = backend_registry.get("XnnpackBackend")
    inner = []  # seconds inside XnnpackBackend.execute during the current run of ours
    real = backend.execute

    def timed(h, args):  # ~0.3 us per delegate call: noise next to the runs
        t = time.perf_counter()
        real(h, args)
        inner.append(time.perf_counter() - t)

    t_ours, t_theirs, t_inner = [], [], []
    backend.execute = timed
    try:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline or len(t_ours) < 10:
            inner.clear()
            t0 = time.perf_counter()
            ours.execute(x_np)
            t1 = time.perf_counter()
            theirs.execute(x_t)
            t2 = time.perf_counter()
            t_ours.append(t1 - t0)
            t_theirs.append(t2 - t1)
            t_inner.append(sum(inner))
        calls = len(inner)
    finally:
        del backend.execute
    a = np.asarray(ours.execute(x_np)[0])
    b = theirs.execute(x_t)[0].numpy()
    info = {"runs": len(t_ours), "max_abs_diff": float(np.abs(a - b).max()),
            "threads": backend.threads, "delegates_s": statistics.median(t_inner),
            "delegate_calls": calls}
    return statistics.median(t_ours), statistics.median(t_theirs), info


def _inner(info) -> str:
    if not info["delegate_calls"]:  # the loop called a handle bound before we wrapped it
        return "n/a"
    return f"{info['delegates_s'] * 1e3:.3f} ({info['delegate_calls']} calls)"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--tier", default="reference", choices=("reference", "fast"))
    args = ap.parse_args(argv)
    print(f"{'program':<16} {'pyruntime ms':>13} {'executorch ms':>14} {'ratio':>6} "
          f"{'in XNNPACK calls ms':>20}  runs")
    for name in args.names:
        ours, theirs, info = bench(name, args.seconds, args.tier)
        print(f"{name:<16} {ours * 1e3:13.3f} {theirs * 1e3:14.3f} {ours / theirs:6.3f} "
              f"{_inner(info):>20}  {info['runs']} "
              f"(threads {info['threads']}, max diff {info['max_abs_diff']:.1e})")


if __name__ == "__main__":
    main()
