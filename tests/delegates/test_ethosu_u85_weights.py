"""Ethos-U85 weight streams (``delegates/ethosu/weights_u85.py``) against the weights vela
compiled: for every NPU_OP_CONV / NPU_OP_DEPTHWISE of vela 5.2.0's streams for
``ethos-u85-128`` to ``-2048``, the decoded OHWI weights equal the TOSA graph's constant
exactly, every padding position holds zero, and the 10-byte bias/scale records equal the
CONV2D bias and the following RESCALE's multiplier and shift (vela strips the
multiplier's trailing zero bits and lowers the shift to match: compared as ratios).

Measured (``FORMATS``): on 128 and 256 MACs mlp 1 standard + 2 fast, cnn 2 standard +
1 fast, MobileNetV2 25 standard (all 17 depthwise among them) + 28 fast; on 512 and 2048
MACs (2 and 4 weight decoders, a standard stream each) mlp and cnn 2 standard + 1 fast.
The fast streams of the fixtures are all in raw mode; ``test_fast_palette_modes`` has
vela compile the MLP with weights of few distinct values to reach the 2- and 4-bit
palette modes.
"""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from tests import parts
from tests.delegates.ethosu_fixtures import delegate_blob, get_fixture, unavailable_reason

_why = unavailable_reason()
parts.need("arm", None if _why is None else f"Ethos-U85 weight tests need the Arm flow: {_why}")

from pyruntime.delegates.ethosu import npu  # noqa: E402
from pyruntime.delegates.ethosu import registers_u85 as R85  # noqa: E402
from pyruntime.delegates.ethosu import weights_u85 as WU  # noqa: E402
from pyruntime.delegates.ethosu.payload import _driver_header, read_payload  # noqa: E402

# fixture -> (standard, fast) operations (of which depthwise: all standard)
FORMATS = {"mlp_u85": (1, 2), "cnn_u85": (2, 1), "mlp_u85_128": (1, 2), "cnn_u85_128": (2, 1),
           "mnv2_u85": (25, 28), "mnv2_u85_128": (25, 28),
           "mlp_u85_512": (2, 1), "cnn_u85_512": (2, 1), "mlp_u85_2048": (2, 1),
           "cnn_u85_2048": (2, 1)}
NAMES = ["mlp_u85", "cnn_u85", "mlp_u85_128", "cnn_u85_128", "mlp_u85_512", "cnn_u85_512",
         "mlp_u85_2048", "cnn_u85_2048",
         pytest.param("mnv2_u85", marks=pytest.mark.slow),
         pytest.param("mnv2_u85_128", marks=pytest.mark.slow)]
_WEIGHTED = ("NPU_OP_CONV", "NPU_OP_DEPTHWISE")


def _tosa_convs(tosa: bytes) -> list:
    """Per CONV2D / DEPTHWISE_CONV2D in graph order: (OHWI int64 weights, bias, RESCALE
    multipliers, RESCALE shifts); depthwise weights as (channels, H, W, 1)."""
    from tosa.DType import DType
    from tosa.Op import Op
    from tosa.TosaGraph import TosaGraph

    types = {DType.INT8: np.int8, DType.INT16: np.int16, DType.INT32: np.int32}
    blk = TosaGraph.GetRootAs(tosa, 0).Regions(0).Blocks(0)
    tensors = {blk.Tensors(i).Name().decode(): blk.Tensors(i)
               for i in range(blk.TensorsLength())}

    def const(name):
        t = tensors[name]
        data = np.frombuffer(t.DataAsNumpy().tobytes(), types[t.Type()]).astype(np.int64)
        return data.reshape(tuple(t.ShapeAsNumpy())) if t.ShapeLength() else data

    ops = [blk.Operators(i) for i in range(blk.OperatorsLength())]
    out = []
    for op in ops:
        if op.Op() not in (Op.CONV2D, Op.DEPTHWISE_CONV2D):
            continue
        w = const(op.Inputs(1).decode())
        if op.Op() == Op.DEPTHWISE_CONV2D:  # [KH, KW, C, M]
            kh, kw, c, m = w.shape
            w = w.reshape(kh, kw, c * m).transpose(2, 0, 1)[..., None]
        res = next(r for r in ops if r.Op() == Op.RESCALE
                   and r.Inputs(0).decode() == op.Outputs(0).decode())
        out.append((w, const(op.Inputs(2).decode()).reshape(-1),
                    const(res.Inputs(1).decode()).reshape(-1),
                    const(res.Inputs(2).decode()).reshape(-1)))
    return out


