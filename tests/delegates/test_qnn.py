"""The Qualcomm QNN bridge: programs lowered by ExecuTorch's own QNN exporter run in
pyruntime on the QNN HTP simulator (``onnxruntime-qnn``'s x86_64 libraries) with the
outputs ``executorch.runtime``'s QnnBackend gives for the same .pte on the same
library (floats within 1e-5 x max(1, max |ref|), integers exact); plus payload and
compile-spec parsing, binary info, shared contexts, graph selection, malformed
payloads, wrong arguments, a missing library, and the GIL released while QNN runs.

Tests that need the QNN library skip (with the reason) where it is absent; the
fixture tests also need a C compiler (for the exporter's test shim), torch and
executorch. The payload and struct tests run everywhere."""
from __future__ import annotations

import ctypes
import json
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates import backend_registry
from pyruntime.delegates.qnn import context, ctypes_api as api, library
from pyruntime.delegates.qnn.backend import QnnBackend
from pyruntime.delegates.qnn.payload import MAGIC, parse_compile_specs, parse_payload
from tests import parts
from tests.delegates import qnn_fixtures as Q

LIB = library.get_library()
_NO_FIXTURES = Q.unavailable_reason()
needs_lib = parts.skip_unless(LIB is not None, "qnn", f"QnnBackend: {library.unavailable_reason()}")
needs_fixtures = parts.skip_unless(
    LIB is not None and _NO_FIXTURES is None, "qnn",
    f"QnnBackend fixtures: {_NO_FIXTURES or library.unavailable_reason()}")
_REPO = Path(__file__).resolve().parents[2]

FIXTURES = list(Q.NAMES)
# the fast tier runs the delegate call through the same bridge: a few programs suffice
FAST = ["mlp_int8", "mlp_u8_io", "two_methods", "stateful_fp16", "vit_fp16"]


def assert_parity(got, want, where):
    got = np.asarray(got)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "f":
        tol = 1e-5 * max(1.0, float(np.max(np.abs(want))))
        err = float(np.max(np.abs(got.astype(np.float64) - want)))
        assert err <= tol, f"{where}: max abs error {err:.3g} > {tol:.3g}"
    else:
        assert np.array_equal(got, want), f"{where}: {int(np.sum(got != want))} elements differ"


def run_fixture(fx, tier="reference"):
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    methods, outs = {}, []
    try:
        for m, inputs in fx.runs:
            if m not in methods:
                methods[m] = prog.load_method(m, tier=tier)
            outs.append(methods[m].execute(inputs))
    finally:
        for meth in methods.values():
            meth.destroy()
    return outs


def delegate(fx, method="forward", index=0):
    """(payload bytes, compile specs) of a fixture's delegate."""
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    bd = prog._plan(method).delegates[index]
    blob = bytes(np.asarray(prog._pte.delegate_blob(bd.processed, "test")).reshape(-1))
    specs = [(cs.key, bytes(cs.value)) for cs in bd.compile_specs]
    return blob, specs


def tensors(arrays):
    return [ETensor.from_array(np.ascontiguousarray(a)) for a in arrays]


# ---- payload, compile spec, structs (no library needed) ---------------------------------
def _payload(binary: bytes, signature=1234, size=None) -> bytes:
    header = struct.pack("<IqQ", MAGIC, signature, len(binary) if size is None else size)
    return header + bytes(256 - len(header)) + binary


def test_payload_header_is_parsed():
    p = parse_payload(_payload(b"\x01\x02\x03\x04" * 10, signature=-7))
    assert p.has_header and p.signature == -7 and bytes(p.binary) == b"\x01\x02\x03\x04" * 10
    # trailing bytes after the declared size are not part of the binary
    p = parse_payload(_payload(b"abcdef", size=4))
    assert bytes(p.binary) == b"abcd"


def test_payload_without_the_magic_is_a_raw_context_binary():
    raw = b"\x00\x00\x00\x02" + bytes(range(200))
    p = parse_payload(raw)
    assert not p.has_header and bytes(p.binary) == raw
    assert parse_payload(raw).signature == p.signature != parse_payload(raw + b"x").signature


@pytest.mark.parametrize("blob,words", [
    (b"", "empty payload"),
    (struct.pack("<IqQ", MAGIC, 1, 10) + bytes(100), "too short for the 256-byte header"),
    (_payload(b"", size=0), "context binary is empty"),
    (_payload(b"x" * 10, size=11), "says the context binary has 11 bytes"),
    (_payload(b"x" * 10, size=2 ** 64 - 1), "the payload holds 10"),
])
def test_malformed_headers_are_errors_naming_the_backend(blob, words):
    with pytest.raises(ExecuTorchError) as e:
        parse_payload(blob)
    assert e.value.code == ErrorCode.InvalidProgram
    assert "QnnBackend payload" in str(e.value) and words in str(e.value)


