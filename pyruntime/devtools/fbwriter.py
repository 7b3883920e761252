"""Write a flatbuffer from plain dicts, driven by the same field tables the reader uses.

A table is a dict keyed by field name (see ``schemas.py``); a union field holds
``(code, dict)``; ``None`` or a missing key leaves a field out, and scalars equal
to their default are omitted, as flatcc does. ``align`` maps ``(table, field)``
to the ``force_align`` of a ``[ubyte]`` vector.

>>> from pyruntime.devtools.schemas import ETDUMP_SCHEMA
>>> buf = build(ETDUMP_SCHEMA, "ETDump", {"version": 0, "run_data": []}, b"ED00",
...             size_prefixed=True)
>>> buf[8:12]
b'ED00'
"""
from __future__ import annotations

import flatbuffers
import numpy as np

_SLOT = {
    "bool": "PrependBoolSlot", "u8": "PrependUint8Slot", "i8": "PrependInt8Slot",
    "u16": "PrependUint16Slot", "i16": "PrependInt16Slot", "u32": "PrependUint32Slot",
    "i32": "PrependInt32Slot", "u64": "PrependUint64Slot", "i64": "PrependInt64Slot",
    "f32": "PrependFloat32Slot", "f64": "PrependFloat64Slot",
}
_NP = {"bool": np.bool_, "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16,
       "u32": np.uint32, "i32": np.int32, "u64": np.uint64, "i64": np.int64,
       "f32": np.float32, "f64": np.float64}


class _Writer:
    def __init__(self, schema: dict, align: dict | None):
        self.schema = schema
        self.align = align or {}
        self.b = flatbuffers.Builder(4096)

    def table(self, name: str, obj: dict) -> int:
        fields = self.schema[name]
        unknown = set(obj) - {f for f, _, _ in fields}
        if unknown:
            raise KeyError(f"table {name} has no field(s) {sorted(unknown)}")
        refs, scalars = [], []
        nfields = 0
        for fname, fid, kind in fields:
            union = isinstance(kind, tuple) and kind[0] == "union"
            nfields = max(nfields, fid + (2 if union else 1))
            val = obj.get(fname)
            if val is None:
                continue
            if union:
                code, member = val
                scalars.append((fid, "u8", code, 0))
                refs.append((fid + 1, self.table(kind[1][code], member or {})))
            elif isinstance(kind, str) and kind in _SLOT:
                scalars.append((fid, kind, val, False if kind == "bool" else 0))
            elif isinstance(kind, tuple) and kind[0] == "default":
                scalars.append((fid, kind[1], val, kind[2]))
            else:
                refs.append((fid, self.child(name, fname, kind, val)))
        b = self.b
        b.StartObject(nfields)
        for fid, kind, val, default in sorted(scalars, key=lambda s: -_NP[s[1]]().itemsize):
            getattr(b, _SLOT[kind])(fid, val, default)
        for fid, off in refs:
            b.PrependUOffsetTRelativeSlot(fid, off, 0)
        return b.EndObject()

    def child(self, table: str, fname: str, kind, val) -> int:
        b = self.b
        if kind == "str":
            return b.CreateString(val)
        if kind == "bytes":
            return self.bytes(bytes(val), self.align.get((table, fname), 1))
        tag = kind[0]
        if tag == "table":
            return self.table(kind[1], val)
        if tag == "vec":
            arr = np.asarray(val, dtype=_NP[kind[1]])
            if arr.size == 0:
                b.StartVector(arr.itemsize, 0, arr.itemsize)
                return b.EndVector()
            return b.CreateNumpyVector(arr.reshape(-1))
        if tag == "vec_table":
            offs = [self.table(kind[1], v) for v in val]
            b.StartVector(4, len(offs), 4)
            for off in reversed(offs):
                b.PrependUOffsetTRelative(off)
            return b.EndVector()
        raise AssertionError(kind)

    def bytes(self, data: bytes, alignment: int) -> int:
        b = self.b
        n = len(data)
        b.StartVector(1, n, max(alignment, 1))
        b.head = b.head - n
        b.Bytes[b.head:b.head + n] = data
        return b.EndVector()


def build(schema: dict, root: str, obj: dict, identifier: bytes, *, size_prefixed=False,
          align: dict | None = None) -> bytes:
    """The flatbuffer of ``obj`` as table ``root`` with file ``identifier``."""
    w = _Writer(schema, align)
    off = w.table(root, obj)
    if size_prefixed:
        w.b.FinishSizePrefixed(off, file_identifier=identifier)
    else:
        w.b.Finish(off, file_identifier=identifier)
    return bytes(w.b.Output())
