"""Child process for vela's MLW codec: ``python .../delegates/ethosu/codec_worker.py``
(a script on its own: it imports only numpy and ``ethosu.mlw_codec``).

vela's C decoder ends the whole process (``exit(1)``) on a corrupt weight stream, so
pyruntime never calls it in its own process: ``weights.decode_streams`` sends the
streams here. It serves requests until its stdin closes; each request is a u64
length and an ``.npz`` with ``s<i>`` (uint8 streams) and ``p<i>`` (int64
permutation parameters, see ``permutation_here``); each answer an ``.npz`` with
``d<i>`` (decoded values) and ``q<i>`` (permutations), after its own u64 length.
Before each item its name goes to stderr, so the parent can name the stream that
killed the worker. The codec's own messages (on fd 1) are sent to stderr too.
"""
from __future__ import annotations

import io
import os
import struct
import sys

import numpy as np


_BASE = 255  # digits 1..255 fit the codec's signed 9-bit range; 0 is padding


def decode_here(stream: bytes) -> np.ndarray:
    from ethosu import mlw_codec

    return np.asarray(mlw_codec.decode(bytearray(stream)), np.int64)


def permutation_here(ohwi: tuple, ifm_ublock: int, ofm_ublock: int, ofm_block_depth: int,
                     depthwise: bool, part_kernel: bool, ifm_bits: int,
                     decomp: tuple) -> np.ndarray:
    """For each position of the decoded stream of an ``ohwi`` volume: the flat OHWI index
    of the weight there, or -1 for padding (vela's encoder, in this process)."""
    from ethosu import mlw_codec as mlw

    n = int(np.prod(ohwi))
    ndig = 1
    while _BASE ** ndig < n:
        ndig += 1
    flat = np.arange(n, dtype=np.int64)
    index = None
    for d in range(ndig):
        digit = (flat // _BASE ** d) % _BASE + 1
        enc, _ = mlw.reorder_encode(ifm_ublock, ofm_ublock, digit.astype(np.int16).reshape(ohwi),
                                    ofm_block_depth, depthwise, part_kernel, ifm_bits,
                                    decomp[0], decomp[1])
        dec = np.asarray(mlw.decode(bytearray(enc)), np.int64)
        if index is None:
            index = np.zeros(len(dec), np.int64)
            pad = dec == 0
        index += (dec - 1) * _BASE ** d
    index[pad] = -1
    return index


def handle(request: bytes) -> bytes:
    req = np.load(io.BytesIO(request), allow_pickle=False)
    out = {}
    for name in sorted(req.files):
        sys.stderr.write(f"item {name}\n")
        sys.stderr.flush()
        if name.startswith("s"):
            out["d" + name[1:]] = decode_here(req[name].tobytes()).astype(np.int16)
        else:
            p = [int(v) for v in req[name]]
            out["q" + name[1:]] = permutation_here(
                tuple(p[0:4]), p[4], p[5], p[6], bool(p[7]), bool(p[8]), p[9],
                (p[10], p[11]))
    buf = io.BytesIO()
    np.savez(buf, **out)
    return buf.getvalue()


def _read(f, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def main() -> int:
    """Serve requests until stdin closes: each is a u64 length and an .npz, each answer
    a u64 length and an .npz."""
    # the codec's C code prints its complaints to stdout: answers get a private copy of
    # the pipe, and whatever else writes to fd 1 lands on stderr
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    while True:
        try:
            (n,) = struct.unpack("<Q", _read(inp, 8))
            request = _read(inp, n)
        except EOFError:
            return 0
        answer = handle(request)
        out.write(struct.pack("<Q", len(answer)) + answer)
        out.flush()


if __name__ == "__main__":
    sys.exit(main())
