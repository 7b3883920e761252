"""A fixed-rate control loop around a policy program, as a robotics stack runs one.

    python examples/control_loop.py [--rate 500] [--seconds 5] [--policy policy.pte]

Each period the loop reads a (simulated) sensor into a preallocated buffer, hands it to
the realtime runner (``pyruntime.realtime``: the policy on its own thread, the GIL
released while it runs), takes the newest action without waiting, and sleeps to the
next period boundary. At the end it prints the loop's deadline misses and jitter (how
late each period started) and the policy's own latency. Without ``--policy`` it
exports a small MLP policy (17 joint readings -> 6 torques) with ExecuTorch first
(torch + executorch: ``pip install -e '.[test]'``); running it needs neither.
"""
from __future__ import annotations

import argparse
import array
import math
import time
from pathlib import Path

import numpy as np

from pyruntime.realtime import RealtimeRunner

OUT = Path(__file__).resolve().parent / "out"


def export_policy(path: Path) -> None:
    import torch
    from executorch.exir import to_edge

    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(17, 64), torch.nn.Tanh(),
                                 torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                 torch.nn.Linear(64, 6)).eval()
    ep = torch.export.export(policy, (torch.zeros(1, 17),))
    path.write_bytes(to_edge(ep).to_executorch().buffer)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=500.0, help="loop rate in Hz")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--policy", type=Path, default=None, help="a .pte taking float [1, 17]")
    ap.add_argument("--cpu", type=int, default=None, help="pin the policy's thread to a CPU")
    args = ap.parse_args()
    pte = args.policy
    if pte is None:
        OUT.mkdir(exist_ok=True)
        pte = OUT / "control_policy.pte"
        if not pte.exists():
            print(f"exporting {pte.name} with ExecuTorch ...")
            export_policy(pte)

    period = 1.0 / args.rate
    sensor = array.array("f", [0.0] * 17)  # what a driver fills in place each period
    late, missed, results, latencies = [], 0, 0, []
    with RealtimeRunner(pte, cpu=args.cpu) as rt:  # loaded, warmed up, gc frozen
        t0 = time.perf_counter()
        nxt = t0 + period
        k = 0
        while nxt - t0 < args.seconds:
            left = nxt - time.perf_counter()
            if left > 0:  # sleep, never spin: a spinning Python thread holds the GIL
                time.sleep(left)  # the policy's thread needs between its runs
            start = time.perf_counter()
            late.append(start - nxt)
            for j in range(17):  # the sensor: joint angles of a slow sine sweep
                sensor[j] = math.sin(0.01 * k + j)
            rt.submit([sensor])
            r = rt.latest()  # the newest action, never waited for
            if r is not None:
                results += 1
                latencies.append(r.latency_s)
                action = r.outputs[0]  # read-only, valid until the next latest()
                assert action.shape == (1, 6)
            k += 1
            nxt += period
            if time.perf_counter() > nxt:  # this period's work ran into the next one
                missed += 1
                nxt += period * math.ceil((time.perf_counter() - nxt) / period)
        runs, replaced = rt.runs, rt.replaced
    late_us = np.asarray(late) * 1e6
    lat_us = np.asarray(latencies) * 1e6
    print(f"{k} periods at {args.rate:g} Hz in {args.seconds:g} s: {missed} deadline misses, "
          f"jitter {late_us.std():.1f} us (start late by p50 {np.median(late_us):.1f} us, "
          f"max {late_us.max():.1f} us)")
    print(f"policy: {runs} runs ({replaced} inputs superseded before they ran), "
          f"submit-to-result latency p50 {np.median(lat_us):.1f} us, "
          f"p99 {np.percentile(lat_us, 99):.1f} us, {results} periods used a result")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
