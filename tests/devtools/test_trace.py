"""Profiles and pictures: Chrome trace JSON, time per operator, memory-plan plot."""
from __future__ import annotations

import json

import numpy as np

import pyruntime
from pyruntime import cli
from pyruntime.devtools import ETDump, chrome_trace, memory_plan, op_times
from tests.devtools.reference_dumps import reference_dump
from tests.programs.fixtures import get_fixture

PNG = b"\x89PNG"


def test_trace_command(tmp_path, capsys):
    fx = get_fixture("cnn_bn")
    inp = tmp_path / "in.npz"
    np.savez(inp, set0_arg0=fx.calls[0][0], set1_arg0=fx.calls[1][0])
    out, png, etdp = tmp_path / "t.json", tmp_path / "ops.png", tmp_path / "t.etdp"
    assert cli.main(["trace", str(fx.pte_path), "--tier", "reference", "--inputs", str(inp), "--out", str(out),
                     "--plot", str(png), "--etdump", str(etdp), "--iters", "2"]) == 0
    text = capsys.readouterr().out
    assert "convolution.out" in text and "total" in text and "mean ms" in text
    doc = json.loads(out.read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for e in slices:
        assert {"name", "ts", "dur", "pid", "tid", "cat"} <= set(e) and e["dur"] >= 0
    runs = [e for e in slices if e["cat"] == "execute"]
    kernels = [e for e in slices if e["cat"] == "kernel"]
    assert len(runs) == 4 and len(kernels) == 4 * 11  # 2 sets x 2 iterations, 11 instructions
    for k in kernels:  # every instruction slice lies inside its execute
        r = runs[k["args"]["run"]]
        assert r["ts"] <= k["ts"] and k["ts"] + k["dur"] <= r["ts"] + r["dur"] + 1e-3
    assert png.read_bytes()[:4] == PNG
    rows = op_times(ETDump.load(etdp))
    assert sum(r.calls for r in rows) == 44 and abs(sum(r.percent for r in rows) - 100) < 1e-6


def test_trace_of_an_executorch_dump_with_delegate_events():
    rd = reference_dump("partial", xnnpack=True)
    dump = ETDump.load(rd.etdp)
    doc = chrome_trace(dump)
    names = [(e["cat"], e["name"]) for e in doc["traceEvents"] if e["ph"] == "X"]
    assert ("delegate call", "DELEGATE_CALL") in names and ("kernel", "cumsum.out") in names
    inner = [n for c, n in names if c == "delegate"]
    assert inner and all("Fully Connected" in n for n in inner)  # XNNPACK's own op timings
    rows = {r.op: r for r in op_times(dump)}
    n = len(dump.executions)  # two delegate calls and one cumsum per execute
    assert rows["DELEGATE_CALL"].calls == 2 * n and rows["cumsum.out"].calls == n


def test_memory_plan_and_plot(tmp_path, capsys):
    fx = get_fixture("cnn_bn")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    blocks, sizes = memory_plan(prog, "forward")
    assert sizes == prog.metadata("forward").planned_buffer_sizes and blocks
    for b in blocks:
        assert 0 <= b.offset and b.offset + b.nbytes <= sizes[b.arena - 1]
        assert 0 <= b.first <= b.last
    # tensors sharing bytes are never live at the same instruction
    for i, a in enumerate(blocks):
        for b in blocks[i + 1:]:
            if a.arena == b.arena and a.offset < b.offset + b.nbytes and b.offset < a.offset + \
                    a.nbytes and a.nbytes and b.nbytes:
                assert a.last < b.first or b.last < a.first, (a, b)
    png = tmp_path / "plan.png"
    assert cli.main(["inspect", str(fx.pte_path), "--memory-plot", str(png)]) == 0
    assert png.read_bytes()[:4] == PNG and "wrote memory plan" in capsys.readouterr().out
