"""The header ExecuTorch's XNNPACK and Vulkan serializers put before a delegate's
flatbuffer, read once for both: both write the same 30 bytes and differ only in magic.

Layout::

    0..3   zero            4..7   magic ("XH00", "VH00")   8..9   header length (>= 30)
    10..13 flatbuffer offset   14..17 flatbuffer size
    18..21 data offset         22..29 data size (u64): constants, raw bytes
"""
from __future__ import annotations

import struct

import numpy as np

from pyruntime.delegates.interface import payload_bytes

HEADER_SIZE = 30


def payload_segments(blob, magic: bytes, error, noun: str, region: str,
                     plural: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(payload, flatbuffer, data region)``: ``blob`` as flat bytes, split at the header
    when it has one (``magic`` at 4..7, see ``header_segments``); without one it is a bare
    flatbuffer with an empty data region (the bridge checks its identifier)."""
    buf = payload_bytes(blob)
    if len(buf) < 8:
        raise error(f"{len(buf)} bytes is too short")
    if bytes(buf[4:8]) != magic:
        return buf, buf, buf[:0]
    return (buf, *header_segments(buf, magic, error, noun, region, plural))


def header_segments(buf: np.ndarray, magic: bytes, error, noun: str, region: str,
                    plural: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The flatbuffer and the data region of ``buf`` (views), which starts with the header
    (``magic`` already checked). Every offset and size is checked first: ``error(msg)``
    (the bridge's payload error) otherwise, the message calling the payload ``noun`` and the
    data region ``region`` (``plural``: "raw bytes are")."""
    n = len(buf)
    if n < HEADER_SIZE:
        raise error(f"{n} bytes is too short for the {magic.decode()} header")
    hlen, fb_off, fb_size, d_off, d_size = struct.unpack_from("<HIIIQ", buf, 8)
    if hlen < HEADER_SIZE:
        raise error(f"header length {hlen} < {HEADER_SIZE}")
    if fb_size < 8 or fb_off < hlen or fb_off + fb_size > n:
        raise error(f"flatbuffer [{fb_off}, +{fb_size}) is outside the {n}-byte {noun}")
    if d_off < fb_off + fb_size or d_off + d_size > n:
        are, overlap = ("are", "overlap") if plural else ("is", "overlaps")
        raise error(f"{region} [{d_off}, +{d_size}) {are} outside the {noun} or {overlap} the "
                    f"flatbuffer (ends at {fb_off + fb_size}, {noun} {n} bytes)")
    return buf[fb_off:fb_off + fb_size], buf[d_off:d_off + d_size]
