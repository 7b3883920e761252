"""Our EventTracer's dumps against dumps ExecuTorch's C++ runtime recorded for the same
programs and inputs: the same debug events, equal tensors, the same event names;
ExecuTorch's Inspector opens ours."""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from pyruntime.devtools import ETDump, EventTracer
from tests.devtools.reference_dumps import reference_dump

# an MLP, a CNN, an int8 CNN, MobileNetV2, a ViT-tiny-like encoder, KV-cache decoders over
# several calls on one method (aten ops; ExecuTorch's custom sdpa/update_cache ops), dynamic
# batch sizes, a cond program (JumpFalse / Move)
PROGRAMS = ["mlp", "cnn_bn", "quant_cnn", "mobilenet_v2", "vit_tiny", "llama_kv",
            "llama_sdpa_kv", "mlp_dynamic", "cond"]


def record(pte_path, calls, method="forward", tier="reference", **kw):
    tracer = EventTracer(**kw)
    m = tracer.load_method(pyruntime.Runtime.get().load_program(pte_path), method, tier=tier)
    outputs = [m.execute(c) for c in calls]
    return tracer.etdump(), outputs, m


def assert_close(ours, ref, where):
    if isinstance(ref, list):
        assert isinstance(ours, list) and len(ours) == len(ref), where
        for i, (a, b) in enumerate(zip(ours, ref)):
            assert_close(a, b, f"{where}[{i}]")
        return
    if not isinstance(ref, np.ndarray):
        assert ours == ref, where
        return
    assert ours.shape == ref.shape and ours.dtype == ref.dtype, \
        f"{where}: {ours.dtype}{list(ours.shape)} vs {ref.dtype}{list(ref.shape)}"
    if ref.dtype.kind in "fc":
        a, b = ours.astype(np.float64), ref.astype(np.float64)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        finite = np.isfinite(b)
        scale = max(1.0, float(np.abs(b[finite]).max())) if finite.any() else 1.0
        with np.errstate(invalid="ignore"):  # inf - inf where both are the same inf
            err = np.where(same, 0, np.abs(a - b))
        assert (err <= 1e-4 * scale).all(), f"{where}: max err {np.nanmax(err)} (scale {scale})"
    else:
        np.testing.assert_array_equal(ours, ref, err_msg=where)


def assert_dumps_match(ours: ETDump, ref: ETDump):
    assert len(ours.executions) == len(ref.executions)
    for k, (a, b) in enumerate(zip(ours.executions, ref.executions)):
        va, vb = a.instruction_outputs(), b.instruction_outputs()
        assert set(va) == set(vb), f"run {k}: instructions logged differ: " \
                                   f"{sorted(set(va) ^ set(vb))[:10]}"
        for key, refs in vb.items():
            assert_close(va[key], refs, f"run {k} instruction {key}")
        assert_close(a.program_outputs(), b.program_outputs(), f"run {k} outputs")
        names = lambda r: [e.name for e in r.profile_events if e.name is not None]  # noqa: E731
        assert names(a) == names(b), f"run {k}: profile event names differ"


@pytest.mark.parametrize("name", PROGRAMS)
def test_debug_events_match_executorch(name):
    rd = reference_dump(name)
    ours, _, _ = record(rd.fixture.pte_path, rd.fixture.calls, rd.fixture.method)
    assert_dumps_match(ours, ETDump.load(rd.etdp, rd.bin))
    # the block layout of the C++ runtime: load block, then per execute the instructions'
    # events, Method::execute, and the program outputs last
    assert [r.name for r in ours.runs] == ["Default"] + ["Execute"] * len(rd.fixture.calls)
    events = ours.executions[0].events
    end = [i for i, e in enumerate(events) if getattr(e, "name", None) == "Method::execute"]
    assert len(end) == 1
    tail = events[end[0] + 1:]
    assert all(getattr(e, "value", None) is not None and e.value.output for e in tail)


@pytest.mark.parametrize("name", ["mlp", "cnn_bn"])
def test_fast_tier_dump_matches_executorch(name):
    """The fast tier's compiled kernels are what gets logged (not the reference ones)."""
    rd = reference_dump(name)
    ours, outputs, m = record(rd.fixture.pte_path, rd.fixture.calls, tier="fast")
    assert m._fast.kernels, "nothing compiled: this test would not test the fast tier"
    assert_dumps_match(ours, ETDump.load(rd.etdp, rd.bin))
    plain = pyruntime.Runtime.get().load_program(rd.fixture.pte_path).load_method(
        "forward", tier="fast")
    for call, outs in zip(rd.fixture.calls, outputs):
        for a, b in zip(plain.execute(call), outs):
            np.testing.assert_array_equal(a, b)