def test_struct_layouts_match_the_qnn_abi():
    assert api.sizes() == {"QuantizeParams": 40, "TensorV1": 112, "TensorV2": 136,
                           "Tensor": 144, "GraphInfo": 88, "BinaryInfo": 144}
    assert api.TensorV1.quant.offset == 32 and api.TensorV1.rank.offset == 72
    assert api.TensorV1.dims.offset == 80 and api.TensorV1.mem.offset == 96
    assert api.QnnInterface.table.offset == 40 and api.QnnSystemInterface.table.offset == 32
    soc = api.HtpSocConfig(api.HTP_DEVICE_CONFIG_SOC, 57, 57)
    assert struct.unpack_from("<III", bytes(soc)) == (0, 57, 57)  # readable in both layouts


def test_tensor_name_conventions():
    assert context.input_number("input_3_x@0") == 3
    assert context.input_number("input_0_mutbuf_1_b_acc@0") == 0
    assert context.input_number("x") is None and context.input_number("input_x") is None
    assert context.mutbuf_number("input_2_mutbuf_4_k@0") == 4
    assert context.mutbuf_number("output_mutbuf_0_add@0") == 0
    assert context.mutbuf_number("output_add@0") is None


def test_quantization_encodings_are_read():
    q = api.QuantizeParams()
    q.definition, q.encoding = api.DEFINITION_DEFINED, api.ENC_SCALE_OFFSET
    q.scale_offset.scale, q.scale_offset.offset = 0.5, -128
    r = context._quant(q, "t", "test")
    assert r.axis is None and r.scale.tolist() == [0.5] and r.zero_point.tolist() == [128]
    pairs = (api.ScaleOffset * 3)((0.1, 0), (0.2, -1), (0.4, -2))
    q.encoding = api.ENC_AXIS_SCALE_OFFSET
    q.axis_scale_offset.axis, q.axis_scale_offset.num = 0, 3
    q.axis_scale_offset.scale_offset = ctypes.cast(pairs, ctypes.POINTER(api.ScaleOffset))
    r = context._quant(q, "t", "test")
    assert r.axis == 0 and np.allclose(r.scale, [0.1, 0.2, 0.4]) and r.offset.tolist() == [0, -1, -2]
    scales, offsets = np.array([1.0, 2.0], np.float32), np.array([3, 4], np.int32)
    q.encoding = api.ENC_BW_AXIS_SCALE_OFFSET
    b = q.bw_axis_scale_offset
    b.bitwidth, b.axis, b.num = 4, 1, 2
    b.scales = scales.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    b.offsets = offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    r = context._quant(q, "t", "test")
    assert (r.axis, r.bitwidth, r.scale.tolist(), r.offset.tolist()) == (1, 4, [1, 2], [3, 4])
    q.encoding = api.ENC_AXIS_SCALE_OFFSET
    q.axis_scale_offset.num, q.axis_scale_offset.scale_offset = 5, None
    with pytest.raises(ExecuTorchError, match="5 per-axis encodings"):
        context._quant(q, "t", "test")


def test_qnn_error_codes_are_described():
    assert api.describe_error(0x7_0000_753A) == "30010 (SYSTEM_CONTEXT_MALFORMED_BINARY)"
    assert api.describe_error(6003) == "6003 (graph error)"


# ---- the library -----------------------------------------------------------------------
@needs_lib
def test_library_is_found_and_described():
    assert backend_registry.get("QnnBackend").library is LIB
    assert "QnnBackend" in pyruntime.Runtime.get().backend_registry.available()
    assert LIB.backend_id == api.BACKEND_ID_HTP and LIB.core_api.startswith("2.")
    desc = LIB.describe()
    assert LIB.folder in desc and LIB.version in desc and LIB.version[0].isdigit()
    # the device for a SoC is created with its config (the simulator accepts it)
    assert LIB.device(57).value and 57 not in LIB.device_notes


@needs_lib
def test_explicit_library_folder_is_honoured(monkeypatch, tmp_path):
    monkeypatch.setenv(library.ENV, str(tmp_path))
    library.clear_cache()
    try:
        assert library.get_library() is None
        reason = library.unavailable_reason()
        assert str(tmp_path) in reason and "pip install --no-deps onnxruntime-qnn" in reason
        monkeypatch.setenv(library.ENV, LIB.folder)
        assert library.get_library() is LIB  # one library (and backend) per folder
    finally:
        monkeypatch.delenv(library.ENV)
        library.clear_cache()


