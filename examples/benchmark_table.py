"""Write BENCHMARKS.md: ``pyruntime bench`` on the parity models, both tiers.

    python examples/benchmark_table.py [--rounds N] [--out BENCHMARKS.md]

Programs come from the test fixtures (exported by ExecuTorch, cached in
tests/.fixtures). Every row times pyruntime and executorch.runtime in the same
process on the same inputs (interleaved rounds, medians).
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("PYRUNTIME_COMPILE", "sync")  # time compiled kernels: compile at load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyruntime.bench import bench  # noqa: E402
from tests.programs.fixtures import get_fixture  # noqa: E402
from tests.programs.small_programs import small_program  # noqa: E402

MODELS = ["chain400", "mlp", "cnn_bn", "mobilenet_v2", "resnet18", "vit_tiny", "audio_encoder",
          "llama", "llama_kv", "llama_sdpa_kv", "quant_cnn",
          "xnnpack:mobilenet_v2", "xnnpack:resnet18", "xnnpack:vit_tiny"]


def _path(name):
    if name == "chain400":
        return small_program(name)[0]
    if name.startswith("xnnpack:"):  # the same model lowered to ExecuTorch's XnnpackBackend
        from tests.delegates.xnnpack_fixtures import get_fixture as xnnpack_fixture

        return xnnpack_fixture(name.split(":", 1)[1]).pte_path
    return get_fixture(name).pte_path


def _ms(s):
    return "-" if s is None else (f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms")


# ---- vs ExecuTorch XNNPACK (issue 16) ------------------------------------------------------
# Our fast tier on the portable .pte against executorch.runtime on the same model lowered with
# XnnpackPartitioner, threads=1 and threads=2 on both sides. Each (model, threads) pair runs in
# its own process (ExecuTorch's threadpool size is set once, before anything loads), both
# runtimes in that process, interleaved rounds, medians of CPU time (process_time: steadier
# on a shared host) and of wall time.
VS_XNNPACK = ["mobilenet_v2@224", "resnet18@224", "vit_tiny", "audio_encoder", "mobilenet_v2",
              "resnet18"]


def _xnnpack_pair(name):
    """(portable .pte, XNNPACK .pte, inputs) of ``name`` (a parity fixture, or ``model@224``:
    the same model exported at 224x224, cached next to the fixtures)."""
    if "@" not in name:
        from tests.delegates.xnnpack_fixtures import get_fixture as xnnpack_fixture

        fx = get_fixture(name)
        return fx.pte_path, xnnpack_fixture(name).pte_path, fx.calls[0]
    model, res = name.split("@")
    res = int(res)
    cache = Path(os.environ.get("PYRUNTIME_FIXTURES") or ROOT / "tests" / ".fixtures")
    paths = [cache / f"bench{res}_{model}_{kind}.pte" for kind in ("portable", "xnnpack")]
    if not all(p.exists() for p in paths):
        import torch
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import \
            XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        from tests.programs import models

        m = getattr(models, f"make_{model}")(res).eval()
        ep = torch.export.export(m, (torch.randn(1, 3, res, res),))
        for path, parts in zip(paths, ([], [XnnpackPartitioner()])):
            prog = to_edge_transform_and_lower(ep, partitioner=parts).to_executorch()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(prog.buffer)
    x = __import__("numpy").random.default_rng(0).standard_normal((1, 3, res, res))
    return paths[0], paths[1], [x.astype("float32")]


def _vs_xnnpack_one(name, threads, rounds):
    """In this process: {"ours"/"fast"/"theirs": (cpu s, wall s)} medians for one model and
    thread count (ours: math="exact", fast: math="fast"; ExecuTorch's threadpool must not
    have been used yet)."""
    import statistics
    import time

    import executorch.extension.pybindings.portable_lib as et_lib
    import torch
    from executorch.runtime import Runtime as ETRuntime

    import pyruntime

    portable, xnn, inputs = _xnnpack_pair(name)
    et_lib._unsafe_reset_threadpool(threads)
    theirs_m = ETRuntime.get().load_program(str(xnn)).load_method("forward")
    prog = pyruntime.Runtime.get().load_program(str(portable))
    ours_m = prog.load_method("forward", tier="fast", threads=threads)
    fast_m = prog.load_method("forward", tier="fast", threads=threads, math="fast")
    tin = [torch.from_numpy(x) for x in inputs]
    fns = {"ours": lambda: ours_m.execute(inputs), "fast": lambda: fast_m.execute(inputs),
           "theirs": lambda: theirs_m.execute(tin)}
    times = {k: ([], []) for k in fns}
    for f in fns.values():
        f()
    for _ in range(rounds):
        for k, f in fns.items():
            c, w = time.process_time(), time.perf_counter()
            f()
            times[k][0].append(time.process_time() - c)
            times[k][1].append(time.perf_counter() - w)
    return {k: (statistics.median(c), statistics.median(w)) for k, (c, w) in times.items()}


def vs_xnnpack(names=VS_XNNPACK, rounds=20, threads=(1, 2)):
    """Rows (name, threads, {"ours"/"theirs": (cpu, wall)}), one subprocess per row."""
    import json
    import subprocess

    rows = []
    for name in names:
        for th in threads:
            code = ("import json, sys; sys.path.insert(0, %r); "
                    "from examples.benchmark_table import _vs_xnnpack_one; "
                    "print('RESULT', json.dumps(_vs_xnnpack_one(%r, %d, %d)))"
                    % (str(ROOT), name, th, rounds))
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               cwd=str(ROOT))
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if not line:
                print(f"vs xnnpack {name} threads={th}: failed\n{p.stderr[-2000:]}",
                      file=sys.stderr)
                continue
            r = json.loads(line[0][7:])
            rows.append((name, th, r))
            print(f"{name:18s} threads={th} exact cpu {_ms(r['ours'][0]):>9s} | fast cpu "
                  f"{_ms(r['fast'][0]):>9s} | xnnpack cpu {_ms(r['theirs'][0]):>9s} | ratio "
                  f"exact {r['ours'][0] / r['theirs'][0]:.2f} fast "
                  f"{r['fast'][0] / r['theirs'][0]:.2f}", flush=True)
    return rows


def vs_xnnpack_lines(rows):
    lines = [
        "",
        "## vs ExecuTorch XNNPACK",
        "",
        "pyruntime's fast tier on the portable `.pte` against `executorch.runtime` on the same",
        "model lowered with `XnnpackPartitioner` (`@224`: exported at 224x224 by this script;",
        "the others are the parity fixtures' sizes). threads=N on both sides (ExecuTorch's",
        "threadpool reset to N before loading); one process per row, interleaved rounds,",
        "medians. CPU = `time.process_time` (all threads of the process), the steadier figure",
        "on a shared host; ratio = pyruntime / XNNPACK. exact: `math=\"exact\"` (the",
        "default, executorch.runtime's bits); fast: `math=\"fast\"` (FMA, vector",
        "transcendentals; docs/TIERS.md).",
        "",
        "| program | threads | exact CPU | fast CPU | XNNPACK CPU | ratio exact | ratio fast | "
        "exact wall | fast wall | XNNPACK wall |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, th, r in rows:
        (oc, ow), (fc, fw), (tc, tw) = r["ours"], r["fast"], r["theirs"]
        lines.append(f"| {name} | {th} | {_ms(oc)} | {_ms(fc)} | {_ms(tc)} | {oc / tc:.2f} | "
                     f"{fc / tc:.2f} | {_ms(ow)} | {_ms(fw)} | {_ms(tw)} |")
    return lines


# ---- the machine's GEMM speed, for scale -----------------------------------------------------
# float32 matrix products, 512 x 512 x 512: OpenBLAS's sgemm (numpy, FMA where the CPU has it)
# at 1 and 2 threads, and the fast tier's ordered gemm (kernels.fast.ordered: each output a
# running sum in k order, no FMA, as ExecuTorch's portable kernels compute it), one thread.
_GEMM_CHILD = """
import sys, time
import numpy as np
n, which = 512, sys.argv[1]
rng = np.random.default_rng(0)
a, b = rng.standard_normal((2, n, n)).astype(np.float32)
if which == "blas":
    fn = lambda: a @ b
