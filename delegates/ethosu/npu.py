"""A functional model of the Ethos-U55 NPU: the register machine and its memory.

``compile_stream`` walks the command stream once at load: it decodes every word
(an unknown opcode or a cmd1 missing its payload word is an error naming the
command's index), keeps the register file as the stream sets it, and turns each
``NPU_OP_*`` into an operation with its registers decoded and every feature-map
byte address computed and checked against its memory region. Addresses depend
only on registers, so a malformed stream fails at load, never half-way through a
run. ``Npu.run`` then executes the operations on the memory regions (byte arrays:
0 the read-only weight data, 1 the scratch arena that holds inputs, outputs and
intermediates, 2 fast scratch) with the integer arithmetic of ``ops.py``.

Feature maps (``FeatureMap``) are up to four tiles (``BASE0..3``: tile 1 right of
``WIDTH0``, tile 2 below ``HEIGHT0``, tile 3 below ``HEIGHT1`` on the right), in NHWC
(``c * STRIDE_C``) or NHCWB16 (bricks of 16 channels: ``(c // 16) * STRIDE_C +
(c % 16) * element size``), rows at ``STRIDE_Y`` and columns at ``STRIDE_X``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.ethosu import registers as R
from pyruntime.delegates.ethosu.payload import BACKEND

N_REGIONS = 8
# Work limits of the model (a corrupted stream must fail, not exhaust memory or time):
# far above any Ethos-U55 operation (a MobileNetV2's largest is 0.2 M elements, 10 M MACs)
MAX_FM_ELEMENTS = 1 << 22
MAX_OP_MACS = 1 << 30
MAX_WINDOW_ELEMENTS = 1 << 23  # the gathered input windows of one operation
MAX_WEIGHTS = 1 << 22


class StreamError(ExecuTorchError):
    pass


def stream_error(index: int, word: int, msg: str, code=ErrorCode.InvalidProgram):
    return StreamError(code, f"{BACKEND}: command {index} (word {word}): {msg}")


@dataclass
class FeatureMap:
    region: int
    dims: tuple  # (H, W, C) elements
    dtype: str  # "s8", "u8", "s16", ...
    esz: int
    index: np.ndarray  # (H, W, C) byte offset of each element in its region
    zero_point: int = 0

    @property
    def signed(self) -> bool:
        return self.dtype.startswith("s")


@dataclass
class Operation:
    kind: str  # conv, depthwise, pool, elementwise, dma
    index: int  # command index in the stream
    word: int
    regs: dict
    ifm: FeatureMap | None = None
    ifm2: FeatureMap | None = None
    ofm: FeatureMap | None = None
    attrs: dict = field(default_factory=dict)


def _s16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


class _Regs:
    """The register file; cmd1 registers hold (payload, param)."""

    def __init__(self):
        self.v: dict = {}

    def get(self, name: str, default=0):
        return self.v.get(name, default)


def decode_words(words: np.ndarray, isa=R) -> list:
    """[(command index, word index, name, param, payload or None)], up to NPU_OP_STOP;
    ``isa`` the opcode tables (``registers`` for Ethos-U55/U65, ``registers_u85``)."""
    out = []
    w = [int(x) for x in words]
    i = 0
    n = len(w)
    while i < n:
        word = w[i]
        code = word & 0xFFFF
        param = word >> 16
        is_cmd1 = bool(code & R.CMD1_FLAG)
        op = code & 0x3FF
        name = (isa.CMD1 if is_cmd1 else isa.CMD0).get(op)
        if name is None or code & 0xBC00:
            raise stream_error(len(out), i, f"unknown opcode 0x{code:04x} "
                                            f"({'cmd1' if is_cmd1 else 'cmd0'} 0x{op:03x})")
        payload = None
        if is_cmd1:
            if i + 1 >= n:
                raise stream_error(len(out), i, f"{name} is a cmd1 whose payload word is "
                                                "missing (truncated stream)")
            payload = w[i + 1]
        out.append((len(out), i, name, param, payload))
        if name == "NPU_OP_STOP":
            return out
        i += 2 if is_cmd1 else 1
    raise stream_error(len(out), n, "the stream ends without NPU_OP_STOP (truncated)")


class Arch:
    """Micro-block sizes of an Ethos-U55/U65 configuration (vela's architecture table)."""

    UBLOCKS = {32: (8, 4), 64: (8, 8), 128: (8, 8), 256: (8, 8), 512: (8, 8)}

    def __init__(self, config):
        if config.product not in (0, 1):
            raise ExecuTorchError(
                ErrorCode.NotSupported,
                f"{BACKEND}: the command stream is for {config.name}; the NPU model runs "
                "Ethos-U55, Ethos-U65 and Ethos-U85 streams only")
        if config.macs not in self.UBLOCKS:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: {config.name}: no such MAC configuration")
        if config.product == 1 and config.macs == 512:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: Ethos-U65-512 (two cores, split weight "
                                  "streams) is not modelled")
        self.config = config
        self.ifm_ublock, self.ofm_ublock = self.UBLOCKS[config.macs]


class Compiler:
    isa = R  # the opcode tables (registers_u85 for the Ethos-U85)

    def __init__(self, arch: Arch, region_sizes: dict):
        self.arch = arch
        self.sizes = region_sizes
        self.regs = _Regs()

    # ---- feature maps ------------------------------------------------------------
    def _fm(self, prefix: str, dims: tuple, c: tuple, writable: bool, prec_table,
            order: tuple = (0, 1, 2), flip: int | None = None) -> FeatureMap:
        """The feature map ``prefix`` of ``dims`` (H, W, C) as its registers place it.
        ``order``: the axes of ``dims`` in the order memory holds them (an Ethos-U85 OFM
        written transposed: its tiles and strides describe the transposed shape);
        ``flip``: an axis written reversed (Ethos-U85)."""
        g = self.regs.get
        idx, w = c
        region = g(f"{prefix}_REGION")
        prec = g(f"{prefix}_PRECISION")
        p = prec & 0xF if prefix != "OFM" else prec & 0x7
        if p not in prec_table:
            raise stream_error(idx, w, f"{prefix}_PRECISION {prec:#x}: unknown data type {p}")
        dtype, esz = prec_table[p]
        fmt = (prec >> 6) & 3
        if fmt not in R.FORMATS:
            raise stream_error(idx, w, f"{prefix}_PRECISION {prec:#x}: unknown format {fmt}")
        if region >= N_REGIONS or region not in self.sizes:
            raise stream_error(idx, w, f"{prefix}_REGION {region} is not a memory region")
        if writable and region == 0:
            raise stream_error(idx, w, f"{prefix} writes into region 0 (read-only weights)")
        if min(dims) < 1:
            raise stream_error(idx, w, f"{prefix} has empty dimensions {list(dims)}")
        if dims[0] * dims[1] * dims[2] > MAX_FM_ELEMENTS:
            raise stream_error(idx, w, f"{prefix} {'x'.join(map(str, dims))} is larger than "
                                       f"the model's limit of {MAX_FM_ELEMENTS} elements",
                               ErrorCode.NotSupported)
        H, W, C = (dims[k] for k in order)
        bases = [g(f"{prefix}_BASE{t}")[0] for t in range(4)]
        sx, sy, sc = (g(f"{prefix}_STRIDE_{a}")[0] for a in "XYC")
        h0 = g(f"{prefix}_HEIGHT0_M1") + 1
        h1 = g(f"{prefix}_HEIGHT1_M1") + 1
        w0 = g(f"{prefix}_WIDTH0_M1") + 1
        h = np.arange(H, dtype=np.int64)[:, None]
        x = np.arange(W, dtype=np.int64)[None, :]
        right = x >= w0
        bottom = np.where(right, h >= h1, h >= h0)
        tile = right.astype(np.int64) + 2 * bottom
        base = np.asarray(bases, np.int64)[tile]
        hh = h - np.where(bottom, np.where(right, h1, h0), 0)
        ww = x - np.where(right, w0, 0)
        off = base + hh * sy + ww * sx  # (H, W)
        ch = np.arange(C, dtype=np.int64)
        coff = ch * sc if fmt == 0 else (ch // 16) * sc + (ch % 16) * esz
        index = off[:, :, None] + coff[None, None, :]
        if order != (0, 1, 2):
            index = index.transpose(np.argsort(order))
        if flip is not None:
            index = np.flip(index, flip)
        lo, hi = int(index.min()), int(index.max()) + esz
        if lo < 0 or hi > self.sizes[region]:
            raise stream_error(idx, w, f"{prefix} {R.FORMATS[fmt]} {H}x{W}x{C} at bases "
                                       f"{[hex(b) for b in bases]} spans bytes [{lo}, {hi}) of "
                                       f"region {region}, which has {self.sizes[region]} bytes",
                               ErrorCode.InvalidProgram)
        zp = g(f"{prefix}_ZERO_POINT")
        zp = _s16(zp) if dtype.startswith("s") else zp & 0xFFFF
        return FeatureMap(region, dims, dtype, esz, index, zp)

    def _span(self, c, what: str, region: int, start: int, length: int):
        if region >= N_REGIONS or region not in self.sizes:
            raise stream_error(*c, f"{what}: region {region} is not a memory region")
        if length < 0 or start < 0 or start + length > self.sizes[region]:
            raise stream_error(*c, f"{what}: bytes [{start}, {start + length}) are outside "
                                   f"region {region} ({self.sizes[region]} bytes)")

    # ---- operations ----------------------------------------------------------------
    def _output_stage(self, c, op: Operation) -> None:
        g = self.regs.get
        prec = g("OFM_PRECISION")
        act = g("ACTIVATION")
        fn, clip = act & 0xFFF, (act >> 12) & 0xF
        if fn != 0:
            what = ("a lookup-table activation (its table lives in SHRAM, loaded by a DMA "
                    "to internal memory)" if 16 <= fn <= 23 else
                    {3: "TANH", 4: "SIGMOID"}.get(fn, f"activation function {fn}"))
            raise stream_error(*c, f"{what} is not modelled", ErrorCode.NotSupported)
        if clip not in R.CLIP_RANGES:
            raise stream_error(*c, f"ACTIVATION clip range {clip} is unknown")
        lo, hi = R.TYPE_RANGES[op.ofm.dtype]
        rng = R.CLIP_RANGES[clip]
        if rng is not None:
            lo, hi = max(lo, rng[0]), min(hi, rng[1])
        amin, amax = _s16(g("ACTIVATION_MIN")), _s16(g("ACTIVATION_MAX"))
        if op.ofm.dtype.startswith("u"):
            amin, amax = amin & 0xFFFF, amax & 0xFFFF
        if op.ofm.esz < 4:
            lo, hi = max(lo, amin), min(hi, amax)
        op.attrs.update(clamp=(lo, hi), rounding=_rounding(c, "OFM", prec),
                        global_scale=bool((prec >> 8) & 1))
        scale, sparam = g("OFM_SCALE", (1, 0))
        op.attrs["ofm_scale"] = (int(scale), int(sparam) & 0x3F)

    def _kernel(self, c, op: Operation, with_ifm_depth: bool, ofm_dims: tuple) -> None:
        g = self.regs.get
        ks = g("KERNEL_STRIDE")
        sx = ((ks & 1) | ((ks >> 6) & 1) << 1) + 1
        sy = (((ks >> 1) & 1) | ((ks >> 9) & 1) << 1) + 1
        dx, dy = ((ks >> 3) & 1) + 1, ((ks >> 4) & 1) + 1
        kw_eff, kh_eff = g("KERNEL_WIDTH_M1") + 1, g("KERNEL_HEIGHT_M1") + 1
        if (kw_eff - 1) % dx or (kh_eff - 1) % dy:
            raise stream_error(*c, f"kernel extent {kh_eff}x{kw_eff} does not fit dilation "
                                   f"{dy}x{dx}")
        kw, kh = (kw_eff - 1) // dx + 1, (kh_eff - 1) // dy + 1
        pt, pl = g("IFM_PAD_TOP"), g("IFM_PAD_LEFT")
        pb, pr = g("IFM_PAD_BOTTOM"), g("IFM_PAD_RIGHT")
        if g("IFM_UPSCALE") & 3:
            raise stream_error(*c, "IFM upscaling (nearest/transpose resampling) is not "
                                   "modelled", ErrorCode.NotSupported)
        OH, OW, OC = ofm_dims
        ih = (OH - 1) * sy + kh_eff - pt - pb
        iw = (OW - 1) * sx + kw_eff - pl - pr
        if ih < 1 or iw < 1:
            raise stream_error(*c, f"padding ({pt}, {pl}, {pb}, {pr}) leaves no IFM rows or "
                                   f"columns for a {kh}x{kw} kernel")
        ic = g("IFM_DEPTH_M1") + 1 if with_ifm_depth else OC
        window = OH * OW * kh * kw * (ic if with_ifm_depth else OC)
        if window > MAX_WINDOW_ELEMENTS or window * (OC if with_ifm_depth else 1) > MAX_OP_MACS:
            raise stream_error(*c, f"a {kh}x{kw} kernel over {ic} channels for a {OH}x{OW}x{OC} "
                                   "OFM is beyond the model's work limits",
                               ErrorCode.NotSupported)
        op.attrs.update(stride=(sy, sx), dilation=(dy, dx), kernel=(kh, kw),
                        pad=(pt, pl, pb, pr), part_kernel=bool((ks >> 2) & 1))
        op.ifm = self._fm("IFM", (ih, iw, ic), c, False, R.IFM_PRECISION)

    def compile(self, words: np.ndarray) -> list:
        ops = []
        regs = self.regs.v
        for idx, word, name, param, payload in decode_words(words, self.isa):
            c = (idx, word)
            if payload is not None:
                regs[name] = (payload, param)
                continue
            if not name.startswith("NPU_OP_"):
                regs[name] = param
                continue
            if name not in self.isa.OPERATIONS:
                continue  # STOP ends the list; waits, IRQ, PMU: nothing to model
            ops.append(self._operation(name, param, c))
        return ops

    def _operation(self, name: str, param: int, c) -> Operation:
        g = self.regs.get
        op = Operation(name[7:].lower(), c[0], c[1], {})
        if name == "NPU_OP_DMA_START":
            return self._dma(c, op)
        ofm_dims = (g("OFM_HEIGHT_M1") + 1, g("OFM_WIDTH_M1") + 1, g("OFM_DEPTH_M1") + 1)
        op.ofm = self._fm("OFM", ofm_dims, c, True, R.OFM_PRECISION)
        self._output_stage(c, op)
        return self._compute(name, param, c, op, ofm_dims)

    def _dma(self, c, op: Operation) -> Operation:
        """A 1-D DMA between memory regions."""
        g = self.regs.get
        src_r, dst_r = g("DMA0_SRC_REGION"), g("DMA0_DST_REGION")
        if (src_r >> 8) & 1 or (dst_r >> 8) & 1:
            raise stream_error(*c, "DMA to or from internal memory (SHRAM, e.g. a "
                                   "lookup table) is not modelled", ErrorCode.NotSupported)
        if (src_r >> 9) & 3 or (dst_r >> 9) & 3:
            raise stream_error(*c, "2-D/3-D strided DMA is not modelled",
                               ErrorCode.NotSupported)
        src, dst, n = g("DMA0_SRC", (0, 0))[0], g("DMA0_DST", (0, 0))[0], \
            g("DMA0_LEN", (0, 0))[0]
        self._span(c, "DMA source", src_r & 0xFF, src, n)
        self._span(c, "DMA destination", dst_r & 0xFF, dst, n)
        if dst_r & 0xFF == 0:
            raise stream_error(*c, "DMA writes into region 0 (read-only weights)")
        op.attrs.update(src=(src_r & 0xFF, src), dst=(dst_r & 0xFF, dst), length=n)
        return op

    def _check_convolution(self, c, op: Operation, scale_length: int, ohwi: tuple) -> None:
        """What a CONV/DEPTHWISE needs: a bias/scale record per OFM channel, an IFM the
        model convolves, weights within the model's limits."""
        oc = ohwi[0]
        if scale_length < 10 * oc:
            raise stream_error(*c, f"SCALE_LENGTH {scale_length} holds fewer than the {oc} "
                                   "10-byte bias/scale records the OFM depth needs")
        if op.ifm.esz == 4:
            raise stream_error(*c, "32-bit IFM convolution is not modelled",
                               ErrorCode.NotSupported)
        if int(np.prod(ohwi)) > MAX_WEIGHTS:
            raise stream_error(*c, f"{'x'.join(map(str, ohwi))} weights are beyond the "
                                   "model's limits", ErrorCode.NotSupported)

    def _compute(self, name: str, param: int, c, op: Operation, ofm_dims: tuple) -> Operation:
        """CONV, DEPTHWISE, POOL and ELEMENTWISE: their inputs, weights and modes."""
        g = self.regs.get
        if name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            self._kernel(c, op, name == "NPU_OP_CONV", ofm_dims)
            kh, kw = op.attrs["kernel"]
            ic = op.ifm.dims[2]
            oc = ofm_dims[2]
            wr, sr = g("WEIGHT_REGION"), g("SCALE_REGION")
            wb, wl = g("WEIGHT_BASE", (0, 0))[0], g("WEIGHT_LENGTH", (0, 0))[0]
            sb, sl = g("SCALE_BASE", (0, 0))[0], g("SCALE_LENGTH", (0, 0))[0]
            self._span(c, "weights", wr, wb, wl)
            self._span(c, "scales", sr, sb, sl)
            depthwise = name == "NPU_OP_DEPTHWISE"
            self._check_convolution(c, op, sl, (oc, kh, kw, 1 if depthwise else ic))
            dy, dx = op.attrs["dilation"]
            op.attrs.update(
                weights=(wr, wb, wl), scales=(sr, sb, sl),
                ohwi=(oc, kh, kw, 1 if depthwise else ic),
                block_depth=g("OFM_BLK_DEPTH_M1") + 1, ifm_bits=8 * op.ifm.esz,
                decomp=(8 // dy, 8 // dx))
            return op
        if name == "NPU_OP_POOL":
            mode = R.POOL_MODES.get(param)
            if mode is None or mode == "REDUCE_SUM":
                raise stream_error(*c, f"pooling mode {mode or param} is not modelled",
                                   ErrorCode.NotSupported)
            self._kernel(c, op, False, ofm_dims)
            op.attrs["mode"] = mode
            return op
        # elementwise
        mode = R.ELEMENTWISE_MODES.get(param)
        if mode not in ("ADD", "SUB", "MUL", "MIN", "MAX", "ABS"):
            raise stream_error(*c, f"elementwise mode {mode or param} is not modelled",
                               ErrorCode.NotSupported)
        op.attrs["mode"] = mode
        op.ifm = self._fm("IFM", ofm_dims, c, False, R.IFM_PRECISION)
        prec = g("IFM_PRECISION")
        op.attrs.update(ifm_scale_mode=(prec >> 8) & 3, ifm_rounding=_rounding(c, "IFM", prec),
                        opa_scale=g("OPA_SCALE", (0, 0)), opb_scale=g("OPB_SCALE", (0, 0)))
        if mode != "ABS":
            bc = g("IFM2_BROADCAST")
            op.attrs["reversed"] = bool((bc >> 6) & 1)
            if (bc >> 7) & 1:
                op.attrs["scalar"] = g("IFM2_SCALAR")
                p2 = g("IFM2_PRECISION") & 0xF
                if p2 not in R.IFM_PRECISION:
                    raise stream_error(*c, f"IFM2_PRECISION: unknown data type {p2}")
                zp = g("IFM2_ZERO_POINT")
                op.attrs["scalar_zp"] = _s16(zp) if R.IFM_PRECISION[p2][0][0] == "s" \
                    else zp & 0xFFFF
                op.attrs["scalar_signed"] = R.IFM_PRECISION[p2][0][0] == "s"
                op.attrs["scalar_dtype"] = R.IFM_PRECISION[p2][0]
            else:
                d2 = tuple(1 if (bc >> b) & 1 else d for b, d in zip((0, 1, 2), ofm_dims))
                op.ifm2 = self._fm("IFM2", d2, c, False, R.IFM_PRECISION)
        if mode in ("ADD", "SUB", "MUL"):
            _check_operand_scaling(c, op)
        return op


def _rounding(c, prefix: str, prec: int) -> str:
    r = (prec >> 14) & 3
    if r not in R.ROUNDING:
        raise stream_error(*c, f"{prefix}_PRECISION {prec:#x}: unknown rounding mode {r}")
    return R.ROUNDING[r]


def _check_operand_scaling(c, op: Operation) -> None:
    """Refuse the operand scalings of ELEMENTWISE ADD/SUB/MUL that no vela 5.2.0 stream
    for our targets has (so none was compared with the TOSA reference model), instead of
    guessing them. What runs: ADD/SUB in SCALE_16BIT (OPA/OPB_SCALE as 16-bit multipliers
    without shifts) on 8-, 16- and 32-bit IFMs; ADD/SUB with one operand rescaled by a
    32-bit OPA_SCALE on 8-bit IFMs; MUL in SCALE_16BIT, which leaves its operands as they
    are (vela sets OPA/OPB_SCALE only for ADD/SUB, so a MUL finds whatever the last
    ADD/SUB left there)."""
    a = op.attrs
    smode, kind = a["ifm_scale_mode"], a["mode"]
    name = R.SCALE_MODES.get(smode, f"scale mode {smode}")
    what = f"NPU_OP_ELEMENTWISE {kind} in IFM_PRECISION {name}"
    if kind == "MUL":
        if smode != 0:
            raise stream_error(*c, f"{what} is not modelled (vela scales MUL operands only "
                                   "through OFM_SCALE)", ErrorCode.NotSupported)
        return
    if smode == 0:
        for reg in ("OPA_SCALE", "OPB_SCALE"):
            scale, shift = a[reg.lower()]
            if scale > 0xFFFF or shift & 0x3F:
                raise stream_error(*c, f"{what} with {reg} {scale:#x} shift {shift & 0x3F} "
                                       "is not modelled (vela writes 16-bit scales without "
                                       "a shift in this mode)", ErrorCode.NotSupported)
        return
    widths = {op.ifm.dtype, op.ifm2.dtype if op.ifm2 is not None else a["scalar_dtype"]}
    if smode not in R.SCALE_MODES or widths - {"s8", "u8"}:
        raise stream_error(*c, f"{what} with {'/'.join(sorted(widths))} IFMs is not "
                               "modelled (vela 5.2.0 rescales one operand only for 8-bit "
                               "IFMs)", ErrorCode.NotSupported)
