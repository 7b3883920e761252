"""The Ethos-U bridge: vela command streams made by ExecuTorch's own Arm flow
(``EthosUQuantizer`` + ``EthosUPartitioner``) run on our functional model of the NPU.

Oracle: the TOSA reference model run on the exact TOSA graph vela compiled (kept by
``dump_intermediate_artifacts_to``). The NPU model's int8 outputs must equal it,
element for element, on random int8 inputs and on the whole program's float path.

Where the two differ by design, and what was measured (``test_rounding_by_design``):
the average pool. TOSA's AVG_POOL2D divides by the window size with
``reciprocal_scale`` (multiplier ``(((1 << 30) + 1) << k) // n``, shift ``30 + k``); vela
programs the NPU with ``((1 << (31 + k)) + (1 << k)) // n`` and shift ``31 + k``: about
the same ratio in one more bit, so a sum could round to the neighbouring integer (one
quantisation step). Measured over every sum an int8 window of 4 to 144 elements can
reach: no sum differs, so the comparison below stays exact. Every other operation in
these streams (convolutions and depthwise convolutions with per-channel 40-bit
bias / 32-bit scale records and natural rounding, the residual ADDs with one
operand rescaled by OPA_SCALE, max pools, the 1x1 average pools that copy and
transpose NCHW to NHWC) computes exactly what the TOSA graph computes. Measured
on the fixtures: 0 mismatches (``EXACT`` below, per model).
"""
from __future__ import annotations

import struct
import time

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from tests import parts
from tests.delegates.ethosu_fixtures import delegate_blob, get_fixture, unavailable_reason

_why = unavailable_reason()
parts.need("arm", None if _why is None else f"EthosUBackend tests need the Arm flow: {_why}")

from pyruntime.delegates import backend_registry  # noqa: E402
from pyruntime.delegates.ethosu import ethosu_backend  # noqa: E402
from pyruntime.delegates.ethosu.payload import read_payload  # noqa: E402

tosa_reference_model = parts.importorskip("tosa_reference_model", "arm")

NPU = {"mlp_u55": "Ethos-U55-128", "cnn_u55": "Ethos-U55-128", "mnv2_u55": "Ethos-U55-128",
       "cnn_u65": "Ethos-U65-256",
       "mlp_u85": "Ethos-U85-256", "cnn_u85": "Ethos-U85-256", "mnv2_u85": "Ethos-U85-256",
       "mlp_u85_128": "Ethos-U85-128", "cnn_u85_128": "Ethos-U85-128",
       "mnv2_u85_128": "Ethos-U85-128",
       "mlp_u85_512": "Ethos-U85-512", "cnn_u85_512": "Ethos-U85-512",
       "mlp_u85_2048": "Ethos-U85-2048", "cnn_u85_2048": "Ethos-U85-2048"}
TRIALS = {"mlp_u55": 20, "cnn_u55": 5, "mnv2_u55": 2, "cnn_u65": 5,
          "mlp_u85": 20, "cnn_u85": 5, "mnv2_u85": 2, "mlp_u85_128": 20, "cnn_u85_128": 5,
          "mnv2_u85_128": 2, "mlp_u85_512": 20, "cnn_u85_512": 5, "mlp_u85_2048": 20,
          "cnn_u85_2048": 5}
SLOW = {"mnv2_u55", "mnv2_u85", "mnv2_u85_128"}  # ~2 minutes of export each, once
# operations each stream must contain (what the model is exercised on)
_U85_CNN = {"conv", "pool.MAX", "pool.AVERAGE", "pool.SUM"}
_U85_MNV2 = {"conv", "depthwise", "elementwise.ADD", "pool.AVERAGE"}
OPS = {"mlp_u55": {"conv"},
       "cnn_u55": {"conv", "pool.MAX", "pool.AVERAGE", "dma_start"},
       "mnv2_u55": {"conv", "depthwise", "elementwise.ADD", "pool.AVERAGE", "dma_start"},
       "cnn_u65": {"conv", "pool.MAX", "pool.AVERAGE", "dma_start"},
       "mlp_u85": {"conv"}, "cnn_u85": _U85_CNN, "mnv2_u85": _U85_MNV2,
       "mlp_u85_128": {"conv"}, "cnn_u85_128": _U85_CNN, "mnv2_u85_128": _U85_MNV2,
       "mlp_u85_512": {"conv"}, "cnn_u85_512": _U85_CNN, "mlp_u85_2048": {"conv"},
       "cnn_u85_2048": _U85_CNN}