else:  # "ordered" (exact) or "fma" (math="fast")
    from pyruntime.kernels.fast.ordered import gemm_scratch, ordered_gemm
    c = np.empty((n, n), np.float32)
    S = np.empty(gemm_scratch(n, n, n), np.float32)
    z = np.float32(0)
    fma = int(which == "fma")
    fn = lambda: ordered_gemm(n, n, n, a.ctypes.data, n, 1, b.ctypes.data, n, 1, c.ctypes.data,
                              n, S, z, 4, 0, 0, fma)
    fn()
    assert np.allclose(c, a @ b, rtol=1e-3, atol=1e-3)
fn()
ts = []
for _ in range(15):
    t0 = time.perf_counter()
    fn()
    ts.append(time.perf_counter() - t0)
print("RESULT", 2 * n ** 3 / min(ts) / 1e9)
"""


def gemm_gflops():
    """[(what, GFLOP/s)]: OpenBLAS sgemm at 1 and 2 threads, the ordered gemm at 1, exact
    and with FMA."""
    import subprocess

    out = []
    for what, which, threads in (("OpenBLAS sgemm, 1 thread", "blas", 1),
                                 ("OpenBLAS sgemm, 2 threads", "blas", 2),
                                 ("fast tier ordered gemm, 1 thread", "ordered", 1),
                                 ("the same with FMA (math=\"fast\"), 1 thread", "fma", 1)):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": str(threads),
               "OMP_NUM_THREADS": str(threads)}
        p = subprocess.run([sys.executable, "-c", _GEMM_CHILD, which], capture_output=True,
                           text=True, cwd=str(ROOT), env=env)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if not line:
            print(f"gemm {what}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
            continue
        out.append((what, float(line[0].split()[1])))
        print(f"gemm 512^3 {what}: {out[-1][1]:.1f} GFLOP/s", flush=True)
    return out


def gemm_lines(rows):
    return ["", "Scale: float32 GEMM on this machine (512 x 512 x 512, best of 15): " + "; ".join(
        f"{what} {g:.0f} GFLOP/s" for what, g in rows) + "."]


# ---- startup (issue 16) -------------------------------------------------------------------
# A new process: import pyruntime, load the portable .pte on the fast tier, execute once, with
# the kernels in the on-disk cache (a priming run fills it first). Optionally (--startup-cold)
# the same with an empty cache: what a first run costs without `pyruntime warmup`.
STARTUP = ["mobilenet_v2@224", "mobilenet_v2", "resnet18", "vit_tiny", "llama_kv"]

_STARTUP_CHILD = """
import time
c0, w0 = time.process_time(), time.perf_counter()
import sys
import numpy as np
import pyruntime
from pyruntime.kernels.fast import deferred
recs = []