def _npu_convs(config, words) -> list:
    """Per weighted operation: (command index, name, register file snapshot)."""
    regs: dict = {}
    out = []
    for idx, _, name, param, payload in npu.decode_words(words, R85):
        if payload is not None:
            regs[name] = (payload, param)
        elif not name.startswith("NPU_OP_"):
            regs[name] = param
        elif name in _WEIGHTED:
            out.append((idx, name, dict(regs)))
    return out


def _ohwi(name: str, regs: dict, kernel: tuple) -> tuple:
    o = regs["OFM_DEPTH_M1"] + 1
    return (o,) + tuple(kernel) + (1 if name == "NPU_OP_DEPTHWISE" else
                                   regs["IFM_DEPTH_M1"] + 1,)


def _streams(regs: dict, lay, weights: np.ndarray):
    fmt, region, spans = WU.weight_spans(regs, lay)
    assert region == 0  # these programs read their weights from the payload
    raws = [bytes(weights[a:a + n]) for a, n in spans]
    return fmt, raws[0] if len(raws) == 1 else raws


@pytest.fixture(scope="module", params=NAMES)
def program(request):
    fx = get_fixture(request.param)
    blob, _, _ = delegate_blob(fx.pte_path)
    p = read_payload(np.frombuffer(blob, np.uint8))
    assert p.config.product == 2
    convs = _npu_convs(p.config, p.commands)
    tosa = _tosa_convs(fx.tosa_path.read_bytes())
    assert len(convs) == len(tosa), "one NPU operation per TOSA convolution"
    return request.param, p, convs, tosa


def test_weights_match_tosa(program):
    name, p, convs, tosa = program
    counts = {"standard": 0, "fast": 0}
    items, raws, refs = [], [], []
    for (idx, op, regs), (ref, _, _, _) in zip(convs, tosa):
        lay = WU.layout_from_registers(regs, p.config, op)
        fmt, raw = _streams(regs, lay, p.weights)
        ohwi = _ohwi(op, regs, ref.shape[1:3])
        assert ohwi == ref.shape, f"command {idx}"
        got = WU.decode_u85(raw, fmt, ohwi, lay)
        assert np.array_equal(got, ref), f"{name} command {idx}: {op} {lay}"
        pad = WU.padding_values(raw, fmt, ohwi, lay)
        assert not pad.any(), f"{name} command {idx}: nonzero values at padding positions"
        counts[WU.FORMATS[fmt]] += 1
        items.append((ohwi, fmt, lay))
        raws.append(raw)
        refs.append(ref)
    # all of a program at once (one request to the codec's child process)
    for got, ref in zip(WU.decode_streams(raws, items), refs):
        assert np.array_equal(got, ref)
    print(f"{name} ({p.config.name}): {counts['standard']} standard, {counts['fast']} fast")
    assert (counts["standard"], counts["fast"]) == FORMATS[name]


def test_scales_match_tosa(program):
    name, p, convs, tosa = program
    for (idx, op, regs), (_, bias, mult, shift) in zip(convs, tosa):
        lay = WU.layout_from_registers(regs, p.config, op)
        o = regs["OFM_DEPTH_M1"] + 1
        sb, sl = regs["SCALE_BASE"][0], regs["SCALE_LENGTH"][0]
        n = WU.scale_records(o, lay)
        assert sl == 10 * n, f"command {idx}: SCALE_LENGTH {sl} for {o} channels"
        raw = p.weights[sb:sb + sl]
        b, m, s = WU.unpack_scales_u85(raw, n, lay.acc48)
        bias, mult, shift = (np.broadcast_to(v, (o,)) for v in (bias, mult, shift))
        assert np.array_equal(b[:o], bias), f"command {idx}"
        assert np.all(s[:o] <= shift) and np.array_equal(m[:o] << (shift - s[:o]), mult), \
            f"command {idx}"
        assert not b[o:].any() and not m[o:].any() and not s[o:].any()
        assert not raw.reshape(n, 10)[:, 9].any()


def _fast_stream():
    fx = get_fixture("mlp_u85")
    blob, _, _ = delegate_blob(fx.pte_path)
    p = read_payload(np.frombuffer(blob, np.uint8))
    for _, op, regs in _npu_convs(p.config, p.commands):
        lay = WU.layout_from_registers(regs, p.config, op)
        fmt, raw = _streams(regs, lay, p.weights)
        if fmt == 1:
            return raw, _ohwi(op, regs, (1, 1)), lay
    raise AssertionError("mlp_u85 has no fast weight stream")


