"""Export time and planned memory, our exporter next to ExecuTorch's, per model.

    python -m tests.exporter.bench_export [names...]

Both exporters start from the same nn.Module and example inputs; each is timed
end to end (torch.export included) after one warm-up export in the process,
alternating ours and theirs. Planned bytes are the arena sizes of the forward
method: ours with the default (greedy) planner, ExecuTorch's, ours with "best",
and ours with "best" plus ``fold_constants=True``.
"""
from __future__ import annotations

import sys
import time
import warnings

from tests.exporter.helpers import MODEL_NAMES, fixture_model
from tests.programs import fixtures


def _inputs(name):
    spec = fixtures.SPECS[name]
    example = spec.example() if spec.example else spec.calls()[0]
    args = tuple(fixtures._to_torch(v) for v in example)
    return args, (spec.dynamic_shapes() if spec.dynamic_shapes else None)


def _ours(model, args, ds, planner="greedy", fold=False):
    from pyruntime import exporter

    t0 = time.perf_counter()
    r = exporter.export(model, args, dynamic_shapes=ds, memory_planner=planner,
                        fold_constants=fold)
    return time.perf_counter() - t0, r.non_const_buffer_sizes["forward"][1]


def _theirs(model, args, ds):
    import torch
    from executorch.exir import to_edge

    t0 = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(model, args, dynamic_shapes=ds)
    et = to_edge(ep).to_executorch()
    dt = time.perf_counter() - t0
    return dt, et.executorch_program.execution_plan[0].non_const_buffer_sizes[1]


def main(argv=None) -> int:
    import torch

    warnings.filterwarnings("ignore")
    names = (argv if argv is not None else sys.argv[1:]) or list(MODEL_NAMES)
    warm = torch.nn.Linear(2, 2)
    _ours(warm, (torch.randn(1, 2),), None)
    _theirs(warm, (torch.randn(1, 2),), None)
    print(f"{'model':14} {'ours greedy':>12} {'ExecuTorch':>12} {'ours best':>12} "
          f"{'saved':>6} {'best+fold':>12} {'export ours':>12} {'ExecuTorch':>11} {'ratio':>6}")
    tot = [0, 0, 0, 0.0, 0.0, 0]
    for name in names:
        model = fixture_model(name)
        args, ds = _inputs(name)
        t_ours, greedy = _ours(model, args, ds)
        t_theirs, theirs = _theirs(model, args, ds)
        _, best = _ours(model, args, ds, "best")
        _, folded = _ours(model, args, ds, "best", fold=True)
        for i, v in enumerate((greedy, theirs, best, t_ours, t_theirs, folded)):
            tot[i] += v
        print(f"{name:14} {greedy:12d} {theirs:12d} {best:12d} {1 - best / greedy:6.1%} "
              f"{folded:12d} {t_ours:11.2f}s {t_theirs:10.2f}s {t_theirs / t_ours:5.2f}x",
              flush=True)
    print(f"{'total':14} {tot[0]:12d} {tot[1]:12d} {tot[2]:12d} {1 - tot[2] / tot[0]:6.1%} "
          f"{tot[5]:12d} {tot[3]:11.2f}s {tot[4]:10.2f}s {tot[4] / tot[3]:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