@pytest.fixture
def no_library(monkeypatch):
    monkeypatch.setattr(library, "find_library", lambda folder=None: None)
    library.clear_cache()
    yield
    library.clear_cache()


@needs_fixtures
def test_a_soc_the_library_rejects_is_an_error_unless_the_fallback_is_asked(monkeypatch):
    """The library's own answer to a SoC config it does not know (9999: QNN 2.51 rejects
    it with 14001): an ExecuTorchError at load naming the SoC and the reason; with
    ``soc_fallback`` the program runs on a device without config, warned once."""
    import pyruntime.delegates.qnn.backend as qb

    def rejected_soc(specs):
        o = parse_compile_specs(specs)
        o.soc_model = 9999
        return o

    monkeypatch.setattr(qb, "parse_compile_specs", rejected_soc)
    monkeypatch.setattr(LIB, "_warned", set())
    fx = Q.get_fixture("mlp_fp16")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    with pytest.raises(ExecuTorchError) as e:
        prog.load_method("forward")
    assert e.value.code == ErrorCode.DelegateInvalidCompatibility
    msg = str(e.value)
    assert "SoC model 9999" in msg and "14001" in msg and "soc_fallback" in msg, msg
    bridge = backend_registry.get("QnnBackend")
    monkeypatch.setattr(bridge, "soc_fallback", False)
    bridge.set_option("soc_fallback", True)
    assert bridge.get_option("soc_fallback") is True
    with pytest.warns(RuntimeWarning, match="SoC model 9999 rejected"):
        m = prog.load_method("forward")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per SoC and process
        m2 = prog.load_method("forward")
    (inputs,) = [i for _, i in fx.runs[:1]]
    for meth in (m, m2):
        for g, w in zip(meth.execute(inputs), fx.expected[0]):
            assert_parity(np.asarray(g), w, "fallback device")
        meth.destroy()
    with pytest.raises(ExecuTorchError, match="unknown option"):
        bridge.set_option("soc_fallback", "yes")


@needs_fixtures
def test_missing_library_is_a_clear_not_found_at_load(no_library):
    fx = Q.get_fixture("mlp_fp16")
    from pyruntime.delegates.qnn import qnn_backend as backend

    assert not backend.is_available()
    assert "QnnBackend" not in backend_registry.available()
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    with pytest.raises(ExecuTorchError) as e:
        prog.load_method("forward")
    assert e.value.code == ErrorCode.NotFound
    assert "QnnBackend" in str(e.value)
    assert "pip install --no-deps onnxruntime-qnn==2.7.0" in str(e.value)


# ---- parity with executorch.runtime ----------------------------------------------------------
@needs_fixtures
@pytest.mark.parametrize("name", [n for n in FIXTURES if n != "stateful_fp16"])
def test_programs_match_executorch_runtime(name):
    fx = Q.get_fixture(name)
    assert all(ops == {"delegate": 1} for ops in fx.meta["lowered"].values()), fx.meta
    for i, (outs, exp) in enumerate(zip(run_fixture(fx), fx.expected)):
        assert len(outs) == len(exp)
        for j, (o, e) in enumerate(zip(outs, exp)):
            assert_parity(o, e, f"{name} run {i} ({fx.runs[i][0]}) output {j}")


@needs_fixtures
@pytest.mark.parametrize("name", FAST)
def test_fast_tier_matches_the_reference_tier(name):
    fx = Q.get_fixture(name)
    ref, fast = run_fixture(fx), run_fixture(fx, "fast")
    for i, (a, b) in enumerate(zip(ref, fast)):
        for j, (x, y) in enumerate(zip(a, b)):
            assert np.array_equal(np.asarray(x), np.asarray(y)), f"{name} run {i} output {j}"


@needs_fixtures
def test_mutable_buffer_state_lives_in_the_delegate():
    """``acc += fc(x); return acc * 0.5`` with ``acc`` delegated (mutbuf_ tensors): the
    state persists across runs and starts at zero, torch's initial value.
    executorch.runtime does not clear the buffer it allocates for the state (its
    elements start from whatever the heap held: some come out as fp16's 65504), so it
    is the oracle only for the elements whose first run agrees: those must agree on
    every run."""
    fx = Q.get_fixture("stateful_fp16")
    outs = [np.asarray(o[0]) for o in run_fixture(fx)]
    for i, (o, t) in enumerate(zip(outs, fx.torch)):
        assert np.allclose(o, t[0], atol=2e-3, rtol=2e-3), f"run {i} vs torch"
    assert not np.allclose(outs[0], outs[1])  # the state moved
    # The tolerance comes from torch's magnitude: ExecuTorch's own output can hold heap
    # garbage as large as 65504, which would make almost any element look clean.
    tol = 1e-5 * max(1.0, float(np.max(np.abs(fx.torch[0][0]))))
    clean = np.abs(outs[0] - fx.expected[0][0]) <= tol  # where its buffer started at 0
    assert clean.any(), clean  # (ExecuTorch's heap decides how many)
    for i, (o, e) in enumerate(zip(outs, fx.expected)):
        assert_parity(np.where(clean, o, 0), np.where(clean, e[0], 0), f"run {i} vs executorch")


