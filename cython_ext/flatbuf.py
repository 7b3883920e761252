"""A bounds-checked, table-driven FlatBuffers reader (spec section 1).

It lives in the lowest layer so that both ``pyruntime`` (.pte, .ptd) and the
delegate bridges (XNNPACK's XNNGraph, Vulkan's VkGraph, ...) can read their
flatbuffers with it; ``pyruntime.schema.flatbuf`` re-exports it.

Nothing here trusts the file: every offset, length and count is checked
against the buffer before it is followed, and any violation raises
``ExecuTorchError(InvalidProgram)`` naming the table and field. Tables are
described declaratively (see ``pyruntime/schema/program.py``), and ``read_table`` turns a
table position into a plain Python object with one attribute per field.
"""
from __future__ import annotations

import struct

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError

_SCALARS = {
    "bool": ("<?", 1), "u8": ("<B", 1), "i8": ("<b", 1), "u16": ("<H", 2), "i16": ("<h", 2),
    "u32": ("<I", 4), "i32": ("<i", 4), "u64": ("<Q", 8), "i64": ("<q", 8),
    "f32": ("<f", 4), "f64": ("<d", 8),
}
_NP = {"bool": np.bool_, "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16,
       "u32": np.uint32, "i32": np.int32, "u64": np.uint64, "i64": np.int64,
       "f32": np.float32, "f64": np.float64}
_STRUCTS = {k: struct.Struct(v[0]) for k, v in _SCALARS.items()}


class Node:
    """A parsed table: attributes named as the schema's fields."""

    __slots__ = ("__dict__",)

    def __init__(self, kind: str):
        self.__dict__["_kind"] = kind

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k != "_kind")
        return f"{self._kind}({fields})"


class Reader:
    """Reads flatbuffer primitives out of ``buf`` (bytes, mmap or uint8 ndarray)."""

    def __init__(self, buf, error_code=ErrorCode.InvalidProgram, what="program"):
        self.buf = buf
        self.n = len(buf)
        self.code = error_code
        self.what = what

    def fail(self, msg: str):
        raise ExecuTorchError(self.code, f"malformed {self.what}: {msg}")

    def scalar(self, kind: str, pos: int, where: str):
        size = _SCALARS[kind][1]
        if pos < 0 or pos + size > self.n:
            self.fail(f"{where}: {kind} at byte {pos} is outside the {self.n}-byte buffer")
        return _STRUCTS[kind].unpack_from(self.buf, pos)[0]

    def uoffset(self, pos: int, where: str) -> int:
        target = pos + self.scalar("u32", pos, where)
        if target >= self.n:
            self.fail(f"{where}: offset at byte {pos} points to {target}, past the end ({self.n})")
        return target

    def table(self, pos: int, where: str) -> "Table":
        return Table(self, pos, where)

    def root(self, identifier: bytes | None = None) -> "Table":
        if self.n < 8:
            self.fail(f"{self.n} bytes is too short for a flatbuffer")
        if identifier is not None and bytes(self.buf[4:8]) != identifier:
            self.fail(f"file identifier {bytes(self.buf[4:8])!r}, expected {identifier!r}")
        return self.table(self.uoffset(0, "root"), "root")

    def vector(self, pos: int, elem_size: int, where: str) -> tuple[int, int]:
        """(start, count) of the vector whose length prefix is at ``pos``."""
        count = self.scalar("u32", pos, where)
        start = pos + 4
        if start + count * elem_size > self.n:
            self.fail(f"{where}: vector of {count} x {elem_size} bytes at {start} overruns the buffer")
        return start, count


class Table:
    __slots__ = ("r", "pos", "vt", "vt_len", "where")

    def __init__(self, r: Reader, pos: int, where: str):
        self.r, self.pos, self.where = r, pos, where
        soff = r.scalar("i32", pos, where)
        vt = pos - soff
        vt_size = r.scalar("u16", vt, where + " vtable")
        if vt_size < 4 or vt_size % 2 or vt + vt_size > r.n:
            r.fail(f"{where}: bad vtable (size {vt_size} at {vt})")
        self.vt = vt
        self.vt_len = (vt_size - 4) // 2

    def field_pos(self, fid: int) -> int:
        if fid >= self.vt_len:
            return 0
        off = self.r.scalar("u16", self.vt + 4 + 2 * fid, self.where)
        return self.pos + off if off else 0

    def sub(self, fid: int, name: str) -> str:
        return f"{self.where}.{name}"


# ---- declarative schema reading ------------------------------------------------
# A schema is {table_name: [(field_name, field_id, kind), ...]}; kinds:
#   scalar names ("u32", "i64", "bool", ...) with optional default via ("u32", default)
#   "str", "bytes" (ubyte vector -> read-only uint8 ndarray view)
#   ("vec", scalar) -> list of Python scalars;  ("vec_str",) -> list of str
#   ("table", Name), ("vec_table", Name)
#   ("union", {code: Name}) -> consumes ids fid (type) and fid+1 (value); attribute
#   holds (code, Node or None)


def read_table(t: Table, name: str, schema: dict) -> Node:
    node = Node(name)
    d = node.__dict__
    r = t.r
    for fname, fid, kind in schema[name]:
        where = t.sub(fid, fname)
        if isinstance(kind, tuple) and kind[0] == "union":
            code_pos = t.field_pos(fid)
            code = r.scalar("u8", code_pos, where) if code_pos else 0
            vpos = t.field_pos(fid + 1)
            member = None
            if code and vpos:
                mname = kind[1].get(code)
                if mname is None:
                    r.fail(f"{where}: unknown union type code {code}")
                member = read_table(r.table(r.uoffset(vpos, where), where), mname, schema)
            d[fname] = (code, member)
            continue
        pos = t.field_pos(fid)
        d[fname] = _read_field(r, pos, kind, where, schema)
    return node


def _read_field(r: Reader, pos: int, kind, where: str, schema: dict):
    if isinstance(kind, str):
        if kind == "str":
            return _string(r, pos, where) if pos else None
        if kind == "bytes":
            if not pos:
                return None
            start, count = r.vector(r.uoffset(pos, where), 1, where)
            return np.frombuffer(r.buf, np.uint8, count, start) if count else np.zeros(0, np.uint8)
        return r.scalar(kind, pos, where) if pos else (False if kind == "bool" else 0)
    tag = kind[0]
    if tag == "default":
        return r.scalar(kind[1], pos, where) if pos else kind[2]
    if not pos:
        return None
    vpos = r.uoffset(pos, where)
    if tag == "table":
        return read_table(r.table(vpos, where), kind[1], schema)
    if tag == "vec":
        k = kind[1]
        start, count = r.vector(vpos, _SCALARS[k][1], where)
        return np.frombuffer(r.buf, _NP[k], count, start).tolist() if count else []
    if tag == "vec_table":
        start, count = r.vector(vpos, 4, where)
        return [read_table(r.table(r.uoffset(start + 4 * i, f"{where}[{i}]"), f"{where}[{i}]"),
                           kind[1], schema) for i in range(count)]
    if tag == "vec_str":
        start, count = r.vector(vpos, 4, where)
        return [_string(r, start + 4 * i, f"{where}[{i}]") for i in range(count)]
    raise AssertionError(kind)


def _string(r: Reader, pos: int, where: str) -> str:
    spos = r.uoffset(pos, where)
    start, count = r.vector(spos, 1, where)
    try:
        return bytes(r.buf[start:start + count]).decode("utf-8")
    except UnicodeDecodeError:
        r.fail(f"{where}: string is not valid UTF-8")
