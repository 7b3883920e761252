"""diff: pyruntime re-runs a program and compares every instruction with another dump."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pyruntime import cli
from pyruntime.devtools import ETDump, EventTracer, compare_values, diff, diff_dumps
from tests.devtools.reference_dumps import reference_dump


def _inputs(tmp_path, calls):
    p = tmp_path / "in.npz"
    np.savez(p, **{f"set{k}_arg{i}": a for k, c in enumerate(calls) for i, a in enumerate(c)})
    return p


def _perturbed_buffer(dump: ETDump, run: int, key, delta=0.5) -> bytes:
    """The dump's debug buffer with one element of one instruction's output changed."""
    events = [e for e in dump.executions[run].debug_events
              if (e.chain_index, e.instruction_id) == key and e.delegate_id is None]
    t = events[0].value.value
    buf = bytearray(dump.debug_buffer)
    x = np.frombuffer(buf, np.float32, 1, t.offset + 4 * 3)
    x += np.float32(delta)
    return bytes(buf)


def test_no_divergence_against_executorch(tmp_path, capsys):
    rd = reference_dump("quant_cnn")
    report = diff(rd.fixture.pte_path, rd.fixture.calls, rd.etdp, rd.bin, tier="reference")
    assert report.ok and report.first_divergence is None
    assert len(report.rows) == 2 * 25 and report.missing == 0
    assert all(r.max_abs_err < 1e-4 for r in report.rows)
    # the command: table, JSON, plot, exit 0
    inp = _inputs(tmp_path, rd.fixture.calls)
    args = ["diff", str(rd.fixture.pte_path), "--tier", "reference", "--inputs", str(inp), "--etdump", str(rd.etdp),
            "--debug-buffer", str(rd.bin)]
    assert cli.main(args + ["--plot", str(tmp_path / "d.png")]) == 0
    out = capsys.readouterr().out
    assert "quantize_per_tensor.out" in out and "SNR dB" in out and "all 50 compared" in out
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"
    assert cli.main(args + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["first_divergence"] is None and len(doc["rows"]) == 50


def test_one_perturbed_tensor_is_the_first_and_only_divergence(tmp_path, capsys):
    rd = reference_dump("cnn_bn")
    ref = ETDump.load(rd.etdp, rd.bin)
    target = (0, 4)  # the second convolution of the first execute
    bad = tmp_path / "bad.bin"
    bad.write_bytes(_perturbed_buffer(ref, 0, target))
    report = diff(rd.fixture.pte_path, rd.fixture.calls, rd.etdp, bad, tier="reference")
    assert not report.ok
    wrong = [r for r in report.rows if not r.ok]
    assert len(wrong) == 1 and report.first_divergence is wrong[0]
    f = wrong[0]
    assert (f.run, f.chain, f.instruction, f.op) == (0, 0, 4, "convolution.out")
    assert f.max_abs_err == pytest.approx(0.5, rel=1e-3) and f.snr_db < 80
    inp = _inputs(tmp_path, rd.fixture.calls)
    code = cli.main(["diff", str(rd.fixture.pte_path), "--tier", "reference", "--inputs", str(inp), "--etdump",
                     str(rd.etdp), "--debug-buffer", str(bad), "--atol", "1e-3"])
    out = capsys.readouterr().out
    assert code == 1
    assert "first divergence: run 0 instruction 4 (convolution.out)" in out
    assert out.count("DIVERGED") == 1


def test_between_two_pyruntime_runs_of_different_tiers(tmp_path):
    from tests.programs.fixtures import get_fixture

    fx = get_fixture("mlp")
    inp = _inputs(tmp_path, fx.calls)
    etdp, binf = tmp_path / "fast.etdp", tmp_path / "fast.bin"
    assert cli.main(["run", str(fx.pte_path), "--inputs", str(inp), "--tier", "fast",
                     "--etdump", str(etdp), "--debug-buffer", str(binf)]) == 0
    report = diff(fx.pte_path, str(inp), etdp, binf, tier="reference")
    assert report.ok and len(report.rows) == 2 * 8


def test_another_program_version_is_aligned_by_op_sequence():
    """An instruction missing from the other dump (another .pte version) shifts the ids;
    the rest still pair up by their op sequence."""
    rd = reference_dump("cnn_bn", calls=1)
    ref = ETDump.load(rd.etdp, rd.bin)
    other = ETDump.load(rd.etdp, rd.bin)
    run = other.executions[0]
    run.events = [e for e in run.events if e.instruction_id != 2 or e.chain_index != 0]
    for e in run.events:
        if e.chain_index == 0 and e.instruction_id > 2:
            e.instruction_id -= 1
    report = diff_dumps(ref, other)
    assert report.ok and report.missing == 1 and len(report.rows) == 10
    assert [r.instruction for r in report.rows] == [0, 1, 3, 4, 5, 6, 7, 8, 9, 10]


def test_inside_delegates_compares_node_values():
    from tests.delegates.xnnpack_fixtures import get_fixture

    fx = get_fixture("cnn_bn")
    tracer = EventTracer()
    from pyruntime import Runtime
    tracer.load_method(Runtime.get().load_program(fx.pte_path), tier="reference").execute(fx.calls[0])
    report = diff(fx.pte_path, fx.calls[:1], tracer.etdump(), tier="reference")
    inner = [r for r in report.rows if r.delegate_id is not None]
    assert report.ok and len(inner) >= 5 and all(r.max_abs_err == 0 for r in inner)


@pytest.mark.parametrize("ref, other, ok, note", [
    (np.array([1.0, np.nan, np.inf]), np.array([1.0, np.nan, np.inf]), True, ""),
    (np.array([1.0, np.inf]), np.array([1.0, -np.inf]), False, ""),
    (np.array([100.0, 0.0]), np.array([100.05, 0.0]), True, ""),  # rtol * max|ref|
    (np.array([1, 2], np.int8), np.array([1, 3], np.int8), False, ""),
    (np.zeros((2, 2)), np.zeros((2, 3)), False, "shape [2, 3], expected [2, 2]"),
    (np.zeros(2, np.float32), np.zeros(2, np.float64), False, "dtype float64"),
    (3, 3, True, ""),
])
def test_compare_values(ref, other, ok, note):
    err, snr, within, why = compare_values(ref, other, atol=1e-4, rtol=1e-3)
    assert within is ok and note in why
    if ok and isinstance(ref, np.ndarray) and not np.array_equal(ref, other, equal_nan=True):
        assert 0 < err and math.isfinite(snr)


def test_diff_errors_are_reported(tmp_path, capsys):
    from tests.programs.fixtures import get_fixture

    fx = get_fixture("mlp")
    inp = _inputs(tmp_path, fx.calls[:1])
    (tmp_path / "x.etdp").write_bytes(b"garbage!" * 4)
    code = cli.main(["diff", str(fx.pte_path), "--tier", "reference", "--inputs", str(inp), "--etdump",
                     str(tmp_path / "x.etdp"), "--debug-buffer", str(tmp_path / "x.etdp")])
    assert code == 2 and "x.etdp" in capsys.readouterr().err
