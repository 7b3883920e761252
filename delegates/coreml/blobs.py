"""MIL blob storage v2 (``weights/weight.bin``): our own reader.

Layout (little-endian), as coremltools' ``BlobWriter`` writes it::

    file header (64 bytes):  u32 count, u32 version (2), zero padding
    per blob, a 64-byte metadata record at the offset a ``BlobFileValue`` names:
        u32 sentinel 0xDEADBEEF, u32 dtype, u64 size in bytes, u64 data offset,
        u64 padding bits (sub-byte types: unused bits in the last byte), zero padding
    data: 64-byte aligned, ``size`` bytes at ``data offset``

Sub-byte types (int4, uint1..uint6) are packed least significant bits first,
one continuous bit stream. Every offset and size is checked against the file.
"""
from __future__ import annotations

import struct

import numpy as np

from pyruntime.delegates.coreml.payload import payload_error

SENTINEL = 0xDEADBEEF
HEADER_SIZE = 64
RECORD_SIZE = 64

# blob dtype code -> (numpy dtype, bits per element)
BLOB_DTYPES = {
    1: (np.float16, 16), 2: (np.float32, 32), 3: (np.uint8, 8), 4: (np.int8, 8),
    5: ("bfloat16", 16), 6: (np.int16, 16), 7: (np.uint16, 16), 8: (np.int8, 4),
    9: (np.uint8, 1), 10: (np.uint8, 2), 11: (np.uint8, 4), 12: (np.uint8, 3),
    13: (np.uint8, 6), 14: (np.int32, 32), 15: (np.uint32, 32),
}
BLOB_DTYPE_NAMES = {1: "fp16", 2: "fp32", 3: "uint8", 4: "int8", 5: "bf16", 6: "int16",
                    7: "uint16", 8: "int4", 9: "uint1", 10: "uint2", 11: "uint4", 12: "uint3",
                    13: "uint6", 14: "int32", 15: "uint32"}


def unpack_bits(packed: np.ndarray, nbits: int, count: int, signed: bool) -> np.ndarray:
    """``count`` ``nbits``-wide integers from an LSB-first bit stream."""
    bits = np.unpackbits(packed, bitorder="little")
    if bits.size < count * nbits:
        raise payload_error(f"{bits.size} bits hold fewer than {count} {nbits}-bit values")
    bits = bits[:count * nbits].reshape(count, nbits).astype(np.int32)
    vals = (bits << np.arange(nbits, dtype=np.int32)).sum(axis=1)
    if signed:
        vals = np.where(vals >= 1 << (nbits - 1), vals - (1 << nbits), vals)
        return vals.astype(np.int8)
    return vals.astype(np.uint8)


class BlobFile:
    """One ``weight.bin``: ``read(offset, dtype_name, count)`` -> numpy array (a view if
    byte-aligned)."""

    def __init__(self, buf: np.ndarray, name: str):
        self.buf, self.name = buf, name
        if len(buf) < HEADER_SIZE:
            raise payload_error(f"{name}: {len(buf)} bytes is too short for a blob file header")
        self.count, self.version = struct.unpack_from("<II", buf, 0)
        if self.version != 2:
            raise payload_error(f"{name}: blob storage version {self.version}, expected 2")

    def record(self, offset: int):
        n = len(self.buf)
        if offset < HEADER_SIZE or offset + RECORD_SIZE > n:
            raise payload_error(f"{self.name}: blob record at {offset} is outside the {n}-byte "
                                "file")
        sentinel, dtype, size, data_off, pad_bits = struct.unpack_from("<IIQQQ", self.buf, offset)
        if sentinel != SENTINEL:
            raise payload_error(f"{self.name}: no blob at offset {offset} (sentinel "
                                f"0x{sentinel:08x})")
        if dtype not in BLOB_DTYPES:
            raise payload_error(f"{self.name}: blob at {offset} has unknown dtype code {dtype}")
        if data_off + size > n or data_off < HEADER_SIZE:
            raise payload_error(f"{self.name}: blob at {offset}: data [{data_off}, +{size}) is "
                                f"outside the {n}-byte file")
        return dtype, size, data_off, pad_bits

    def read(self, offset: int, want: str, shape: tuple) -> np.ndarray:
        """The blob at ``offset`` as an array of ``shape``; ``want`` is the MIL dtype name the
        program declares (checked against the record)."""
        dtype, size, data_off, _ = self.record(offset)
        name = BLOB_DTYPE_NAMES[dtype]
        if name != want:
            raise payload_error(f"{self.name}: blob at {offset} holds {name} data, the program "
                                f"declares {want}")
        np_dtype, bits = BLOB_DTYPES[dtype]
        count = int(np.prod(shape, dtype=np.int64))
        raw = self.buf[data_off:data_off + size]
        if bits < 8:
            if count * bits > size * 8:
                raise payload_error(f"{self.name}: blob at {offset}: {size} bytes hold fewer "
                                    f"than {count} {name} values")
            return unpack_bits(raw, bits, count, name == "int4").reshape(shape)
        if np_dtype == "bfloat16":
            from pyruntime.cython_ext.dtypes import to_numpy_dtype

            np_dtype = to_numpy_dtype(15)
        item = np.dtype(np_dtype).itemsize
        if count * item != size:
            raise payload_error(f"{self.name}: blob at {offset} has {size} bytes, shape "
                                f"{list(shape)} of {name} needs {count * item}")
        return raw.view(np_dtype).reshape(shape)
