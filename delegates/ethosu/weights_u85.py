"""Ethos-U85 weight streams: decoding and the order the NPU consumes weights in.

Written from Arm's open-source compiler (regor: ``ethos_u85_weight_encoder.cpp``,
``mlw_codec/source/mlw_encode_fwd.cpp``, ``ethos_u85.cpp``, ``ethos_u85_interface.hpp``)
and checked against vela 5.2.0's streams for ``ethos-u85-128``/``-256``
(tests/delegates/test_ethosu_u85_weights.py).

Two stream formats, chosen per operation by ``WEIGHT_FORMAT`` bit 0:

* standard (0): vela's MLW compression, the Ethos-U55's codec; ``ethosu.mlw_codec``
  expands it (in a child process, ``weights.decode_streams``: vela's decoder exits
  its process on a corrupt stream).
* fast (1): a 32-byte header then fixed-width fields, read as one little-endian bit
  string, least significant bit first. Header bit 0: raw mode; bit 1: small palette;
  bits 2-103 zero; bits 104-111: a signed zero adjustment; bits 112-255: a palette of
  16 nine-bit entries, each a value folded to ``|v| * 2 + sign``. The body holds one
  field per weight: a 2-bit palette index (small palette: four entries), a 4-bit
  palette index, or in raw mode 8 bits, the weight plus the zero adjustment as a
  signed byte. The body is zero-padded to a multiple of 256 bits. The header does not
  say how many weights follow: the layout does.

Order (the same for both formats). Weights are walked in OFM blocks of
``OFM_BLK_DEPTH_M1 + 1`` channels; within one, over IFM blocks (the IFM block depth is
not a register: the NPU derives it, as we do, from the traversal, the IFM width and
the micro-block: 16 part-kernel-first, 32 for 32-bit IFMs or a 16-deep micro-block on
128/256 MACs, else 64), forwards in even OFM blocks and backwards in odd ones; then
sub-kernels of up to ``8 / dilation`` positions per axis, columns of sub-kernels
outermost; then IFM micro-block slices (the IFM block, or 8 channels for 16-bit IFMs
part-kernel-first); then OFM micro-blocks (``ofm_ublock_depth`` channels, from
``ACC_FORMAT``'s micro-block and the MAC count); then the kernel positions of the
sub-kernel (part-kernel-first and depthwise: grouped by stride phase, y then x; rows
top to bottom, even rows left to right, odd rows right to left); at each position the
slice's IFM channels in groups of 8 (depthwise: 1), within a group the micro-block's OFM
channels in groups of 4, then the 4 channels, then the group's IFM channels. Depth-first
traversal treats the stride as 1 and pads nothing; part-kernel-first pads the kernel
positions of each sub-kernel up to a multiple of 5 (10 for 16-bit IFMs) with zero
positions at the end; depthwise pads to a multiple of 10 and, beyond 256 MACs or with
16-bit IFMs, adds 2 (<= 512 MACs) or 6 zero positions after each 10. Channels past
the OFM/IFM depth and padding positions hold zeros.

Several weight decoders (512 MACs and up: 2 or 4 cores) split the OFM micro-block into
groups of 4 channels dealt round-robin: with the standard format each core reads a
stream of its own (``WEIGHT_BASE``, ``WEIGHT1_BASE``..``WEIGHT3_BASE``); a fast stream
is one stream interleaving the cores' sequences in blocks of ``ofm_ublock_depth * ifm
micro-block depth * kernel rounding / cores`` values. Both are checked on vela's
``ethos-u85-512`` and ``-2048`` streams (2 and 4 cores).

Biases and scales (``SCALE_BASE``) are 10-byte records, one per OFM channel, padded to
a multiple of 16 records: with a 32-bit accumulator (``ACC_FORMAT`` bits 0-1 = 0) a
signed 32-bit bias, a 31-bit multiplier, a 6-bit shift, a zero byte; with a 48-bit
accumulator a signed 48-bit bias, a 15-bit multiplier, the shift, a zero byte
(``unpack_scales_u85``). The fixtures (8-bit IFMs) have the 32-bit variant only; fast
streams in raw mode with a nonzero zero adjustment (weights beyond int8) neither.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

FORMATS = {0: "standard", 1: "fast"}
TRAVERSALS = ("depth_first", "part_kernel", "depthwise")
# ACC_FORMAT bits 8-10: OFM micro-block (height, width)
MICROBLOCKS = {0: (1, 1), 1: (1, 2), 2: (1, 4), 3: (2, 2), 4: (2, 4), 5: (4, 4)}
# MAC configuration -> (weight decoders/cores, {micro-block (h, w): its depth})
CONFIGS = {
    128: (1, {(1, 2): 8, (1, 1): 16}),
    256: (1, {(1, 2): 16, (1, 4): 8, (2, 2): 8}),
    512: (2, {(2, 2): 16, (1, 4): 16}),
    1024: (4, {(2, 2): 32, (1, 4): 32, (2, 4): 16}),
    2048: (4, {(2, 2): 64, (1, 4): 64, (4, 4): 16}),
}
_GROUP = 4  # OFM channels a weight decoder takes at a time
_FAST_HEADER = 32  # bytes
_MAX_VALUES = 1 << 26  # a layout asking for more is not a real operation

_PERMS: dict = {}
_LOCK = threading.Lock()

INSTALL_HINT = ("decoding Ethos-U85 standard-format weights needs vela's MLW codec: pip "
                "install 'pyruntime[arm]' (pip install --no-deps ethos-u-vela==5.2.0)")


class U85WeightError(ValueError):
    """A weight stream that does not decode, or registers that describe no layout;
    ``item``: the index of the stream in a ``decode_streams`` call (-1: none)."""

    def __init__(self, msg: str, item: int = -1):
        super().__init__(msg)
        self.item = item


@dataclass(frozen=True)
class U85Layout:
    """What decides the order of an Ethos-U85 weight stream (``layout_from_registers``)."""

    macs: int  # MACs per cycle of the configuration
    cores: int  # weight decoders: 1 up to 256 MACs
    traversal: str  # "depth_first" | "part_kernel" | "depthwise"
    ofm_ublock_depth: int
    ofm_block_depth: int  # OFM_BLK_DEPTH_M1 + 1
    ifm_block_depth: int  # derived (no register holds it)
    ifm_bits: int  # 8, 16, 32
    stride: tuple = (1, 1)  # (y, x)
    dilation: tuple = (1, 1)  # (y, x)
    acc48: bool = False  # 48-bit accumulator: selects the bias/scale record variant

    def __post_init__(self):
        problems = []
        if self.traversal not in TRAVERSALS:
            problems.append(f"traversal {self.traversal!r} (expected one of {TRAVERSALS})")
        for name in ("ofm_ublock_depth", "ofm_block_depth", "ifm_block_depth", "cores"):
            if getattr(self, name) < 1:
                problems.append(f"{name} {getattr(self, name)} (expected >= 1)")
        if self.ofm_ublock_depth % (_GROUP * max(self.cores, 1)):
            problems.append(f"OFM micro-block depth {self.ofm_ublock_depth} is not a multiple of "
                            f"{_GROUP} channels for each of {self.cores} cores")
        if self.ofm_block_depth % self.ofm_ublock_depth:
            problems.append(f"OFM block depth {self.ofm_block_depth} is not a multiple of the "
                            f"micro-block depth {self.ofm_ublock_depth}")
        if self.ifm_bits not in (8, 16, 32):
            problems.append(f"IFM width {self.ifm_bits} bits (expected 8, 16 or 32)")
        if any(d not in (1, 2) for d in self.dilation):
            problems.append(f"dilation {self.dilation} (expected 1 or 2 per axis)")
        if any(not 1 <= s <= 4 for s in self.stride):
            problems.append(f"stride {self.stride} (expected 1 to 4 per axis)")
        if problems:
            raise U85WeightError("impossible Ethos-U85 weight layout: " + "; ".join(problems))

    @property
    def ifm_ublock_depth(self) -> int:
        """IFM channels covered at each kernel position before the next position."""
        if self.traversal == "depthwise":
            return 1
        if self.traversal == "part_kernel" and self.ifm_bits == 16:
            return 8
        return self.ifm_block_depth

    @property
    def kernel_round(self) -> int:
        """Kernel positions of a sub-kernel are padded up to a multiple of this."""
        if self.traversal == "depth_first":
            return 1
        if self.traversal == "part_kernel":
            return 10 if self.ifm_bits == 16 else 5
        return 10

    @property
    def dw_padding(self) -> int:
        """Zero positions a depthwise stream adds after each ``kernel_round`` positions."""
        if self.ifm_bits != 16 and self.macs <= 256:
            return 0
        return 2 if self.macs <= 512 else 6


def _ifm_block_depth(traversal: str, ifm_bits: int, macs: int, ublock_depth: int) -> int:
    if traversal == "part_kernel":
        return 16
    if ifm_bits == 32 or (macs in (128, 256) and ublock_depth == 16):
        return 32
    return 64


def _addr(value) -> int:
    """A cmd1 address register as the compiler keeps it: (payload, param) -> 40 bits."""
    if isinstance(value, tuple):
        return int(value[0]) | ((int(value[1]) & 0xFF) << 32)
    return int(value)


def layout_from_registers(regs, config, kind: str) -> U85Layout:
    """The layout of the weights of the operation the registers describe. ``regs``: a
    ``get(name, default)`` over the register file as ``npu.Compiler`` keeps it (cmd0: an
    int; cmd1: (payload, param)); ``config``: the payload's ``NpuConfig`` (its MAC
    count); ``kind``: "conv" or "depthwise" (or the ``NPU_OP_`` names)."""
    g = regs.get
    acc = int(g("ACC_FORMAT", 0))
    if acc & 3 not in (0, 1):
        raise U85WeightError(f"ACC_FORMAT {acc:#x}: accumulator format {acc & 3} (expected "
                             "0 for 32-bit or 1 for 48-bit)")
    ub = (acc >> 8) & 7
    if ub not in MICROBLOCKS:
        raise U85WeightError(f"ACC_FORMAT {acc:#x}: micro-block code {ub} (expected 0-5)")
    wf = int(g("WEIGHT_FORMAT", 0))
    ks = int(g("KERNEL_STRIDE", 0))
    sx = ((ks & 1) | ((ks >> 6) & 1) << 1) + 1
    sy = (((ks >> 1) & 1) | ((ks >> 9) & 1) << 1) + 1
    dx, dy = ((ks >> 3) & 1) + 1, ((ks >> 4) & 1) + 1
    prec = int(g("IFM_PRECISION", 0))
    return make_layout(int(config.macs), kind, MICROBLOCKS[ub], bool(acc & 1),
                       int(g("OFM_BLK_DEPTH_M1", 0)) + 1, 8 << ((prec >> 2) & 3), (sy, sx),
                       (dy, dx), bool((ks >> 2) & 1), sparse=bool((wf >> 4) & 1),
                       decomposition=4 if (ks >> 5) & 1 else 8)


def make_layout(macs: int, kind: str, microblock: tuple, acc48: bool, ofm_block_depth: int,
                ifm_bits: int, stride: tuple, dilation: tuple, part_kernel: bool,
                sparse: bool = False, decomposition: int = 8) -> U85Layout:
    """A layout from decoded register fields (``layout_from_registers`` reads them):
    ``microblock`` ``ACC_FORMAT``'s (height, width); ``stride``/``dilation`` (y, x);
    ``part_kernel`` ``KERNEL_STRIDE``'s weight order bit."""
    kind = kind.lower().removeprefix("npu_op_")
    if kind not in ("conv", "depthwise"):
        raise U85WeightError(f"operation {kind!r} has no weights (expected conv or depthwise)")
    if macs not in CONFIGS:
        raise U85WeightError(f"Ethos-U85 with {macs} MACs does not exist (expected one of "
                             f"{sorted(CONFIGS)})")
    cores, ublocks = CONFIGS[macs]
    if tuple(microblock) not in ublocks:
        raise U85WeightError(f"micro-block {tuple(microblock)} is not one of the "
                             f"Ethos-U85-{macs}'s {sorted(ublocks)}")
    if sparse:
        raise U85WeightError("2:4 sparse weights (WEIGHT_FORMAT bit 4) are not modelled")
    if decomposition != 8:
        raise U85WeightError("4x4 kernel decomposition (KERNEL_STRIDE bit 5) is not "
                             "modelled (vela decomposes kernels into 8x8)")
    if ifm_bits > 32:
        raise U85WeightError(f"a {ifm_bits}-bit IFM has no convolution weights")
    ublock_depth = ublocks[tuple(microblock)]
    if kind == "depthwise":
        traversal = "depthwise"
    else:
        traversal = "part_kernel" if part_kernel else "depth_first"
    return U85Layout(macs=macs, cores=cores, traversal=traversal,
                     ofm_ublock_depth=ublock_depth, ofm_block_depth=int(ofm_block_depth),
                     ifm_block_depth=_ifm_block_depth(traversal, ifm_bits, macs, ublock_depth),
                     ifm_bits=int(ifm_bits), stride=tuple(int(v) for v in stride),
                     dilation=tuple(int(v) for v in dilation), acc48=bool(acc48))


