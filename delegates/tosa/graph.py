"""Just enough of the TOSA flatbuffer (``tosa_1.0.fbs``) to bind a delegate call: the main
block's input and output tensors (name, shape, dtype), read with every offset checked.

TosaGraph {version, regions:[TosaRegion]}; TosaRegion {name, blocks:[TosaBasicBlock]};
TosaBasicBlock {name, operators, tensors:[TosaTensor], inputs:[string], outputs:[string]};
TosaTensor {name, shape:[int32], type:DType, data, ...}. The first block of the first
region is the graph's entry (as the reference model runs it).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError

BACKEND = "TOSABackend"
FILE_ID = b"TOSA"
# DType enum -> numpy dtype of the arrays the reference model takes and returns
DTYPES = {1: np.dtype(np.bool_), 3: np.dtype(np.int8), 4: np.dtype(np.int16),
          5: np.dtype(np.int32), 7: np.dtype(np.float32), 8: np.dtype(np.float16)}
DTYPE_NAMES = {0: "UNKNOWN", 1: "BOOL", 2: "INT4", 3: "INT8", 4: "INT16", 5: "INT32",
               6: "INT48", 7: "FP32", 8: "FP16", 9: "BF16", 10: "SHAPE", 11: "FP8E4M3",
               12: "FP8E5M2"}


def payload_error(msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidProgram, f"{BACKEND} payload: {msg}")


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple
    dtype_id: int

    @property
    def dtype(self):
        return DTYPES.get(self.dtype_id)

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES.get(self.dtype_id, f"DType {self.dtype_id}")


@dataclass(frozen=True)
class Graph:
    inputs: list  # TensorSpec, in the order the reference model assigns inputs
    outputs: list
    n_operators: int


class _Buf:
    """A flatbuffer with bounds-checked reads (offsets come from untrusted bytes)."""

    def __init__(self, data: bytes):
        self.b = data

    def u32(self, pos: int) -> int:
        if pos < 0 or pos + 4 > len(self.b):
            raise payload_error(f"offset {pos} is outside the {len(self.b)}-byte flatbuffer")
        return struct.unpack_from("<I", self.b, pos)[0]

    def u16(self, pos: int) -> int:
        if pos < 0 or pos + 2 > len(self.b):
            raise payload_error(f"offset {pos} is outside the {len(self.b)}-byte flatbuffer")
        return struct.unpack_from("<H", self.b, pos)[0]

    def i32(self, pos: int) -> int:
        v = self.u32(pos)
        return v - (1 << 32) if v >= 1 << 31 else v

    def table(self, pos: int) -> int:
        return pos + self.u32(pos)  # uoffset to a table

    def field(self, table: int, index: int) -> int | None:
        """Absolute position of field ``index`` of the table at ``table`` (None: absent)."""
        vt = table - self.i32(table)
        slot = 4 + 2 * index
        if slot + 2 > self.u16(vt):
            return None
        off = self.u16(vt + slot)
        return table + off if off else None

    def vector(self, pos: int, elem: int) -> tuple[int, int]:
        start = pos + self.u32(pos)
        n = self.u32(start)
        if start + 4 + n * elem > len(self.b):
            raise payload_error(f"a vector of {n} elements runs past the flatbuffer end")
        return start + 4, n

    def string(self, pos: int) -> str:
        start, n = self.vector(pos, 1)
        return self.b[start:start + n].decode("utf-8", "replace")

    def tables(self, table: int, index: int) -> list[int]:
        return self._each(table, index, self.table)

    def strings(self, table: int, index: int) -> list[str]:
        return self._each(table, index, self.string)

    def _each(self, table: int, index: int, read) -> list:
        """``read`` of every offset in the vector of field ``index`` ([] when absent)."""
        f = self.field(table, index)
        if f is None:
            return []
        start, n = self.vector(f, 4)
        return [read(start + 4 * i) for i in range(n)]


def read_graph(data: bytes) -> Graph:
    if len(data) < 8 or data[4:8] != FILE_ID:
        raise payload_error(f"not a TOSA flatbuffer (file identifier {bytes(data[4:8])!r}, "
                            f"expected {FILE_ID!r})")
    b = _Buf(data)
    root = b.table(0)
    regions = b.tables(root, 1)
    if not regions:
        raise payload_error("the graph has no regions")
    blocks = b.tables(regions[0], 1)
    if not blocks:
        raise payload_error("the first region has no basic blocks")
    block = blocks[0]
    tensors = {}
    for t in b.tables(block, 2):
        name_f = b.field(t, 0)
        name = b.string(name_f) if name_f is not None else ""
        shape_f = b.field(t, 1)
        shape = ()
        if shape_f is not None:
            start, n = b.vector(shape_f, 4)
            shape = tuple(b.i32(start + 4 * i) for i in range(n))
        type_f = b.field(t, 2)
        tensors[name] = TensorSpec(name, shape, b.u32(type_f) if type_f is not None else 0)
    ops_f = b.field(block, 1)
    n_ops = b.vector(ops_f, 4)[1] if ops_f is not None else 0

    def specs(names, what):
        out = []
        for n in names:
            if n not in tensors:
                raise payload_error(f"graph {what} {n!r} is not a tensor of the block")
            out.append(tensors[n])
        return out

    return Graph(specs(b.strings(block, 3), "input"), specs(b.strings(block, 4), "output"),
                 n_ops)
