"""``pyruntime bench FILE``: time pyruntime and executorch.runtime side by side.

Both runtimes load the same program and run the same inputs in one process,
in interleaved rounds; medians are reported with their ratio (ours / theirs,
below 1 means pyruntime is faster). executorch is optional: without it only
our numbers are printed. This module is the only runtime-side code that may
import executorch or torch, and only when asked to compare.
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from pyruntime.program import TensorInfo
from pyruntime.runtime import Runtime


@dataclass
class BenchResult:
    file: str
    method: str
    tier: str
    instructions: int
    load_cold_s: float
    load_warm_s: float
    ours_s: float
    theirs_s: float | None = None
    theirs_load_s: float | None = None
    threads2_per_s: float | None = None
    threads: int = 1
    extra: dict = field(default_factory=dict)
    math: str = "exact"  # the mode pyruntime ran (pyruntime.mathmode)

    @property
    def ratio(self):
        return None if self.theirs_s is None else self.ours_s / self.theirs_s


def _inputs(meta, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for info in meta.inputs:
        if not isinstance(info, TensorInfo):
            out.append(info.value)
        elif info.dtype == np.bool_:
            out.append(rng.random(info.sizes) > 0.5)
        elif info.dtype.kind in "iu":
            out.append(np.zeros(info.sizes, info.dtype))
        else:
            out.append(rng.standard_normal(info.sizes).astype(info.dtype))
    return out


def _executorch_method(path, method):
    try:
        import torch
        from executorch.runtime import Runtime as ETRuntime
    except ImportError:
        return None, None, None
    for mod in ("executorch.kernels.quantized", "executorch.extension.llm.custom_ops.custom_ops"):
        try:
            __import__(mod)
        except Exception:  # noqa: BLE001 - optional op libraries
            pass
    t = time.perf_counter()
    try:
        m = ETRuntime.get().load_program(str(path)).load_method(method)
    except Exception as e:  # noqa: BLE001 - e.g. a backend executorch's wheel lacks (Vulkan)
        print(f"note: executorch.runtime cannot load {path} ({type(e).__name__}: "
              f"{str(e).splitlines()[0] if str(e) else ''}); timing pyruntime alone",
              file=sys.stderr)
        return None, None, None
    return m, time.perf_counter() - t, torch


def _time(fn, rounds):
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts


def bench(path, method="forward", tier="fast", rounds=None, compare=True,
          min_time=2.0, threads2=True, threads=None, math=None) -> BenchResult:
    rt = Runtime.get()
    t = time.perf_counter()
    prog = rt.load_program(path)
    m = prog.load_method(method, tier=tier, threads=threads, math=math)
    cold = time.perf_counter() - t
    m.wait_compiled()  # kernels a background process still compiles: time compiled code
    t = time.perf_counter()
    prog2 = rt.load_program(path)
    prog2.load_method(method, tier=tier, threads=threads, math=m.math)
    warm = time.perf_counter() - t
    meta = prog.metadata(method)
    args = _inputs(meta)
    m.execute(args)  # warm-up
    one = min(_time(lambda: m.execute(args), 3))
    et, et_load, torch = _executorch_method(path, method) if compare else (None, None, None)
    if et is not None:
        targs = [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
        et.execute(targs)
        one = max(one, min(_time(lambda: et.execute(targs), 3)))
    if rounds is None:
        rounds = int(max(5, min(2000, min_time / max(one, 1e-6) / 2)))
    ours, theirs = [], []
    chunk = max(1, rounds // 10)
    for _ in range(0, rounds, chunk):  # interleaved so drift affects both alike
        ours += _time(lambda: m.execute(args), chunk)
        if et is not None:
            theirs += _time(lambda: et.execute(targs), chunk)
    res = BenchResult(str(path), method, tier, meta.instruction_count, cold, warm,
                      statistics.median(ours), statistics.median(theirs) if theirs else None,
                      et_load, threads=m.threads, math=m.math)
    if threads2:
        res.threads2_per_s = _two_threads(prog, method, tier, args, min_time / 2, m.math)
    return res


def _two_threads(prog, method, tier, args, seconds, math="exact"):
    """Executes per second with two threads, each running its own loaded Method
    (one intra-op thread each, so the two threads are the parallelism)."""
    import threading

    methods = [prog.load_method(method, tier=tier, threads=1, math=math) for _ in range(2)]
    counts = [0, 0]
    stop = time.perf_counter() + seconds

    def work(i):
        while time.perf_counter() < stop:
            methods[i].execute(args)
            counts[i] += 1

    ths = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    t = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    return sum(counts) / (time.perf_counter() - t)


def _fmt(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def report(r: BenchResult, out=None) -> None:
    out = sys.stdout if out is None else out
    w = out.write
    w(f"{r.file} [{r.method}] tier={r.tier}, math={r.math}, threads={r.threads}, "
      f"{r.instructions} instructions\n")
    w(f"  load: cold {_fmt(r.load_cold_s)}, warm {_fmt(r.load_warm_s)}"
      f"{'' if r.theirs_load_s is None else f', executorch.runtime {_fmt(r.theirs_load_s)}'}\n")
    w(f"  execute (median): pyruntime {_fmt(r.ours_s)}")
    if r.theirs_s is not None:
        w(f", executorch.runtime {_fmt(r.theirs_s)}, ratio {r.ratio:.3f}x")
    w("\n")
    if r.instructions:
        w(f"  per instruction: pyruntime {_fmt(r.ours_s / r.instructions)}"
          f"{'' if r.theirs_s is None else f', executorch.runtime {_fmt(r.theirs_s / r.instructions)}'}\n")
    if r.threads2_per_s is not None:
        w(f"  2 threads: {r.threads2_per_s:.1f} executes/s total "
          f"(1 thread: {1 / r.ours_s:.1f}/s)\n")
