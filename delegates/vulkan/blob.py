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

import struct
from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.flatbuf import Node, Reader, read_table
from pyruntime.delegates.interface import payload_bytes
from pyruntime.delegates.named_data import named_bytes
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
    buf = payload_bytes(blob)
    n = len(buf)
    if n < 8:
        raise blob_error(f"{n} bytes is too short")
    if bytes(buf[4:8]) != HEADER_MAGIC:
        if bytes(buf[4:8]) == IDENTIFIER:  # a bare VkGraph flatbuffer
            fb, raw = buf, buf[:0]
        else:
            raise blob_error(f"magic {bytes(buf[4:8])!r}, expected {HEADER_MAGIC!r}",
                             ErrorCode.DelegateInvalidCompatibility)
    else:
        if n < 30:
            raise blob_error(f"{n} bytes is too short for the VH00 header")
        hlen, fb_off, fb_size, r_off, r_size = struct.unpack_from("<HIIIQ", buf, 8)
        if hlen < 30:
            raise blob_error(f"header length {hlen} < 30")
        if fb_size < 8 or fb_off < hlen or fb_off + fb_size > n:
            raise blob_error(f"flatbuffer [{fb_off}, +{fb_size}) is outside the {n}-byte payload")
        if r_off < fb_off + fb_size or r_off + r_size > n:
            raise blob_error(f"raw bytes [{r_off}, +{r_size}) are outside the payload or overlap "
                             f"the flatbuffer (ends at {fb_off + fb_size}, payload {n} bytes)")
        fb, raw = buf[fb_off:fb_off + fb_size], buf[r_off:r_off + r_size]
    ident = bytes(fb[4:8])
    if ident != IDENTIFIER:
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
        return _named(named_data, c.named_key, c.length, where)
    if c.offset + c.length > len(vb.raw):
        raise blob_error(f"{where}: constant {idx} [{c.offset}, +{c.length}) is outside the "
                         f"{len(vb.raw)}-byte raw region")
    return vb.raw[c.offset:c.offset + c.length]


def _named(named_data, key: str, size: int, where: str) -> np.ndarray:
    data = named_bytes(named_data, key, BACKEND, where)
    if len(data) < size:
        raise blob_error(f"{where}: named data {key!r} has {len(data)} bytes, the graph says "
                         f"{size}")
    return data[:size]
