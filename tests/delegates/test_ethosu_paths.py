"""NPU paths the programs of ``test_ethosu.py`` never reach, each compared bit for bit with
the TOSA reference model run on the TOSA graph vela compiled (fixtures ``tfl_*`` and
``ew16_*`` of ``ethosu_fixtures``, for Ethos-U55-128, Ethos-U65-256 and Ethos-U85-256).

TFL rounding (``OFM_PRECISION`` rounding mode 0, modelled as TOSA ``DOUBLE_ROUND``). vela
programs it for a TOSA RESCALE in ``DOUBLE_ROUND`` mode and NATURAL for
``SINGLE_ROUND``. ExecuTorch 1.5.1 writes every RESCALE as ``SINGLE_ROUND``, so in its
programs TFL is left only where vela adds operations of its own with identity scales
(1x1 copies scaled by ``(2^31 + 1) >> 31``, elementwise steps scaled by 1 shift 0), where
every mode agrees (``test_executorch_streams_have_tfl_only_on_identity_scales``).
``tfl_*`` therefore gives vela the Arm flow's graph of a convolution, a MUL and an ADD
with its RESCALEs switched to ``DOUBLE_ROUND``: the stream has TFL on the convolution
(per-channel scales, shifts 40-41), the MUL (shift 37) and the ADD (OFM shift 50; its
rescaled operand uses the IFM rounding, TFL too, at shift 11). The two modes
differ only past a shift of 31, on a 2^(30 - shift) share of the values:
``test_tfl_rounding_is_what_the_oracle_needs`` shows that the same stream with TFL read
as NATURAL misses the oracle on the convolution's and the MUL's outputs.

16-bit elementwise (``ew16_*``, ``get_symmetric_a16w8_quantization_config``): ``a + b``
and ``a - b`` of two inputs with one scale become one ADD / SUB of 16-bit IFMs in the
16-bit scale mode (``IFM_PRECISION`` scale mode 0: A and B times ``OPA_SCALE`` /
``OPB_SCALE`` = 2048, then a non-trivial OFM scale); ``a * c`` a 16-bit MUL; ``a + c``
(two scales) vela builds from 32-bit steps: ADDs that widen each 16-bit IFM (minus a
scalar) to 32 bits, MULs of 32-bit values by a broadcast 32-bit multiplier, a 32-bit
ADD. vela 5.2.0 never rescales one operand of a 16-bit ADD/SUB by ``OPA_SCALE``
(scale modes 1 and 2 on 16-bit IFMs): the model refuses that, and the other operand
scalings no stream has, with NotSupported (``test_unmodelled_operand_scaling_is_refused``).
"""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from tests import parts
from tests.delegates.ethosu_fixtures import delegate_blob, get_fixture, unavailable_reason

_why = unavailable_reason()
parts.need("arm", None if _why is None else f"EthosUBackend tests need the Arm flow: {_why}")

from pyruntime.delegates.ethosu import ethosu_backend  # noqa: E402
from pyruntime.delegates.ethosu.npu import decode_words  # noqa: E402
from pyruntime.delegates.ethosu.payload import read_payload  # noqa: E402
from pyruntime.delegates.tosa.graph import read_graph  # noqa: E402
from tests.delegates.test_ethosu import _rebuild  # noqa: E402

tosa_reference_model = parts.importorskip("tosa_reference_model", "arm")

NPU = {"tfl_u55": "Ethos-U55-128", "tfl_u65": "Ethos-U65-256", "tfl_u85": "Ethos-U85-256",
       "ew16_u55": "Ethos-U55-128", "ew16_u65": "Ethos-U65-256", "ew16_u85": "Ethos-U85-256",
       "ops_u85": "Ethos-U85-256"}
TRIALS = 8


def load(name):
    blob, specs, bid = delegate_blob(get_fixture(name).pte_path)
    assert bid == "EthosUBackend"
    h = ethosu_backend.init(blob, specs, None)
    assert name not in NPU or h.program.config.name == NPU[name]
    return h


def graph(name):
    return read_graph(get_fixture(name).tosa_path.read_bytes())


