"""The operator coverage sweep (tests/kernels/coverage.py) and the table it generates (docs/COVERAGE.md).

Every operator ExecuTorch ships must have a reference kernel, every op x dtype cell that torch
supports must pass (reference, or compiled and reference), except the gaps named in KNOWN_GAPS,
and the committed table must match a fresh sweep.
"""
from __future__ import annotations

import pathlib

import pytest

from tests.kernels import coverage
from pyruntime.kernels.registry import Kernel, _REGISTRY

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "COVERAGE.md"

_UNREGISTERED = "no reference kernel registered yet"
# op -> (dtypes or "all", reason). Keep short and honest: test_known_gaps_are_real fails once
# a gap is closed, so entries must be removed when fixed.
KNOWN_GAPS: dict = {}
# ops whose fast tier runs the reference kernel (a Python call for that instruction), by
# design; op -> reason. Issue 17: FFTs are pocketfft through numpy, bit for bit ExecuTorch's.
REFERENCE_ONLY = {op: "pocketfft through numpy (ExecuTorch's results bit for bit)"
                  for op in ("aten::_fft_r2c.out", "aten::_fft_c2r.out", "aten::_fft_c2c.out")}


@pytest.fixture(scope="module")
def rows():
    return coverage.sweep_isolated()


@pytest.fixture(scope="module")
def by_op(rows):
    return {r.op: r for r in rows}


def _gap(op, dt):
    g = KNOWN_GAPS.get(op)
    return g is not None and (g[0] == "all" or dt in g[0])


def test_op_lists():
    libs = coverage.executorch_ops()
    assert len(libs["portable"]) == 209  # spec 7.2: 204 aten:: entries + 5 namespaced
    assert len(set(libs["portable"])) == len(libs["portable"])
    assert len(libs["quantized"]) == 19
    assert "llama::sdpa_with_kv_cache.out" in libs["llm"]
    assert "executorch_prim::et_view.default" in libs["prim"]
    assert {n for n in libs["portable"] if n.startswith("dim_order_ops::")} == {
        "dim_order_ops::_empty_dim_order.out", "dim_order_ops::_to_dim_order_copy.out",
        "dim_order_ops::_clone_dim_order.out"}


def test_every_op_has_a_reference_kernel(by_op):
    missing = [op for op in coverage.all_ops()
               if not by_op[op].registered and KNOWN_GAPS.get(op, (None, ""))[1] != _UNREGISTERED]
    assert not missing, f"operators without a reference kernel: {missing}"


def test_registered_extras_are_swept(by_op):
    """Registered kernels outside ExecuTorch's lists are swept too (library "extra"), but
    the namespaces of coverage.NOT_SWEPT, which their own tests check."""
    from pyruntime.kernels.registry import registered_names
    extras = [r for r in by_op.values() if r.library == "extra"]
    left = {n for n in registered_names() if any(n.startswith(p) for p in coverage.NOT_SWEPT)}
    assert extras and set(by_op) >= set(registered_names()) - left
    assert left  # the carve-out names something real


def _swept_ops():
    return coverage.swept_ops()


@pytest.mark.parametrize("op", _swept_ops())
def test_op_cells(op, by_op):
    row = by_op[op]
    assert row.cells, f"{op}: no cells"
    bad = {dt: c.reason for dt, c in row.cells.items()
           if c.status in ("missing", "untested") and not _gap(op, dt)}
    assert not bad, f"{op}: unexpected missing/untested cells: {bad}"
    # every op is exercised on at least one dtype unless it is a known whole-op gap
    if KNOWN_GAPS.get(op, (None,))[0] != "all":
        assert any(c.status in ("reference", "compiled") for c in row.cells.values()), row.cells


def test_known_gaps_are_real(by_op):
    stale = []
    for op, (dts, _) in KNOWN_GAPS.items():
        cells = by_op[op].cells
        for dt in (cells if dts == "all" else dts):
            if cells[dt].status != "missing":
                stale.append((op, dt, cells[dt].status))
    assert not stale, f"KNOWN_GAPS entries that now pass (remove them): {stale}"


def test_every_supported_cell_runs_compiled(rows):
    """Issue 4's bar: every op x dtype cell torch supports matches torch on the compiled
    tier too, not only on the reference kernels."""
    reference_only = [(r.op, dt, c.reason) for r in rows for dt, c in r.cells.items()
                      if c.status == "reference" and r.op not in REFERENCE_ONLY]
    assert not reference_only, reference_only
    assert all(any(c.status == "reference" for c in by.cells.values())
               for by in rows if by.op in REFERENCE_ONLY), "REFERENCE_ONLY entries now compile"


def test_compiled_tier_is_exercised(rows):
    cells, _ = coverage.summary(rows)
    assert cells["compiled"] > 100
    with_binder = [r for r in rows if r.compiled_binder]
    assert with_binder and all(
        any(c.status == "compiled" for c in r.cells.values()) for r in with_binder
        if r.op not in ("aten::native_dropout.out",)), [
        r.op for r in with_binder if not any(c.status == "compiled" for c in r.cells.values())]


def test_sweep_detects_a_wrong_kernel(monkeypatch):
    """A deliberately wrong kernel shows up as missing: the sweep is not vacuous."""
    def wrong_neg(self, out):
        out.write(self.numpy())  # identity instead of negation

    monkeypatch.setitem(_REGISTRY, "aten::neg.out", Kernel("aten::neg.out", wrong_neg, 2))
    (row,) = coverage.sweep(["aten::neg.out"], dtypes=["int32", "float32"])
    assert row.cells["float32"].status == "missing"
    assert row.cells["int32"].status == "missing"
    assert "mismatch" in row.cells["float32"].reason


def test_prim_cases(by_op):
    """Every prim op runs compiled (kernels/prim/typed.py) and matches its reference."""
    for op in coverage.executorch_ops()["prim"]:
        assert by_op[op].cells["scalar"].status == "compiled", (op, by_op[op].cells)


def test_table_is_up_to_date(rows):
    want = coverage.render(rows)
    assert TABLE.exists(), "run: python -m tests.kernels.coverage --out docs/COVERAGE.md"
    got = TABLE.read_text()
    if got != want:
        diff = [f"- {a}\n+ {b}" for a, b in zip(got.splitlines(), want.splitlines()) if a != b]
        pytest.fail("docs/COVERAGE.md is stale; regenerate with "
                    "`python -m tests.kernels.coverage --out docs/COVERAGE.md`:\n"
                    + "\n".join(diff[:10]))


def test_summary_counts_match_rows(rows):
    cells, prim = coverage.summary(rows)
    n_tensor = sum(1 for r in rows if r.library != "prim")
    assert sum(cells.values()) == n_tensor * len(coverage.DTYPES)
    assert sum(prim.values()) == len(coverage.executorch_ops()["prim"])
