"""How many output elements of each parity program are bit-identical to executorch.runtime's.

    python -m tests.programs.bitexact                     # every fixture, both tiers
    python -m tests.programs.bitexact quant_cnn --xnnpack  # also the XNNPACK fixtures

Per fixture and tier: the fraction of output elements (over every call, in order on
one loaded method) whose bytes equal the reference's, and the largest difference.
Parity tests bound the error; this measures how often there is none at all.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def identical_fraction(got: list, want: list) -> tuple[int, int, float]:
    """(identical elements, elements, max abs difference) over lists of arrays."""
    same = total = 0
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.ascontiguousarray(g), np.ascontiguousarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            total += w.size
            worst = float("inf")
            continue
        bits = np.dtype(f"u{w.dtype.itemsize}") if w.dtype.itemsize in (1, 2, 4, 8) else None
        eq = (g.view(bits) == w.view(bits)) if bits is not None else (g == w)
        same += int(eq.sum())
        total += w.size
        if w.size and w.dtype.kind in "fciub":
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))))
    return same, total, worst


def measure(fx, tier: str) -> tuple[int, int, float]:
    import pyruntime

    program = pyruntime.Runtime.get().load_program(fx.pte_path, data_path=fx.ptd_path)
    method = program.load_method(getattr(fx, "method", "forward"), tier=tier)
    got, want = [], []
    for inputs, expected in zip(fx.calls, fx.expected):
        got += list(method.execute(inputs))
        want += list(expected)
    return identical_fraction(got, want)


def main(argv=None) -> int:
    from tests.programs import fixtures

    ap = argparse.ArgumentParser(prog="python -m tests.programs.bitexact", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="fixtures (default: all)")
    ap.add_argument("--xnnpack", action="store_true", help="the XNNPACK fixtures too")
    ap.add_argument("--tiers", default="reference,fast")
    args = ap.parse_args(argv)
    rows = [("", n, fixtures.get_fixture) for n in (args.names or fixtures.FIXTURE_NAMES)
            if n in fixtures.SPECS]
    if args.xnnpack:
        from tests.delegates import xnnpack_fixtures as xf
        rows += [("xnnpack_", n, xf.get_fixture) for n in (args.names or xf.NAMES)
                 if n in xf.SPECS]
    print(f"| program | {' | '.join(args.tiers.split(','))} |")
    print("|---|" + "---|" * len(args.tiers.split(",")))
    for prefix, name, get in rows:
        fx = get(name)
        cells = []
        for tier in args.tiers.split(","):
            same, total, worst = measure(fx, tier)
            cells.append(f"{100.0 * same / max(total, 1):.1f}% of {total}"
                         + ("" if same == total else f" (max diff {worst:.3g})"))
        print(f"| {prefix}{name} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