def random_inputs(name, rng) -> list:
    """Random integers over each TOSA input's whole type range."""
    out = []
    for s in graph(name).inputs:
        info = np.iinfo(s.dtype)
        out.append(rng.integers(info.min, info.max, s.shape, endpoint=True).astype(s.dtype))
    return out


def oracle(name, xs: list) -> list:
    outs, status = tosa_reference_model.run(get_fixture(name).tosa_path.read_bytes(), xs)
    assert status.name == "TOSA_VALID"
    return [np.asarray(o).reshape(-1) for o in outs]


def npu_run(h, name, xs: list) -> list:
    for x, io in zip(xs, h.program.inputs):
        h.regions[io.region][io.offset:io.offset + io.nbytes] = x.reshape(-1).view(np.uint8)
    h.run()
    return [h.regions[io.region][io.offset:io.offset + io.nbytes].view(s.dtype).copy()
            for io, s in zip(h.program.outputs, graph(name).outputs)]


def mismatches(h, name, trials=TRIALS, seed=11) -> tuple[int, int]:
    """(outputs that differ from the oracle, outputs compared) over random inputs."""
    rng = np.random.default_rng(seed)
    differ = total = 0
    for _ in range(trials):
        xs = random_inputs(name, rng)
        for got, want in zip(npu_run(h, name, xs), oracle(name, xs)):
            differ += int(np.sum(got != want))
            total += want.size
    return differ, total


@pytest.mark.parametrize("name", list(NPU))
def test_npu_model_equals_tosa_reference(name):
    differ, total = mismatches(load(name), name)
    print(f"{name}: {total - differ}/{total} outputs equal the TOSA reference model")
    assert total > 0 and differ == 0


# ---- TFL rounding ----------------------------------------------------------------------
def shifts(h, op) -> np.ndarray:
    """The shifts of an operation's output stage (per channel or global)."""
    if op.kind in ("conv", "depthwise") and not op.attrs["global_scale"]:
        return np.asarray(h.executor.scale_records(op)[2])
    return np.asarray([op.attrs["ofm_scale"][1]])


def tfl_ops(h) -> dict:
    """kind -> the operation with TFL rounding and a shift over 31 (where TFL and NATURAL
    differ)."""
    out = {}
    for op in h.ops:
        if op.attrs.get("rounding") == "TFL" and shifts(h, op).max() > 31:
            out[op.kind + (f".{op.attrs['mode']}" if "mode" in op.attrs else "")] = op
    return out


@pytest.mark.parametrize("name", ["tfl_u55", "tfl_u65", "tfl_u85"])
def test_tfl_rounding_is_what_the_oracle_needs(name):
    """(On the Ethos-U85 the mode is DOUBLE_SYMMETRIC, in OFM_SCALE and IFM2_SCALE.)"""
    h = load(name)
    ops = tfl_ops(h)
    assert {"conv", "elementwise.MUL", "elementwise.ADD"} <= set(ops), h.op_counts
    add = ops["elementwise.ADD"].attrs
    if name.endswith("u85"):  # B rescaled: multiplier, shift 11, TFL
        assert add["operand_scales"][1][1:] == (11, "TFL")
    else:
        assert add["ifm_scale_mode"] in (1, 2)
        assert add["ifm_rounding"] == "TFL"
    assert mismatches(h, name, 4 * TRIALS)[0] == 0
    for kind in ("conv", "elementwise.MUL"):  # the same stream, one op's TFL as NATURAL
        op = ops[kind]
        op.attrs["rounding"] = "NATURAL"
        try:
            differ, total = mismatches(h, name, 4 * TRIALS)
        finally:
            op.attrs["rounding"] = "TFL"
        print(f"{name}: {kind} (shift {shifts(h, op).max()}) rounded NATURAL: {differ}/"
              f"{total} outputs differ from the oracle")
        assert differ > 0


IDENTITY_SCALES = {(1, 0), ((1 << 31) + 1, 31)}  # (multiplier, shift)


@pytest.mark.parametrize("name", ["mlp_u55", "cnn_u55", "cnn_u65", "ew16_u55", "ew16_u65",
                                  "mlp_u85", "cnn_u85", "ew16_u85"])
