"""Tail latency of pyruntime's execute(out=) vs executorch.runtime's execute, side by side.

    python examples/bench_latency.py                       # the table on stdout
    python examples/bench_latency.py --seconds 2 --update BENCHMARKS.md

Each row is ``pyruntime latency --vs-executorch`` (pyruntime.latency.measure) on an
ExecuTorch-exported program of the test fixtures: back to back, idle and
beside one busy process (``--load 1``), both runtimes interleaved in half-second slices
on the same inputs (threads=1; XNNPACK rows one per core, as executorch's XNNPACK pool).
Ours is ``execute(inputs, out=...)`` on the fast tier;
executorch.runtime has no such call (it clones every output). Ratio = ours / theirs
(below 1: our tail is shorter). Needs torch + executorch (the fixtures and the
reference), not pyruntime's runtime.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("PYRUNTIME_COMPILE", "sync")  # time compiled kernels: compile at load

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BEGIN, END = "<!-- latency-bench:start -->", "<!-- latency-bench:end -->"
# (label, fixture module, fixture name, input note)
PROGRAMS = [
    ("mlp", "tests.programs.fixtures", "mlp", "4x32"),
    ("cnn_bn", "tests.programs.fixtures", "cnn_bn", "2x3x32x32"),
    ("mobilenet_v2", "tests.programs.fixtures", "mobilenet_v2", "1x3x96x96"),
    ("xnnpack:mlp", "tests.delegates.xnnpack_fixtures", "mlp", "4x32"),
    ("xnnpack:cnn_bn", "tests.delegates.xnnpack_fixtures", "cnn_bn", "2x3x32x32"),
    ("xnnpack:mobilenet_v2", "tests.delegates.xnnpack_fixtures", "mobilenet_v2", "1x3x96x96"),
]


def _us(v: float) -> str:
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.1f} us"


def rows(seconds: float, loads: list[int], only: list[str] | None):
    import importlib

    from pyruntime.latency import measure

    for label, module, name, shape in PROGRAMS:
        if only and label not in only:
            continue
        path = importlib.import_module(module).get_fixture(name).pte_path
        # executorch.runtime's portable kernels are single-threaded and its XNNPACK uses a
        # pool of one thread per core: ours gets the same
        threads = (os.cpu_count() or 1) if label.startswith("xnnpack:") else 1
        for load in loads:
            res = measure(str(path), seconds=seconds, threads=threads, load=load,
                          vs_executorch=True)
            yield label, shape, load, res["pyruntime"], res["executorch"]


def table(seconds: float, loads: list[int], only: list[str] | None) -> str:
    head = ("| program | input | load | ours p50 | ours p99 | ours max | executorch p50 | "
            "executorch p99 | executorch max | p99 ratio |\n|---|---|---|---|---|---|---|---|---|---|\n")
    body = []
    for label, shape, load, a, b in rows(seconds, loads, only):
        body.append(f"| {label} | {shape} | {'idle' if load == 0 else f'{load} busy'} | "
                    f"{_us(a.p50_us)} | {_us(a.p99_us)} | {_us(a.max_us)} | {_us(b.p50_us)} | "
                    f"{_us(b.p99_us)} | {_us(b.max_us)} | {a.p99_us / b.p99_us:.2f} |")
        print(body[-1], file=sys.stderr, flush=True)
    return head + "\n".join(body) + "\n"


def section(seconds: float, loads: list[int], only: list[str] | None) -> str:
    t = table(seconds, loads, only)
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{BEGIN}\n## Latency: execute(out=) vs executorch.runtime (issue 29)\n\n"
            f"`python examples/bench_latency.py --seconds {seconds:g}` on "
            f"{time.strftime('%Y-%m-%d')} ({cpu}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}): `pyruntime latency --vs-executorch` per row, back "
            "to back, threads=1 (portable rows: executorch's portable kernels are "
            "single-threaded) or one per core (XNNPACK rows: executorch's XNNPACK "
            "threadpool size), each runtime measured for the same time in alternating "
            "half-second slices; `1 busy` = beside one spinning process (`--load 1`). Ours: "
            "`execute(inputs, out=...)`, fast tier; executorch.runtime clones every output. "
            "Ratio = our p99 / executorch's p99.\n\n" + t + f"{END}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per row and runtime")
    ap.add_argument("--loads", default="0,1", help="busy background processes, comma-separated")
    ap.add_argument("--only", default="", help="comma-separated program labels")
    ap.add_argument("--update", metavar="BENCHMARKS.md", help="replace the section in this file")
    a = ap.parse_args(argv)
    loads = [int(x) for x in a.loads.split(",") if x != ""]
    text = section(a.seconds, loads, [x for x in a.only.split(",") if x] or None)
    if not a.update:
        print(text)
        return 0
    doc = Path(a.update)
    old = doc.read_text() if doc.exists() else ""
    pat = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END) + "\n?", re.S)
    doc.write_text(pat.sub(lambda _: text, old) if pat.search(old) else old.rstrip("\n") + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