def layout_of(op, arch) -> tuple:
    """(ohwi, format, layout) of an ``npu_u85`` convolution/depthwise ``Operation`` (its
    ``attrs``: ohwi, weight_format, block, ifm_bits, stride, dilation, part_kernel,
    microblock, acc_bits; ``arch.macs``): the items ``decode_streams`` takes."""
    a = op.attrs
    fmt = 1 if a["weight_format"] == "fast" else 0
    lay = make_layout(int(arch.macs), op.kind, a["microblock"], a["acc_bits"] == 48,
                      a["block"][2], a["ifm_bits"], a["stride"], a["dilation"],
                      a.get("part_kernel", False),
                      decomposition=a.get("decomposition", 8))
    return tuple(a["ohwi"]), fmt, lay


def weight_spans(regs, layout: U85Layout) -> tuple[int, int, list]:
    """(format, region, [(address, length)] per stream): one stream for the fast format
    or a single core, else one per core (``WEIGHT_BASE``, ``WEIGHT1_BASE``, ...)."""
    g = regs.get
    fmt = int(g("WEIGHT_FORMAT", 0)) & 1
    n = 1 if fmt == 1 else layout.cores
    names = ["WEIGHT"] + [f"WEIGHT{i}" for i in range(1, 4)]
    spans = [(_addr(g(f"{p}_BASE", (0, 0))), _addr(g(f"{p}_LENGTH", (0, 0))))
             for p in names[:n]]
    return fmt, int(g("WEIGHT_REGION", 0)), spans


