"""``python -m pyruntime.exporter MODULE:FACTORY --out model.pte``: export a model given by a factory.

The factory (called with no arguments) returns a module, ``(module, example_args)``
or ``(module, example_args, dynamic_shapes)``. Without example args, give
``--shape`` once per float input, e.g. ``--shape 1x3x32x32``.

    python -m pyruntime.exporter tests.programs.models:make_mlp --shape 4x32 --out mlp.pte
"""
from __future__ import annotations

import argparse
import importlib
import sys

import torch

from pyruntime.exporter.api import export
from pyruntime.exporter.errors import ExportError


def _load_factory(spec: str):
    if ":" not in spec:
        raise SystemExit(f"expected MODULE:FACTORY, got {spec!r}")
    mod_name, attr = spec.split(":", 1)
    sys.path.insert(0, ".")
    obj = importlib.import_module(mod_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyruntime.exporter", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("factory", help="MODULE:FACTORY returning the model (and example inputs)")
    p.add_argument("--out", required=True, help="where to write the .pte")
    p.add_argument("--shape", action="append", default=[],
                   help="shape of a random float32 example input, e.g. 1x3x32x32 (repeatable)")
    p.add_argument("--planner", default="greedy", choices=["greedy", "best"],
                   help="memory planner (greedy = ExecuTorch's plan)")
    p.add_argument("--fold-constants", action="store_true",
                   help="compute ops on weights alone at export time (smaller plan)")
    p.add_argument("--external-data", metavar="PTD",
                   help="put the weights in this .ptd file instead of the .pte")
    args = p.parse_args(argv)

    made = _load_factory(args.factory)()
    dynamic_shapes = None
    if isinstance(made, tuple):
        model, example = made[0], tuple(made[1])
        dynamic_shapes = made[2] if len(made) > 2 else None
    else:
        model = made
        example = tuple(torch.randn(*[int(d) for d in s.lower().split("x")])
                        for s in args.shape)
    if isinstance(model, torch.nn.Module):
        model.eval()
    try:
        result = export(model, example, dynamic_shapes=dynamic_shapes,
                        memory_planner=args.planner, fold_constants=args.fold_constants,
                        external_constants=args.external_data is not None)
    except ExportError as e:
        print(f"export failed: {e}", file=sys.stderr)
        return 1
    result.save(args.out)
    if args.external_data:
        result.save_data(args.external_data)
    for name, sizes in result.non_const_buffer_sizes.items():
        print(f"method {name}: planned memory {sum(sizes)} bytes {sizes}")
    print(f"wrote {args.out} ({len(result.buffer)} bytes) in {result.seconds:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