def test_executorch_streams_have_tfl_only_on_identity_scales(name):
    """Why the ``tfl_*`` fixtures edit the TOSA graph: with ExecuTorch's SINGLE_ROUND
    RESCALEs vela leaves TFL only on its own copies and widenings, whose output scales
    send every 8- or 16-bit value (or 32-bit sum) to itself in every rounding mode."""
    from pyruntime.delegates.ethosu.ops import round_shift

    h = load(name)
    tfl = [op for op in h.ops if op.attrs.get("rounding") == "TFL"]
    for op in tfl:
        assert op.attrs["global_scale"] and tuple(op.attrs["ofm_scale"]) in IDENTITY_SCALES
    x = np.arange(-1 << 15, 1 << 15, dtype=np.int64)
    for scale, shift in IDENTITY_SCALES:
        for mode in ("TFL", "NATURAL", "TRUNCATE"):
            assert np.array_equal(round_shift(x * scale, shift, mode), x)
    print(f"{name}: TFL on {len(tfl)} operations, all with identity scales")


# ---- 16-bit elementwise ------------------------------------------------------------------
def elementwise(h, mode, ifm, ofm) -> list:
    return [op for op in h.ops if op.kind == "elementwise" and op.attrs["mode"] == mode and
            op.ifm.dtype == ifm and op.ofm.dtype == ofm]


@pytest.mark.parametrize("name", ["ew16_u55", "ew16_u65"])
def test_16bit_elementwise_paths_are_in_the_stream(name):
    h = load(name)
    for mode in ("ADD", "SUB"):
        (op,) = elementwise(h, mode, "s16", "s16")
        a = op.attrs
        assert op.ifm2 is not None and op.ifm2.dtype == "s16"
        assert a["ifm_scale_mode"] == 0  # SCALE_16BIT
        assert a["opa_scale"][0] > 1 and a["opb_scale"][0] > 1
        scale, shift = a["ofm_scale"]
        assert scale & (scale - 1) and shift > 0, a["ofm_scale"]  # not a power of two
    assert elementwise(h, "MUL", "s16", "s16")
    widen = elementwise(h, "ADD", "s16", "s32")
    assert len(widen) == 2 and all(op.attrs["ifm_scale_mode"] == 0 for op in widen)
    assert elementwise(h, "MUL", "s32", "s32") and elementwise(h, "MUL", "s32", "s16")


def test_16bit_elementwise_paths_on_the_ethos_u85():
    """The U85 scales each operand itself (``IFM_SCALE``/``IFM2_SCALE``: multiplier and
    shift), so vela builds ``a + c`` (two scales) as one 16-bit ADD with A rescaled, where
    the U55 needs 32-bit steps; ``a + b`` and ``a - b`` scale both by 2048."""
    h = load("ew16_u85")
    (rescaled,) = [op for op in elementwise(h, "ADD", "s16", "s16")
                   if op.attrs["operand_scales"][0][1] > 0]
    scale, shift, _ = rescaled.attrs["operand_scales"][0]
    assert scale & (scale - 1) and shift == 21
    for mode in ("ADD", "SUB"):
        assert any(tuple(s[:2] for s in op.attrs["operand_scales"]) == ((2048, 0), (2048, 0))
                   for op in elementwise(h, mode, "s16", "s16"))
    assert elementwise(h, "MUL", "s16", "s16")
    assert not [op for op in h.ops if op.ofm.dtype == "s32"]