@needs_fixtures
def test_integer_io_fixtures_carry_their_quantization():
    u8 = Q.get_fixture("mlp_u8_io")
    blob, specs = delegate(u8)
    info = context.read_binary_info(LIB, parse_payload(blob).binary)
    (g,) = info.graphs.values()
    (x,), (y,) = g.inputs, g.outputs
    assert (x.dtype_name, x.dims, y.dtype_name, y.dims) == (
        "UFIXED_POINT_8", (4, 16), "UFIXED_POINT_8", (4, 8))
    assert x.quant.axis is None and x.quant.scale[0] > 0
    assert u8.runs[0][1][0].dtype == np.uint8 and u8.expected[0][0].dtype == np.uint8
    u16 = Q.get_fixture("add_u16")
    blob, _ = delegate(u16)
    (g,) = context.read_binary_info(LIB, parse_payload(blob).binary).graphs.values()
    assert [t.dtype_name for t in g.inputs + g.outputs] == ["UFIXED_POINT_16"] * 3
    assert [t.name.split("_")[1] for t in g.inputs] == ["0", "1"]
    fp = Q.get_fixture("mlp_fp16")
    opts = parse_compile_specs(delegate(fp)[1])
    assert (opts.soc_model, opts.htp_arch, opts.precision, opts.backend_type) == (57, 75, 1, 2)
    assert parse_compile_specs(specs).precision == 0  # quantized


# ---- contexts and graphs ----------------------------------------------------------------
@needs_fixtures
def test_two_methods_share_one_context_with_two_graphs():
    fx = Q.get_fixture("two_methods")
    (fwd_blob, _), (dec_blob, _) = delegate(fx, "forward"), delegate(fx, "decode")
    assert parse_payload(fwd_blob).signature == parse_payload(dec_blob).signature
    before = context.live_contexts()
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    fwd, dec = prog.load_method("forward"), prog.load_method("decode")
    hf, hd = fwd._delegate_handles[0][1], dec._delegate_handles[0][1]
    assert hf.ctx is hd.ctx and context.live_contexts() == before + 1
    assert sorted(hf.ctx.info.graphs) == ["decode", "forward"]
    for (m, inputs), exp in zip(fx.runs, fx.expected):
        assert_parity((fwd if m == "forward" else dec).execute(inputs)[0], exp[0], m)
    assert {hf.graph_name, hd.graph_name} == {"forward", "decode"}
    fwd.destroy()
    assert context.live_contexts() == before + 1  # still used by decode
    dec.destroy()
    assert context.live_contexts() == before


@needs_fixtures
def test_release_from_a_finalizer_inside_acquire_does_not_deadlock():
    """A garbage collection inside ``context.acquire`` (which holds the registry lock) can
    finalize a Method whose QNN delegate then releases its context on the same thread.
    That used to wait forever on the lock (the fuzz campaign's 'hangs'); the release is
    now queued and counted once the lock is free."""
    fx = Q.get_fixture("two_methods")
    before = context.live_contexts()
    m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward")
    assert context.live_contexts() == before + 1
    done = threading.Event()

    def release_while_held():
        with context._registry_lock:  # what acquire holds when a collection runs
            m.destroy()  # what Method.__del__ does
        done.set()

    t = threading.Thread(target=release_while_held, daemon=True)
    t.start()
    t.join(20)
    assert done.is_set(), "releasing a context while the registry lock is held blocked"
    assert context.live_contexts() == before  # the queued release was counted

@needs_fixtures
def test_graph_is_chosen_by_method_name_and_a_wrong_name_is_an_error():
    fx = Q.get_fixture("two_methods")
    blob, specs = delegate(fx, "decode")
    b = QnnBackend()
    h = b.init(blob, specs, None, runtime_options={"method": "decode"})
    try:
        assert h.graph_name == "decode"
        (_, inputs), exp = fx.runs[1], fx.expected[1]
        out = ETensor.empty(6, exp[0].shape)
        b.execute(h, tensors(inputs) + [out])
        assert_parity(out.numpy(), exp[0], "decode")
    finally:
        b.destroy(h)
    with pytest.raises(ExecuTorchError) as e:
        b.init(blob, specs, None, runtime_options={"method": "encode"})
    assert e.value.code == ErrorCode.InvalidProgram
    assert "QnnBackend" in str(e.value) and "'encode' has no graph" in str(e.value)
    assert "'forward'" in str(e.value) and "'decode'" in str(e.value)


