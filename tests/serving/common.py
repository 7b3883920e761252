"""Shared by the serving tests: the programs, their input sets, the sequential oracle."""
from __future__ import annotations

import numpy as np

import pyruntime
from tests.delegates import xnnpack_fixtures
from tests.programs import fixtures
from tests.programs.test_parity import assert_output_parity

__all__ = ["PROGRAMS", "program", "input_sets", "sequential", "write_sets", "read_outputs",
           "assert_output_parity", "check_against_oracles"]

# name -> (fixture getter, extra set shapes beyond the fixture's own calls)
PROGRAMS = {
    "mlp": (lambda: fixtures.get_fixture("mlp"), [(4, 32)] * 4),
    "xnnpack_mlp": (lambda: xnnpack_fixtures.get_fixture("mlp"), [(4, 32)] * 4),
    "mlp_dynamic": (lambda: fixtures.get_fixture("mlp_dynamic"), [(7, 16), (2, 16), (16, 16)]),
}


def program(name):
    """The fixture: ``.pte_path``, ``.calls`` and executorch.runtime's ``.expected``."""
    return PROGRAMS[name][0]()


def input_sets(name, seed=0) -> list:
    """The fixture's calls (with reference outputs) first, then seeded extra sets."""
    fx = program(name)
    rng = np.random.default_rng(seed)
    extra = [[rng.standard_normal(s).astype(np.float32)] for s in PROGRAMS[name][1]]
    return [list(c) for c in fx.calls] + extra


def sequential(pte_path, sets, tier, threads=1) -> list:
    """The oracle: one method in this process, the sets one by one, in order."""
    prog = pyruntime.Runtime.get().load_program(pte_path)
    m = prog.load_method("forward", tier=tier, threads=threads)
    return [m.execute(s) for s in sets]


def write_sets(path, sets, indices=None) -> None:
    indices = range(len(sets)) if indices is None else indices
    np.savez(path, **{f"set{k}_arg{i}": np.asarray(a) for k, s in zip(indices, sets)
                      for i, a in enumerate(s)})


def read_outputs(path) -> dict:
    """``set{k}_out{j}`` -> {k: [out0, out1, ...]}."""
    out: dict = {}
    with np.load(path) as z:
        for key in z.files:
            k, j = key[3:].split("_out")
            out.setdefault(int(k), {})[int(j)] = z[key]
    return {k: [v[j] for j in sorted(v)] for k, v in sorted(out.items())}


def check_against_oracles(name, sets, got: dict, tier, skip=()):
    """``got`` ({k: outputs}) equals the sequential run exactly, and executorch.runtime's
    outputs (the fixture's calls are sets 0..n-1) within the parity tolerance."""
    fx = program(name)
    want = sequential(fx.pte_path, [s for k, s in enumerate(sets) if k not in skip], tier)
    ran = [k for k in range(len(sets)) if k not in skip]
    assert sorted(got) == ran
    for k, w in zip(ran, want):
        assert len(got[k]) == len(w)
        for j, (g, e) in enumerate(zip(got[k], w)):
            np.testing.assert_array_equal(g, e, err_msg=f"{name} set {k} output {j}")
    for k, ref in enumerate(fx.expected):  # the fixture's calls are sets 0..n-1
        if k not in skip:
            for j, e in enumerate(ref):
                assert_output_parity(got[k][j], e, f"{name} set {k} output {j} vs executorch")
