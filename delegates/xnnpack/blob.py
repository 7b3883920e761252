"""The XNNPACK delegate blob: ``XH00`` header, XNNGraph flatbuffer, constant data.

Layout (spec section 8.1)::

    0..3   zero            4..7   "XH00"          8..9   header length (>= 30)
    10..13 flatbuffer offset   14..17 flatbuffer size
    18..21 constant-data offset  22..29 constant-data size (u64)

A blob without the ``XH00`` magic is a bare flatbuffer. Every offset and size
is checked against the blob before a view is made; a bad blob raises
``ExecuTorchError`` whose message names ``XnnpackBackend``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.flatbuf import Node, Reader, read_table
from pyruntime.delegates.named_data import sized_named_bytes
from pyruntime.delegates.segment_header import payload_segments
from pyruntime.delegates.xnnpack.schema import XNN_SCHEMA

BACKEND = "XnnpackBackend"
HEADER_MAGIC = b"XH00"
IDENTIFIERS = (b"XN01", b"XN00")
_NO_OFFSET = 0xFFFFFFFFFFFFFFFF


def blob_error(msg: str, code=ErrorCode.InvalidProgram) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND} blob: {msg}")


@dataclass
class XnnBlob:
    graph: Node  # the XNNGraph root table
    identifier: bytes
    constants: np.ndarray  # the constant-data region (uint8, may be empty)
    source: np.ndarray  # the whole blob, kept alive while views point into it


def parse_blob(blob) -> XnnBlob:
    """Split and verify a delegate blob; returns the parsed graph and constant region."""
    buf, fb, constants = payload_segments(blob, HEADER_MAGIC, blob_error, "blob",
                                          "constant data")
    ident = bytes(fb[4:8])
    if ident not in IDENTIFIERS:
        raise blob_error(f"flatbuffer identifier {ident!r}, expected one of "
                         f"{[i.decode() for i in IDENTIFIERS]}",
                         ErrorCode.DelegateInvalidCompatibility)
    reader = Reader(fb, ErrorCode.InvalidProgram, f"{BACKEND} blob (XNNGraph)")
    graph = read_table(reader.root(), "XNNGraph", XNN_SCHEMA)
    if graph.xvalues is None:
        raise blob_error("the graph has no xvalues")
    return XnnBlob(graph, ident, constants, buf)


def constant_bytes(xb: XnnBlob, idx: int, named_data, where: str) -> np.ndarray | None:
    """The bytes of constant entry ``idx`` (0 = no data), from the blob or named data."""
    if idx == 0:
        return None
    g = xb.graph
    if g.constant_data:
        if idx >= len(g.constant_data):
            raise blob_error(f"{where}: constant index {idx} out of range "
                             f"({len(g.constant_data)} entries)")
        entry = g.constant_data[idx]
        if entry.named_key is not None:
            return sized_named_bytes(named_data, entry.named_key, entry.size, BACKEND, where,
                                     blob_error)
        if entry.offset == _NO_OFFSET or entry.offset + entry.size > len(xb.constants):
            raise blob_error(f"{where}: constant {idx} [{entry.offset}, +{entry.size}) is outside "
                             f"the {len(xb.constants)}-byte constant region")
        return xb.constants[entry.offset:entry.offset + entry.size]
    if g.constant_buffer:  # XN00 files keep constants inside the flatbuffer
        if idx >= len(g.constant_buffer):
            raise blob_error(f"{where}: constant buffer {idx} out of range "
                             f"({len(g.constant_buffer)} buffers)")
        storage = g.constant_buffer[idx].storage
        return storage if storage is not None else np.zeros(0, np.uint8)
    raise blob_error(f"{where}: constant index {idx} but the graph has no constant data")
