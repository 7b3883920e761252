"""The EthosUBackend payload: ExecuTorch's ``vela_bin_stream`` container and the driver
header at the start of ``cmd_data``.

Container (``executorch/backends/arm/arm_vela.py``, read on the device by
``VelaBinStream.cpp``): blocks of a 32-byte header ``{char name[16]; u32 size;
u8 external; u8 reserved[11]}`` then ``size`` bytes padded to 16, in the order
``vela_bin_stream`` (empty), ``cmd_data``, ``weight_data``, ``scratch_size`` (u32),
``inputs``, ``outputs``, ``vela_end_stream`` (empty). ``inputs``/``outputs`` are an
i32 count then ``{i32 shape[6]; i32 elem_size; i32 offset; i32 region}`` records:
a tensor's bytes live at ``offset`` in memory region ``region`` (1: the scratch
arena). A block with ``external`` set holds the sha256 key of named data instead
(``VelaExternalBlockPlacements``).

``cmd_data`` is vela's driver payload: the fourcc ``COP1``, a Config action (its
word: ``macs_per_cc`` log2 in bits 0-3, ``cmd_stream_version`` 4-7, ``shram_size`` in
KiB 8-15, ``product`` 28-31: 0 Ethos-U55, 1 Ethos-U65, 2 Ethos-U85) and an ID word,
NOP actions, then a CmdStream action whose 24-bit length counts the 32-bit words of
the register command stream that follows.

Every size and offset is checked; a bad payload raises ``ExecuTorchError`` naming
``EthosUBackend``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.interface import payload_bytes

BACKEND = "EthosUBackend"
HEADER = struct.Struct("<16sIB11s")
BLOCK_ORDER = ("vela_bin_stream", "cmd_data", "weight_data", "scratch_size", "inputs",
               "outputs", "vela_end_stream")
MAX_SCRATCH = 512 << 20  # the scratch arena is a real allocation here
PRODUCTS = {0: "Ethos-U55", 1: "Ethos-U65", 2: "Ethos-U85"}
# driver action ids (the low byte of an action word)
DA_CONFIG, DA_CMDSTREAM, DA_READAPB, DA_DUMPSHRAM, DA_NOP = 1, 2, 3, 4, 5


def payload_error(msg: str, code=ErrorCode.InvalidProgram) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND} payload: {msg}")


@dataclass(frozen=True)
class IOTensor:
    shape: tuple  # 6-D, as vela writes it
    elem_size: int
    offset: int
    region: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.elem_size


@dataclass(frozen=True)
class NpuConfig:
    product: int
    macs: int  # MACs per cycle (from log2 in the config word)
    shram_kb: int
    cmd_stream_version: int

    @property
    def name(self) -> str:
        p = PRODUCTS.get(self.product, f"product {self.product}")
        return f"{p}-{self.macs}"


@dataclass(frozen=True)
class VelaProgram:
    config: NpuConfig
    commands: np.ndarray  # uint32 words of the register command stream
    weights: np.ndarray  # uint8, memory region 0
    scratch_size: int
    inputs: list
    outputs: list


def _blocks(data: np.ndarray, named_data) -> dict:
    out: dict = {}
    pos, n = 0, len(data)
    while pos < n:
        if pos + HEADER.size > n:
            raise payload_error(f"block header at byte {pos} runs past the payload end ({n})")
        raw_name, size, external, _ = HEADER.unpack_from(data, pos)
        name = raw_name.split(b"\0", 1)[0].decode("ascii", "replace")
        start = pos + HEADER.size
        if size > n - start:
            raise payload_error(f"block {name!r} at byte {pos} claims {size} bytes, "
                                f"{n - start} remain")
        body = data[start:start + size]
        if external:
            key = bytes(body).decode("ascii", "replace")
            value = None
            try:
                value = named_data.get(key) if named_data is not None else None
            except Exception:  # noqa: BLE001 - a data map may raise its own errors
                value = None
            if value is None:
                raise payload_error(f"block {name!r} is external (named data key {key!r}), "
                                    "which the program does not provide", ErrorCode.NotFound)
            body = np.asarray(value).reshape(-1).view(np.uint8)
        if name in out:
            raise payload_error(f"block {name!r} appears twice")
        out[name] = body
        pos = start + ((size + 15) // 16) * 16
        if name == "vela_end_stream":
            break
    order = [k for k in out]
    if not order or order[0] != "vela_bin_stream":
        raise payload_error("does not start with a 'vela_bin_stream' block (not a vela "
                            "command stream)")
    missing = [k for k in BLOCK_ORDER if k not in out]
    if missing:
        raise payload_error(f"missing blocks {missing} (found {order})")
    return out


def _io(block: np.ndarray, what: str) -> list:
    b = bytes(block)
    if len(b) < 4:
        raise payload_error(f"{what} block is {len(b)} bytes, too short for its count")
    (count,) = struct.unpack_from("<i", b, 0)
    if count < 0 or 4 + count * 36 > len(b):
        raise payload_error(f"{what} block declares {count} tensors in {len(b)} bytes")
    out = []
    for i in range(count):
        vals = struct.unpack_from("<9i", b, 4 + 36 * i)
        shape, esz, off, region = tuple(vals[:6]), vals[6], vals[7], vals[8]
        if min(shape) < 0 or esz not in (1, 2, 4) or off < 0 or not 0 <= region < 8:
            raise payload_error(f"{what} {i}: shape {list(shape)}, element size {esz}, "
                                f"offset {off}, region {region} is not a valid record")
        out.append(IOTensor(shape, esz, off, region))
    return out


def _driver_header(cmd: np.ndarray) -> tuple[NpuConfig, np.ndarray]:
    if len(cmd) % 4:
        raise payload_error(f"cmd_data is {len(cmd)} bytes, not a whole number of words")
    words = cmd.view(np.uint32) if cmd.flags.c_contiguous and cmd.ctypes.data % 4 == 0 \
        else np.frombuffer(bytes(cmd), np.uint32)
    if len(words) < 1 or bytes(cmd[:4]) != b"COP1":
        raise payload_error(f"cmd_data does not start with the COP1 driver header "
                            f"(got {bytes(cmd[:4])!r})")
    config = None
    i = 1
    while i < len(words):
        w = int(words[i])
        action, param = w & 0xFF, w >> 16
        if action == DA_CONFIG:
            if i + 2 >= len(words):
                raise payload_error("driver Config action runs past cmd_data")
            cw = int(words[i + 1])
            config = NpuConfig(product=cw >> 28, macs=1 << (cw & 0xF), shram_kb=(cw >> 8) & 0xFF,
                               cmd_stream_version=(cw >> 4) & 0xF)
            i += 3
        elif action == DA_NOP:
            i += 1
        elif action == DA_READAPB:
            i += 1
        elif action == DA_DUMPSHRAM:
            i += 1
        elif action == DA_CMDSTREAM:
            length = param | (((w >> 8) & 0xFF) << 16)
            if i + 1 + length > len(words):
                raise payload_error(f"driver CmdStream action claims {length} words, "
                                    f"{len(words) - i - 1} remain in cmd_data")
            if config is None:
                raise payload_error("the driver header has no Config action before its "
                                    "command stream")
            return config, words[i + 1:i + 1 + length]
        else:
            raise payload_error(f"unknown driver action {action} at cmd_data word {i}")
    raise payload_error("cmd_data has no CmdStream driver action")


def read_payload(processed, named_data=None) -> VelaProgram:
    data = payload_bytes(processed)
    blocks = _blocks(data, named_data)
    config, commands = _driver_header(blocks["cmd_data"])
    sb = blocks["scratch_size"]
    if len(sb) < 4:
        raise payload_error(f"scratch_size block is {len(sb)} bytes")
    scratch = struct.unpack_from("<I", bytes(sb[:4]))[0]
    if scratch > MAX_SCRATCH:
        raise payload_error(f"scratch_size {scratch} is beyond the model's limit of "
                            f"{MAX_SCRATCH} bytes", ErrorCode.NotSupported)
    return VelaProgram(config, commands, blocks["weight_data"], scratch,
                       _io(blocks["inputs"], "inputs"), _io(blocks["outputs"], "outputs"))