def test_corrupt_fast_streams():
    raw, ohwi, lay = _fast_stream()
    assert WU.decode_u85(raw, 1, ohwi, lay).shape == ohwi
    rng = np.random.default_rng(0)
    bad = {
        "truncated by 32 bytes": raw[:-32],
        "truncated by 1 byte": raw[:-1],
        "header only": raw[:32],
        "shorter than its header": raw[:7],
        "empty": b"",
        "garbage": rng.integers(0, 256, len(raw), dtype=np.uint8).tobytes(),
        "garbage header": rng.integers(0, 256, 32, dtype=np.uint8).tobytes() + raw[32:],
        "raw and small palette": bytes([raw[0] | 3]) + raw[1:],
        "reserved header bit": raw[:5] + bytes([raw[5] ^ 0x10]) + raw[6:],
        "trailing bytes": raw + bytes(32),
    }
    for what, stream in bad.items():
        with pytest.raises(WU.U85WeightError):
            WU.decode_u85(stream, 1, ohwi, lay)
        with pytest.raises(WU.U85WeightError) as e:  # the batch names the stream
            WU.decode_streams([raw, stream], [(ohwi, 1, lay)] * 2)
        assert e.value.item == 1, what
    # a stream for another layout: the count of values does not fit
    other = WU.U85Layout(**{**lay.__dict__, "ofm_block_depth": 8})
    with pytest.raises(WU.U85WeightError, match="takes|bytes"):
        WU.decode_u85(raw, 1, (ohwi[0] + 64,) + ohwi[1:], other)


