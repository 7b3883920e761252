"""Soak: many executes, and many load/unload cycles per delegate bridge, in one process,
with resident memory and open file descriptors measured after a warm-up.

    python -m tests.soak            # the short runs tests/test_soak.py makes (a minute)
    python -m tests.soak --long     # 1,000,000 executes of an MLP, 10,000 of MobileNetV2,
                                    # 1,000 load/unload cycles per bridge (tens of minutes)

Each row: what ran, how many times, the resident-set growth from the end of the warm-up
to the end (and the largest growth seen on the way), and the descriptors then and now.
"""
from __future__ import annotations

import argparse
import gc
import os
import time
from dataclasses import dataclass

import numpy as np

import pyruntime


@dataclass
class Soak:
    what: str
    count: int
    seconds: float
    rss_growth: int  # bytes, end of warm-up -> end
    rss_peak_growth: int  # the largest growth seen at any sample
    fds_before: int
    fds_after: int
    extra: str = ""

    def row(self) -> str:
        return (f"{self.what:34s} {self.count:>9d} {self.seconds:8.1f} s  RSS "
                f"{self.rss_growth / 2**20:+7.2f} MiB (max {self.rss_peak_growth / 2**20:+.2f})"
                f"  fds {self.fds_before} -> {self.fds_after}  {self.extra}")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _soak(what, step, count, warmup, samples=50, extra=None) -> Soak:
    for _ in range(warmup):
        step()
    gc.collect()
    r0, f0, peak = rss(), fds(), 0
    every = max(1, count // samples)
    t = time.perf_counter()
    for k in range(count):
        step()
        if k % every == every - 1:
            peak = max(peak, rss() - r0)
    dt = time.perf_counter() - t
    gc.collect()
    grow = rss() - r0
    return Soak(what, count, dt, grow, max(peak, grow), f0, fds(), extra() if extra else "")


def executes(fx, count, warmup, threads=None) -> Soak:
    """``count`` executes of one loaded method (fast tier) on the fixture's inputs."""
    m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward",
                                                                         threads=threads)
    inputs = fx.calls[0]
    want = fx.expected[0][0]
    m.execute(inputs)
    r = _soak(f"execute {fx.name}", lambda: m.execute(inputs), count, warmup)
    got = m.execute(inputs)[0]  # still right at the end
    tol = 1e-4 * max(1.0, float(np.abs(want).max()))
    assert np.abs(got.astype(np.float64) - want).max() <= tol, fx.name
    return r


def cycles(name, pte_path, inputs, count, warmup, extra=None) -> Soak:
    """``count`` times: load the program and its method, execute once, release all."""
    rt = pyruntime.Runtime.get()

    def cycle():
        m = rt.load_program(pte_path).load_method("forward")
        m.execute(inputs)
        m.destroy()

    return _soak(f"load/run/unload {name}", cycle, count, warmup, extra=extra)


def bridges():
    """(bridge name, pte, inputs, extra-report function or None) for each bridge whose
    parts are installed here, the others named in the second list."""
    have, missing = [], []

    def add(name, get, extra=None):
        try:
            fx = get()
        except Exception as e:  # noqa: BLE001 - a bridge whose vendor part is absent
            missing.append(f"{name}: {type(e).__name__}: {str(e)[:120]}")
            return
        calls = fx.calls if hasattr(fx, "calls") else None
        inputs = calls[0] if calls else fx.runs[0][1]
        have.append((name, fx.pte_path, inputs, extra))

    from tests.delegates import xnnpack_fixtures as X
    add("XnnpackBackend", lambda: X.get_fixture("mlp"))
    from tests.delegates import vulkan_fixtures as V
    add("VulkanBackend", lambda: V.get_fixture("mlp"))
    from tests.delegates import qnn_fixtures as Q

    def qnn_contexts():
        from pyruntime.delegates.qnn import context
        return f"live QNN contexts {context.live_contexts()}"
    add("QnnBackend", lambda: Q.get_fixture("mlp_fp16"), qnn_contexts)
    from tests.delegates import coreml_fixtures as C
    add("CoreMLBackend", lambda: C.get_fixture("mlp"))
    from tests.delegates import ethosu_fixtures as E
    add("EthosUBackend", lambda: E.get_fixture("mlp_u55"))
    return have, missing


def run(long: bool = False) -> list[Soak]:
    from tests.programs.fixtures import get_fixture

    n_small, n_big, n_cycles = (1_000_000, 10_000, 1_000) if long else (20_000, 200, 40)
    rows = [executes(get_fixture("mlp"), n_small, n_small // 10),
            executes(get_fixture("mobilenet_v2"), n_big, max(20, n_big // 10))]
    have, missing = bridges()
    for name, pte, inputs, extra in have:
        rows.append(cycles(name, pte, inputs, n_cycles, max(5, n_cycles // 10), extra))
    for m in missing:
        print(f"not run: {m}")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long", action="store_true", help="the issue's full counts")
    args = ap.parse_args()
    for r in run(args.long):
        print(r.row(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
