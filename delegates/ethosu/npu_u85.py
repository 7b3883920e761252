"""The Ethos-U85 register machine: what changes from the Ethos-U55's (``npu.py``).

Register fields from Arm's public interface header for the U85 (regor's
``ethos_u85_interface.hpp``), their use as vela 5.2.0 writes them for ``ethos-u85-128``
to ``-2048`` (regor's ``ethos_u85_register_cs_generator.cpp``), checked bit for bit
against the TOSA reference model on the test programs (tests/delegates/test_ethosu.py,
test_ethosu_paths.py).

What differs from the U55:

- ``IFM/IFM2/OFM_PRECISION`` keep the U55's type (bit 0), width and format (bits 6-7)
  fields but give bits 14-15 to the storage (0: the four tiles in memory; 2: a chaining
  buffer inside the NPU; 3: none, an output kept in the accumulators). The OFM adds the
  scale mode (bit 8: 0 per channel, 1 global), a reversed axis (bits 9-10: H, W, C) and a
  transposition (bits 11-13: the order memory holds the H, W, C axes in, e.g. 3 = WCH,
  the NCHW-to-NHWC copy vela makes for a program's input); the OFM registers give the
  shape before transposition, its tiles and strides the shape after.
- Rounding moves into the scale registers: ``OFM_SCALE`` (also written for per-channel
  operations, where it only carries the rounding) holds shift (bits 0-5), a
  double-rounding position (6-10), the rounding mode (13-15) and a 31-bit multiplier.
- ``ACC_FORMAT``: 32- or 48-bit accumulators (bits 0-1), where they start (4-5: reset;
  kept from the previous operation, or loaded from IFM2), whether the operation writes
  its OFM (bit 6), and the OFM micro-block (8-10).
- Bias/scale records stay 10 bytes per output channel, with another layout: for 32-bit
  accumulators a 32-bit bias, a 31-bit multiplier and a 6-bit shift (bytes 0-3, 4-7,
  8); for 48-bit ones a 48-bit bias, a 15-bit multiplier and the shift (0-5, 6-7, 8).
- ``WEIGHT_FORMAT`` picks the weight decoder per operation (``weights_u85.py``).
- POOL gains SUM (no division), MIN, NONE and arg-max modes; ``AVERAGE`` divides by the
  window's element count itself (vela leaves the 1/N out of ``OFM_SCALE``).
- ELEMENTWISE rescales each operand by its own ``IFM_SCALE``/``IFM2_SCALE`` (multiplier,
  shift, rounding) before the operation; ``IFM_BROADCAST``/``IFM2_BROADCAST`` broadcast
  along H (bit 0), W (1), C (2) or make IFM2 the ``OP_SCALAR`` (bit 3).

What runs: CONV, DEPTHWISE, POOL (MAX, MIN, AVERAGE, SUM), ELEMENTWISE (ADD, SUB, MUL,
MIN, MAX, ABS) and 1-D DMA on 128 to 2048 MACs (one weight stream per weight decoder),
8/16-bit feature maps in memory or chaining buffers, transposed and reversed OFMs,
NATURAL and DOUBLE_SYMMETRIC rounding, both weight decoders. What does not
(``NotSupported`` at load, naming the command; no vela stream of ours has them, so
nothing could be checked): operations that keep or load their accumulators or write no
OFM, lookup-table activations, RESIZE, BRANCH, indexed DMA, sparse weights, the other
rounding modes and double rounding, MUL with scaled operands.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.ethosu import registers as R
from pyruntime.delegates.ethosu import registers_u85 as R85
from pyruntime.delegates.ethosu import weights_u85 as W85
from pyruntime.delegates.ethosu.npu import (MAX_FM_ELEMENTS, Compiler, FeatureMap,
                                            Operation, _s16, stream_error)
from pyruntime.delegates.ethosu.payload import BACKEND

STORAGE = {0: "TILE2X2", 1: "TILE3X1", 2: "CHAINED", 3: "NONE"}
# OFM transposition (bits 11-13): memory order of the (H, W, C) axes
TRANSPOSE = {0: (0, 1, 2), 1: (1, 0, 2), 2: (0, 2, 1), 3: (1, 2, 0), 6: (2, 0, 1),
             7: (2, 1, 0)}
REVERSE = {0: None, 1: 0, 2: 1, 3: 2}
ROUNDING_OFM = {0: "DOUBLE_SYMMETRIC", 1: "NATURAL", 2: "DOUBLE_ASYMMETRIC", 3: "SYMMETRIC",
                4: "TRUNCATE_TO_ZERO", 5: "TRUNCATE_TO_LOWER"}
# the rounding modes the model computes (ops.round_shift's names)
MODELLED_ROUNDING = {"NATURAL": "NATURAL", "DOUBLE_SYMMETRIC": "TFL"}
POOL_MODES = {0: "MAX", 1: "AVERAGE", 2: "REDUCE_SUM", 3: "SUM", 4: "NONE", 5: "MIN",
              6: "ARGMAX_X", 7: "ARGMAX_Y"}
MODELLED_POOLS = {"MAX", "AVERAGE", "SUM", "MIN"}
ACC_INPUT = {0: "RESET", 1: "KEEP", 2: "IFM2"}


class ArchU85:
    """An Ethos-U85 configuration: 128 to 2048 MACs, with 1 (up to 256 MACs), 2 (512) or
    4 weight decoders."""

    def __init__(self, config):
        if config.product != 2:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: {config.name} is not an Ethos-U85")
        if config.macs not in W85.CONFIGS:
            raise ExecuTorchError(
                ErrorCode.NotSupported,
                f"{BACKEND}: {config.name}: no such Ethos-U85 configuration (128 to 2048 "
                "MACs)")
        self.config = config
        self.macs = config.macs
        self.cores = W85.CONFIGS[config.macs][0]


CHAIN_BASE = 16  # memory-region keys of the chaining buffers: CHAIN_BASE + buffer
ELEMENTWISE_MODES = {0: "MUL", 1: "ADD", 2: "SUB", 3: "MIN", 4: "MAX", 5: "LRELU", 6: "ABS",
                     7: "CLZ", 8: "SHR", 9: "SHL", 10: "LSR", 11: "DIV", 16: "CMP_EQ",
                     17: "CMP_NE", 18: "CMP_GE", 19: "CMP_GT", 33: "AND", 34: "OR",
                     35: "XOR", 36: "NOT", 42: "AND_NOT"}
MODELLED_ELEMENTWISE = {"ADD", "SUB", "MUL", "MIN", "MAX", "ABS"}
BROADCAST_SCALAR = 8  # IFM/IFM2_BROADCAST: bits 0-2 broadcast H, W, C; 8 a scalar
IFM_ROUNDING = {0: "DOUBLE_SYMMETRIC", 1: "NATURAL"}


class CompilerU85(Compiler):
    """``npu.Compiler`` for Ethos-U85 streams. Chaining buffers (an OFM kept inside the
    NPU for the next operation's IFM or IFM2) are memory regions ``CHAIN_BASE + n`` of
    dense NHWC bytes, added to the region sizes as the stream writes them."""

    isa = R85

    def __init__(self, arch, region_sizes: dict):
        super().__init__(arch, dict(region_sizes))
        self.chains: dict = {}  # region -> (dims, dtype) last written

    def _operation(self, name: str, param: int, c) -> Operation:
        g = self.regs.get
        if name in ("NPU_OP_RESIZE", "NPU_OP_BRANCH"):
            raise stream_error(*c, f"{name} is not modelled", ErrorCode.NotSupported)
        op = Operation(name[7:].lower(), c[0], c[1], {"isa": "u85"})
        if name == "NPU_OP_DMA_START":
            for reg in ("DMA0_SRC_REGION", "DMA0_DST_REGION"):
                if (g(reg) >> 11) & 1:
                    raise stream_error(*c, "indexed DMA (gather/scatter) is not modelled",
                                       ErrorCode.NotSupported)
            return self._dma(c, op)
        self._accumulators(c, op)
        prec = g("OFM_PRECISION")
        transpose = (prec >> 11) & 7
        if transpose not in TRANSPOSE:
            raise stream_error(*c, f"OFM_PRECISION {prec:#x}: unknown transposition "
                                   f"{transpose}")
        ofm_dims = (g("OFM_HEIGHT_M1") + 1, g("OFM_WIDTH_M1") + 1, g("OFM_DEPTH_M1") + 1)
        self._output_stage(c, op)
        if name == "NPU_OP_ELEMENTWISE":
            self._elementwise(param, c, op, ofm_dims)
        elif name == "NPU_OP_POOL":
            mode = POOL_MODES.get(param & 7)
            if mode not in MODELLED_POOLS:
                raise stream_error(*c, f"pooling mode {mode or param} is not modelled",
                                   ErrorCode.NotSupported)
            self._kernel(c, op, False, ofm_dims)
            op.attrs["mode"] = mode
        else:
            self._convolution(name, param, c, op, ofm_dims)
        # the OFM is placed last: the inputs may read the chaining buffer it replaces
        order, flip = TRANSPOSE[transpose], REVERSE[(prec >> 9) & 3]
        op.ofm = self._fm("OFM", ofm_dims, c, True, R.OFM_PRECISION, order, flip)
        op.attrs.update(ofm_order="".join("HWC"[k] for k in order),
                        ofm_reversed=None if flip is None else "HWC"[flip])
        lo, hi = op.attrs["clamp"]
        if op.ofm.dtype.startswith("u") and lo < 0:  # ACTIVATION_MIN/MAX read unsigned
            lo, hi = lo & 0xFFFF, hi & 0xFFFF
        tlo, thi = R.TYPE_RANGES[op.ofm.dtype]
        op.attrs["clamp"] = (max(lo, tlo), min(hi, thi))
        return op

    def _fm(self, prefix: str, dims: tuple, c: tuple, writable: bool, prec_table,
            order: tuple = (0, 1, 2), flip: int | None = None) -> FeatureMap:
        g = self.regs.get
        prec = g(f"{prefix}_PRECISION")
        storage = STORAGE[(prec >> 14) & 3]
        if storage == "TILE2X2":
            return super()._fm(prefix, dims, c, writable, prec_table, order, flip)
        if storage != "CHAINED":
            raise stream_error(*c, f"{prefix}_PRECISION {prec:#x}: {prefix} storage {storage} "
                                   "is not modelled", ErrorCode.NotSupported)
        if order != (0, 1, 2) or flip is not None:
            raise stream_error(*c, f"{prefix}_PRECISION {prec:#x}: a chained OFM cannot be "
                                   "transposed or reversed")
        p = prec & 0xF if prefix != "OFM" else prec & 0x7
        if p not in prec_table:
            raise stream_error(*c, f"{prefix}_PRECISION {prec:#x}: unknown data type {p}")
        dtype, esz = prec_table[p]
        n = dims[0] * dims[1] * dims[2]
        if min(dims) < 1 or n > MAX_FM_ELEMENTS:
            raise stream_error(*c, f"chained {prefix} {'x'.join(map(str, dims))} is empty or "
                                   "beyond the model's limits", ErrorCode.NotSupported)
        region = CHAIN_BASE + (g(f"{prefix}_REGION") & 7)
        if writable:
            self.chains[region] = (dims, dtype)
            self.sizes[region] = max(self.sizes.get(region, 0), n * esz)
        elif self.chains.get(region) != (dims, dtype):
            held = self.chains.get(region)
            held = "nothing" if held is None else f"{held[1]} {list(held[0])}"
            raise stream_error(*c, f"{prefix} reads chaining buffer {region - CHAIN_BASE} as "
                                   f"{dtype} {list(dims)}; it holds {held}")
        zp = g(f"{prefix}_ZERO_POINT")
        zp = _s16(zp) if dtype.startswith("s") else zp & 0xFFFF
        index = np.arange(n, dtype=np.int64).reshape(dims) * esz
        return FeatureMap(region, dims, dtype, esz, index, zp)

    def _output_stage(self, c, op: Operation) -> None:
        """Activation clamp (the OFM type's range is applied with the OFM), rounding and
        the global scale from ``OFM_SCALE``."""
        g = self.regs.get
        act = g("ACTIVATION")
        if act & 0x1F:
            raise stream_error(*c, f"ACTIVATION {act:#x}: the lookup-table activation "
                                   f"{act & 0x1F} is not modelled", ErrorCode.NotSupported)
        lo, hi = -(1 << 62), 1 << 62
        if not (act >> 12) & 1:  # clip to ACTIVATION_MIN/MAX (16-bit values)
            lo, hi = _s16(g("ACTIVATION_MIN")), _s16(g("ACTIVATION_MAX"))
        scale, shift, rounding = self._scale(c, "OFM_SCALE", ROUNDING_OFM, 7)
        op.attrs.update(clamp=(lo, hi), rounding=rounding, ofm_scale=(scale, shift),
                        global_scale=bool((g("OFM_PRECISION") >> 8) & 1))

    def _scale(self, c, reg: str, modes: dict, mask: int) -> tuple:
        """(multiplier, shift, rounding) of OFM/IFM/IFM2_SCALE: the shift in bits 0-5, a
        double-rounding position in 6-10, the rounding mode from bit 13, the 31-bit
        multiplier in the payload word (unset: 1, no shift)."""
        scale, param = self.regs.get(reg, (1, 0))
        shift, dbl, rmode = param & 0x3F, (param >> 6) & 0x1F, (param >> 13) & mask
        rounding = modes.get(rmode)
        if rounding is None:
            raise stream_error(*c, f"{reg}: unknown rounding mode {rmode}")
        if shift == 0 and not dbl:  # nothing to round: every mode is exact
            return int(scale) & 0x7FFFFFFF, 0, "NATURAL"
        if rounding not in MODELLED_ROUNDING or dbl:
            raise stream_error(*c, f"{reg}: rounding {rounding}"
                                   f"{f' with double rounding at {dbl}' if dbl else ''} is not "
                                   "modelled", ErrorCode.NotSupported)
        return int(scale) & 0x7FFFFFFF, shift, MODELLED_ROUNDING[rounding]

    def _elementwise(self, param: int, c, op: Operation, ofm_dims: tuple) -> None:
        """Operands IFM and IFM2 (each a feature map, broadcast along H/W/C, or IFM2 the
        ``OP_SCALAR``), each rescaled by its ``IFM_SCALE``/``IFM2_SCALE``."""
        g = self.regs.get
        mode = ELEMENTWISE_MODES.get(param & 0x3F)
        if mode not in MODELLED_ELEMENTWISE:
            raise stream_error(*c, f"elementwise mode {mode or param} is not modelled",
                               ErrorCode.NotSupported)
        op.attrs["mode"] = mode
        operands = ("IFM",) if mode == "ABS" else ("IFM", "IFM2")
        for prefix in operands:
            bc = g(f"{prefix}_BROADCAST")
            if bc & BROADCAST_SCALAR:
                if prefix == "IFM" or bc & 7:
                    raise stream_error(*c, f"{prefix}_BROADCAST {bc:#x}: a scalar IFM is "
                                           "not modelled", ErrorCode.NotSupported)
                p2 = g("IFM2_PRECISION") & 0xF
                if p2 not in R.IFM_PRECISION:
                    raise stream_error(*c, f"IFM2_PRECISION: unknown data type {p2}")
                dtype, esz = R.IFM_PRECISION[p2]
                v = g("OP_SCALAR", (0, 0))[0] & ((1 << (8 * esz)) - 1)
                if dtype.startswith("s") and v >> (8 * esz - 1):
                    v -= 1 << (8 * esz)
                zp = g("IFM2_ZERO_POINT")
                op.attrs["scalar"] = v - (_s16(zp) if dtype.startswith("s") else zp & 0xFFFF)
                continue
            dims = tuple(1 if (bc >> b) & 1 else d for b, d in zip((0, 1, 2), ofm_dims))
            setattr(op, prefix.lower(), self._fm(prefix, dims, c, False, R.IFM_PRECISION))
        op.attrs["operand_scales"] = tuple(self._scale(c, f"{p}_SCALE", IFM_ROUNDING, 1)
                                           for p in operands)
        if mode == "MUL":
            for p, (scale, shift, _) in zip(operands, op.attrs["operand_scales"]):
                if scale != 1 << shift:
                    raise stream_error(*c, f"NPU_OP_ELEMENTWISE MUL with {p}_SCALE "
                                           f"{scale:#x} shift {shift} is not modelled (vela "
                                           "scales a product only through OFM_SCALE)",
                                       ErrorCode.NotSupported)

    def _accumulators(self, c, op: Operation) -> None:
        acc = self.regs.get("ACC_FORMAT")
        source = ACC_INPUT.get((acc >> 4) & 3, f"source {(acc >> 4) & 3}")
        if source != "RESET" or (acc >> 6) & 1:
            what = (f"accumulators that start from {source}" if source != "RESET" else
                    "an operation that writes no OFM (its accumulators kept)")
            raise stream_error(*c, f"ACC_FORMAT {acc:#x}: {what} is not modelled",
                               ErrorCode.NotSupported)
        if acc & 3 not in (0, 1):
            raise stream_error(*c, f"ACC_FORMAT {acc:#x}: unknown accumulator format {acc & 3}")
        block = W85.MICROBLOCKS.get((acc >> 8) & 7)
        if block is None:
            raise stream_error(*c, f"ACC_FORMAT {acc:#x}: unknown micro-block {(acc >> 8) & 7}")
        op.attrs.update(acc_bits=48 if acc & 3 else 32, microblock=block)

    def _convolution(self, name: str, param: int, c, op: Operation, ofm_dims: tuple):
        g = self.regs.get
        if name == "NPU_OP_CONV" and param & 1:
            raise stream_error(*c, "a convolution whose weights are a feature map (IFM2) is "
                                   "not modelled", ErrorCode.NotSupported)
        self._kernel(c, op, name == "NPU_OP_CONV", ofm_dims)
        kh, kw = op.attrs["kernel"]
        ic, oc = op.ifm.dims[2], ofm_dims[2]
        depthwise = name == "NPU_OP_DEPTHWISE"
        fmt = g("WEIGHT_FORMAT")
        if (fmt >> 4) & 1:
            raise stream_error(*c, "sparse (2:4) weights are not modelled",
                               ErrorCode.NotSupported)
        # one stream per weight decoder in the standard format, one in the fast format
        streams = self.arch.cores if not fmt & 1 else 1
        wr, sr = g("WEIGHT_REGION"), g("SCALE_REGION")
        spans = []
        for k, reg in enumerate(("WEIGHT", "WEIGHT1", "WEIGHT2", "WEIGHT3")):
            wb, wl = g(f"{reg}_BASE", (0, 0))[0], g(f"{reg}_LENGTH", (0, 0))[0]
            if k < streams:
                self._span(c, f"weights ({reg}_BASE)", wr, wb, wl)
                spans.append((wb, wl))
            elif wl:
                raise stream_error(*c, f"{reg}_LENGTH {wl}: a weight stream for a decoder "
                                       f"the {self.arch.config.name} does not use "
                                       f"({streams} stream{'s' if streams > 1 else ''} in the "
                                       f"{'fast' if fmt & 1 else 'standard'} format)")
        sb, sl = g("SCALE_BASE", (0, 0))[0], g("SCALE_LENGTH", (0, 0))[0]
        self._span(c, "scales", sr, sb, sl)
        ohwi = (oc, kh, kw, 1 if depthwise else ic)
        self._check_convolution(c, op, sl, ohwi)
        op.attrs.update(weights=(wr, spans), scales=(sr, sb, sl), ohwi=ohwi,
                        weight_format="fast" if fmt & 1 else "standard",
                        block=(g("OFM_BLK_HEIGHT_M1") + 1, g("OFM_BLK_WIDTH_M1") + 1,
                               g("OFM_BLK_DEPTH_M1") + 1),
                        ifm_bits=8 * op.ifm.esz,
                        decomposition=4 if (g("KERNEL_STRIDE") >> 5) & 1 else 8)
        return op