@needs_fixtures
def test_without_the_method_name_the_arguments_choose_the_graph():
    fx = Q.get_fixture("two_methods")
    blob, specs = delegate(fx, "forward")
    b = QnnBackend()
    h = b.init(blob, specs, None)
    try:
        (_, inputs), exp = fx.runs[1], fx.expected[1]  # decode's arguments
        assert h.graph_name is None
        out = ETensor.empty(6, exp[0].shape)
        b.execute(h, tensors(inputs) + [out])
        assert h.graph_name == "decode"
        assert_parity(out.numpy(), exp[0], "decode")
    finally:
        b.destroy(h)


# ---- malformed payloads, rejected binaries, wrong arguments ---------------------------------
def _load_with_payload(fx, edit):
    """The fixture's .pte with its (first) delegate payload replaced by ``edit(payload)``
    of the same length, loaded."""
    data = fx.pte_path.read_bytes()
    blob, _ = delegate(fx)
    start = data.find(blob)
    assert start >= 0
    new = edit(bytearray(blob))
    assert len(new) == len(blob)
    return pyruntime.Runtime.get().load_program(
        data[:start] + bytes(new) + data[start + len(blob):]).load_method("forward")


def _set(offset, value, fmt):
    def edit(b):
        struct.pack_into(fmt, b, offset, value)
        return b
    return edit


@needs_fixtures
@pytest.mark.parametrize("edit,code,words", [
    (_set(0, 0x12345678, "<I"), ErrorCode.InvalidProgram, "QnnSystemContext_getBinaryInfo"),
    (_set(12, 1 << 40, "<Q"), ErrorCode.InvalidProgram, "the payload holds"),
    (_set(12, 0, "<Q"), ErrorCode.InvalidProgram, "context binary is empty"),
    (_set(12, 2000, "<Q"), ErrorCode.InvalidProgram, "QnnSystemContext_getBinaryInfo"),
], ids=["bad-magic", "size-past-end", "size-zero", "truncated-binary"])
def test_malformed_payloads_are_errors_naming_the_backend(edit, code, words):
    fx = Q.get_fixture("mlp_int8")
    with pytest.raises(ExecuTorchError) as e:
        _load_with_payload(fx, edit)
    msg = str(e.value)
    assert e.value.code == code and "QnnBackend" in msg and words in msg
    if "getBinaryInfo" in words:  # QNN's own verdict (the system library logs nothing)
        assert "QNN error 30010 (SYSTEM_CONTEXT_MALFORMED_BINARY)" in msg


@needs_fixtures
def test_a_binary_the_library_rejects_gives_its_code_and_message():
    """A context blob whose metadata reads but whose content QNN's HTP library refuses
    (it validates the blob's flatbuffers): QNN's error code and its logged messages."""
    fx = Q.get_fixture("mlp_int8")
    blob, specs = delegate(fx)
    binary = bytes(parse_payload(blob).binary)
    errors = []
    for a, b in ((8192, 12288), (4096, 8192), (12288, 16384)):
        bad = binary[:a] + bytes(b - a) + binary[b:]
        try:
            h = QnnBackend().init(_payload(bad, signature=a), specs, None)
        except library.QnnError as e:
            errors.append(e)
        else:
            QnnBackend().destroy(h)
    assert errors, "QNN accepted every zeroed region"
    for e in errors:
        assert e.status == 5005 and e.code == ErrorCode.DelegateInvalidCompatibility
        assert "QnnBackend: QnnContext_createFromBinary" in str(e)
        assert e.messages and "QNN error 5005" in str(e) and "ERROR: <E>" in str(e)