def oracle(fx, xs: list) -> list:
    outs, status = tosa_reference_model.run(fx.tosa_path.read_bytes(), xs)
    assert status.name == "TOSA_VALID"
    return outs


def npu_run(h, xs: list) -> list:
    for x, io in zip(xs, h.program.inputs):
        h.regions[io.region][io.offset:io.offset + io.nbytes] = x.reshape(-1).view(np.uint8)
    h.run()
    return [h.regions[io.region][io.offset:io.offset + io.nbytes].view(np.int8).copy()
            for io in h.program.outputs]


def tosa_inputs(fx):
    from pyruntime.delegates.tosa.graph import read_graph

    return read_graph(fx.tosa_path.read_bytes()).inputs


@pytest.fixture(scope="module")
def handles():
    out = {}

    def get(name):
        if name not in out:
            blob, specs, bid = delegate_blob(get_fixture(name).pte_path)
            assert bid == "EthosUBackend"
            out[name] = ethosu_backend.init(blob, specs, None)
        return out[name]
    return get


def test_registered_under_the_id_executorch_writes():
    assert "EthosUBackend" in backend_registry.registered()
    assert backend_registry.get("EthosUBackend") is ethosu_backend
    assert ethosu_backend.is_available()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW
                                  else n for n in NPU])
def test_npu_model_equals_tosa_reference(name, handles):
    fx = get_fixture(name)
    h = handles(name)
    assert h.program.config.name == NPU[name]
    assert OPS[name] <= set(h.op_counts), h.op_counts
    rng = np.random.default_rng(11)
    specs = tosa_inputs(fx)
    exact = total = 0
    for _ in range(TRIALS[name]):
        xs = [rng.integers(-128, 128, s.shape).astype(np.int8) for s in specs]
        got = npu_run(h, xs)
        want = oracle(fx, xs)
        for g, w in zip(got, want):
            w = np.asarray(w).reshape(-1)
            exact += int(np.sum(g == w))
            total += w.size
    print(f"{name}: {exact}/{total} outputs equal the TOSA reference model")
    assert exact == total


@pytest.mark.parametrize("name", ["mlp_u55", "cnn_u55", "mlp_u85", "cnn_u85"])
def test_program_runs_in_pyruntime_like_the_oracle(name):
    """The whole program (quantize, delegate, dequantize) through pyruntime's loader, on
    float inputs: its output, quantised back with the boundary q-params, equals the TOSA
    reference model fed the same int8 input."""
    fx = get_fixture(name)
    m = pyruntime.load(fx.pte_path)
    x = fx.inputs[0]
    out = np.asarray(m.forward(x)[0])
    (si, zi), (so, zo) = fx.meta["input_q"], fx.meta["output_q"]
    xq = np.clip(np.round(x / np.float32(si)) + zi, -128, 127).astype(np.int8)
    want = np.asarray(oracle(fx, [xq.reshape(tosa_inputs(fx)[0].shape)])[0])
    got = np.clip(np.round(out / np.float32(so)) + zo, -128, 127).astype(np.int8)
    assert np.array_equal(got.reshape(-1), want.reshape(-1))
    # and the result means what the float model computes (a few quantisation steps)
    import torch

    from tests.delegates.ethosu_fixtures import make_model

    ref = make_model(fx.spec.model)(torch.from_numpy(x)).detach().numpy()
    assert np.max(np.abs(out - ref)) < 12 * so


@pytest.mark.slow
def test_mobilenet_v2_96_runs_under_a_second(handles):
    h = handles("mnv2_u55")
    x = np.random.default_rng(3).integers(-128, 128, h.program.inputs[0].nbytes, np.int8)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        npu_run(h, [x])
        best = min(best, time.perf_counter() - t)
    print(f"MobileNetV2 96x96 int8 on the Ethos-U55 model: {best * 1e3:.0f} ms")
    assert best < 1.0


