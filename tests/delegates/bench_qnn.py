"""Latency of QNN-delegated programs: pyruntime vs executorch.runtime, same process.

    python -m tests.delegates.bench_qnn [names] [--seconds S] [--tier fast]

Both runtimes drive the same QNN HTP library (the simulator of onnxruntime-qnn)
in one process: executorch.runtime through the test shim (its SoC device config
rewritten, see tests/delegates/qnn_shim), pyruntime directly (it writes the
config itself). The script re-runs itself with the shim's environment
(``LD_LIBRARY_PATH`` is read when a process starts). Runs are interleaved, who
goes first alternating; the table shows medians, the ratio ours/theirs and the
time of ours spent inside the QnnBackend calls.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

DEFAULT = ("mlp_int8", "cnn_bn_fp16", "mobilenet_v2_fp16", "mobilenet_v2_int8", "vit_fp16",
           "llama_fp16")
_MARK = "PYRUNTIME_QNN_BENCH_CHILD"


def bench(name: str, seconds: float = 3.0, tier: str = "reference") -> tuple:
    import torch
    from executorch.runtime import Runtime as EtRuntime

    import pyruntime
    from pyruntime.delegates import backend_registry
    from tests.delegates.qnn_fixtures import get_fixture

    fx = get_fixture(name)
    method, x_np = fx.runs[0]
    # executorch.runtime first: its dlopen("libQnnHtp.so") must find the shim, not the real
    # library pyruntime loads by path (both are named libQnnHtp.so)
    theirs = EtRuntime.get().load_program(fx.pte_path).load_method(method)
    ours = pyruntime.Runtime.get().load_program(fx.pte_path).load_method(method, tier=tier)
    x_t = [torch.from_numpy(a) for a in x_np]
    for _ in range(3):
        ours.execute(x_np)
        theirs.execute(x_t)
    backend = backend_registry.get("QnnBackend")
    inner = []
    real = backend.execute

    def timed(h, args):
        t = time.perf_counter()
        real(h, args)
        inner.append(time.perf_counter() - t)

    t_ours, t_theirs, t_inner = [], [], []
    backend.execute = timed
    try:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline or len(t_ours) < 10:
            inner.clear()
            first_ours = len(t_ours) % 2 == 0  # alternate who goes first
            if not first_ours:
                t0 = time.perf_counter()
                theirs.execute(x_t)
                t_theirs.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ours.execute(x_np)
            t_ours.append(time.perf_counter() - t0)
            if first_ours:
                t0 = time.perf_counter()
                theirs.execute(x_t)
                t_theirs.append(time.perf_counter() - t0)
            t_inner.append(sum(inner))
    finally:
        del backend.execute
    a = np.asarray(ours.execute(x_np)[0])
    b = theirs.execute(x_t)[0].numpy()
    diff = float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
    ours.destroy()
    return statistics.median(t_ours), statistics.median(t_theirs), {
        "runs": len(t_ours), "max_abs_diff": diff, "delegates_s": statistics.median(t_inner)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--tier", default="reference", choices=("reference", "fast"))
    args = ap.parse_args(argv)
    if not os.environ.get(_MARK):
        from tests.delegates import qnn_fixtures

        qnn_fixtures.build(args.names)  # export first (a child of its own)
        env = qnn_fixtures.shim_env()
        env[_MARK] = "1"
        env["PYRUNTIME_QNN_LIB_DIR"] = qnn_fixtures.real_library_dir()  # ours: the real one
        sys.exit(subprocess.call([sys.executable, "-m", "tests.delegates.bench_qnn",
                                  *(argv if argv is not None else sys.argv[1:])], env=env))
    print(f"{'program':<18} {'pyruntime ms':>13} {'executorch ms':>14} {'ratio':>6} "
          f"{'in QnnBackend ms':>17}  runs")
    for name in args.names:
        ours, theirs, info = bench(name, args.seconds, args.tier)
        print(f"{name:<18} {ours * 1e3:13.3f} {theirs * 1e3:14.3f} {ours / theirs:6.3f} "
              f"{info['delegates_s'] * 1e3:17.3f}  {info['runs']} "
              f"(max diff {info['max_abs_diff']:.1e})", flush=True)


if __name__ == "__main__":
    main()
