"""Quickstart: export a small CNN with ExecuTorch, run it in pyruntime, compare.

    python examples/quickstart.py

Exporting needs torch + executorch (installed by ``pip install -e '.[test]'``);
running the .pte in pyruntime needs neither.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import pyruntime
from pyruntime.cli import inspect_program

OUT = Path(__file__).resolve().parent / "out"


def export_cnn(path: Path) -> None:
    import torch
    from executorch.exir import to_edge

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10),
    ).eval()
    ep = torch.export.export(model, (torch.randn(1, 3, 32, 32),))
    path.write_bytes(to_edge(ep).to_executorch().buffer)


def main() -> int:
    OUT.mkdir(exist_ok=True)
    pte = OUT / "quickstart_cnn.pte"
    if not pte.exists():
        print(f"exporting {pte.name} with ExecuTorch ...")
        export_cnn(pte)
    inspect_program(pte)

    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    program = pyruntime.Runtime.get().load_program(pte)
    t0 = time.perf_counter()
    # the fast tier (the default): compiled kernels from the disk cache; on a machine whose
    # cache lacks some, a background process compiles them and those instructions run on
    # the reference kernels meanwhile (`python -m pyruntime warmup` compiles ahead of use)
    method = program.load_method("forward")
    t1 = time.perf_counter()
    (ours,) = method.execute([x])
    t2 = time.perf_counter()
    print(f"\npyruntime: load {1e3 * (t1 - t0):.1f} ms, execute {1e3 * (t2 - t1):.1f} ms")
    if method.pending_kernels:
        print(f"({method.pending_kernels} instructions ran on reference kernels: their "
              "compiled kernels are compiling in the background)")
    print("logits:", np.array2string(ours[0], precision=4))
    # the reference tier: the readable numpy definition of each op, the oracle
    (oracle,) = program.load_method("forward", tier="reference").execute([x])
    print(f"reference tier max abs difference: {float(np.max(np.abs(ours - oracle))):.2e}")

    try:
        import torch
        from executorch.runtime import Runtime
    except ImportError:
        print("(executorch not installed: skipping the comparison)")
        return 0
    (ref,) = Runtime.get().load_program(str(pte)).load_method("forward").execute(
        [torch.from_numpy(x)])
    err = float(np.max(np.abs(ours - ref.numpy())))
    print(f"executorch.runtime max abs difference: {err:.2e}")
    return 0 if err <= 1e-4 * max(1.0, float(np.abs(ref.numpy()).max())) else 1


if __name__ == "__main__":
    sys.exit(main())
