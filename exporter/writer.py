"""Serialize a Program to ``.pte`` bytes and named tensors to ``.ptd`` (spec sections 2, 3).

The Program is plain data: one dict per table, keyed by the field names of
``pyruntime.schema.program.PROGRAM_SCHEMA`` (the same table the loader reads
with, so field ids cannot drift apart). A union field holds ``(code, dict)``
with the member table's code from ``KERNEL_TYPES`` / ``INSTRUCTION_TYPES``.
Scalars equal to the schema default are omitted, as flatc does; a list field
holding ``[]`` is written as an empty vector, ``None`` leaves it out.

>>> prog = {"execution_plan": [], "segments": []}
>>> pte = serialize_pte(prog, constants=[b""])
>>> pte[4:8]
b'ET12'
"""
from __future__ import annotations

import math
import struct

import flatbuffers
import numpy as np

from pyruntime.schema.program import FLAT_TENSOR_SCHEMA, PROGRAM_SCHEMA

SEGMENT_ALIGNMENT = 128
CONSTANT_ALIGNMENT = 16
MAX_FORCE_ALIGN = 16  # largest force_align in program.fbs (Buffer.storage)

_SLOT = {
    "bool": ("PrependBoolSlot", False), "u8": ("PrependUint8Slot", 0), "i8": ("PrependInt8Slot", 0),
    "u16": ("PrependUint16Slot", 0), "i16": ("PrependInt16Slot", 0),
    "u32": ("PrependUint32Slot", 0), "i32": ("PrependInt32Slot", 0),
    "u64": ("PrependUint64Slot", 0), "i64": ("PrependInt64Slot", 0),
    "f32": ("PrependFloat32Slot", 0.0), "f64": ("PrependFloat64Slot", 0.0),
}
_NP = {"bool": np.bool_, "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16,
       "u32": np.uint32, "i32": np.int32, "u64": np.uint64, "i64": np.int64,
       "f32": np.float32, "f64": np.float64}


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# ----------------------------------------------------------------- flatbuffer tables


def _build(b: flatbuffers.Builder, schema: dict, name: str, obj: dict) -> int:
    """Build table ``name`` from ``obj``; returns its offset. Children are built first."""
    fields = schema[name]
    known = {f for f, _, _ in fields}
    unknown = set(obj) - known
    if unknown:
        raise KeyError(f"table {name} has no field(s) {sorted(unknown)}")
    refs: list[tuple[int, int]] = []  # (field id, child offset)
    scalars: list[tuple[int, str, object]] = []
    for fname, fid, kind in fields:
        val = obj.get(fname)
        if val is None:
            continue
        if isinstance(kind, tuple) and kind[0] == "union":
            code, member = val
            mname = kind[1][code]
            scalars.append((fid, "u8", code))
            refs.append((fid + 1, _build(b, schema, mname, member or {})))
        elif isinstance(kind, str) and kind in _SLOT:
            scalars.append((fid, kind, val))
        else:
            refs.append((fid, _child(b, schema, kind, val)))
    nfields = max((fid for _, fid, k in fields), default=-1) + 1
    if any(isinstance(k, tuple) and k[0] == "union" for _, _, k in fields):
        nfields += 1
    b.StartObject(nfields)
    # widest scalars first keeps the inline table small
    for fid, kind, val in sorted(scalars, key=lambda s: -np.dtype(_NP[s[1]]).itemsize):
        meth, default = _SLOT[kind]
        getattr(b, meth)(fid, val, default)
    for fid, off in refs:
        b.PrependUOffsetTRelativeSlot(fid, off, 0)
    return b.EndObject()


def _child(b: flatbuffers.Builder, schema: dict, kind, val) -> int:
    if kind == "str":
        return b.CreateString(val)
    if kind == "bytes":
        return b.CreateByteVector(bytes(val))
    tag = kind[0]
    if tag == "table":
        return _build(b, schema, kind[1], val)
    if tag == "vec":
        arr = np.asarray(val, dtype=_NP[kind[1]])
        if arr.size == 0:
            b.StartVector(arr.itemsize, 0, arr.itemsize)
            return b.EndVector()
        return b.CreateNumpyVector(arr)
    if tag == "vec_table":
        offs = [_build(b, schema, kind[1], v) for v in val]
        return _offset_vector(b, offs)
    if tag == "vec_str":
        return _offset_vector(b, [b.CreateString(s) for s in val])
    raise AssertionError(kind)