def test_delegate_events_match_executorch():
    """A delegate call logs its arguments (inputs and outputs) and XNNPACK's per-operator
    timings, as the C++ runtime does."""
    rd = reference_dump("partial", xnnpack=True)
    ours, _, _ = record(rd.fixture.pte_path, rd.fixture.calls)
    ref = ETDump.load(rd.etdp, rd.bin)
    for a, b in zip(ours.executions, ref.executions):
        va, vb = a.instruction_outputs(), b.instruction_outputs()
        assert set(va) == set(vb) and len(vb[(0, 0)]) == 2  # one input, one output
        for key in vb:
            assert_close(va[key], vb[key], str(key))
        seq = lambda r: [(e.name, e.delegate_debug_id_str, e.instruction_id)  # noqa: E731
                         for e in r.profile_events]
        assert seq(a) == seq(b)
        inner = [e for e in a.profile_events if e.delegate_debug_id_str]
        call = [e for e in a.profile_events if e.name == "DELEGATE_CALL"][0]
        assert call.start_time <= inner[0].start_time <= inner[0].end_time


def test_values_inside_an_xnnpack_delegate():
    """The XNNPACK nodes' outputs, keyed by debug handle, equal the same layers computed
    without delegation (the portable MLP fixture: same weights, same input)."""
    from tests.delegates.xnnpack_fixtures import get_fixture as xnn_fixture
    from tests.programs.fixtures import get_fixture

    fx = xnn_fixture("mlp")
    ours, _, _ = record(fx.pte_path, fx.calls[:1])
    inner = ours.executions[0].delegate_outputs()
    assert len(inner) == 2 and all(len(v) == 1 for v in inner.values())
    portable = get_fixture("mlp")
    ref, _, _ = record(portable.pte_path, portable.calls[:1])
    relus = [v[0] for k, v in sorted(ref.executions[0].instruction_outputs().items())
             if k[1] in (2, 5)]  # the two relu.out instructions
    for (key, vals), want in zip(sorted(inner.items(), key=lambda kv: kv[0][2]), relus):
        np.testing.assert_allclose(vals[0], want, rtol=1e-5, atol=1e-5, err_msg=str(key))
    # the real outputs are untouched by the debug runtime
    np.testing.assert_allclose(ours.executions[0].program_outputs()[0], fx.expected[0][0],
                               rtol=1e-6, atol=1e-6)


def test_executorch_inspector_opens_our_dump(tmp_path):
    """ExecuTorch's Inspector reads our dump as it reads its own (one execute: with several,
    its Inspector asserts that every run has the same outputs, also on its own dumps)."""
    from executorch.devtools import Inspector

    rd = reference_dump("cnn_bn", calls=1)
    ours, _, _ = record(rd.fixture.pte_path, rd.fixture.calls[:1])
    ours.save(tmp_path / "o.etdp", tmp_path / "o.bin")
    mine = Inspector(etdump_path=str(tmp_path / "o.etdp"),
                     debug_buffer_path=str(tmp_path / "o.bin"))
    theirs = Inspector(etdump_path=str(rd.etdp), debug_buffer_path=str(rd.bin))
    for a, b in zip(mine.event_blocks, theirs.event_blocks):
        assert a.name == b.name
        assert [e.name for e in a.events] == [e.name for e in b.events]
        for ea, eb in zip(a.events, b.events):
            assert len(ea.debug_data) == len(eb.debug_data)
            for x, y in zip(ea.debug_data, eb.debug_data):
                np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-5)
    assert len(mine.to_dataframe()) == len(theirs.to_dataframe())
    # a delegated program: XNNPACK's operator timings and node values, by delegate debug id
    from tests.delegates.xnnpack_fixtures import get_fixture as xnn_fixture

    fx = xnn_fixture("cnn_bn")
    ours, _, _ = record(fx.pte_path, fx.calls[:1])
    ours.save(tmp_path / "x.etdp", tmp_path / "x.bin")
    events = Inspector(etdump_path=str(tmp_path / "x.etdp"),
                       debug_buffer_path=str(tmp_path / "x.bin")).event_blocks[1].events
    inner = {e.delegate_debug_identifier: e for e in events if e.delegate_debug_identifier}
    assert "Convolution (NHWC, F32) IGEMM #1" in inner
    assert inner[1].debug_data[0].shape == (2, 32, 32, 16)  # the first conv node, NHWC
