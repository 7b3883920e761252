"""The ETDump (.etdp) writer and reader against ExecuTorch's own serializer, and bad input."""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.devtools import (
    DebugBuffer, DebugEvent, DebugValue, ETDump, ProfileEvent, RunData, TensorRef,
)
from tests.devtools.reference_dumps import reference_dump


def _sample() -> ETDump:
    buf = DebugBuffer()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[1, -2], [3, 4]], dtype=np.int64)
    ta = TensorRef(6, (2, 3), (3, 1), buf.write(a, "a"))
    tb = TensorRef(4, (2, 2), (2, 1), buf.write(b, "b"))
    t_empty = TensorRef(6, (0, 4), (4, 1), buf.write(np.zeros((0, 4), np.float32), "e"))
    load = RunData("Default", [ProfileEvent("Method::init", -1, 0, 10, 20)])
    run = RunData("Execute", [
        DebugEvent(0, 0, DebugValue("Tensor", ta)),
        ProfileEvent("native_call_add.out", 0, 0, 100, 150),
        ProfileEvent("OPERATOR_CALL", 0, 0, 99, 151),
        ProfileEvent(None, 0, 1, 160, 170, delegate_debug_id_str="Conv #1",
                     delegate_debug_metadata=b"\x01\x02"),
        DebugEvent(0, 1, DebugValue("Tensor", tb), delegate_debug_id_int=7),
        DebugEvent(0, 1, DebugValue("TensorList", [ta, t_empty])),
        DebugEvent(0, 2, DebugValue("Int", -5)),
        DebugEvent(0, 2, DebugValue("Double", 2.5)),
        DebugEvent(0, 2, DebugValue("Bool", True)),
        ProfileEvent("DELEGATE_CALL", 0, 1, 155, 180),
        ProfileEvent("Method::execute", -1, 0, 90, 200),
        DebugEvent(-1, 0, DebugValue("Tensor", ta, output=True)),
    ], bundled_input_index=3)
    return ETDump([load, run], bytes(buf.data))


