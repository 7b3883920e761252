"""EventTracer behaviour: off costs nothing, a full debug buffer is an error (never an
abort), profiling-only dumps, control flow, and ``pyruntime run --etdump``."""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime import cli
from pyruntime.devtools import DebugEvent, ETDump, EventTracer, ProfileEvent
from pyruntime.devtools.tracer import kernel_outputs
from tests.programs.fixtures import get_fixture


def _load(name, tier="reference", tracer=None):
    fx = get_fixture(name)
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    m = tracer.load_method(prog, fx.method, tier=tier) if tracer else \
        prog.load_method(fx.method, tier=tier)
    return fx, m


def test_no_tracer_runs_the_plain_fast_loop(monkeypatch):
    """Without a tracer the loop runs unobserved (compiled instructions in C, the whole
    execute in C where its arguments allow); with one, the same loop runs observed, every
    execute recorded; detached, unobserved again."""
    from pyruntime.method import Method

    fx, m = _load("mlp", tier="fast")
    assert m.event_tracer is None
    runs = []
    real_run = Method._run
    monkeypatch.setattr(Method, "_run", lambda self, observer=None: (
        runs.append(observer is None), real_run(self, observer))[1])
    m.execute(fx.calls[0])
    assert runs == []  # the all-in-C execute (cython_ext._loop.Bound)
    m.execute([np.asfortranarray(fx.calls[0][0])])  # not the exact case: the general path
    assert runs == [True]
    tracer = EventTracer()
    assert tracer.attach(m) is m and m.event_tracer is tracer
    m.execute(fx.calls[0])
    assert runs == [True, False] and len(tracer.runs) == 1  # observed: the tracer saw it
    EventTracer.detach(m)
    m.execute(fx.calls[0])
    m.execute([np.asfortranarray(fx.calls[0][0])])
    assert runs == [True, False, True] and len(tracer.runs) == 1


def test_full_debug_buffer_is_an_error_and_the_dump_stays_valid():
    tracer = EventTracer(debug_buffer_size=20_000)
    fx, m = _load("cnn_bn", tracer=tracer)
    with pytest.raises(ExecuTorchError) as e:
        m.execute(fx.calls[0])
    assert e.value.code == ErrorCode.OutOfResources
    msg = str(e.value)
    assert "instruction 0" in msg and "convolution" in msg and "debug buffer is full" in msg
    dump = ETDump.from_bytes(tracer.etdump().to_bytes(), tracer.etdump().debug_buffer)
    assert dump.executions[0].events == []  # nothing logged past the capacity
    # the method is usable again (untraced, or with a large enough buffer)
    EventTracer.detach(m)
    np.testing.assert_allclose(m.execute(fx.calls[0])[0], fx.expected[0][0], rtol=1e-4, atol=1e-5)
    big = EventTracer(debug_buffer_size=10_000_000)
    big.attach(m).execute(fx.calls[0])
    assert len(big.etdump().executions[0].instruction_outputs()) == 11


def test_profiling_only():
    tracer = EventTracer(intermediates=False)
    fx, m = _load("mlp", tracer=tracer)
    for c in fx.calls:
        m.execute(c)
    dump = tracer.etdump()
    assert dump.debug_buffer is None
    for run in dump.executions:
        assert not run.debug_events
        ops = [e for e in run.events if isinstance(e, ProfileEvent) and e.name == "OPERATOR_CALL"]
        assert [e.instruction_id for e in ops] == list(range(8))
        assert all(e.end_time >= e.start_time > 0 for e in ops)


def test_control_flow_is_traced_per_executed_instruction():
    tracer = EventTracer()
    fx, m = _load("cond", tracer=tracer)
    for c in fx.calls[:2]:  # one call takes each branch
        m.execute(c)
    runs = tracer.etdump().executions
    ids = [[e.instruction_id for e in r.profile_events if e.chain_index == 0] for r in runs]
    assert ids[0] != ids[1]  # different branches, different instructions
    names = {e.name for r in runs for e in r.profile_events}
    assert {"JF_CALL", "MOVE_CALL"} <= names


def test_kernel_outputs_follow_the_emitter_convention():
    from pyruntime.values import ListRef

    values = ["x", 1, "out", "a", "b", ListRef([3, 4])]
    assert kernel_outputs(values, [0, 1, 2, 2]) == ["out"]  # one out, repeated
    assert kernel_outputs(values, [0, 3, 4, 5]) == ["a", "b"]  # two outs, then their list
    assert kernel_outputs(values, [0, 1]) == [1]  # a functional / prim op's result


# ---- the CLI -------------------------------------------------------------------------
def test_run_writes_an_etdump_per_input_set(tmp_path, capsys):
    fx = get_fixture("mlp")
    inp = tmp_path / "in.npz"
    np.savez(inp, set0_arg0=fx.calls[0][0], set1_arg0=fx.calls[1][0])
    out, etdp, binf = tmp_path / "out.npz", tmp_path / "r.etdp", tmp_path / "r.bin"
    assert cli.main(["run", str(fx.pte_path), "--tier", "reference", "--inputs", str(inp), "--out", str(out),
                     "--etdump", str(etdp), "--debug-buffer", str(binf)]) == 0
    with np.load(out) as z:
        assert sorted(z.files) == ["set0_out0", "set1_out0"]
        for k in range(2):
            np.testing.assert_allclose(z[f"set{k}_out0"], fx.expected[k][0], rtol=1e-5, atol=1e-6)
    dump = ETDump.load(etdp, binf)
    assert [r.name for r in dump.runs] == ["Default", "Execute", "Execute"]
    for k, run in enumerate(dump.executions):
        np.testing.assert_allclose(run.program_outputs()[0], fx.expected[k][0], rtol=1e-5,
                                   atol=1e-6)
    # without --debug-buffer: profiling events only
    assert cli.main(["run", str(fx.pte_path), "--tier", "reference", "--inputs", str(inp), "--etdump", str(etdp)]) == 0
    assert not any(isinstance(e, DebugEvent) for r in ETDump.load(etdp).runs for e in r.events)
    # a too-small buffer is reported, not a crash
    assert cli.main(["run", str(fx.pte_path), "--tier", "reference", "--inputs", str(inp), "--etdump", str(etdp),
                     "--debug-buffer", str(binf), "--debug-buffer-size", "1000"]) == 1
    assert "debug buffer is full" in capsys.readouterr().err


def test_run_keeps_reading_plain_npz_keys(tmp_path):
    fx = get_fixture("mlp")
    inp, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inp, fx.calls[0][0])  # arr_0
    assert cli.main(["run", str(fx.pte_path), "--tier", "reference", "--inputs", str(inp), "--out", str(out)]) == 0
    with np.load(out) as z:
        assert z.files == ["output_0"]
        np.testing.assert_allclose(z["output_0"], fx.expected[0][0], rtol=1e-5, atol=1e-6)
    np.savez(inp, set0_arg0=fx.calls[0][0], x=fx.calls[0][0])
    assert cli.main(["run", str(fx.pte_path), "--tier", "reference", "--inputs", str(inp)]) == 1  # mixed keys