@pytest.mark.parametrize("n", [4, 9, 25, 49, 64, 144])
def test_rounding_by_design(n):
    """The average pool's two divisions (see the module doc), over every sum an n-element
    window of int8 values (minus a zero point) can reach: different multipliers, the
    same results."""
    from pyruntime.delegates.ethosu.ops import pooling_scale, round_shift

    sums = np.arange(-255 * n, 255 * n + 1, dtype=np.int64)
    scale, shift = (int(v[0]) for v in pooling_scale(np.array([n])))
    k = shift - 31  # vela: ((1 << (31 + k)) + (1 << k)) // n, shift 31 + k
    assert scale == ((1 << shift) + (1 << k)) // n
    npu = round_shift(sums * scale, shift, "NATURAL")
    tosa_mult = (((1 << 30) + 1) << k) // n  # TOSA reciprocal_scale
    tosa = round_shift(sums * tosa_mult, 30 + k, "NATURAL")
    differ = int(np.sum(npu != tosa))
    print(f"avg pool over {n}: {differ} of {len(sums)} sums differ")
    assert differ == 0


@pytest.mark.parametrize("reg,param,what", [
    (0x125, 4, "the lookup-table activation 4 is not modelled"),  # ACTIVATION: LUT_S8_S8
    (0x124, 0x0210, "accumulators that start from KEEP"),  # ACC_FORMAT: acc kept
    (0x124, 0x0240, "writes no OFM"),  # ACC_FORMAT: output disabled
])
def test_unmodelled_ethos_u85_features_are_refused_naming_the_command(reg, param, what):
    """What the Ethos-U85 model does not compute is NotSupported at load, naming the
    operation's command, never a wrong result."""
    blob, specs, words = _words("mlp_u85")
    starts = _command_starts(words)
    at = next(s for s in starts if words[s] & 0xFFFF == reg)
    op = next(i for i, s in enumerate(starts) if s > at and words[s] & 0xFFFF == 0x002)
    w = list(words)
    w[at] = reg | param << 16
    e = _fails(_rebuild(blob, w), specs, f"command {op}", what)
    assert e.code == ErrorCode.NotSupported


@pytest.mark.parametrize("log2_macs,what", [(6, "no such Ethos-U85 configuration"),
                                             (15, "no such Ethos-U85 configuration")])
def test_an_unknown_ethos_u85_configuration_is_refused_plainly(log2_macs, what):
    blob, specs, _ = _words("mlp_u85")
    bad = bytearray(blob)
    pos = bytes(blob).find(b"COP1") + 4  # the Config action's word follows the fourcc
    word = int.from_bytes(bad[pos + 4:pos + 8], "little")
    bad[pos + 4:pos + 8] = ((word & ~0xF) | log2_macs).to_bytes(4, "little")
    e = _fails(bytes(bad), specs, f"Ethos-U85-{1 << log2_macs}", what)
    assert e.code == ErrorCode.NotSupported


def test_a_weight_stream_for_an_absent_decoder_names_the_command():
    """Ethos-U85-256 has one weight decoder: a WEIGHT1_LENGTH is a malformed stream."""
    blob, specs, words = _words("mlp_u85")
    starts = _command_starts(words)
    at = next(s for s in starts if words[s] & 0xFFFF == 0x4021)  # WEIGHT_LENGTH
    op = next(i for i, s in enumerate(starts) if s > at and words[s] & 0xFFFF == 0x002)
    w = words[:at] + [0x4091, 64] + words[at:]  # WEIGHT1_LENGTH 64 before it
    e = _fails(_rebuild(blob, w), specs, f"command {op + 1}", "WEIGHT1_LENGTH 64")
    assert e.code == ErrorCode.InvalidProgram


# ---- malformed streams ------------------------------------------------------------------
def _rebuild(blob: bytes, words: list) -> bytes:
    """The payload with its register command stream replaced by ``words``."""
    out, pos = bytearray(), 0
    while pos < len(blob):
        name, size, ext, _ = struct.unpack_from("<16sIB11s", blob, pos)
        body = blob[pos + 32:pos + 32 + size]
        if name.rstrip(b"\0") == b"cmd_data":
            hdr = np.frombuffer(body, np.uint32)
            n = next(i for i in range(1, len(hdr)) if hdr[i] & 0xFF == 2)
            tag = 2 | (len(words) & 0xFFFF) << 16 | ((len(words) >> 16) & 0xFF) << 8
            body = hdr[:n].tobytes() + struct.pack("<I", tag) + \
                np.asarray(words, np.uint32).tobytes()
        out += struct.pack("<16sIB11s", name, len(body), ext, b"\0" * 11)
        out += body + b"\0" * (-len(body) % 16)
        pos += 32 + size + (-size % 16)
        if name.rstrip(b"\0") == b"vela_end_stream":
            break
    return bytes(out)