@needs_fixtures
def test_wrong_arguments_are_rejected_before_qnn_runs():
    fx = Q.get_fixture("mlp_fp16")
    blob, specs = delegate(fx)
    b = QnnBackend()
    h = b.init(blob, specs, None, runtime_options={"method": "forward"})
    x = fx.runs[0][1][0]
    try:
        cases = [
            ([ETensor.from_array(x.astype(np.float64)), ETensor.empty(6, (4, 8))], "expects FLOAT_32"),
            ([ETensor.from_array(x[:2]), ETensor.empty(6, (4, 8))], "storage has 128 bytes"),
            ([ETensor.from_array(np.zeros((2, 32), np.float32)), ETensor.empty(6, (4, 8))],
             None),  # same bytes, another shape: bound by pointer, as ExecuTorch does
            ([ETensor.from_array(x), ETensor.from_array(np.zeros((4, 8, 2), np.float32))],
             "writes 32 elements"),
            ([ETensor.from_array(x)], "1 arguments, graph 'forward' binds 2"),
            ([ETensor.from_array(x), 3], "must be a tensor"),
        ]
        for args, words in cases:
            if words is None:
                b.execute(h, args)
                continue
            with pytest.raises(ExecuTorchError) as e:
                b.execute(h, args)
            assert "QnnBackend" in str(e.value) and words in str(e.value), str(e.value)
        ro = ETensor.empty(6, (4, 8))
        ro.storage.flags.writeable = False
        with pytest.raises(ExecuTorchError, match="read-only"):
            b.execute(h, [ETensor.from_array(x), ro])
        out = ETensor.empty(6, (4, 8))  # still runs after the errors
        b.execute(h, [ETensor.from_array(x), out])
        assert_parity(out.numpy(), fx.expected[0][0], "after errors")
    finally:
        b.destroy(h)
    with pytest.raises(ExecuTorchError) as e:
        b.execute(h, [ETensor.from_array(x), ETensor.empty(6, (4, 8))])
    assert e.value.code == ErrorCode.DelegateInvalidHandle


# ---- the GIL ----------------------------------------------------------------------------
@needs_fixtures
def test_qnn_runs_without_the_gil():
    """While a thread executes a program (the simulator working inside QnnGraph_execute,
    a ctypes call), this thread keeps running Python: no gap near the length of a call."""
    fx = Q.get_fixture("mobilenet_v2_fp16")
    method = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward")
    x = fx.runs[0][1]
    t0 = time.perf_counter()
    method.execute(x)
    call = time.perf_counter() - t0
    done = threading.Event()

    def work():
        for _ in range(3):
            method.execute(x)
        done.set()

    t = threading.Thread(target=work)
    gaps, last = [], time.perf_counter()
    t.start()
    while not done.is_set():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    t.join()
    method.destroy()
    assert len(gaps) > 1000 and max(gaps) < max(0.5 * call, 0.05), (call, max(gaps), len(gaps))


