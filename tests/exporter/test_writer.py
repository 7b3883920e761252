"""The .pte / .ptd writer: header, segments and alignment as spec section 3
describes, readable by pyruntime's loader and by ExecuTorch's deserializer."""
from __future__ import annotations

import struct

import torch

from pyruntime import exporter
from pyruntime.exporter.writer import serialize_pte, serialize_ptd
from pyruntime.loader import PteFile, load_bytes
from pyruntime.ptd import DataMap


def _plan(values, instructions=(), operators=()):
    return {"name": "forward", "values": values, "inputs": [0], "outputs": [0],
            "chains": [{"inputs": [], "outputs": [], "instructions": list(instructions)}],
            "operators": list(operators), "delegates": [], "non_const_buffer_sizes": [0, 16]}


def _tensor(**kw):
    return {"val": (5, {"scalar_type": 6, "sizes": [4], "dim_order": [0], **kw})}


def test_header_segments_and_constant_alignment():
    consts = [b"", b"\x01" * 12, b"\x02" * 20, b"\x03" * 8]
    plan = _plan([_tensor(allocation_info={"memory_id": 1}), _tensor(data_buffer_idx=1),
                  {"val": (2, {"int_val": -3})}, {"val": (7, {"items": [2, 2]})}])
    pte = serialize_pte({"execution_plan": [plan]}, consts, mutable=[b"", b"\x09" * 16])
    assert pte[4:8] == b"ET12" and pte[8:12] == b"eh00"
    root, = struct.unpack_from("<I", pte, 0)
    hlen, program_size, base, seg_size = struct.unpack_from("<IQQQ", pte, 12)
    assert hlen == 32 and base % 128 == 0 and base >= program_size
    assert len(pte) == base + seg_size and root >= 40

    f = PteFile(load_bytes(pte))
    p = f.program
    assert p.constant_segment.offsets == [0, 0, 16, 48]  # padded to 16 after each entry
    assert [s.offset % 128 for s in p.segments] == [0, 0]
    table = f.constant_table()
    assert bytes(table[2][:20]) == consts[2] and bytes(table[3][:8]) == consts[3]
    assert bytes(f.mutable_entry(1, 16, "t")) == b"\x09" * 16
    plan = p.execution_plan[0]
    assert plan.values[1].val[1].data_buffer_idx == 1
    assert plan.values[2].val[1].int_val == -3 and plan.values[3].val[1].items == [2, 2]
    assert plan.values[0].val[1].allocation_info.memory_id == 1
    assert plan.non_const_buffer_sizes == [0, 16]


def test_no_segment_data_means_no_extended_header():
    pte = serialize_pte({"execution_plan": [_plan([_tensor()])]}, [b""])
    assert pte[4:8] == b"ET12" and pte[8:12] != b"eh00"
    f = PteFile(load_bytes(pte))
    assert not f.has_header and f.program.constant_segment.offsets == [0]


def test_ptd_round_trip():
    layout = {"scalar_type": 6, "sizes": [3], "dim_order": [0]}
    ptd = serialize_ptd([("a.weight", b"\x01" * 12, layout), ("b", b"\x02" * 5, None)])
    assert ptd[4:8] == b"FT01" and ptd[8:12] == b"FH01"
    hlen, fb_off, fb_size, base, size = struct.unpack_from("<IQQQQ", ptd, 12)
    assert (hlen, fb_off) == (40, 48) and base % 128 == 0 and len(ptd) == base + size
    data = DataMap.load(ptd)
    assert sorted(data.keys()) == ["a.weight", "b"]
    assert bytes(data.get("a.weight")) == b"\x01" * 12
    assert list(data.layout("a.weight").sizes) == [3]


def test_executorch_deserializer_reads_our_program():
    from executorch.exir._serialize._program import deserialize_pte_binary

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    result = exporter.export(model, (torch.randn(2, 4),))
    program = deserialize_pte_binary(result.buffer).program
    plan = program.execution_plan[0]
    names = {op.name + "." + op.overload for op in plan.operators}
    assert names == {"aten::permute_copy.out", "aten::addmm.out", "aten::relu.out"}
    assert list(plan.non_const_buffer_sizes) == result.non_const_buffer_sizes["forward"]
    weight = model[0].weight.detach().numpy()
    pte = PteFile(load_bytes(result.buffer))
    blobs = [bytes(b[:weight.nbytes]) for b in pte.constant_table()[1:]]
    assert weight.tobytes() in blobs
