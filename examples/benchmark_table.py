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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads for pyruntime (executorch's portable kernels use 1)")
    args = ap.parse_args(argv)
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
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
