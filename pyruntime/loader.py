"""Reading a .pte: the data source, the extended header, segments (spec sections 3.1-3.4).

``load_bytes`` turns a path (memory-mapped, read-only, zero-copy), bytes-like
object or binary file-like object into a read-only uint8 array. ``PteFile``
parses the header and the Program flatbuffer and hands out bounds-checked
views of segments, constants and named data.
"""
from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError, invalid_program
from pyruntime.schema.flatbuf import Reader, read_table
from pyruntime.schema.program import PROGRAM_SCHEMA

PTE_IDENTIFIER = b"ET12"
_EH_MAGIC = b"eh00"


def load_bytes(source) -> np.ndarray:
    """A read-only uint8 array over ``source`` (path, bytes-like or file-like)."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    return np.zeros(0, np.uint8)
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise ExecuTorchError(ErrorCode.AccessFailed, f"cannot read {path}: {e}") from e
        return np.frombuffer(mm, np.uint8)
    if hasattr(source, "read"):
        data = source.read()
        if not isinstance(data, (bytes, bytearray)):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  "file-like source must be opened in binary mode")
        source = data
    try:
        arr = np.frombuffer(source, np.uint8)
    except TypeError:
        raise ExecuTorchError(
            ErrorCode.InvalidArgument,
            f"cannot load a program from {type(source).__name__}; give a path, bytes or a "
            "binary file object") from None
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


class PteFile:
    """The parsed container: header fields, the Program table and segment access."""

    def __init__(self, data: np.ndarray):
        self.data = data
        n = len(data)
        if n < 8:
            raise invalid_program(f"{n} bytes is too short for an ExecuTorch program")
        ident = bytes(data[4:8])
        if ident != PTE_IDENTIFIER:
            if ident[:2] == b"ET":
                raise ExecuTorchError(
                    ErrorCode.InvalidProgram,
                    f"program format {ident.decode('latin-1')!r} is not supported "
                    f"(this runtime reads {PTE_IDENTIFIER.decode()})")
            raise invalid_program(f"not an ExecuTorch program (identifier {ident!r}, "
                                  f"expected {PTE_IDENTIFIER!r})")
        self.program_size = n
        self.segment_base_offset = 0
        self.segment_data_size = 0
        self.has_header = n >= 16 and bytes(data[8:12]) == _EH_MAGIC
        if self.has_header:
            self._parse_header()
        reader = Reader(data[:self.program_size])
        self.program = read_table(reader.root(PTE_IDENTIFIER), "Program", PROGRAM_SCHEMA)

    def _parse_header(self):
        d, n = self.data, len(self.data)
        length = struct.unpack_from("<I", d, 12)[0]
        if length < 24 or n < 8 + length:
            raise invalid_program(f"extended header length {length} is invalid for a {n}-byte file")
        self.program_size, self.segment_base_offset = struct.unpack_from("<QQ", d, 16)
        if length >= 32:
            self.segment_data_size = struct.unpack_from("<Q", d, 32)[0]
        if not 8 <= self.program_size <= n:
            raise invalid_program(f"header program_size {self.program_size} outside the "
                                  f"{n}-byte file (truncated?)")
        if self.segment_data_size > 0 or self.segment_base_offset == 0:
            need = (self.segment_base_offset + self.segment_data_size
                    if self.segment_data_size else self.program_size)
            if n < need:
                raise invalid_program(f"file is {n} bytes but the header says it holds "
                                      f"{need} (truncated?)")
        if self.segment_base_offset and self.segment_base_offset < self.program_size:
            raise invalid_program(f"segment_base_offset {self.segment_base_offset} lies inside "
                                  f"the flatbuffer ({self.program_size} bytes)")

    # ---- segments --------------------------------------------------------------
    def segment(self, index: int, what: str = "segment") -> np.ndarray:
        segs = self.program.segments or []
        if not 0 <= index < len(segs):
            raise invalid_program(f"{what}: segment index {index} out of range ({len(segs)} segments)")
        if not self.has_header:
            if segs[index].size == 0:
                return self.data[:0]
            raise invalid_program(f"{what}: segment {index} is referenced but the file has no "
                                  "extended header (no segment data)")
        seg = segs[index]
        start = self.segment_base_offset + seg.offset
        end = start + seg.size
        if end > len(self.data) or start < self.segment_base_offset:
            raise invalid_program(f"{what}: segment {index} [{start}, {end}) is outside the "
                                  f"{len(self.data)}-byte file")
        return self.data[start:end]

    def constant_table(self) -> list[np.ndarray]:
        """Entry k -> bytes from offsets[k] to the end of the constant segment (spec 3.3)."""
        p = self.program
        cs = p.constant_segment
        if cs is not None and cs.offsets:
            if p.constant_buffer:
                raise invalid_program("both constant_segment and constant_buffer are non-empty")
            if len(cs.offsets) == 1:
                return [self.data[:0]]
            seg = self.segment(cs.segment_index, "constant segment")
            out = []
            for k, off in enumerate(cs.offsets):
                if off > len(seg):
                    raise invalid_program(f"constant {k}: offset {off} past the constant segment "
                                          f"({len(seg)} bytes)")
                out.append(seg[off:])
            return out
        return [b.storage if b.storage is not None else self.data[:0]
                for b in (p.constant_buffer or [])]

    def mutable_entry(self, k: int, nbytes: int, where: str) -> np.ndarray:
        tables = self.program.mutable_data_segments or []
        if not tables:
            raise invalid_program(f"{where}: data_buffer_idx {k} on a planned tensor but the "
                                  "program has no mutable data segment")
        t = tables[0]
        if not 0 <= k < len(t.offsets or []):
            raise invalid_program(f"{where}: mutable data index {k} out of range")
        seg = self.segment(t.segment_index, "mutable data segment")
        off = t.offsets[k]
        if off + nbytes > len(seg):
            raise invalid_program(f"{where}: initial state needs {nbytes} bytes at {off}, the "
                                  f"mutable segment has {len(seg)}")
        return seg[off:off + nbytes]

    def delegate_blob(self, ref, where: str) -> np.ndarray:
        if ref is None:
            raise invalid_program(f"{where}: delegate has no processed data reference")
        if ref.location == 1:
            return self.segment(ref.index, where)
        inline = self.program.backend_delegate_data or []
        if not 0 <= ref.index < len(inline):
            raise invalid_program(f"{where}: inline delegate data index {ref.index} out of range "
                                  f"({len(inline)} entries)")
        d = inline[ref.index].data
        return d if d is not None else self.data[:0]

    def named_data(self) -> dict[str, np.ndarray]:
        out = {}
        for nd in self.program.named_data or []:
            if nd.key is None:
                raise invalid_program("named_data entry without a key")
            out[nd.key] = self.segment(nd.segment_index, f"named data {nd.key!r}")
        return out
