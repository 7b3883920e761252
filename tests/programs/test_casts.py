"""Float -> integer casts that C++ leaves undefined (NaN, inf, out of range) give what
ExecuTorch's portable kernels give on x86, on both tiers, on any CPU.

One program exported by ExecuTorch casts the same special values from float32,
float64, bfloat16 and float16 to every integer type and Bool; executorch.runtime's
outputs are the expected values (cached with the program)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pyruntime
from tests.programs.fixtures import _versions, _write_atomic, cache_dir

VERSION = "1"
VALUES = [0.0, -0.0, 2.5, -3.5, 127.9, -128.9, 128.0, -129.0, 255.0, 256.0, 300.7, -300.7,
          32768.0, -32769.0, 65535.0, 2.0**31, -2.0**31 - 1e3, 2.0**32, 1e10, -1e10, 2.0**63,
          -2.0**64, 1e30, float("nan"), float("inf"), float("-inf")]
SOURCES = ("float32", "float64", "bfloat16", "float16")
TARGETS = ("int8", "uint8", "int16", "int32", "int64", "bool")


def _build():
    import torch
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    targets = [getattr(torch, t) for t in TARGETS]

    class Casts(torch.nn.Module):
        def forward(self, a, b, c, d):
            return tuple(x.to(t) for x in (a, b, c, d) for t in targets)

    xs = tuple(torch.tensor(VALUES, dtype=getattr(torch, s)) for s in SOURCES)
    pte = to_edge(torch.export.export(Casts(), xs)).to_executorch().buffer
    outs = Runtime.get().load_program(pte).load_method("forward").execute(list(xs))
    return pte, [o.numpy() for o in outs]


@pytest.fixture(scope="module")
def casts():
    d = cache_dir() / "small"
    d.mkdir(parents=True, exist_ok=True)
    pte, npz, key = d / "casts.pte", d / "casts.npz", d / "casts.key"
    want = json.dumps({"v": VERSION, **_versions()})
    if not (pte.exists() and npz.exists() and key.exists() and key.read_text() == want):
        data, outs = _build()
        _write_atomic(pte, lambda f: f.write(data))
        _write_atomic(npz, lambda f: np.savez(f, *outs))
        _write_atomic(key, lambda f: f.write(want.encode()))
    with np.load(npz) as z:
        expected = [z[f"arr_{i}"] for i in range(len(z.files))]
    return pte, expected


@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_undefined_float_to_int_casts_match_executorch_on_x86(casts, tier):
    import ml_dtypes

    pte, expected = casts
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier=tier)
    if tier == "fast":  # every cast runs compiled, not on the reference fallback
        assert m._fast.compiled == len(m._fast.flat) == 24
    dts = {"bfloat16": ml_dtypes.bfloat16}
    with np.errstate(over="ignore"):
        xs = [np.array(VALUES, np.float64).astype(dts.get(s, s)) for s in SOURCES]
    got = m.execute(xs)
    assert len(got) == len(expected) == len(SOURCES) * len(TARGETS)
    for k, (g, e) in enumerate(zip(got, expected)):
        src, dst = SOURCES[k // len(TARGETS)], TARGETS[k % len(TARGETS)]
        assert g.dtype == e.dtype, (src, dst)
        np.testing.assert_array_equal(g, e, err_msg=f"{src} -> {dst}")