def _words(name):
    blob, specs, _ = delegate_blob(get_fixture(name).pte_path)
    return blob, specs, [int(w) for w in read_payload(np.frombuffer(blob, np.uint8)).commands]


def _command_starts(words):
    """Word index of each command."""
    starts, i = [], 0
    while i < len(words):
        starts.append(i)
        i += 2 if words[i] & 0x4000 else 1
    return starts


@pytest.mark.parametrize("code,what", [(0x0121 | 0x4000, "unknown opcode 0x4121"),
                                       (0x0004, "unknown opcode 0x0004")])
def test_a_malformed_ethos_u85_stream_names_the_command(code, what):
    blob, specs, words = _words("mlp_u85")
    k = 5
    at = _command_starts(words)[k]
    bad = words[:at] + [code] + words[at + 1:]
    with pytest.raises(ExecuTorchError, match=f"command {k} \\(word {at}\\): {what}") as e:
        ethosu_backend.init(_rebuild(blob, bad), specs, None)
    assert e.value.code == ErrorCode.InvalidProgram


def _fails(blob, specs, *needles):
    with pytest.raises(ExecuTorchError) as e:
        ethosu_backend.init(blob, specs, None)
    msg = str(e.value)
    assert "EthosUBackend" in msg, msg
    for n in needles:
        assert n in msg, msg
    return e.value


def test_unmodified_rebuild_still_loads():
    blob, specs, words = _words("cnn_u55")
    h = ethosu_backend.init(_rebuild(blob, words), specs, None)
    assert len(h.ops) == sum(h.op_counts.values()) > 0


