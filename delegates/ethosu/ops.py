"""The NPU's arithmetic: what each operation computes, in integers, with numpy.

Every operation reads its input feature maps minus their zero points (padding reads
as the zero point, so it adds nothing), accumulates in 64-bit integers (the NPU's
32/40-bit accumulators never overflow for 8/16-bit data at these sizes), and sends
the accumulator through the output stage:

    out = clamp(round_shift(acc * scale, shift) + ofm_zero_point, lo, hi)

with ``scale``/``shift`` per output channel (the 10-byte records after the bias: CONV,
DEPTHWISE) or global (``OFM_SCALE``: POOL, ELEMENTWISE, and CONV when
``OFM_PRECISION`` selects it), ``lo``/``hi`` the intersection of the OFM type,
``ACTIVATION``'s clip range and ``ACTIVATION_MIN``/``MAX``. Rounding
(``OFM_PRECISION`` bits 14-15): NATURAL adds half and shifts (round half up, the
TOSA ``SINGLE_ROUND``: checked bit-exact on every convolution of the test streams),
TFL is the TOSA ``DOUBLE_ROUND`` (half up, and beyond a shift of 31 another 2^30
toward the value's sign, which there is TFLite's two rounding steps; vela programs
TFL for the TOSA RESCALEs in that mode, and on operations of its own with identity
scales), TRUNCATE rounds toward zero. TFL is checked
bit-exact against the TOSA reference model where it changes results: the per-channel
convolution (shift 41), MUL (shift 37) and ADD (OFM and rescaled operand) of the
``tfl_*`` test streams, which miss the oracle when read as NATURAL
(``tests/delegates/test_ethosu_paths.py``).

- CONV: sum over the kernel and IFM depth of ``(ifm - zp) * w``, plus the 40-bit bias.
- DEPTHWISE: the same per channel (channel multiplier 1).
- POOL MAX: the window's maximum (padding excluded); AVERAGE: the window's sum
  scaled by ``OFM_SCALE`` (vela folds 1/N into it), or, when ``OFM_PRECISION`` asks
  for per-channel scaling (padded average pools), by the NPU's own reciprocal of
  each window's count of real elements.
- ELEMENTWISE ADD/SUB: operand scaling from ``IFM_PRECISION`` bits 8-9:
  SCALE_16BIT multiplies A and B by ``OPA_SCALE``/``OPB_SCALE`` (16-bit, no shift);
  SCALE_OPA_32BIT / SCALE_OPB_32BIT rescale A / B by ``OPA_SCALE`` (multiplier,
  shift; rounded with the IFM rounding mode) and shift the other left by 19, then
  add or subtract. (The fixed shift is inferred from vela's scaling, which puts both
  operands in units of 2^-19 of the larger input scale.) MUL multiplies, MIN/MAX
  compare, ABS negates negatives; then the output stage. Checked bit-exact against
  the TOSA reference model: the 32-bit modes on 8-bit IFMs (the MobileNetV2 residual
  adds; the ``tfl_*`` ADD, whose B is the scaled operand), SCALE_16BIT on 16-bit IFMs
  with scales of 2048 and on 16- and 32-bit IFMs with scales of 1, and MUL of 8-,
  16- and 32-bit values (``ew16_*``, ``tfl_*``). What no vela stream for our targets has (the
  32-bit modes on 16- or 32-bit IFMs, a shift or a scale over 16 bits in SCALE_16BIT,
  a MUL with operand scaling) ``npu.py`` refuses at load.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.ethosu import weights as W
from pyruntime.delegates.ethosu.npu import FeatureMap, Operation
from pyruntime.delegates.ethosu.payload import BACKEND

_NEG = -(1 << 40)  # padding for max pooling: below any accumulator value


def op_error(op: Operation, msg: str, code=ErrorCode.InvalidProgram) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND}: command {op.index} (word {op.word}, NPU_OP_"
                                 f"{op.kind.upper()}): {msg}")


# ---- memory ---------------------------------------------------------------------------
def read_fm(fm: FeatureMap, regions) -> np.ndarray:
    """The feature map's values as int64 (H, W, C), zero point subtracted."""
    mem = regions[fm.region]
    if fm.esz == 1:
        v = mem[fm.index]
        v = v.view(np.int8) if fm.signed else v
        return v.astype(np.int64) - fm.zero_point
    v = np.zeros(fm.index.shape, np.int64)
    for b in range(fm.esz):
        v |= mem[fm.index + b].astype(np.int64) << (8 * b)
    if fm.signed:
        top = 1 << (8 * fm.esz - 1)
        v = np.where(v >= top, v - 2 * top, v)
    return v - fm.zero_point