def test_corrupt_standard_stream():
    fx = get_fixture("mlp_u85")
    blob, _, _ = delegate_blob(fx.pte_path)
    p = read_payload(np.frombuffer(blob, np.uint8))
    for _, op, regs in _npu_convs(p.config, p.commands):
        lay = WU.layout_from_registers(regs, p.config, op)
        fmt, raw = _streams(regs, lay, p.weights)
        if fmt == 0:
            break
    ohwi = _ohwi(op, regs, (1, 1))
    rng = np.random.default_rng(1)
    for stream in (raw[:len(raw) // 3], rng.integers(0, 256, len(raw), np.uint8).tobytes()):
        with pytest.raises(WU.U85WeightError):
            WU.decode_u85(stream, 0, ohwi, lay)
    assert WU.decode_u85(raw, 0, ohwi, lay).shape == ohwi  # the codec's worker recovers


class _Cfg:
    def __init__(self, macs):
        self.macs = macs


def test_impossible_layouts():
    good = {"ACC_FORMAT": 2 << 8, "OFM_BLK_DEPTH_M1": 15, "KERNEL_STRIDE": 0,
            "IFM_PRECISION": 1, "WEIGHT_FORMAT": 0}
    lay = WU.layout_from_registers(good, _Cfg(256), "conv")
    assert (lay.ofm_ublock_depth, lay.ifm_block_depth, lay.traversal) == (8, 64, "depth_first")
    for regs, cfg, kind, match in (
            ({**good, "ACC_FORMAT": 0}, 256, "conv", "micro-block"),  # 1x1: not on 256 MACs
            ({**good, "ACC_FORMAT": 7 << 8}, 256, "conv", "micro-block"),
            ({**good, "ACC_FORMAT": 2 << 8 | 2}, 256, "conv", "accumulator"),
            (good, 64, "conv", "MACs"),
            (good, 256, "pool", "no weights"),
            ({**good, "WEIGHT_FORMAT": 0x11}, 256, "conv", "sparse"),
            ({**good, "KERNEL_STRIDE": 1 << 5}, 256, "conv", "decomposition"),
            ({**good, "IFM_PRECISION": 3 << 2}, 256, "conv", "64-bit")):
        with pytest.raises(WU.U85WeightError, match=match):
            WU.layout_from_registers(regs, _Cfg(cfg), kind)
    with pytest.raises(WU.U85WeightError, match="traversal"):
        WU.U85Layout(**{**lay.__dict__, "traversal": "sideways"})
    with pytest.raises(WU.U85WeightError, match="multiple of the micro-block"):
        WU.U85Layout(**{**lay.__dict__, "ofm_block_depth": 12})
    with pytest.raises(WU.U85WeightError, match="I = 1"):
        dw = WU.layout_from_registers(good, _Cfg(256), "depthwise")
        WU.decode_u85(b"", 0, (8, 3, 3, 2), dw)
    with pytest.raises(WU.U85WeightError, match="fast"):
        WU.decode_u85(bytes(64), 1, (8, 3, 3, 1), dw)
    with pytest.raises(WU.U85WeightError, match="OHWI"):
        WU.decode_u85(bytes(64), 1, (8, 0, 3, 1), lay)


@pytest.mark.parametrize("macs", [128, 256, 512, 1024, 2048])
@pytest.mark.parametrize("kind,part_kernel,stride,dilation,ohwi", [
    ("conv", False, (1, 1), (1, 1), (70, 1, 1, 100)),
    ("conv", True, (2, 2), (1, 1), (33, 3, 3, 20)),
    ("conv", True, (1, 2), (2, 1), (24, 11, 9, 5)),
    ("depthwise", False, (2, 2), (1, 1), (40, 3, 3, 1)),
    ("depthwise", False, (1, 1), (2, 2), (17, 5, 5, 1)),
])
def test_orders_cover_each_weight_once(macs, kind, part_kernel, stride, dilation, ohwi):
    """Every layout (also those no fixture has: 16-bit IFMs, 1024 MACs) places each weight
    exactly once, in both formats; the fast stream's length fits its header's arithmetic."""
    cores, ublocks = WU.CONFIGS[macs]
    for ub in ublocks:
        for bits in (8, 16):
            lay = WU.make_layout(macs, kind, ub, False, 2 * ublocks[ub], bits, stride,
                                 dilation, part_kernel)
            for fmt in ((0,) if kind == "depthwise" else (0, 1)):
                orders = WU.stream_orders(ohwi, fmt, lay)
                assert len(orders) == (cores if fmt == 0 else 1)
                idx = np.concatenate(orders)
                idx = np.sort(idx[idx >= 0])
                assert np.array_equal(idx, np.arange(int(np.prod(ohwi)))), (lay, fmt)


def test_fast_palette_modes():
    """vela's fast streams for weights of 5, 4 and 16 distinct values (the MLP's graph
    with its weights replaced): the 4-bit and 2-bit palette modes."""
    from ethosu.vela import vela
    from tosa.Op import Op
    from tosa.TosaGraph import TosaGraph
    import tempfile

    fx = get_fixture("mlp_u85")
    buf = bytearray(fx.tosa_path.read_bytes())
    blk = TosaGraph.GetRootAs(buf, 0).Regions(0).Blocks(0)
    tensors = {blk.Tensors(i).Name().decode(): blk.Tensors(i)
               for i in range(blk.TensorsLength())}
    views = [tensors[op.Inputs(1).decode()].DataAsNumpy()
             for op in (blk.Operators(i) for i in range(blk.OperatorsLength()))
             if op.Op() == Op.CONV2D]
    rng = np.random.default_rng(1)
    for v, values in zip(views, ([3, -7, 0, 5, 9], [-1, 2, 0, 1], list(range(-8, 8)))):
        v[:] = np.asarray(rng.choice(values, v.size), np.int8).view(np.uint8)  # in place
    refs = [v.view(np.int8).astype(np.int64) for v in views]
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/mlp.tosa", "wb") as f:
            f.write(buf)
        with contextlib.redirect_stdout(io.StringIO()):
            vela.main(["--accelerator-config=ethos-u85-256", "--config=Arm/vela.ini",
                       "--output-format=raw", "--system-config=Ethos_U85_SYS_DRAM_Mid",
                       "--memory-mode=Sram_Only", f"--output-dir={d}/out", f"{d}/mlp.tosa"])
        with np.load(f"{d}/out/mlp_vela.npz", allow_pickle=False) as z:
            cmd, weights = z["cmd_data"].tobytes(), z["weight_data"].tobytes()
    config, words = _driver_header(np.frombuffer(cmd, np.uint8))
    weights = np.frombuffer(weights, np.uint8)
    modes = []
    for (_, op, regs), ref in zip(_npu_convs(config, words), refs):
        lay = WU.layout_from_registers(regs, config, op)
        fmt, raw = _streams(regs, lay, weights)
        assert fmt == 1
        modes.append(WU.fast_header(raw)["bits"])
        got = WU.decode_u85(raw, fmt, _ohwi(op, regs, (1, 1)), lay)
        assert np.array_equal(got.reshape(-1), ref)
    assert modes == [4, 2, 4]