def test_truncated_stream_names_the_command():
    blob, specs, words = _words("cnn_u55")
    starts = _command_starts(words)
    cut = starts[40]
    _fails(_rebuild(blob, words[:cut]), specs, "command 40", "without NPU_OP_STOP")
    # a cmd1 whose payload word is cut off
    k = next(i for i, s in enumerate(starts) if words[s] & 0x4000)
    _fails(_rebuild(blob, words[:starts[k] + 1]), specs, f"command {k}", "payload")
    # the container itself cut anywhere: an error, never a crash
    for n in (0, 10, 40, 100, len(blob) // 2, len(blob) - 20):
        with pytest.raises(ExecuTorchError, match="EthosUBackend"):
            ethosu_backend.init(blob[:n], specs, None)


def test_unknown_opcode_names_the_command():
    blob, specs, words = _words("cnn_u55")
    starts = _command_starts(words)
    w = list(words)
    w[starts[7]] = 0x0077  # no such cmd0
    _fails(_rebuild(blob, w), specs, "command 7", "unknown opcode 0x0077")


def test_register_pointing_outside_a_region_names_the_operation():
    blob, specs, words = _words("cnn_u55")
    starts = _command_starts(words)
    # the first IFM_BASE0 (cmd1 0x4000): move the input to the end of memory
    k = next(i for i, s in enumerate(starts) if words[s] & 0xFFFF == 0x4000)
    w = list(words)
    w[starts[k] + 1] = 0x7FFFFFF0
    op = next(i for i, s in enumerate(starts) if i > k and (w[s] & 0xFFFF) in (2, 3, 5, 6))
    _fails(_rebuild(blob, w), specs, f"command {op}", "spans bytes", "region 1")
    # a DMA reading past the weights
    k = next(i for i, s in enumerate(starts) if words[s] & 0xFFFF == 0x4030)  # DMA0_SRC
    w = list(words)
    w[starts[k] + 1] = 0x00FFFFF0
    op = next(i for i, s in enumerate(starts) if i > k and w[s] & 0xFFFF == 0x10)
    _fails(_rebuild(blob, w), specs, f"command {op}", "DMA source")


def test_corrupt_weight_stream_is_an_error_not_an_exit():
    """vela's decoder exits the process on a corrupt stream: it runs in a child."""
    blob, specs, _ = _words("mlp_u55")
    p = read_payload(np.frombuffer(blob, np.uint8))
    wstart = bytes(blob).find(p.weights.tobytes())
    bad = bytearray(blob)
    bad[wstart + 0x140:wstart + 0x140 + 656] = b"\xff" * 656  # the first conv's stream
    err = _fails(bytes(bad), specs, "command")
    assert "weight" in str(err)


def test_missing_codec_is_not_found_and_unavailable(monkeypatch):
    import sys

    import ethosu

    monkeypatch.delattr(ethosu, "mlw_codec", raising=False)
    monkeypatch.setitem(sys.modules, "ethosu.mlw_codec", None)
    assert not ethosu_backend.is_available()
    assert "ethos-u-vela" in ethosu_backend.unavailable_reason()
    blob, specs, _ = delegate_blob(get_fixture("mlp_u55").pte_path)
    with pytest.raises(ExecuTorchError) as e:
        ethosu_backend.init(blob, specs, None)
    assert e.value.code == ErrorCode.NotFound and "EthosUBackend" in str(e.value)
    with pytest.raises(ExecuTorchError, match="ethos-u-vela") as e:
        pyruntime.Runtime.get().load_program(get_fixture("mlp_u55").pte_path) \
            .load_method("forward")
    assert e.value.code == ErrorCode.NotFound


# ---- hand-written streams: what the fixtures' streams do not exercise -------------------
def _cmd0(code, param=0):
    return [code | (param & 0xFFFF) << 16]


def _cmd1(code, payload, param=0):
    return [code | 0x4000 | (param & 0xFFFF) << 16, payload & 0xFFFFFFFF]


def _payload(words, scratch, inputs, outputs, weights=b"") -> bytes:
    """A vela_bin_stream of our own: an Ethos-U55-128 driver header and ``words``."""
    words = list(words) + _cmd0(0x000, 0xFFFF)  # NPU_OP_STOP
    header = [int.from_bytes(b"COP1", "little"), 0x00100001, 0x00001807, 0x10066001,
              5, 5, 5, 2 | len(words) << 16]
    cmd = np.asarray(header + words, np.uint32).tobytes()

    def io(recs):
        out = struct.pack("<i", len(recs))
        for shape, off in recs:
            out += struct.pack("<9i", *([1] * (6 - len(shape)) + list(shape)), 1, off, 1)
        return out

    out = b""
    for name, data in (("vela_bin_stream", b""), ("cmd_data", cmd), ("weight_data", weights),
                       ("scratch_size", struct.pack("<I", scratch)), ("inputs", io(inputs)),
                       ("outputs", io(outputs)), ("vela_end_stream", b"")):
        out += struct.pack("<16sIB11s", name.encode(), len(data), 0, b"\0" * 11)
        out += data + b"\0" * (-len(data) % 16)
    return out


def _fm_regs(prefix, base, h, w, c, fmt, *, width0=None, height1=None, base1=0, esz=1):
    """Register writes for an int8 feature map (IFM, IFM2 or OFM)."""
    cmd0 = {"IFM": 0x100, "IFM2": 0x180, "OFM": 0x110}[prefix]
    cmd1 = {"IFM": 0x000, "IFM2": 0x080, "OFM": 0x010}[prefix]
    # NHCWB16 is (h, c // 16, w, c % 16): a brick of 16 channels per column
    sx = 16 * esz if fmt == 1 else c * esz
    sy = w * sx * (-(-c // 16) if fmt == 1 else 1)
    sc = w * 16 * esz if fmt == 1 else esz
    w0 = w if width0 is None else width0
    out = (_cmd0(cmd0 + 0x0F, 1) + _cmd1(cmd1, base) + _cmd1(cmd1 + 1, base1) +
           _cmd1(cmd1 + 2, 0) + _cmd1(cmd1 + 3, 0) +
           _cmd1(cmd1 + 4, sx) + _cmd1(cmd1 + 5, sy) + _cmd1(cmd1 + 6, sc))
    h1 = h if height1 is None else height1
    if prefix == "OFM":
        out += (_cmd0(0x111, w - 1) + _cmd0(0x112, h - 1) + _cmd0(0x113, c - 1) +
                _cmd0(0x11A, w0 - 1) + _cmd0(0x11B, h - 1) + _cmd0(0x11C, h1 - 1) +
                _cmd0(0x114, 1 | fmt << 6 | 1 << 8 | 2 << 14) + _cmd0(0x118, 0))
    else:
        out += (_cmd0(cmd0 + 0x0A, w0 - 1) + _cmd0(cmd0 + 0x0B, h - 1) +
                _cmd0(cmd0 + 0x0C, h1 - 1) + _cmd0(cmd0 + 0x05, 1 | fmt << 6) +
                _cmd0(cmd0 + 0x09, 0))
        if prefix == "IFM":
            out += _cmd0(0x104, c - 1)
    return out


def _activation(lo=-128, hi=127):
    return _cmd0(0x125, 0) + _cmd0(0x126, lo) + _cmd0(0x127, hi)


@pytest.mark.parametrize("mode,fn", [(0, lambda a, b: a * b), (3, np.minimum), (4, np.maximum),
                                     (6, lambda a, b: np.abs(a))])
def test_elementwise_on_tiled_nhwc_into_nhcwb16(mode, fn):
    """IFM split in two tiles (columns 0-2 at BASE0, 3-4 at BASE1), IFM2 in NHCWB16,
    OFM in NHCWB16: values land where the addressing says, clamped to [-100, 100]."""
    H, W, C = 4, 5, 20
    rng = np.random.default_rng(mode)
    a = rng.integers(-12, 12, (H, W, C)).astype(np.int8)
    b = rng.integers(-12, 12, (H, W, C)).astype(np.int8)
    # scratch: [0, 400) the input A in NHWC order, then B (NHCWB16), then the output
    left, right = np.ascontiguousarray(a[:, :3]), np.ascontiguousarray(a[:, 3:])
    a_off, a_right = 0, 4 * 3 * C
    b_off, o_off = 512, 1024
    size = o_off + H * W * 32
    words = (_fm_regs("IFM", a_off, H, W, C, 0, width0=3, base1=a_right) +
             _fm_regs("IFM2", b_off, H, W, C, 1) + _fm_regs("OFM", o_off, H, W, C, 1) +
             _activation(-100, 100) + _cmd1(0x024, 1, 0) + _cmd0(0x180, 0) +
             _cmd0(0x006, mode))
    # the IFM's rows are 3 columns wide in each tile: STRIDE_Y is per tile
    words = [w for w in words]
    i = words.index(0x4005) + 1  # IFM_STRIDE_Y payload
    words[i] = 3 * C
    blob = _payload(words, size, [((H, 3, C), 0)], [((H * W * 32,), o_off)])
    h = ethosu_backend.init(blob, [], None)
    mem = h.regions[1]
    mem[a_off:a_off + left.size] = left.reshape(-1).view(np.uint8)
    right_rows = np.zeros((H, 3, C), np.int8)
    right_rows[:, :2] = right
    mem[a_right:a_right + right_rows.size] = right_rows.reshape(-1).view(np.uint8)
    bb = np.zeros((H, 2, W, 16), np.int8)  # NHCWB16: (h, c // 16, w, c % 16)
    bp = np.zeros((H, W, 32), np.int8)
    bp[..., :C] = b
    bb[:] = bp.reshape(H, W, 2, 16).transpose(0, 2, 1, 3)
    mem[b_off:b_off + bb.size] = bb.reshape(-1).view(np.uint8)
    h.run()
    out = mem[o_off:o_off + H * W * 32].view(np.int8).reshape(H, 2, W, 16)
    got = out.transpose(0, 2, 1, 3).reshape(H, W, 32)[..., :C]
    want = np.clip(fn(a.astype(np.int64), b.astype(np.int64)), -100, 100)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("rounding,shift,want", [
    ("NATURAL", 2, [-1, 0, 1, 2]),  # half up
    ("TRUNCATE", 2, [-1, 0, 0, 1]),  # toward zero
    ("TFL", 2, [-1, 0, 1, 2]),  # as NATURAL up to shift 31
    ("TFL", 33, [-2, -1, 1, 2]),  # TOSA DOUBLE_ROUND beyond: halves away from zero
])
def test_rounding_modes(rounding, shift, want):
    from pyruntime.delegates.ethosu.ops import round_shift

    x = np.array([-6, -2, 2, 6], np.int64) << (shift - 2)  # x / 4 after the shift
    assert round_shift(x, shift, rounding).tolist() == want