def _offset_vector(b: flatbuffers.Builder, offs: list[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for off in reversed(offs):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def build_flatbuffer(schema: dict, root: str, obj: dict, identifier: bytes) -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(_build(b, schema, root, obj), file_identifier=identifier)
    return bytes(b.Output())


# ----------------------------------------------------------------- segments


def _pack(blobs: list[bytes], alignment: int) -> tuple[list[bytes], list[int]]:
    """Chunks of the blobs concatenated, padded after every blob but the last to
    ``alignment``, and each blob's offset. (Chunks, not one buffer: weights are
    copied once, when the file is joined.)"""
    chunks, offsets, n = [], [], 0
    for i, blob in enumerate(blobs):
        offsets.append(n)
        chunks.append(blob)
        n += len(blob)
        if i + 1 < len(blobs) and n % alignment:
            chunks.append(b"\0" * (_align(n, alignment) - n))
            n = _align(n, alignment)
    return chunks, offsets


def _place_segments(segments: list[tuple[list[bytes], int]]) -> tuple[list[bytes], int, list]:
    """Lay segments out from relative offset 0, each at lcm(128, its own alignment).
    Returns (chunks, total length, [{offset, size}] per segment)."""
    chunks, table, n = [], [], 0
    for parts, own in segments:
        start = _align(n, math.lcm(SEGMENT_ALIGNMENT, own))
        if start > n:
            chunks.append(b"\0" * (start - n))
        size = sum(len(p) for p in parts)
        table.append({"offset": start, "size": size})
        chunks.extend(parts)
        n = start + size
    return chunks, n, table


def _splice(fb: bytes, header: bytes, base: int, chunks: list[bytes]) -> bytes:
    """Insert ``header`` after byte 7 (fixing the root offset), pad to ``base``, append."""
    root = struct.unpack_from("<I", fb, 0)[0] + len(header)
    head = struct.pack("<I", root) + fb[4:8] + header + fb[8:]
    return b"".join([head, b"\0" * (base - len(head))] + chunks)


def serialize_pte(program: dict, constants: list[bytes], mutable: list[bytes] | None = None,
                  named_data: list[tuple[str, bytes, int]] | None = None) -> bytes:
    """``.pte`` bytes for ``program`` (spec 3.2).

    ``constants``: the constant table, entry 0 the empty placeholder; entries are
    padded to 16 bytes. ``mutable``: initial states of planned mutable tensors
    (entry 0 placeholder; written only if longer than 1), packed without padding.
    ``named_data``: ``(key, bytes, alignment)`` blobs for delegates.
    """
    program = dict(program)
    segments: list[tuple[list[bytes], int]] = []
    const_chunks, const_offsets = _pack(constants, CONSTANT_ALIGNMENT)
    program["constant_segment"] = {"segment_index": len(segments), "offsets": const_offsets}
    program["constant_buffer"] = []
    segments.append((const_chunks, 1))
    if mutable is not None and len(mutable) > 1:
        mut_chunks, mut_offsets = _pack(mutable, 1)
        program["mutable_data_segments"] = [{"segment_index": len(segments),
                                             "offsets": mut_offsets}]
        segments.append((mut_chunks, 1))
    if named_data:
        entries, seen = [], {}
        for key, blob, alignment in named_data:
            if blob not in seen:
                seen[blob] = len(segments)
                segments.append(([blob], alignment))
            entries.append({"key": key, "segment_index": seen[blob]})
        program["named_data"] = entries
    chunks, seg_size, program["segments"] = _place_segments(segments)
    fb = build_flatbuffer(PROGRAM_SCHEMA, "Program", program, b"ET12")
    if seg_size == 0:
        return fb
    header_len = _align(32, MAX_FORCE_ALIGN)
    program_size = header_len + len(fb)
    base = _align(program_size, SEGMENT_ALIGNMENT)
    header = b"eh00" + struct.pack("<IQQQ", 32, program_size, base, seg_size)
    return _splice(fb, header + b"\0" * (header_len - len(header)), base, chunks)


def serialize_ptd(tensors: list[tuple[str, bytes, dict | None]], alignment: int = 16) -> bytes:
    """``.ptd`` (FlatTensor) bytes: ``(key, bytes, tensor_layout dict or None)`` per entry."""
    segments = [([blob], alignment) for _, blob, _ in tensors]
    chunks, seg_size, seg_table = _place_segments(segments)
    named = []
    for i, (key, _, layout) in enumerate(tensors):
        entry = {"key": key, "segment_index": i}
        if layout is not None:
            entry["tensor_layout"] = layout
        named.append(entry)
    fb = build_flatbuffer(FLAT_TENSOR_SCHEMA, "FlatTensor",
                          {"version": 0, "segments": seg_table, "named_data": named}, b"FT01")
    header_len = _align(40, 16)  # inserted after byte 7, like the .pte header
    base = _align(header_len + len(fb), SEGMENT_ALIGNMENT)
    header = b"FH01" + struct.pack("<IQQQQ", 40, header_len, len(fb), base, seg_size)
    return _splice(fb, header + b"\0" * (header_len - len(header)), base, chunks)
