"""The .ptd (FlatTensor) external data file: a named map of tensor blobs (spec section 3.5).

>>> # data = DataMap.load("weights.ptd"); data.keys(); data.get("linear.weight")
"""
from __future__ import annotations

import struct

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.loader import load_bytes
from pyruntime.schema.flatbuf import Reader, read_table
from pyruntime.schema.program import FLAT_TENSOR_SCHEMA

PTD_IDENTIFIER = b"FT01"


def _bad(msg):
    return ExecuTorchError(ErrorCode.InvalidExternalData, f"malformed .ptd: {msg}")


class DataMap:
    """key -> (bytes, TensorLayout or None); from a .ptd file or a plain dict of arrays."""

    def __init__(self, entries: dict[str, tuple[np.ndarray, object]], source: str = "<memory>"):
        self._entries = entries
        self.source = source

    @classmethod
    def load(cls, source) -> "DataMap":
        data = load_bytes(source)
        n = len(data)
        if n < 48 or bytes(data[4:8]) != PTD_IDENTIFIER:
            raise _bad(f"not a FlatTensor file (identifier {bytes(data[4:8])!r})")
        if bytes(data[8:12]) != b"FH01":
            raise _bad("missing FH01 header")
        hlen, fb_off, fb_size, seg_base, seg_size = struct.unpack_from("<IQQQQ", data, 12)
        if hlen < 40 or fb_off + fb_size > n or seg_base + seg_size > n:
            raise _bad(f"header ({hlen}, {fb_off}, {fb_size}, {seg_base}, {seg_size}) does not "
                       f"fit the {n}-byte file")
        reader = Reader(data[:fb_off + fb_size], ErrorCode.InvalidExternalData, ".ptd")
        root = read_table(reader.root(PTD_IDENTIFIER), "FlatTensor", FLAT_TENSOR_SCHEMA)
        if root.segments is None or root.named_data is None:
            raise _bad("segments and named_data must be present")
        entries = {}
        for nd in root.named_data:
            if not 0 <= nd.segment_index < len(root.segments):
                raise _bad(f"key {nd.key!r}: segment {nd.segment_index} out of range")
            seg = root.segments[nd.segment_index]
            if seg.offset + seg.size > seg_size:
                raise _bad(f"key {nd.key!r}: segment [{seg.offset}, +{seg.size}) outside the "
                           f"{seg_size}-byte data region")
            start = seg_base + seg.offset
            entries[nd.key] = (data[start:start + seg.size], nd.tensor_layout)
        return cls(entries, str(source) if not isinstance(source, (bytes, bytearray)) else "<bytes>")

    def keys(self):
        return list(self._entries)

    def __contains__(self, key):
        return key in self._entries

    def __len__(self):
        return len(self._entries)

    def get(self, key: str) -> np.ndarray:
        try:
            return self._entries[key][0]
        except KeyError:
            raise ExecuTorchError(ErrorCode.NotFound, f"key {key!r} not in {self.source}") from None

    def layout(self, key: str):
        return self._entries[key][1] if key in self._entries else None

    def merged(self, other: "DataMap | None") -> "DataMap":
        if other is None:
            return self
        dup = set(self._entries) & set(other._entries)
        if dup:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"named data key(s) in both maps: {sorted(dup)[:5]}")
        return DataMap({**self._entries, **other._entries}, f"{self.source}+{other.source}")
