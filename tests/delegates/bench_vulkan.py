"""Latency of Vulkan-delegated programs in pyruntime next to pyruntime's fast tier on the
portable program of the same model (executorch.runtime cannot run Vulkan programs).

    python -m tests.delegates.bench_vulkan [names] [--write]

Each row is ``pyruntime.bench.bench`` (median of interleaved rounds, same inputs) on the
fixture's Vulkan .pte (fast tier: the loop calls the delegates) and on its portable .pte
(fast tier, threads=1). ``--write`` puts the table into BENCHMARKS.md between the
``<!-- vulkan-bench:start -->`` / ``<!-- vulkan-bench:end -->`` markers.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from pathlib import Path

DEFAULT = ("mlp", "cnn_bn", "mobilenet_v2", "resnet18", "vit_tiny", "audio_encoder", "llama",
           "llama_kv", "quant_cnn", "zoo", "mlp_fp16", "cnn_bn_fp16", "vit_tiny_fp16")
_REPO = Path(__file__).resolve().parents[2]
START, END = "<!-- vulkan-bench:start -->", "<!-- vulkan-bench:end -->"


def _fmt(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def row(name: str, min_time: float = 2.0) -> str:
    import pyruntime
    from pyruntime.bench import bench
    from tests.delegates import vulkan_fixtures as vf

    fx = vf.get_fixture(name)
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    meta = prog.metadata("forward")
    vk = bench(fx.pte_path, tier="fast", compare=False, min_time=min_time, threads2=False)
    port = bench(vf.portable_program(fx), tier="fast", compare=False, min_time=min_time,
                 threads2=False, threads=1)
    kinds = meta.instruction_kinds
    return (f"| {name} | {kinds.get('DelegateCall', 0)} | {kinds.get('KernelCall', 0)} | "
            f"{_fmt(vk.ours_s)} | {_fmt(port.ours_s)} | {vk.ours_s / port.ours_s:.2f} | "
            f"{_fmt(vk.load_cold_s)} | {_fmt(vk.load_warm_s)} |")


def table(names, min_time: float) -> str:
    from pyruntime.delegates.vulkan.device import get_device

    load = os.getloadavg()[0]
    rows = [row(n, min_time) for n in names]
    head = (
        "## Vulkan programs on lavapipe\n\n"
        f"Produced by `python -m tests.delegates.bench_vulkan --write` on "
        f"{time.strftime('%Y-%m-%d')} ({platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}); device: {get_device().describe()}; 1-min load "
        f"average {load:.1f} before, {os.getloadavg()[0]:.1f} after (a shared machine).\n\n"
        "Programs lowered with ExecuTorch's `VulkanPartitioner` (the test fixtures of "
        "`tests/delegates/vulkan_fixtures.py`) run by pyruntime's Vulkan bridge on lavapipe "
        "(Mesa's CPU Vulkan driver: the shaders run as LLVM-compiled CPU code on the same 2 "
        "cores), next to pyruntime's fast tier (threads=1) on the portable program of the "
        "same model. executorch.runtime has no Vulkan backend, so it has no column. "
        "`pyruntime bench --no-compare` on each .pte, medians; ratio = Vulkan / portable "
        "fast tier (above 1: the portable fast tier is faster). Load: cold = first load in the "
        "process (shader compile or SPIR-V cache read, lavapipe's pipeline JIT, constant "
        "upload), warm = a second load in the same process.\n\n"
        "| model | delegate calls | portable kernel calls | Vulkan (lavapipe) | portable fast "
        "tier | ratio | load cold | load warm |\n|---|---|---|---|---|---|---|---|\n")
    return head + "\n".join(rows) + "\n"


def write(text: str) -> None:
    path = _REPO / "BENCHMARKS.md"
    doc = path.read_text()
    block = f"{START}\n{text}{END}"
    if START in doc and END in doc:
        doc = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(doc)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = ap.parse_args(argv)
    text = table(args.names, args.seconds)
    sys.stdout.write(text)
    if args.write:
        write(text)


if __name__ == "__main__":
    main()