def listen():  # Numba's compiler passes, once Numba is imported (cached kernels never do)
    from numba.core import event
    recs.append(event.RecordingListener())
    event.register("numba:run_pass", recs[-1])


deferred.when_loaded(listen)
prog = pyruntime.Runtime.get().load_program(sys.argv[1])
m = prog.load_method(sys.argv[2])
with np.load(sys.argv[3]) as z:
    m.execute([z[k] for k in sorted(z.files, key=lambda k: int(k[3:]))])
c, w = time.process_time() - c0, time.perf_counter() - w0
kernels = {e.data["qualname"] for r in recs for _, e in r.buffer
           if e.data["qualname"].endswith("_kernel")}
print("RESULT", c, w, len(kernels))
"""


def _startup_run(pte, method, npz, env=None):
    import subprocess

    p = subprocess.run([sys.executable, "-c", _STARTUP_CHILD, str(pte), method, str(npz)],
                       capture_output=True, text=True, cwd=str(ROOT), env=env)
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    if not line:
        raise RuntimeError(p.stderr[-2000:])
    c, w, n = line[0].split()[1:]
    return float(c), float(w), int(n)


def startup(names=STARTUP, runs=5, cold=False):
    """Rows (name, kernels the load binds, cached (cpu, wall) medians, cold (cpu, wall,
    kernels compiled) or None)."""
    import statistics
    import tempfile

    import numpy as np

    from pyruntime.warmup import program_kernels

    import subprocess

    rows = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # the bytecode pip writes at install (a checkout run with PYTHONDONTWRITEBYTECODE would
    # otherwise compile ~80 modules from source in every process: +0.13 s)
    subprocess.run([sys.executable, "-m", "compileall", "-q"] + [str(ROOT / d) for d in (
        "pyruntime", "kernels", "delegates", "cython_ext")], capture_output=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if "@" in name:  # a model exported at another size (the vs-XNNPACK pairs)
                pte, _, inputs = _xnnpack_pair(name)
            else:
                fx = get_fixture(name)
                pte, inputs = fx.pte_path, fx.calls[0]
            if not all(isinstance(v, np.ndarray) for v in inputs):
                continue
            npz = Path(tmp) / f"{name}.npz"
            np.savez(npz, **{f"arg{i}": v for i, v in enumerate(inputs)})
            _startup_run(pte, "forward", npz, env)  # fills the cache if needed
            runs_ = [_startup_run(pte, "forward", npz, env) for _ in range(runs)]
            cached = (statistics.median(r[0] for r in runs_),
                      statistics.median(r[1] for r in runs_))
            first = None
            if cold:
                with tempfile.TemporaryDirectory() as empty:
                    first = _startup_run(pte, "forward", npz, {**env, "PYRUNTIME_CACHE": empty})
            rows.append((name, len(program_kernels(pte)), cached, first))
            print(f"startup {name:14s} cached: cpu {cached[0]:.2f} s wall {cached[1]:.2f} s"
                  + (f" | empty cache: cpu {first[0]:.0f} s wall {first[1]:.0f} s, "
                     f"{first[2]} kernels compiled" if first else ""), flush=True)
    return rows


def startup_lines(rows):
    lines = [
        "",
        "## Startup",
        "",
        "A new process imports pyruntime, loads the portable `.pte` on the fast tier (the",
        "default) and executes it once. Cached: the kernels are in the on-disk cache (after a",
        "first run or `python -m pyruntime warmup model.pte`); medians of 5 processes, CPU =",
        "`time.process_time`. Empty cache: the same process with `PYRUNTIME_CACHE` pointing at",
        "an empty folder, so every kernel the program binds compiles (`-` = not measured; run",
        "with `--startup-cold`). Target: cached <= 0.5 s; a fresh install's first run <= 10 s",
        "after `pyruntime warmup`.",
        "",
        "| program | kernels | cached CPU | cached wall | empty cache CPU | empty cache wall |",
        "|---|---|---|---|---|---|",
    ]
    for name, n, (c, w), first in rows:
        cold = (f"{first[0]:.0f} s | {first[1]:.0f} s" if first else "- | -")
        lines.append(f"| {name} | {n} | {c:.2f} s | {w:.2f} s | {cold} |")
    return lines


# ---- a fresh install's first run (issue 32) ------------------------------------------------
# A new process with an empty kernel cache, as after `pip install`: the kernels come from the
# machine code the package ships (kernels.fast.shipped) when it carries this host's level.
_FRESH_CHILD = """
import sys, time
t0 = time.perf_counter()
import numpy as np
import pyruntime
from pyruntime.kernels.fast import background, shipped
m = pyruntime.Runtime.get().load_program(sys.argv[1]).load_method(sys.argv[2])
with np.load(sys.argv[3]) as z:
    args = [z[k] for k in sorted(z.files, key=lambda k: int(k[3:]))]
