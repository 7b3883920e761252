"""The Vulkan delegate payload: ``VH00`` header, VkGraph flatbuffer, raw constant bytes.

Layout (ExecuTorch ``vulkan_graph_serialize.py``)::

    0..3   zero            4..7   "VH00"          8..9   header length (30)
    10..13 flatbuffer offset   14..17 flatbuffer size
    18..21 raw-bytes offset    22..29 raw-bytes size (u64)       padded to 32

The flatbuffer is read with our own bounds-checked reader (the wheel's JSON-based
deserializer fails on the ``-inf`` doubles attention masks carry). Every offset
and size is checked before a view is made; a bad payload raises ``ExecuTorchError``
whose message names ``VulkanBackend``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.flatbuf import Node, Reader, read_table
from pyruntime.delegates.named_data import sized_named_bytes
from pyruntime.delegates.segment_header import payload_segments
from pyruntime.delegates.vulkan.schema import VK_SCHEMA

BACKEND = "VulkanBackend"
HEADER_MAGIC = b"VH00"
IDENTIFIER = b"VK00"
_NAMED = 0xFFFFFFFFFFFFFFFF  # VkBytes.offset of a constant kept in named data


def blob_error(msg: str, code=ErrorCode.InvalidProgram) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND} payload: {msg}")


@dataclass
class VkBlob:
    graph: Node  # the VkGraph root table
    raw: np.ndarray  # the raw-bytes region (uint8, may be empty)
    source: np.ndarray  # the whole payload, kept alive while views point into it


def parse_blob(blob) -> VkBlob:
    """Split and verify a payload; returns the parsed graph and the raw-bytes region."""
    buf, fb, raw = payload_segments(blob, HEADER_MAGIC, blob_error, "payload", "raw bytes",
                                    plural=True)
    ident = bytes(fb[4:8])
    if ident != IDENTIFIER:
        if bytes(buf[4:8]) != HEADER_MAGIC:  # neither a header nor a bare VkGraph flatbuffer
            raise blob_error(f"magic {bytes(buf[4:8])!r}, expected {HEADER_MAGIC!r}",
                             ErrorCode.DelegateInvalidCompatibility)
        raise blob_error(f"flatbuffer identifier {ident!r}, expected {IDENTIFIER!r}",
                         ErrorCode.DelegateInvalidCompatibility)
    reader = Reader(fb, ErrorCode.InvalidProgram, f"{BACKEND} payload (VkGraph)")
    graph = read_table(reader.root(), "VkGraph", VK_SCHEMA)
    if graph.values is None or graph.chain is None:
        raise blob_error("the graph has no values or no chain")
    return VkBlob(graph, raw, buf)


def constant_bytes(vb: VkBlob, idx: int, named_data, where: str) -> np.ndarray:
    """The bytes of ``constants[idx]``: from the program's named data (or a .ptd), or the
    payload's raw region."""
    consts = vb.graph.constants or []
    if not 0 <= idx < len(consts):
        raise blob_error(f"{where}: constant_id {idx} out of range ({len(consts)} constants)")
    c = consts[idx]
    if c.offset == _NAMED or c.named_key is not None:
        if c.named_key is None:
            raise blob_error(f"{where}: constant {idx} is in named data but has no key")
        return sized_named_bytes(named_data, c.named_key, c.length, BACKEND, where,
                                 blob_error)[:c.length]
    if c.offset + c.length > len(vb.raw):
        raise blob_error(f"{where}: constant {idx} [{c.offset}, +{c.length}) is outside the "
                         f"{len(vb.raw)}-byte raw region")
    return vb.raw[c.offset:c.offset + c.length]
