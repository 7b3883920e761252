"""Kernels compiled ahead for x86-64-v3/v4 and shipped with the package
(``kernels.fast.shipped``): which target a host takes, that a target with a feature the
host lacks is never linked, and that a fresh process with an empty cache runs a program
from its first execute on them, without Numba, without a compile, with
executorch.runtime's bits."""
from __future__ import annotations

import json

import pytest

from pyruntime.kernels.fast import shipped
from tests import parts
from tests.child import run_json
from tests.programs.fixtures import get_fixture

V3, V4 = set(shipped.TARGETS["x86-64-v3"]), set(shipped.TARGETS["x86-64-v4"])


def _fake_root(tmp_path, monkeypatch, built):
    for t in built:
        (tmp_path / t).mkdir(exist_ok=True)
        (tmp_path / t / "manifest.json").write_text(json.dumps({"target": t, "kernels": []}))
    monkeypatch.setattr(shipped, "ROOT", tmp_path)


def test_the_widest_target_whose_every_feature_the_host_has(tmp_path, monkeypatch):
    assert shipped.runnable(V4 | {"sha"}) == ["x86-64-v4", "x86-64-v3"]
    assert shipped.runnable(V3) == ["x86-64-v3"]
    assert shipped.runnable(V4 - {"avx512vl"}) == ["x86-64-v3"]
    assert shipped.runnable(V3 - {"fma"}) == []  # an AVX-only CPU: nothing shipped runs
    _fake_root(tmp_path, monkeypatch, ["x86-64-v3"])
    assert shipped.select(V4) == "x86-64-v3"  # v4 not built: the next one down
    assert shipped.select(V3 - {"movbe"}) is None
    _fake_root(tmp_path, monkeypatch, ["x86-64-v4", "x86-64-v3"])
    assert shipped.select(V4) == "x86-64-v4"


def test_every_target_compiles_for_exactly_its_features():
    """The feature string a target compiles with is its list and nothing else (the CPU
    model names no more than that either): code for v3 has no AVX-512 instruction."""
    for t, feats in shipped.TARGETS.items():
        s = shipped.features_string(t)
        assert {f[1:] for f in s.split(",")} == set(feats) and all(f[0] == "+" for f in
                                                                     s.split(","))
        assert shipped.magic(t)[1:] == (t, s)
    assert not any(f.startswith("avx512") for f in shipped.TARGETS["x86-64-v3"])


def test_a_host_lacking_a_feature_never_links_the_target(monkeypatch):
    """``load`` takes the target ``select`` chose for this host's features: with AVX-512
    hidden it never picks the v4 objects, whatever is shipped."""
    monkeypatch.setattr(shipped, "host_features", lambda: V4 - {"avx512f"})
    monkeypatch.setattr(shipped, "_state", {})
    chosen = shipped._chosen()
    assert chosen is None or chosen[0] == "x86-64-v3"
    monkeypatch.setattr(shipped, "host_features", lambda: set())
    monkeypatch.setattr(shipped, "_state", {})
    from pyruntime.kernels.elementwise.typed import unary_kernel

    assert shipped._chosen() is None and shipped.load(unary_kernel) is None


_FIRST_RUN = """
import json, sys, time
import numpy as np
import pyruntime
from pyruntime.kernels.fast import background
from tests.programs.fixtures import get_fixture
fx = get_fixture(sys.argv[1])
t = time.perf_counter()
m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method(fx.method)
got = m.execute(fx.calls[0])
first = time.perf_counter() - t
same = all(np.array_equal(np.asarray(g).view(np.uint8), np.asarray(e).view(np.uint8))
           for g, e in zip(got, fx.expected[0]))
print(json.dumps({"pending": m.pending_kernels, "numba": "numba.core" in sys.modules,
                  "requested": len(background._requested), "same": same}))
"""


@parts.skip_unless(shipped.select() is not None, "shipped",
                   "no shipped kernels for this host's x86-64 level were built")
def test_a_fresh_cache_runs_the_first_execute_on_shipped_kernels(tmp_path):
    fx = get_fixture("mobilenet_v2")  # (built here, not in the child)
    env = {"PYRUNTIME_CACHE": str(tmp_path / "empty"), "PYRUNTIME_COMPILE": "background",
           "PYRUNTIME_PROGRESS": "0"}
    # an empty cache, yet every kernel bound at load: they can only be the shipped ones
    got = run_json(_FIRST_RUN, fx.name, env=env)
    assert got == {"pending": 0, "numba": False, "requested": 0, "same": True}