def write_fm(fm: FeatureMap, regions, values: np.ndarray) -> None:
    mem = regions[fm.region]
    if fm.esz == 1:
        mem[fm.index] = (values & 0xFF).astype(np.uint8)
        return
    for b in range(fm.esz):
        mem[fm.index + b] = ((values >> (8 * b)) & 0xFF).astype(np.uint8)


# ---- output stage ---------------------------------------------------------------------
def round_shift(prod: np.ndarray, shift, rounding: str) -> np.ndarray:
    shift = np.asarray(shift, np.int64)
    if rounding == "TRUNCATE":
        mag = np.right_shift(np.abs(prod), shift)
        return np.where(prod < 0, -mag, mag)
    half = np.where(shift > 0, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
    if rounding == "TFL":
        half = half + np.where(shift > 31, np.where(prod >= 0, 1 << 30, -(1 << 30)), 0)
    return np.right_shift(prod + half, shift)


def scale_values(acc: np.ndarray, scale, shift, rounding: str) -> np.ndarray:
    scale = np.asarray(scale, np.int64)
    peak = int(np.abs(acc).max(initial=0)) * int(np.abs(scale).max(initial=0))
    if peak >= 1 << 62:  # beyond int64: exact Python integers (rare, slow)
        a = acc.astype(object) * scale.astype(object)
        sh = np.broadcast_to(np.asarray(shift, np.int64), a.shape)
        out = np.empty(a.shape, object)
        for i, (p, s) in enumerate(zip(a.flat, sh.flat)):
            s = int(s)
            if rounding == "TRUNCATE":
                out.flat[i] = -((-p) >> s) if p < 0 else p >> s
            else:
                h = (1 << (s - 1)) if s > 0 else 0
                if rounding == "TFL" and s > 31:
                    h += (1 << 30) if p >= 0 else -(1 << 30)
                out.flat[i] = (p + h) >> s
        return np.clip(out, -(1 << 62), 1 << 62).astype(np.int64)
    return round_shift(acc * scale, shift, rounding)


def output(op: Operation, acc: np.ndarray, scale, shift, regions) -> None:
    a = op.attrs
    v = scale_values(acc, scale, shift, a["rounding"]) + op.ofm.zero_point
    lo, hi = a["clamp"]
    write_fm(op.ofm, regions, np.clip(v, lo, hi))


# ---- windows ---------------------------------------------------------------------------
def _padded(op: Operation, x: np.ndarray, fill: int) -> np.ndarray:
    pt, pl, pb, pr = op.attrs["pad"]
    if not (pt or pl or pb or pr):
        return x
    out = np.full((x.shape[0] + pt + pb, x.shape[1] + pl + pr, x.shape[2]), fill, x.dtype)
    out[pt:pt + x.shape[0], pl:pl + x.shape[1]] = x
    return out


def _taps(op: Operation, xp: np.ndarray):
    """Yield (ky, kx, window view (OH, OW, C)) for every kernel tap."""
    OH, OW = op.ofm.dims[:2]
    sy, sx = op.attrs["stride"]
    dy, dx = op.attrs["dilation"]
    kh, kw = op.attrs["kernel"]
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dy, kx * dx
            yield ky, kx, xp[y0:y0 + (OH - 1) * sy + 1:sy, x0:x0 + (OW - 1) * sx + 1:sx]


# ---- operations ------------------------------------------------------------------------
class Executor:
    """Runs compiled operations on memory regions; caches decoded weights and scales
    per operation, checked against the bytes the operation finds in memory."""

    def __init__(self, arch):
        self.arch = arch
        self._w: dict = {}
        self._s: dict = {}

    def layout(self, op: Operation) -> tuple:
        a = op.attrs
        return (a["ohwi"], self.arch.ifm_ublock, self.arch.ofm_ublock, a["block_depth"],
                op.kind == "depthwise", a["part_kernel"], a["ifm_bits"], a["decomp"])

    def load_weights(self, items) -> None:
        """Decode the weight streams of ``items`` ((operation, raw bytes) pairs) in one
        codec child process and cache them as OHWI int64 volumes."""
        if not items:
            return
        try:
            decoded, perms = W.decode_streams([raw for _, raw in items],
                                              [self.layout(op) for op, _ in items])
        except ImportError as e:
            raise op_error(items[0][0], f"{W.INSTALL_HINT} ({e})", ErrorCode.NotFound) \
                from None
        except W.CodecError as e:
            op = items[e.item][0] if 0 <= e.item < len(items) else items[0][0]
            wr, wb, wl = op.attrs["weights"]
            raise op_error(op, f"weight stream at {wb:#x} in region {wr} ({wl} bytes): "
                               f"{e}") from None
        for (op, raw), vals, perm in zip(items, decoded, perms):
            a = op.attrs
            if len(vals) != len(perm):
                raise op_error(op, f"weight stream decodes to {len(vals)} values; an OHWI "
                                   f"volume {list(a['ohwi'])} in OFM blocks of "
                                   f"{a['block_depth']} takes {len(perm)}")
            w = np.zeros(int(np.prod(a["ohwi"])), np.int64)
            keep = perm >= 0
            w[perm[keep]] = vals[keep]
            self._w[op.index] = (raw, w.reshape(a["ohwi"]))

    def weight_bytes(self, op: Operation, regions) -> bytes:
        """The bytes of ``op``'s weight stream as memory holds them now."""
        wr, wb, wl = op.attrs["weights"]
        return regions[wr][wb:wb + wl].tobytes()

    def weights(self, op: Operation, regions) -> np.ndarray:
        raw = self.weight_bytes(op, regions)
        hit = self._w.get(op.index)
        if hit is None or hit[0] != raw:
            self.load_weights([(op, raw)])
        return self._w[op.index][1]

    def scales(self, op: Operation, regions):
        sr, sb, sl = op.attrs["scales"]
        raw = regions[sr][sb:sb + sl]
        key = raw.tobytes()
        hit = self._s.get(op.index)
        if hit is not None and hit[0] == key:
            return hit[1]
        rec = self.unpack_scales(op, raw)
        self._s[op.index] = (key, rec)
        return rec

    def unpack_scales(self, op: Operation, raw: np.ndarray):
        """(bias, scale, shift) from ``op``'s bias/scale records."""
        return W.unpack_scales(raw, op.ofm.dims[2])

    def scale_records(self, op: Operation):
        """(bias, scale, shift) per output channel of a convolution, as it last read them
        (at load, or in the last run)."""
        return self._s[op.index][1]

    def run(self, op: Operation, regions) -> None:
        getattr(self, "_" + op.kind)(op, regions)

    def _dma_start(self, op: Operation, regions) -> None:
        (sr, s), (dr, d), n = op.attrs["src"], op.attrs["dst"], op.attrs["length"]
        regions[dr][d:d + n] = regions[sr][s:s + n]

    def _conv(self, op: Operation, regions) -> None:
        w = self.weights(op, regions)
        bias, scale, shift = self.scales(op, regions)
        x = _padded(op, read_fm(op.ifm, regions), 0)
        OH, OW, OC = op.ofm.dims
        kh, kw = op.attrs["kernel"]
        cols = np.concatenate([t for _, _, t in _taps(op, x)], axis=2) if kh * kw > 1 \
            else next(_taps(op, x))[2]
        k = cols.shape[2]
        # float matmul is exact while every partial sum is an integer below 2^24 (float32)
        # or 2^53 (float64)
        bound = k * int(np.abs(cols).max(initial=0)) * int(np.abs(w).max(initial=0))
        ft = np.float32 if bound < 1 << 24 else np.float64
        acc = cols.reshape(OH * OW, k).astype(ft) @ w.reshape(OC, k).T.astype(ft)
        acc = np.rint(acc).astype(np.int64).reshape(OH, OW, OC) + bias
        self._finish(op, acc, scale, shift, regions)

    def _depthwise(self, op: Operation, regions) -> None:
        w = self.weights(op, regions)
        bias, scale, shift = self.scales(op, regions)
        x = _padded(op, read_fm(op.ifm, regions), 0)
        acc = np.zeros(op.ofm.dims, np.int64)
        for ky, kx, t in _taps(op, x):
            acc += t * w[:, ky, kx, 0]
        self._finish(op, acc + bias, scale, shift, regions)

    def _finish(self, op, acc, scale, shift, regions):
        if op.attrs["global_scale"]:
            scale, shift = op.attrs["ofm_scale"]
        output(op, acc, scale, shift, regions)

    def _pool(self, op: Operation, regions) -> None:
        x = read_fm(op.ifm, regions)
        mode = op.attrs["mode"]
        scale, shift = op.attrs["ofm_scale"]
        if mode == "MAX":
            xp = _padded(op, x, _NEG)
            acc = None
            for _, _, t in _taps(op, xp):
                acc = t.copy() if acc is None else np.maximum(acc, t)
            if not op.attrs["global_scale"]:
                scale, shift = 1, 0
            output(op, acc, scale, shift, regions)
            return
        xp = _padded(op, x, 0)
        acc = np.zeros(op.ofm.dims, np.int64)
        for _, _, t in _taps(op, xp):
            acc += t
        if not op.attrs["global_scale"]:
            ones = _padded(op, np.ones(x.shape[:2] + (1,), np.int64), 0)
            count = np.zeros(op.ofm.dims[:2] + (1,), np.int64)
            for _, _, t in _taps(op, ones):
                count += t
            scale, shift = pooling_scale(np.maximum(count, 1))
        output(op, acc, scale, shift, regions)

    def _elementwise(self, op: Operation, regions) -> None:
        a_ = op.attrs
        mode = a_["mode"]
        a = read_fm(op.ifm, regions)
        if mode == "ABS":
            acc = np.abs(a)
        else:
            if op.ifm2 is not None:
                b = np.broadcast_to(read_fm(op.ifm2, regions), a.shape)
            else:
                s = a_["scalar"] & 0xFFFF
                s = s - 0x10000 if a_["scalar_signed"] and s & 0x8000 else s
                b = np.full(a.shape, s - a_["scalar_zp"], np.int64)
            if a_["reversed"]:
                a, b = b, a
            if mode in ("ADD", "SUB"):
                a, b = self._operand_scaling(op, a, b)
            acc = combine(mode, a, b)
        scale, shift = a_["ofm_scale"]
        output(op, acc, scale, shift, regions)

    def _operand_scaling(self, op, a, b):
        """ADD/SUB operands: SCALE_16BIT multiplies A by OPA_SCALE and B by OPB_SCALE;
        SCALE_OPA_32BIT / SCALE_OPB_32BIT (8-bit IFMs only: ``npu.py`` refuses the rest)
        rescale A / B by OPA_SCALE and shift the other left by 19."""
        a_ = op.attrs
        mode = a_["ifm_scale_mode"]
        (sa, sha), (sb, _) = a_["opa_scale"], a_["opb_scale"]
        if mode == 0:
            return a * sa, b * sb
        scaled = scale_values(a if mode == 1 else b, sa, sha & 0x3F, a_["ifm_rounding"])
        if mode == 1:
            return scaled, b << 19
        return a << 19, scaled


def combine(mode: str, a: np.ndarray, b) -> np.ndarray:
    """ELEMENTWISE ``mode`` on its operands (zero points off, scaled); ABS ignores ``b``."""
    if mode == "ADD":
        return a + b
    if mode == "SUB":
        return a - b
    if mode == "MUL":
        return a * b
    if mode == "MIN":
        return np.minimum(a, b)
    if mode == "MAX":
        return np.maximum(a, b)
    return np.abs(a)


def pooling_scale(count: np.ndarray):
    """The NPU's reciprocal of a window's element count: (multiplier, shift) with
    multiplier ~ 2^(31+k) / count, k = bit length of count - 1."""
    k = np.zeros_like(count)
    m = count - 1
    while np.any(m > 0):
        k += m > 0
        m >>= 1
    shift = 31 + k
    scale = ((np.int64(1) << shift) + (np.int64(1) << k)) // count
    return scale, shift