# ---- untrusted binaries -------------------------------------------------------------------
@needs_fixtures
def test_verification_turns_a_crash_of_qnn_into_an_error():
    """Corruptions that have crashed QNN 2.51 itself (segfaults, under ExecuTorch's runtime
    too): two in the metadata libQnnSystem's getBinaryInfo parses, one in a graph the
    simulator then runs. Whether they crash depends on what the libraries read past
    their buffers, so a run may pass them; with verification on, each load is an
    ExecuTorchError or runs, and this process lives (checked in a child process: a
    crash would take pytest down)."""
    code = f"""
import json, random, sys
sys.path.insert(0, {str(_REPO)!r})
import numpy as np
from pyruntime.cython_ext.errors import ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.qnn.backend import QnnBackend
from pyruntime.delegates.qnn.payload import parse_payload
from tests.delegates import qnn_fixtures as Q
from tests.delegates.test_qnn import delegate, _payload
b = QnnBackend()
b.set_option("verify", True)
seen = {{}}
for name, seed, end in (("cnn_bn_fp16", 44, 1100), ("cnn_bn_fp16", 79, 1100),
                        ("mlp_int8", 47, None), ("mlp_int8", 3, 1024)):
    fx = Q.get_fixture(name)
    blob, specs = delegate(fx)
    binary = bytes(parse_payload(blob).binary)
    rng = random.Random(seed)
    bb = bytearray(binary)
    for _ in range(rng.randint(1, 4)):
        bb[rng.randrange(0, end or len(bb))] = rng.randrange(256)
    try:
        h = b.init(_payload(bytes(bb), signature=seed), specs, None)
        outs = [ETensor.from_array(np.zeros_like(e)) for e in fx.expected[0]]
        b.execute(h, [ETensor.from_array(a) for a in fx.runs[0][1]] + outs)
        b.destroy(h)
        r = "ran"
    except ExecuTorchError as e:
        r = "crash-in-child" if "crashed (SIG" in str(e) else e.code.name
    seen[f"{{name}}/{{seed}}"] = r
print(json.dumps(seen))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, f"child died (rc {p.returncode}): {p.stderr[-2000:]}"
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert set(seen.values()) <= {"ran", "crash-in-child", "InvalidProgram", "NotSupported",
                                  "DelegateInvalidCompatibility", "Internal", "InvalidState"}


@needs_fixtures
def test_a_binary_refused_in_verification_is_never_parsed_here(monkeypatch):
    """On some corrupt binaries QnnSystemContext_getBinaryInfo returns uninitialized
    memory and a later free corrupts the heap (the fuzz campaign: refused in the child,
    ``free(): invalid pointer`` in the parent). So the child's refusal is the answer: this
    process never hands such a binary to QNN."""
    fx = Q.get_fixture("mlp_int8")
    blob, specs = delegate(fx)
    bb = bytearray(parse_payload(blob).binary)
    bb[:64] = bytes(range(64))  # the binary's header: QNN refuses it
    b = QnnBackend()
    b.set_option("verify", True)

    def parsed_here(*a, **k):
        raise AssertionError("the binary was parsed in this process")

    monkeypatch.setattr(context, "read_binary_info", parsed_here)
    with pytest.raises(ExecuTorchError) as e:
        b.init(_payload(bytes(bb), signature=77), specs, None)
    assert "QnnBackend" in e.value.message and "parsed in this process" not in str(e.value)


@needs_fixtures
@pytest.mark.parametrize("name", ["mlp_int8", "cnn_bn_fp16", "mlp_u8_io", "two_methods",
                                  "stateful_fp16"])
@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_isolated_graphs_give_the_same_bytes(name, tier, monkeypatch):
    """With ``$PYRUNTIME_QNN_ISOLATE`` every QNN call runs in a worker process: the
    outputs are the in-process bridge's bit for bit, on both tiers, mutable-buffer state
    included (it lives in the worker, across executes)."""
    from pyruntime.delegates.qnn import isolated

    fx = Q.get_fixture(name)
    want = [[np.array(o) for o in r] for r in run_fixture(fx, tier)]
    monkeypatch.setenv(isolated.ENV, "1")
    got = [[np.array(o) for o in r] for r in run_fixture(fx, tier)]
    assert len(got) == len(want)
    for r, (g, w) in enumerate(zip(got, want)):
        for o, (a, b) in enumerate(zip(g, w)):
            assert a.dtype == b.dtype and np.array_equal(a, b), f"run {r} output {o}"


@needs_fixtures
def test_a_worker_that_dies_is_an_error_and_this_process_lives(monkeypatch):
    """A worker killed by a signal (what a corrupt binary does to the QNN library, see
    verify.py) turns the call into an ExecuTorchError naming the signal; the handle is
    then gone and says so; loading again starts a new worker. A worker that stops
    answering is killed after $PYRUNTIME_QNN_ISOLATE_TIMEOUT seconds."""
    import os
    import signal

    from pyruntime.delegates.qnn import isolated

    monkeypatch.setenv(isolated.ENV, "1")
    fx = Q.get_fixture("mlp_int8")
    inputs = fx.runs[0][1]
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    m = prog.load_method("forward")
    first = np.array(m.execute(inputs)[0])
    worker = isolated._worker(LIB.folder)
    os.kill(worker.proc.pid, signal.SIGSEGV)
    # dead before the next call (the race CI once lost: the call found it dead, not dying)
    worker.proc.wait(timeout=30)
    with pytest.raises(ExecuTorchError) as e:
        m.execute(inputs)
    assert "SIGSEGV" in e.value.message and "unharmed" in e.value.message
    assert "between calls" in e.value.message
    with pytest.raises(ExecuTorchError) as e:
        m.execute(inputs)
    assert "gone" in e.value.message and "SIGSEGV" in e.value.message
    m2 = prog.load_method("forward")  # a new worker
    assert np.array_equal(np.array(m2.execute(inputs)[0]), first)
    monkeypatch.setenv(isolated.TIMEOUT_ENV, "1")
    os.kill(worker.proc.pid, signal.SIGSTOP)
    t0 = time.perf_counter()
    with pytest.raises(ExecuTorchError) as e:
        m2.execute(inputs)
    assert "no answer within 1 s" in e.value.message and time.perf_counter() - t0 < 30
    m3 = prog.load_method("forward")
    assert np.array_equal(np.array(m3.execute(inputs)[0]), first)


@needs_fixtures
def test_an_isolated_handle_closed_inside_a_request_waits_for_the_next(monkeypatch):
    """A handle's finalizer can run inside another call's request (the garbage collector
    runs anywhere): closing it there must not wait for the lock that call holds (a
    deadlock) nor write into the pipe mid-answer; it is destroyed before the next
    request instead."""
    from pyruntime.delegates.qnn import isolated

    fx = Q.get_fixture("mlp_int8")
    blob, specs = delegate(fx)
    h1 = isolated.init(LIB.folder, bytes(blob), specs, {"method": "forward"})
    h2 = isolated.init(LIB.folder, bytes(blob), specs, {"method": "forward"})
    worker = h1.worker
    real, calls = isolated._recv, []

    def recv_closing_h2(f):
        if not calls:
            calls.append(1)
            h2.close()  # as a finalizer would, with the lock held by this thread
        return real(f)

    monkeypatch.setattr(isolated, "_recv", recv_closing_h2)
    inputs = [ETensor.from_array(a) for a in fx.runs[0][1]]
    outs = [ETensor.from_array(np.zeros_like(e)) for e in fx.expected[0]]
    done = []
    t = threading.Thread(target=lambda: (h1.execute(inputs + outs), done.append(1)))
    t.start()
    t.join(60)
    assert done, "deadlocked"
    assert worker.pending == [h2.hid]
    h1.execute(inputs + outs)  # sends the pending destroy first
    assert worker.pending == []
    h1.close()


def test_verification_server_reports_a_crashed_or_hung_child(monkeypatch):
    """The server forks a child per binary: one killed by a signal comes back as that
    signal, one past the timeout is killed and comes back as None, and what a child
    printed (QNN prints to stdout too) comes back as its output, never on the answer
    pipe. Checked on the forking function itself, with the child's work replaced."""
    import os
    import signal

    from pyruntime.delegates.qnn import verify, verify_child

    def segfault(*a):
        os.kill(os.getpid(), signal.SIGSEGV)

    def chatty(*a):
        print("from stdout")
        print(json.dumps({"code": 35, "message": "refused"}), file=sys.stderr)
        return verify.REFUSED

    monkeypatch.setattr(verify_child, "_child", segfault)
    rc, out = verify_child._fork_child("lib", "bin", 0, 30)
    # the crash's trace is the child's output, not noise on this process's terminal
    assert rc == -signal.SIGSEGV and "in segfault" in out  # (the frame that crashed)
    monkeypatch.setattr(verify_child, "_child", lambda *a: time.sleep(60))
    t0 = time.perf_counter()
    assert verify_child._fork_child("lib", "bin", 0, 0.3)[0] is None
    assert time.perf_counter() - t0 < 10
    monkeypatch.setattr(verify_child, "_child", chatty)
    rc, out = verify_child._fork_child("lib", "bin", 0, 30)
    assert rc == verify.REFUSED and "from stdout" in out
    err = verify._refusal(out)
    assert err.code == ErrorCode(35) and err.message == "refused"