t1 = time.perf_counter()
m.execute(args)
t2 = time.perf_counter()
warm = []
for _ in range(20):
    t = time.perf_counter()
    m.execute(args)
    warm.append(time.perf_counter() - t)
print("RESULT", t1 - t0, t2 - t1, sorted(warm)[10], m.pending_kernels,
      len(background._requested), int("numba.core" in sys.modules), shipped.select())
"""


def fresh_install(names=("mobilenet_v2", "mobilenet_v2@224")):
    """Rows (name, import+load s, first execute s, warm execute s, pending kernels, compile
    processes started, Numba imported, shipped target) from new processes with empty caches."""
    import subprocess
    import tempfile

    import numpy as np

    rows = []
    for name in names:
        if "@" in name:
            pte, _, inputs = _xnnpack_pair(name)
        else:
            fx = get_fixture(name)
            pte, inputs = fx.pte_path, fx.calls[0]
        with tempfile.TemporaryDirectory() as tmp:
            npz = Path(tmp) / "in.npz"
            np.savez(npz, **{f"arg{i}": v for i, v in enumerate(inputs)})
            env = {**os.environ, "PYTHONPATH": str(ROOT), "PYRUNTIME_CACHE": str(Path(tmp) / "c"),
                   "PYRUNTIME_COMPILE": "background", "PYRUNTIME_PROGRESS": "0"}
            p = subprocess.run([sys.executable, "-c", _FRESH_CHILD, str(pte), "forward", str(npz)],
                               capture_output=True, text=True, cwd=str(ROOT), env=env)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if not line:
            print(f"fresh install {name}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
            continue
        v = line[0].split()[1:]
        row = (name, float(v[0]), float(v[1]), float(v[2]), int(v[3]), int(v[4]), v[5] == "1",
               v[6])
        rows.append(row)
        print(f"fresh install {name}: import+load {row[1]:.2f} s, first execute "
              f"{_ms(row[2])}, warm {_ms(row[3])} ({row[2] / row[3]:.2f}x), pending {row[4]}, "
              f"compile processes {row[5]}, numba {row[6]}, shipped {row[7]}", flush=True)
    return rows


def fresh_install_lines(rows):
    lines = ["", "First run after a fresh install: a new process, an empty kernel cache",
             "(`PYRUNTIME_CACHE` a new folder, `PYRUNTIME_COMPILE=background`, the default): import",
             "+ load, then the first execute and the median of 20 more. The kernels come from the",
             "machine code the package ships for this host's x86-64 level (docs/TIERS.md).", "",
             "| program | import + load | first execute | warm execute | first / warm | "
             "kernels pending | compile processes | Numba imported | shipped target |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, load, first, warm, pend, procs, nb, target in rows:
        lines.append(f"| {name} | {load:.2f} s | {_ms(first)} | {_ms(warm)} | {first / warm:.2f}"
                     f" | {pend} | {procs} | {'yes' if nb else 'no'} | {target} |")
    return lines


SPEED_BEGIN, SPEED_END = "<!-- speed-bench:start -->", "<!-- speed-bench:end -->"


def speed_section(rounds=20):
    """The issue-32 section: vs XNNPACK in both math modes, the GEMM scale, a fresh
    install's first run, start-up."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        cpu = next(x.split(":", 1)[1].strip() for x in info.splitlines()
                   if x.startswith("model name"))
        flags = next(x.split(":", 1)[1].split() for x in info.splitlines()
                     if x.startswith("flags"))
        feats = ", ".join(f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                                      "avx512_vnni", "avx512_bf16") if f in flags)
    except (OSError, StopIteration):
        feats = "?"
    lines = ["## Speed: math=\"fast\", shipped kernels, start-up (issue 32)", "",
             f"Produced by `python examples/benchmark_table.py --speed-section` on "
             f"{datetime.date.today()}: {cpu} ({feats}), {os.cpu_count()} cores, Python "
             f"{platform.python_version()}; 1-min load average {os.getloadavg()[0]:.1f} before."]
    lines += vs_xnnpack_lines(vs_xnnpack(VS_XNNPACK, rounds))
    lines += gemm_lines(gemm_gflops())
    lines += fresh_install_lines(fresh_install())
    lines += startup_lines(startup(STARTUP))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads for pyruntime (executorch's portable kernels use 1)")
    ap.add_argument("--vs-xnnpack", nargs="*", default=VS_XNNPACK,
                    help="models for the 'vs ExecuTorch XNNPACK' table (none: skip it)")
    ap.add_argument("--startup", nargs="*", default=STARTUP,
                    help="models for the 'Startup' table (none: skip it)")
    ap.add_argument("--startup-cold", action="store_true",
                    help="also time a first run with an empty kernel cache (minutes per model)")
    ap.add_argument("--speed-section", action="store_true",
                    help="only the speed section (vs XNNPACK in both math modes, a fresh "
                         "install's first run, start-up): rewrite it in --out")
    args = ap.parse_args(argv)
    if args.speed_section:
        from examples.bench_llm import update  # (the marked-section writer)

        update(Path(args.out), speed_section(args.rounds or 20), SPEED_BEGIN, SPEED_END)
        print(f"updated {args.out}")
        return 0
    rows = []
    for name in args.models:
        for tier in ("reference", "fast"):
            # delegated rows: both runtimes call the same XNNPACK library with the
            # same thread count (its default, the number of cores)
            threads = None if name.startswith("xnnpack:") else args.threads
            r = bench(_path(name), tier=tier, rounds=args.rounds, min_time=1.0,
                      threads2=(tier == "fast"), threads=threads)
            rows.append((name, r))
            print(f"{name:14s} {tier:9s} ours {_ms(r.ours_s):>10s} theirs {_ms(r.theirs_s):>10s} "
                  f"ratio {r.ratio or 0:.3f}", flush=True)
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `python examples/benchmark_table.py` on {datetime.date.today()} "
        f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}).",
        "Each row: `pyruntime bench` on an ExecuTorch-exported portable `.pte` (the parity",
        "fixtures); pyruntime and executorch.runtime 1.5.1 timed in one process on the same",
        "inputs, interleaved rounds, medians. Ratio = pyruntime / executorch.runtime (below 1:",
        "pyruntime is faster). Load: cold = first load in the process (kernel compile or",
        "on-disk cache read), warm = second load in the same process. pyruntime ran with",
        f"threads={args.threads} (executorch's portable kernels are single-threaded); the last",
        "column is the total throughput of two Python threads, each executing its own Method.",
        "`xnnpack:` rows run the same model lowered with ExecuTorch's XnnpackPartitioner: both",
        "runtimes call the same XNNPACK library (the executorch wheel's), so the ratio is the",
        "bridge's overhead; those rows use the library's default thread count.",
        "",
        "| program | tier | instructions | pyruntime | executorch.runtime | ratio | load cold | "
        "load warm | 2-thread executes/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows:
        t2 = f"{r.threads2_per_s:.1f}" if r.threads2_per_s else "-"
        lines.append(f"| {name} | {r.tier} | {r.instructions} | {_ms(r.ours_s)} | "
                     f"{_ms(r.theirs_s)} | {r.ratio:.3f} | {_ms(r.load_cold_s)} | "
                     f"{_ms(r.load_warm_s)} | {t2} |")
    if args.vs_xnnpack:
        lines += vs_xnnpack_lines(vs_xnnpack(args.vs_xnnpack, args.rounds or 20))
        lines += gemm_lines(gemm_gflops())
    if args.startup:
        lines += startup_lines(startup(args.startup, cold=args.startup_cold))
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
