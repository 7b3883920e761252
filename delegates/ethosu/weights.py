"""Ethos-U55/U65 weight streams: MLW-compressed values in the NPU's brick order.

A convolution's weights are one compressed stream (``WEIGHT_BASE``/``WEIGHT_LENGTH``);
``ethosu.mlw_codec.decode`` (vela's own decoder, from the ``ethos-u-vela`` wheel)
expands it to signed 9-bit values in the order the NPU consumes them: OFM-block
slices, IFM micro-blocks, kernel decomposition into 8x8 sub-kernels, depth-first or
part-kernel-first traversal, zero padding to whole micro-blocks. We do not
re-derive that order from documentation: we ask vela's encoder for it. Encoding a
volume whose values are the digits (base 255, offset by one so that 0 marks
padding) of each element's flat OHWI index, and decoding it again, gives for every
stream position the weight it holds. The permutation is cached per layout.

vela's C decoder ends the process on a corrupt stream, so both run in a child
process (``codec_worker``: one long-lived worker, started on first use and again after
it dies), all of a command stream's weights in one request at load. Decoded streams
are kept by the sha256 of their bytes (up to 256 MiB), so loading a program again
costs no decoding.

Biases and scales are separate 10-byte records per output channel (``SCALE_BASE``):
a 40-bit signed bias, a 32-bit unsigned multiplier and a 6-bit shift.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import threading

import numpy as np

_WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "codec_worker.py")

_PERMS: dict = {}  # layout -> permutation
_DECODED: dict = {}  # sha256 of a weight stream -> its decoded values
_DECODED_BYTES = 0
_DECODED_LIMIT = 256 << 20
_LOCK = threading.Lock()

INSTALL_HINT = ("decoding Ethos-U weights needs vela's MLW codec: pip install "
                "'pyruntime[arm]' (ethos-u-vela; pip install --no-deps ethos-u-vela==5.2.0)")


def codec():
    """``ethosu.mlw_codec`` or ImportError."""
    from ethosu import mlw_codec

    return mlw_codec


class CodecError(Exception):
    """A stream the codec rejected (or that ended its process): ``item`` is its index."""

    def __init__(self, item: int, msg: str):
        super().__init__(msg)
        self.item = item


def decode_streams(streams: list, layouts: list, timeout: float | None = None):
    """Decode ``streams`` and compute the permutations of ``layouts`` (tuples of
    ``codec_worker.permutation_here``'s arguments) in a child process (``codec_worker``): returns
    (decoded arrays, permutations). Permutations already cached here are not recomputed.
    Raises CodecError naming the stream the codec failed on, ImportError without vela."""
    import io

    codec()  # ImportError here, not a worker failure
    digests = [hashlib.sha256(s).digest() for s in streams]
    with _LOCK:
        known = {d: _DECODED[d] for d in digests if d in _DECODED}
        todo = list(dict.fromkeys(k for k in layouts if _key(*k) not in _PERMS))
    missing = [i for i, d in enumerate(digests) if d not in known]
    if not missing and not todo:
        return [known[d] for d in digests], [_PERMS[_key(*k)] for k in layouts]
    if timeout is None:  # a corrupt stream must not hang a load: ~1 s/MB is typical
        timeout = 20.0 + 10.0 * sum(len(streams[i]) for i in missing) / 1e6
    req = {f"s{i:05d}": np.frombuffer(streams[i], np.uint8) for i in missing}
    for j, k in enumerate(todo):
        ohwi, *rest = k
        req[f"p{j:05d}"] = np.asarray(list(ohwi) + [rest[0], rest[1], rest[2], int(rest[3]),
                                                    int(rest[4]), rest[5], *rest[6]], np.int64)
    buf = io.BytesIO()
    np.savez(buf, **req)
    answer = _WORKER.request(buf.getvalue(), timeout)
    res = np.load(io.BytesIO(answer), allow_pickle=False)
    with _LOCK:
        for i in missing:
            known[digests[i]] = res[f"d{i:05d}"].astype(np.int64)
            _remember(digests[i], known[digests[i]])
        for j, k in enumerate(todo):
            _PERMS[_key(*k)] = res[f"q{j:05d}"]
    return [known[d] for d in digests], [_PERMS[_key(*k)] for k in layouts]


def _remember(digest: bytes, values: np.ndarray) -> None:
    """Keep decoded streams (by the sha256 of their bytes) for later loads, up to
    ``_DECODED_LIMIT`` bytes, oldest dropped first."""
    global _DECODED_BYTES
    _DECODED[digest] = values
    _DECODED_BYTES += values.nbytes
    while _DECODED_BYTES > _DECODED_LIMIT and len(_DECODED) > 1:
        old = next(iter(_DECODED))
        _DECODED_BYTES -= _DECODED.pop(old).nbytes


class _Worker:
    """One long-lived ``codec_worker`` process, restarted after it dies (a corrupt stream
    makes vela's decoder exit) or overruns its time."""

    def __init__(self):
        self.proc = None
        self.err = None
        self.pid = 0
        self.mark = 0
        self.lock = threading.Lock()

    def _start(self):
        import subprocess
        import sys
        import tempfile

        self.err = tempfile.TemporaryFile()
        self.pid = os.getpid()
        self.proc = subprocess.Popen([sys.executable, _WORKER_SCRIPT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err)

    def _stop(self):
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def _failure(self, timed_out: bool, timeout: float) -> CodecError:
        self.err.seek(0)
        lines = self.err.read().decode("utf-8", "replace").strip().splitlines()
        self._stop()
        mine = lines[self.mark:] if self.mark <= len(lines) else lines
        items = [ln for ln in mine if ln.startswith("item ")]
        last = items[-1].split()[1] if items else ""
        why = next((ln for ln in reversed(mine) if not ln.startswith("item ")), "")
        what = (f"did not finish within {timeout:.0f} s" if timed_out else
                f"rejected it and exited ({why or 'no message'})")
        if last.startswith("s"):
            return CodecError(int(last[1:]), f"vela's weight decoder {what}")
        return CodecError(-1, f"the weight codec {what}")

    def request(self, payload: bytes, timeout: float) -> bytes:
        import select
        import struct
        import time

        with self.lock:
            if self.proc is not None and self.pid != os.getpid():
                self.proc = None  # a forked copy: the pipes belong to the parent's worker
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            self.err.seek(0)
            self.mark = len(self.err.read().decode("utf-8", "replace").strip().splitlines())
            try:
                self.proc.stdin.write(struct.pack("<Q", len(payload)) + payload)
                self.proc.stdin.flush()
            except OSError:
                raise self._failure(False, timeout) from None
            out, fd = bytearray(), self.proc.stdout.fileno()
            deadline = time.monotonic() + timeout
            need = 8
            while len(out) < need:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise self._failure(True, timeout)
                chunk = os.read(fd, max(need - len(out), 1 << 16))
                if not chunk:
                    raise self._failure(False, timeout)
                out += chunk
                if len(out) >= 8 and need == 8:
                    need = 8 + struct.unpack_from("<Q", out)[0]
                    if need > 1 << 34:  # not an answer: the worker is confused
                        raise self._failure(False, timeout)
            return bytes(out[8:need])


_WORKER = _Worker()


def _key(ohwi, *rest):
    return (tuple(int(v) for v in ohwi),) + tuple(
        tuple(int(x) for x in r) if isinstance(r, tuple) else int(r) for r in rest)


def unpack_scales(raw: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` 10-byte records -> (bias int64, scale int64, shift int64)."""
    rec = raw[:10 * n].reshape(n, 10).astype(np.int64)
    bias = np.zeros(n, np.int64)
    for i in range(5):
        bias |= rec[:, i] << (8 * i)
    bias = np.where(bias >= 1 << 39, bias - (1 << 40), bias)
    scale = np.zeros(n, np.int64)
    for i in range(4):
        scale |= rec[:, 5 + i] << (8 * i)
    shift = rec[:, 9] & 0x3F
    return bias, scale, shift