def test_round_trip_and_layout():
    dump = _sample()
    data = dump.to_bytes()
    assert data[8:12] == b"ED00" and int.from_bytes(data[:4], "little") == len(data) - 4
    back = ETDump.from_bytes(data, dump.debug_buffer)
    assert [r.events for r in back.runs] == [r.events for r in dump.runs]
    run = back.executions[0]
    assert run.bundled_input_index == 3
    outs = run.instruction_outputs()
    np.testing.assert_array_equal(outs[(0, 0)][0], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert outs[(0, 2)] == [-5, 2.5, True]
    assert outs[(0, 1)][0][1].shape == (0, 4)
    np.testing.assert_array_equal(run.delegate_outputs()[(0, 1, 7)][0], [[1, -2], [3, 4]])
    assert len(run.program_outputs()) == 1
    # tensors start at 64-byte boundaries of the debug buffer; empty ones have offset -1
    refs = [e.value.value for e in run.debug_events if e.value.kind == "Tensor"]
    assert all(t.offset % 64 == 0 for t in refs)
    assert run.debug_events[2].value.value[1].offset == -1


def test_executorch_reads_ours():
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    dump = _sample()
    et = deserialize_from_etdump_flatcc(dump.to_bytes())
    assert [r.name for r in et.run_data] == ["Default", "Execute"]
    ev = et.run_data[1].events
    assert et.run_data[1].bundled_input_index == 3
    assert ev[0].debug_event.debug_entry.tensor.sizes == [2, 3]
    assert ev[0].debug_event.debug_entry.tensor.strides == [3, 1]
    assert ev[1].profile_event.name == "native_call_add.out"
    assert ev[1].profile_event.end_time - ev[1].profile_event.start_time == 50
    assert ev[3].profile_event.delegate_debug_id_str == "Conv #1"
    assert ev[3].profile_event.delegate_debug_metadata == b"\x01\x02"
    assert ev[4].debug_event.delegate_debug_id_int == 7
    assert [t.sizes for t in ev[5].debug_event.debug_entry.tensor_list.tensors] == [[2, 3], [0, 4]]
    assert ev[6].debug_event.debug_entry.int_value.int_val == -5
    assert ev[7].debug_event.debug_entry.double_value.double_val == 2.5
    assert ev[8].debug_event.debug_entry.bool_value.bool_val is True
    out = ev[11].debug_event
    assert out.chain_index == 2 ** 64 - 1 and out.debug_entry.output.bool_val


def test_ours_reads_executorch():
    """Every field our reader sees equals what ExecuTorch's deserializer sees."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    rd = reference_dump("partial", xnnpack=True)
    ours = ETDump.load(rd.etdp, rd.bin)
    et = deserialize_from_etdump_flatcc(rd.etdp.read_bytes())
    assert [r.name for r in ours.runs] == [r.name for r in et.run_data]
    for r_ours, r_et in zip(ours.runs, et.run_data):
        assert len(r_ours.events) == len(r_et.events)
        for a, b in zip(r_ours.events, r_et.events):
            if b.profile_event is not None:
                p = b.profile_event
                assert (a.name, a.chain_index, a.instruction_id, a.start_time, a.end_time,
                        a.delegate_debug_id_str) == (p.name, p.chain_index, p.instruction_id,
                                                     p.start_time, p.end_time,
                                                     p.delegate_debug_id_str)
            else:
                d = b.debug_event
                t = d.debug_entry.tensor
                assert a.instruction_id == d.instruction_id
                assert a.chain_index % 2 ** 64 == d.chain_index
                assert (a.value.value.sizes, a.value.value.offset) == (tuple(t.sizes), t.offset)
    # and re-serializing what we read gives a file ExecuTorch reads back identically
    again = deserialize_from_etdump_flatcc(ours.to_bytes())
    assert again == et


def test_debug_buffer_alignment_and_capacity():
    buf = DebugBuffer(capacity=200)
    assert buf.write(np.ones(3, np.float32), "x") == 0
    assert buf.write(np.ones(3, np.float32), "y") == 64
    with pytest.raises(ExecuTorchError) as e:
        buf.write(np.ones(30, np.float32), "method 'forward' instruction 5 (aten::add.out)")
    assert e.value.code == ErrorCode.OutOfResources
    assert "instruction 5" in str(e.value) and "needs 120 bytes at offset 128" in str(e.value)


@pytest.mark.parametrize("data, match", [
    (b"", "too short"),
    (b"\x00" * 11, "too short"),
    (b"\x08\x00\x00\x00" + b"\x00" * 8, "file identifier"),
    (b"\xff\x00\x00\x00" + b"\x00\x00\x00\x00ED00" + b"\x00" * 8, "size prefix"),
])
def test_malformed_headers(data, match):
    with pytest.raises(ExecuTorchError, match=match):
        ETDump.from_bytes(data)


def test_truncated_and_corrupted_dumps_raise_our_error():
    data = _sample().to_bytes()
    for n in range(0, len(data), 3):
        with pytest.raises(ExecuTorchError):
            ETDump.from_bytes(data[:n])
    rng = np.random.default_rng(0)
    parsed = 0
    for _ in range(300):
        bad = bytearray(data)
        for pos in rng.integers(4, len(bad), size=3):
            bad[pos] = int(rng.integers(0, 256))
        try:
            dump = ETDump.from_bytes(bytes(bad), _sample().debug_buffer)
            for run in dump.runs:  # reading tensors out of the buffer is checked too
                run.instruction_outputs(), run.delegate_outputs(), run.program_outputs()
            parsed += 1
        except ExecuTorchError:
            pass
    assert parsed < 300  # the corruption was seen at least sometimes


def test_tensor_outside_the_debug_buffer():
    dump = _sample()
    run = dump.executions[0]
    with pytest.raises(ExecuTorchError, match=r"needs debug-buffer bytes \[0, 24\), the buffer "
                                              r"has 10 bytes"):
        ETDump(dump.runs, dump.debug_buffer[:10]).executions[0].instruction_outputs()
    with pytest.raises(ExecuTorchError, match="none was given"):
        ETDump(dump.runs, None).executions[0].instruction_outputs()
    assert run.events[0].value.value.offset == 0


def test_load_names_the_file(tmp_path):
    p = tmp_path / "x.etdp"
    p.write_bytes(b"\x10\x00\x00\x00" + b"\x00" * 4 + b"BP08" + b"\x00" * 8)
    with pytest.raises(ExecuTorchError, match=r"x\.etdp: file identifier b'BP08'"):
        ETDump.load(p)
    with pytest.raises(ExecuTorchError, match="cannot read"):
        ETDump.load(tmp_path / "missing.etdp")
