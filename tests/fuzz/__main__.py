"""Longer fuzz campaigns than the suite runs: ``python -m tests.fuzz --cases N``.

    python -m tests.fuzz --cases 100000                  # every target, N cases each
    python -m tests.fuzz --cases 20000 --target fast --jobs 2 --start 50000

Prints one summary line per target (ran / loaded / rejected / crashes / hangs /
other exceptions) and every finding with its case number; a finding
reproduces with ``campaign(target, start=case, count=1)``. Exit status 1 if
anything but ran/loaded/rejected happened.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from tests.fuzz import Report, campaign
from tests.fuzz.targets import TARGETS


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000, help="cases per target")
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--target", action="append", choices=sorted(TARGETS),
                    help="target(s) to run (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes per target")
    ap.add_argument("--chunk", type=int, default=5000, help="cases per worker run")
    args = ap.parse_args(argv)
    bad = False
    for name in args.target or sorted(TARGETS):
        t0 = time.perf_counter()
        chunks = [(s, min(args.chunk, args.start + args.cases - s))
                  for s in range(args.start, args.start + args.cases, args.chunk)]
        total = Report(name)
        with ThreadPoolExecutor(max(1, args.jobs)) as ex:
            for r in ex.map(lambda c: campaign(name, c[0], c[1]), chunks):
                total.merge(r)
                print(f"  {r.summary()}", file=sys.stderr, flush=True)
        print(f"{total.summary()} ({time.perf_counter() - t0:.0f} s)", flush=True)
        for case, kind, detail in total.findings:
            print(f"  case {case}: {kind}: {detail}", flush=True)
        bad |= bool(total.findings)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
