"""Latency of the CoreML bridge's MIL interpreter next to pyruntime's fast tier on the
portable program of the same model, same process, same inputs.

    python -m tests.delegates.bench_coreml [names] [--seconds S] [--threads N]

The CoreML program is the cached fixture (``coreml_fixtures``, fp16 by default;
``mlp_fp32`` is fp32); the portable program is the same torch model exported with
``to_edge().to_executorch()`` (no delegate) at the same input shapes, run on the
fast tier (compiled kernels). Both get the same thread count (it also sets numpy's
OpenBLAS threads, which the interpreter's matmuls use). Runs alternate; the table
shows medians and the ratio interpreter / fast tier.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

DEFAULT = ("mlp", "mlp_fp32", "cnn_bn", "mobilenet_v2", "resnet18", "vit_tiny",
           "audio_encoder", "llama", "llama_kv")


def portable(name: str, folder: Path) -> Path:
    import torch
    from executorch.exir import to_edge

    from tests.delegates.coreml_fixtures import SPECS, _torch_args

    path = folder / f"{name}.pte"
    if not path.exists():
        spec = SPECS[name]
        with torch.no_grad():
            ep = torch.export.export(spec.make(), _torch_args(spec.calls()[0]))
        path.write_bytes(to_edge(ep).to_executorch().buffer)
    return path


def bench(name: str, folder: Path, seconds: float, threads: int) -> tuple:
    import pyruntime
    from tests.delegates.coreml_fixtures import get_fixture

    fx = get_fixture(name)
    rt = pyruntime.Runtime.get()
    ours = rt.load_program(fx.pte_path).load_method("forward", threads=threads)
    fast = rt.load_program(portable(name, folder)).load_method("forward", tier="fast",
                                                               threads=threads)
    x = fx.calls[0]
    for _ in range(2):
        ours.execute(x)
        fast.execute(x)
    t_ours, t_fast = [], []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(t_ours) < 5:
        t0 = time.perf_counter()
        ours.execute(x)
        t1 = time.perf_counter()
        fast.execute(x)
        t_ours.append(t1 - t0)
        t_fast.append(time.perf_counter() - t1)
    ops = sum(ours._delegate_handles[0][1].ops.values())
    return statistics.median(t_ours), statistics.median(t_fast), len(t_ours), ops


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", default=None, help="folder for the portable programs")
    args = ap.parse_args(argv)
    folder = Path(args.cache or tempfile.mkdtemp(prefix="pyruntime_bench_coreml_"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{'model':<14} {'MIL interpreter ms':>19} {'fast tier ms':>13} {'ratio':>6} "
          f"{'MIL ops':>8}  runs (threads {args.threads})")
    for name in args.names:
        ours, fast, runs, ops = bench(name, folder, args.seconds, args.threads)
        print(f"{name:<14} {ours * 1e3:19.3f} {fast * 1e3:13.3f} {ours / fast:6.2f} {ops:8d}"
              f"  {runs}", flush=True)


if __name__ == "__main__":
    main()