# ---- order ------------------------------------------------------------------------
def _kernel_positions(sub_h: int, sub_w: int, stride: tuple) -> list:
    """(y, x) offsets inside a sub-kernel in stream order: stride phases, then rows
    (snaking)."""
    sy, sx = stride
    out = []
    for py in range(sy):
        kh = (sub_h + sy - 1 - py) // sy
        for px in range(sx):
            kw = (sub_w + sx - 1 - px) // sx
            for ky in range(kh):
                cols = range(kw) if ky % 2 == 0 else range(kw - 1, -1, -1)
                out.extend((py + ky * sy, px + kx * sx) for kx in cols)
    return out


def _core_order(ohwi: tuple, lay: U85Layout, core: int) -> np.ndarray:
    """Flat OHWI index (-1: a zero) of each value core ``core`` consumes."""
    O, H, W, I = ohwi
    dw = lay.traversal == "depthwise"
    stride = (1, 1) if lay.traversal == "depth_first" else lay.stride
    dec_y, dec_x = 8 // lay.dilation[0], 8 // lay.dilation[1]
    iud, ud, cores = lay.ifm_ublock_depth, lay.ofm_ublock_depth, lay.cores
    step = 1 if dw else 8
    # one kernel position: IFM groups of `step`, this core's groups of 4 OFM channels
    # (round-robin over cores), 4 channels, the IFM channels of the group
    i_rel = (np.arange(0, iud, step)[:, None, None, None]
             + np.arange(step)[None, None, None, :])
    o_rel = (np.arange(core * _GROUP, ud, _GROUP * cores)[None, :, None, None]
             + np.arange(_GROUP)[None, None, :, None])
    i_rel, o_rel = np.broadcast_arrays(i_rel, o_rel)
    i_rel, o_rel = i_rel.reshape(-1), o_rel.reshape(-1)
    pad_unit = iud * ud // cores  # zeros for one padding position
    dw_pad = lay.dw_padding * ud // cores if dw else 0
    rnd = lay.kernel_round
    ifm_blocks = [0] if dw else list(range(0, I, lay.ifm_block_depth))
    chunks = []
    total = 0
    for n_ob, ob in enumerate(range(0, O, lay.ofm_block_depth)):
        ob_depth = min(lay.ofm_block_depth, O - ob)
        for ib in (ifm_blocks if n_ob % 2 == 0 else ifm_blocks[::-1]):
            ib_depth = 1 if dw else min(lay.ifm_block_depth, I - ib)
            for kx0 in range(0, W, dec_x):
                sub_w = min(W - kx0, dec_x)
                for ky0 in range(0, H, dec_y):
                    sub_h = min(H - ky0, dec_y)
                    pos = np.asarray(_kernel_positions(sub_h, sub_w, stride), np.int64)
                    wy, wx = ky0 + pos[:, 0], kx0 + pos[:, 1]
                    n_pos = len(pos)
                    rounded = -(-n_pos // rnd) * rnd
                    for iuo in range(0, ib_depth, iud):
                        for ouo in range(0, ob_depth, ud):
                            o = ob + ouo + o_rel[None, :]
                            i = ib + iuo + i_rel[None, :]
                            # (kernel positions, values at each)
                            flat = ((o * H + wy[:, None]) * W + wx[:, None]) * I + i
                            flat = np.where((o < O) & (i < I), flat, -1)
                            if dw_pad:
                                gap = np.full((n_pos, dw_pad), -1, np.int64)
                                every = (np.arange(1, n_pos + 1) % rnd == 0)[:, None]
                                flat = np.concatenate(
                                    [flat, np.where(every, gap, -2)], axis=1)
                                flat = flat[flat != -2]
                            chunks.append(flat.reshape(-1))
                            total += flat.size
                            if rounded > n_pos:
                                extra = (rounded - n_pos) * pad_unit + dw_pad
                                chunks.append(np.full(extra, -1, np.int64))
                                total += extra
                            if total > _MAX_VALUES:
                                raise U85WeightError(
                                    f"a {O}x{H}x{W}x{I} layout needs over {_MAX_VALUES} "
                                    "values: beyond the model's limits")
    return np.concatenate(chunks) if chunks else np.zeros(0, np.int64)


def _fast_interleave(seqs: list, lay: U85Layout) -> np.ndarray:
    """One fast stream for several cores: their sequences dealt in blocks."""
    block = lay.ofm_ublock_depth * lay.ifm_ublock_depth * lay.kernel_round // lay.cores
    out = []
    r = 0
    while True:
        last = 0
        for s in seqs:
            part = s[r * block:(r + 1) * block]
            out.append(part)
            last = len(part)
        r += 1
        if last == 0:
            break
    return np.concatenate(out)


def stream_orders(ohwi: tuple, fmt: int, layout: U85Layout) -> list:
    """Per weight stream, the flat OHWI index of each decoded value (-1: a zero);
    cached per (shape, format, layout)."""
    ohwi = tuple(int(v) for v in ohwi)
    if len(ohwi) != 4 or min(ohwi) < 1:
        raise U85WeightError(f"weight shape {ohwi}: expected four positive OHWI dimensions")
    if layout.traversal == "depthwise" and ohwi[3] != 1:
        raise U85WeightError(f"depthwise weights {ohwi}: expected I = 1 (O = channels)")
    if fmt not in FORMATS:
        raise U85WeightError(f"weight format {fmt} (expected 0 standard or 1 fast)")
    if fmt == 1 and layout.traversal == "depthwise":
        raise U85WeightError("depthwise weights in the fast format do not exist (the "
                             "fast decoder takes convolution weights only)")
    key = (ohwi, fmt, layout)
    with _LOCK:
        hit = _PERMS.get(key)
    if hit is not None:
        return hit
    seqs = [_core_order(ohwi, layout, c) for c in range(layout.cores)]
    if fmt == 1 and layout.cores > 1:
        seqs = [_fast_interleave(seqs, layout)]
    for s in seqs:
        s.setflags(write=False)
    with _LOCK:
        _PERMS[key] = seqs
    return seqs


# ---- fast format ------------------------------------------------------------------
def _unfold(f: np.ndarray) -> np.ndarray:
    mag = (f >> 1).astype(np.int64)
    return np.where(f & 1, -mag, mag)


def fast_header(raw: bytes) -> dict:
    """The fields of a fast stream's 32-byte header (U85WeightError if it is not one)."""
    if len(raw) < _FAST_HEADER:
        raise U85WeightError(f"fast weight stream of {len(raw)} bytes is shorter than its "
                             f"{_FAST_HEADER}-byte header")
    h = int.from_bytes(bytes(raw[:_FAST_HEADER]), "little")
    raw_mode, small = bool(h & 1), bool((h >> 1) & 1)
    reserved = (h >> 2) & ((1 << 102) - 1)
    za = (h >> 104) & 0xFF
    za = za - 256 if za & 0x80 else za
    lut = np.asarray([(h >> (112 + 9 * k)) & 0x1FF for k in range(16)], np.int64)
    if reserved:
        raise U85WeightError(f"fast weight stream header: bits 2-103 are {reserved:#x}, "
                             "expected 0 (not a fast-decoder stream)")
    if raw_mode and small:
        raise U85WeightError("fast weight stream header: both raw mode and the small "
                             "palette are set")
    if za and not raw_mode:
        raise U85WeightError(f"fast weight stream header: zero adjustment {za} outside "
                             "raw mode")
    if not raw_mode and np.any(lut == 1):
        raise U85WeightError("fast weight stream header: a palette entry is -0")
    bits = 8 if raw_mode else (2 if small else 4)
    return {"bits": bits, "zero_adjust": za, "palette": _unfold(lut)}


def fast_stream_bytes(count: int, bits: int) -> int:
    """Bytes of a fast stream holding ``count`` fields of ``bits`` bits."""
    return _FAST_HEADER + -(-count * bits // 256) * 32


def decode_fast(raw: bytes, count: int) -> np.ndarray:
    """The ``count`` values of a fast-format stream (int64)."""
    hdr = fast_header(raw)
    bits = hdr["bits"]
    need = fast_stream_bytes(count, bits)
    if len(raw) != need:
        what = "truncated: " if len(raw) < need else ""
        raise U85WeightError(
            f"fast weight stream is {what}{len(raw)} bytes; {count} {bits}-bit fields take "
            f"{need} (header, body padded to 32 bytes)")
    body = np.frombuffer(bytes(raw), np.uint8, offset=_FAST_HEADER)
    if bits == 8:
        vals = body[:count].view(np.int8).astype(np.int64) - hdr["zero_adjust"]
        used = count
    else:
        per = 8 // bits
        shifts = np.arange(per, dtype=np.uint8) * bits
        fields = ((body[:, None] >> shifts[None, :]) & ((1 << bits) - 1)).reshape(-1)
        vals = hdr["palette"][fields[:count].astype(np.int64)]
        used = -(-count // per)
        if count % per and fields[count:used * per].any():
            raise U85WeightError("fast weight stream: nonzero bits after the last field")
    if body[used:].any():
        raise U85WeightError(f"fast weight stream: nonzero padding after the {count} fields")
    return vals


# ---- decoding ---------------------------------------------------------------------
def _split(raw) -> list:
    if isinstance(raw, (bytes, bytearray, memoryview, np.ndarray)):
        return [bytes(raw)]
    return [bytes(r) for r in raw]


def _values(streams: list, items: list) -> list:
    """Per item, its orders and the values of each of its streams: fast streams here,
    all standard streams in one request to vela's codec (a child process)."""
    from pyruntime.delegates.ethosu import weights as W

    out, std = [], []
    for k, (raw, (ohwi, fmt, lay)) in enumerate(zip(streams, items)):
        try:
            orders = stream_orders(ohwi, fmt, lay)
            parts = _split(raw)
            if len(parts) != len(orders):
                raise U85WeightError(f"{len(parts)} weight streams given; the "
                                     f"{FORMATS[fmt]} format on {lay.cores} cores has "
                                     f"{len(orders)}")
            if fmt == 1:
                vals = [decode_fast(b, len(o)) for b, o in zip(parts, orders)]
            else:
                vals = [None] * len(parts)
                std.extend((k, j, b) for j, b in enumerate(parts))
        except U85WeightError as e:
            raise U85WeightError(str(e), k) from None
        out.append((orders, vals))
    if std:
        try:
            decoded, _ = W.decode_streams([b for _, _, b in std], [])
        except W.CodecError as e:
            k = std[e.item][0] if 0 <= e.item < len(std) else -1
            raise U85WeightError(f"standard weight stream: {e}", k) from None
        for (k, j, _), v in zip(std, decoded):
            out[k][1][j] = v
    return out


def decode_streams(streams: list, items: list) -> list:
    """Several operations' weights at once: ``streams[k]`` the bytes of item ``k``'s
    stream (or a list of per-core streams), ``items[k]`` its (ohwi, format, layout) (see
    ``layout_of``). Returns OHWI int64 arrays; U85WeightError names the item (``.item``)
    whose stream does not decode; ImportError without vela (standard streams)."""
    if len(streams) != len(items):
        raise U85WeightError(f"{len(streams)} streams for {len(items)} layouts")
    result = []
    for k, ((orders, vals), (ohwi, fmt, lay)) in enumerate(zip(_values(streams, items),
                                                               items)):
        out = np.zeros(int(np.prod(ohwi)), np.int64)
        for j, (v, o) in enumerate(zip(vals, orders)):
            if len(v) != len(o):
                raise U85WeightError(
                    f"weight stream {j} holds {len(v)} values; a "
                    f"{'x'.join(map(str, ohwi))} {lay.traversal} layout "
                    f"({FORMATS[fmt]}) takes {len(o)}", k)
            real = o >= 0
            out[o[real]] = v[real]
        result.append(out.reshape(tuple(ohwi)))
    return result


def decode_u85(raw, fmt: int, ohwi: tuple, layout: U85Layout) -> np.ndarray:
    """An Ethos-U85 weight stream -> OHWI int64 weights (depthwise: O channels, I = 1).
    ``raw``: the stream's bytes, or a list of per-core streams (standard format on a
    configuration with several weight decoders); ``fmt``: ``WEIGHT_FORMAT`` bit 0.
    Values are as the NPU multiplies them (weight minus its zero point)."""
    return decode_streams([raw], [(tuple(ohwi), int(fmt), layout)])[0]


def padding_values(raw, fmt: int, ohwi: tuple, layout: U85Layout) -> np.ndarray:
    """The values a stream holds at padding positions (all zero in a vela stream): a
    check that the layout is the one the stream was written for."""
    (orders, vals), = _values([raw], [(tuple(ohwi), int(fmt), layout)])
    return np.concatenate([v[:len(o)][o[:len(v)] < 0] for v, o in zip(vals, orders)])


def scale_records(ofm_depth: int, layout: U85Layout) -> int:
    """Bias/scale records vela writes for ``ofm_depth`` channels (a multiple of 16)."""
    unit = -(-layout.ofm_ublock_depth // 16) * 16
    return -(-ofm_depth // unit) * unit


def unpack_scales_u85(raw: np.ndarray, n: int, acc48: bool):
    """``n`` 10-byte records -> (bias, multiplier, shift), int64 each."""
    raw = np.asarray(raw, np.uint8).reshape(-1)
    if len(raw) < 10 * n:
        raise U85WeightError(f"bias/scale data of {len(raw)} bytes holds fewer than {n} "
                             "10-byte records")
    rec = raw[:10 * n].reshape(n, 10).astype(np.int64)
    nb = 6 if acc48 else 4
    bias = np.zeros(n, np.int64)
    for k in range(nb):
        bias |= rec[:, k] << (8 * k)
    bias = np.where(bias >= 1 << (8 * nb - 1), bias - (1 << (8 * nb)), bias)
    scale = np.zeros(n, np.int64)
    for k in range(8 - nb):
        scale |= rec[:, nb + k] << (8 * k)
    scale &= (1 << (8 * (8 - nb) - 1)) - 1
    shift = rec[:, 8] & 0x3F
    return bias, scale, shift