def test_ethos_u85_paths_are_in_the_stream():
    """What ``ops_u85`` exercises (each output equal to the oracle above): OFMs written
    transposed and reversed, MIN pools, MIN/MAX/ABS/SUB of rescaled operands, an IFM2
    broadcast (the NCHW inputs are feature maps of (C, H, W) here: ``z``, (8, 1, 1), is
    broadcast along the last two axes) and a scalar IFM2."""
    h = load("ops_u85")
    assert {"pool.MIN", "elementwise.MIN", "elementwise.MAX", "elementwise.ABS",
            "elementwise.SUB", "elementwise.MUL"} <= set(h.op_counts), h.op_counts
    assert {op.attrs["ofm_order"] for op in h.ops} > {"HWC"}
    assert {op.attrs["ofm_reversed"] for op in h.ops} > {None}
    broadcast, scalar = sorted(elementwise(h, "MAX", "s8", "s8"), key=lambda o: o.ifm2 is None)
    assert broadcast.ifm2.dims == (8, 1, 1) and broadcast.ofm.dims == (8, 6, 6)
    assert any(s[0] != 1 << s[1] for s in broadcast.attrs["operand_scales"])
    assert scalar.ifm2 is None and "scalar" in scalar.attrs  # max(y, 0.75): OP_SCALAR


# ---- refusals ----------------------------------------------------------------------------
def _stream(name):
    blob, specs, _ = delegate_blob(get_fixture(name).pte_path)
    words = [int(w) for w in read_payload(np.frombuffer(blob, np.uint8)).commands]
    return blob, specs, words, decode_words(np.asarray(words))


def _register_at(name, index: int, register: str) -> int:
    """The value of a cmd0 register when command ``index`` starts."""
    *_, cmds = _stream(name)
    return [p for i, _, n, p, _ in cmds if n == register and i < index][-1]


def _inserted(name, before: int, words: list):
    """The fixture's payload with register writes ``words`` inserted before command
    ``before`` (which becomes command ``before + len(commands inserted)``)."""
    blob, specs, stream, cmds = _stream(name)
    at = cmds[before][1]
    return _rebuild(blob, stream[:at] + words + stream[at:]), specs


def _refused(name, op, words, *needles):
    blob, specs = _inserted(name, op.index, words)
    with pytest.raises(ExecuTorchError) as e:
        ethosu_backend.init(blob, specs, None)
    assert e.value.code == ErrorCode.NotSupported, e.value
    for n in (f"command {op.index + 1}", *needles):
        assert n in str(e.value), str(e.value)


IFM_PRECISION, OFM_PRECISION, OPA_SCALE = 0x105, 0x114, 0x4025  # cmd0, cmd0, cmd1


def test_unmodelled_operand_scaling_is_refused():
    """The ew16_u55 stream with one register changed just before an operation: the 16-bit
    SUB asked to rescale one operand by OPA_SCALE (modes 1, 2), or given an OPA_SCALE
    shift in the 16-bit mode, and the 16-bit MUL asked to scale an operand."""
    h = load("ew16_u55")
    (sub,) = elementwise(h, "SUB", "s16", "s16")
    (mul,) = elementwise(h, "MUL", "s16", "s16")
    prec = _register_at("ew16_u55", sub.index, "IFM_PRECISION")
    assert (prec >> 8) & 3 == 0
    blob, specs = _inserted("ew16_u55", sub.index, [IFM_PRECISION | prec << 16])
    ethosu_backend.init(blob, specs, None)  # the same value again: still loads
    for mode, what in ((1, "SCALE_OPA_32BIT"), (2, "SCALE_OPB_32BIT")):
        _refused("ew16_u55", sub, [IFM_PRECISION | (prec | mode << 8) << 16], "SUB", what,
                 "s16 IFMs")
    _refused("ew16_u55", sub, [OPA_SCALE | 3 << 16, 2048], "SUB", "SCALE_16BIT",
             "OPA_SCALE 0x800 shift 3")
    prec = _register_at("ew16_u55", mul.index, "IFM_PRECISION")
    _refused("ew16_u55", mul, [IFM_PRECISION | (prec | 1 << 8) << 16], "MUL",
             "SCALE_OPA_32BIT")


def test_unknown_rounding_mode_is_an_error():
    op = next(o for o in reversed(load("ew16_u55").ops) if o.kind != "dma_start")
    prec = _register_at("ew16_u55", op.index, "OFM_PRECISION")
    blob, specs = _inserted("ew16_u55", op.index, [OFM_PRECISION | (prec | 3 << 14) << 16])
    with pytest.raises(ExecuTorchError, match="unknown rounding mode 3") as e:
        ethosu_backend.init(blob, specs, None)
    assert e.value.code == ErrorCode.InvalidProgram
