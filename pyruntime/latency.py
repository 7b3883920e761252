"""``pyruntime latency MODEL.pte``: the tail latency of one method, back to back or at a
fixed rate, optionally beside busy processes and next to ``executorch.runtime``.

    pyruntime latency policy.pte --rate 500 --seconds 10 --load 1 --vs-executorch

Each run is ``execute(inputs, out=...)`` into preallocated outputs (the call a control
loop makes). Reported: p50, p90, p99, p99.9 and max latency (microseconds); at a fixed
rate also the jitter (standard deviation of the start-time error: how late each run
starts after its period boundary) and deadline misses (runs that end after the next
period starts; the schedule then resumes at the next boundary). ``--vs-executorch``
measures ``executorch.runtime`` on the same program and inputs the same way, in
alternating slices of the measurement, and prints the ratios. ``--json``: one JSON
object with the keys ``runs, p50_us, p90_us, p99_us, p999_us, max_us, jitter_us,
missed`` (jitter and misses are null back to back), and ``executorch`` with the same
keys when asked.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

KEYS = ("runs", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "jitter_us", "missed")
SLICE_S = 0.5  # seconds per alternating slice with --vs-executorch


@dataclass
class Latency:
    runs: int
    p50_us: float
    p90_us: float
    p99_us: float
    p999_us: float
    max_us: float
    jitter_us: float | None
    missed: int | None

    def to_dict(self) -> dict:
        return asdict(self)


class _Recorder:
    """Latencies and start errors of one runtime, gathered over several slices."""

    def __init__(self):
        self.lat, self.err, self.missed = [], [], 0

    def slice(self, step, seconds: float, period: float | None) -> None:
        lat, err = self.lat, self.err
        now = time.perf_counter
        end = now() + seconds
        if period is None:
            while True:
                t0 = now()
                if t0 >= end:
                    return
                step()
                lat.append(now() - t0)
        nxt = now() + period
        while nxt < end:
            while True:  # sleep most of the wait, spin the last part for precision
                left = nxt - now()
                if left <= 0:
                    break
                if left > 2e-3:
                    time.sleep(left - 1e-3)
            t0 = now()
            step()
            t1 = now()
            lat.append(t1 - t0)
            err.append(t0 - nxt)
            nxt += period
            if t1 > nxt:  # ended after the next period began: a missed deadline
                self.missed += 1
                nxt += period * (int((t1 - nxt) / period) + 1)

    def result(self, fixed_rate: bool) -> Latency:
        us = np.asarray(self.lat) * 1e6
        if not us.size:
            raise ValueError("no run finished in the time given")
        p50, p90, p99, p999 = np.percentile(us, [50, 90, 99, 99.9])
        jitter = float(np.std(np.asarray(self.err) * 1e6)) if fixed_rate and self.err else None
        return Latency(int(us.size), float(p50), float(p90), float(p99), float(p999),
                       float(us.max()), jitter, self.missed if fixed_rate else None)


def _busy(k: int) -> list:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]


def measure(path, method="forward", inputs=None, rate=None, seconds=5.0, threads=1,
            load=0, vs_executorch=False, warmup_s=0.5, tier="fast", math=None) -> dict:
    """{"pyruntime": Latency, "executorch": Latency or absent}; see the module doc."""
    from pyruntime.bench import _executorch_method, _inputs
    from pyruntime.runtime import Runtime

    prog = Runtime.get().load_program(path)
    m = prog.load_method(method, tier=tier, threads=threads, math=math)
    m.wait_compiled()
    meta = prog.metadata(method)
    if inputs is None:
        args = _inputs(meta)
    else:
        from pyruntime.devtools.inputs import read_input_sets

        args = read_input_sets(inputs, meta)[0]
    first = m.execute(args)
    out = [o.copy() if isinstance(o, np.ndarray) else None for o in first]

    def ours():
        m.execute(args, out=out)

    steps = {"pyruntime": ours}
    if vs_executorch:
        et, _, torch = _executorch_method(path, method)
        if et is None:
            raise RuntimeError("executorch.runtime cannot run this program here (see above)")
        targs = [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
        steps["executorch"] = lambda: et.execute(targs)
    period = None if rate is None else 1.0 / rate
    procs = _busy(load)
    try:
        for step in steps.values():  # warm-up, under the same load
            end = time.perf_counter() + warmup_s
            while time.perf_counter() < end:
                step()
        recs = {name: _Recorder() for name in steps}
        slices = max(1, int(round(seconds / SLICE_S))) if vs_executorch else 1
        for _ in range(slices):
            for name, step in steps.items():
                recs[name].slice(step, seconds / slices, period)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return {name: r.result(period is not None) for name, r in recs.items()}


def add_parser(sub) -> None:
    p = sub.add_parser("latency", help="tail latency of a method (back to back or at a rate)")
    p.add_argument("file")
    p.add_argument("--method", default="forward")
    p.add_argument("--inputs", help=".npz of the inputs (default: random of the declared shapes)")
    p.add_argument("--rate", type=float, default=None, metavar="HZ",
                   help="run at this fixed rate (default: back to back)")
    p.add_argument("--seconds", type=float, default=5.0, metavar="S")
    p.add_argument("--threads", type=int, default=1, metavar="N", help="intra-op threads")
    p.add_argument("--load", type=int, default=0, metavar="K",
                   help="K busy background processes while measuring")
    p.add_argument("--vs-executorch", action="store_true",
                   help="measure executorch.runtime the same way, interleaved")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def cli(args, stdout=None) -> int:
    stdout = stdout or sys.stdout
    for name, v, ok in (("--rate", args.rate, args.rate is None or args.rate > 0),
                        ("--seconds", args.seconds, args.seconds > 0),
                        ("--threads", args.threads, args.threads >= 1),
                        ("--load", args.load, args.load >= 0)):
        if not ok:
            print(f"error: {name} must be positive, got {v}", file=sys.stderr)
            return 2
    try:
        res = measure(args.file, args.method, args.inputs, args.rate, args.seconds, args.threads,
                      args.load, args.vs_executorch)
    except (RuntimeError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    ours = res["pyruntime"]
    if args.json:
        obj = ours.to_dict()
        if "executorch" in res:
            obj["executorch"] = res["executorch"].to_dict()
        stdout.write(json.dumps(obj) + "\n")
        return 0
    mode = "back to back" if args.rate is None else f"at {args.rate:g} Hz"
    stdout.write(f"{args.file} [{args.method}]: {mode}, {args.seconds:g} s, threads="
                 f"{args.threads}, {args.load} busy process(es)\n")
    stdout.write(f"{'':12s}" + "".join(f"{k:>11s}" for k in KEYS) + "\n")

    def row(label, vals):
        cells = []
        for v in vals:
            cells.append(f"{'-':>11s}" if v is None else f"{v:11d}" if isinstance(v, int)
                         else f"{v:11.1f}" if isinstance(v, float) else f"{v:>11s}")
        stdout.write(f"{label:12s}" + "".join(cells) + "\n")

    row("pyruntime", [getattr(ours, k) for k in KEYS])
    if "executorch" in res:
        theirs = res["executorch"]
        row("executorch", [getattr(theirs, k) for k in KEYS])
        ratios = []
        for k in KEYS:
            a, b = getattr(ours, k), getattr(theirs, k)
            ratios.append(None if k in ("runs", "missed") or a is None or not b
                          else f"{a / b:.2f}x")
        row("ratio", ratios)
    return 0