def test_verification_canaries_catch_writes_past_a_tensor():
    """The child gives QNN buffers with canary bytes on both sides: a graph that writes
    one byte before or past its tensor's bytes is refused."""
    from pyruntime.delegates.qnn import verify_child as verify

    f32 = ETensor.from_array(np.zeros(1, np.float32)).scalar_type
    for where in (-1, 0, None):
        guards = []
        t = verify._guarded_tensor(ETensor(f32, (3, 5)), guards)
        verify._guarded_tensor(ETensor(f32, (2,)), guards)
        assert t.numpy().size == 15 and not t.numpy().any()
        t.numpy()[...] = 1  # its own bytes: fine
        buf, lo, hi = guards[0]
        if where is not None:
            buf[lo - 1 if where < 0 else hi] ^= 1
        assert verify._overwritten(guards) == (None if where is None else 0)


@needs_fixtures
def test_verification_server_is_started_once():
    """Each new binary is checked by a child of one server process per library folder,
    and a binary checked once is not checked again."""
    from pyruntime.delegates.qnn import verify

    lib = library.get_library()
    binaries = []
    for name in ("mlp_int8", "cnn_bn_fp16"):
        blob, _ = delegate(Q.get_fixture(name))
        binaries.append(np.frombuffer(bytes(parse_payload(blob).binary), np.uint8))
    verify.verify(lib.folder, binaries[0])
    server = verify._server(lib.folder)
    pid = server.proc.pid
    verify.verify(lib.folder, binaries[1])
    verify.verify(lib.folder, binaries[0])
    assert server.proc.pid == pid and server.proc.poll() is None
    server.stop()  # a stopped (or dead) server is started again on the next binary
    verify._verified.clear()
    verify.verify(lib.folder, binaries[1])
    assert server.proc is not None and server.proc.pid != pid
    # a forked copy of this process starts a server of its own and leaves ours alone
    import os

    pid = server.proc.pid
    child = os.fork()
    if child == 0:
        ok = False
        try:
            verify._verified.clear()
            verify.verify(lib.folder, binaries[0])
            ok = server.proc.pid != pid
            verify._stop_servers()
        finally:
            os._exit(0 if ok else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
    assert server.proc.pid == pid and server.proc.poll() is None
    verify._verified.clear()
    verify.verify(lib.folder, binaries[0])  # still answers here


def test_backend_options():
    b = QnnBackend()
    assert b.get_option("verify") is False
    b.set_option("verify", True)
    assert b.get_option("verify") is True
    with pytest.raises(ExecuTorchError, match="unknown option"):
        b.set_option("threads", 2)
    with pytest.raises(ExecuTorchError, match="unknown option"):
        b.set_option("verify", "yes")
