"""The XNNPACK bridge: programs lowered with ExecuTorch's XnnpackPartitioner run in
pyruntime on a real XNNPACK library with the outputs executorch.runtime gives for
the same .pte (float: max abs error <= 1e-4 x max(1, max |ref|); int8 models: one
quantization step of the output), plus the library's enums, dynamic shapes,
partial delegation, corrupted blobs and a missing library.

Skipped (with the reason) only when no XNNPACK library can be found."""
from __future__ import annotations

import ctypes
import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import Dynamism, ETensor
from pyruntime.delegates import backend_registry
from pyruntime.delegates.xnnpack import library
from pyruntime.delegates.xnnpack.ctypes_api import BINARY, UNARY, BinaryParams, ExternalValue, UnaryParams
from tests import parts
from tests.delegates.xnnpack_fixtures import get_fixture

LIB = library.get_library()
pytestmark = parts.skip_unless(LIB is not None, "xnnpack",
                               f"XnnpackBackend: {library.unavailable_reason()}")
_REPO = Path(__file__).resolve().parents[2]


def load(fx_or_bytes, tier="reference"):
    src = fx_or_bytes.pte_path if hasattr(fx_or_bytes, "pte_path") else fx_or_bytes
    return pyruntime.Runtime.get().load_program(src).load_method("forward", tier=tier)


def assert_close(got, want, where, tol=None):
    got = np.asarray(got)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    if tol is None:
        tol = 1e-4 * max(1.0, float(np.max(np.abs(want))))
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    assert err <= tol, f"{where}: max abs error {err:.3g} > {tol:.3g}"


def handles(method) -> list:
    """The XnnpackHandle of each delegate of a loaded method (Method internals)."""
    return [h for _, h in method._delegate_handles]


def kinds(method) -> dict:
    """Instruction counts of a loaded method: 'DelegateCall' and operator names."""
    plan = method.plan
    names = [(o.name or "") + (f".{o.overload}" if o.overload else "") for o in plan.operators]
    out: dict[str, int] = {}
    for ins in plan.chains[0].instructions:
        a = ins.instr_args[1]
        k = names[a.op_index] if a._kind == "KernelCall" else a._kind
        out[k] = out.get(k, 0) + 1
    return out


# ---- the library -------------------------------------------------------------------
def test_library_is_found_and_described():
    assert backend_registry.get("XnnpackBackend").library is LIB
    assert "XnnpackBackend" in pyruntime.Runtime.get().backend_registry.available()
    desc = LIB.describe()
    assert LIB.path in desc and LIB.level in ("dynamic", "static")
    if LIB.source == "executorch":  # the wheel's XNNPACK has every node ExecuTorch's runtime has
        assert LIB.level == "dynamic"
        assert LIB.missing_nodes() == ["ScaledDotProductAttention"]


def _run_graph(define, inputs, out_shape):
    """Build a one-node subgraph with ``define(sg, in_ids, out_id)`` and run it once."""
    api = LIB.api
    sg = ctypes.c_void_p()
    assert api.xnn_create_subgraph(len(inputs) + 1, 0, ctypes.byref(sg)) == 0
    ids = []
    for k, x in enumerate(inputs + [np.zeros(out_shape, np.float32)]):
        dims = (ctypes.c_size_t * x.ndim)(*x.shape)
        vid = ctypes.c_uint32()
        flag = 1 if k < len(inputs) else 2
        assert api.xnn_define_tensor_value(sg, 1, x.ndim, dims, None, k, flag,
                                           ctypes.byref(vid)) == 0
        ids.append(vid.value)
    assert define(sg, ids[:-1], ids[-1]) == 0
    rt = ctypes.c_void_p()
    if api.xnn_create_runtime_v3 is not None:
        assert api.xnn_create_runtime_v3(sg, None, None, 0, ctypes.byref(rt)) == 0
    else:
        assert api.xnn_create_runtime_v2(sg, None, 0, ctypes.byref(rt)) == 0
    api.xnn_delete_subgraph(sg)
    bufs = [np.concatenate([x.ravel(), np.zeros(8, np.float32)]) for x in inputs]
    out = np.zeros(int(np.prod(out_shape)) + 8, np.float32)
    ext = (ExternalValue * (len(inputs) + 1))()
    for k, b in enumerate(bufs + [out]):
        ext[k].id, ext[k].data = k, b.ctypes.data
    if LIB.level == "dynamic":
        assert api.xnn_reshape_runtime(rt) == 0
        assert api.xnn_setup_runtime_v2(rt, len(ext), ext) == 0
    else:
        assert api.xnn_setup_runtime(rt, len(ext), ext) == 0
    assert api.xnn_invoke_runtime(rt) == 0
    api.xnn_delete_runtime(rt)
    return out[:int(np.prod(out_shape))].reshape(out_shape)


_X = np.linspace(-3.0, 3.0, 24, dtype=np.float32).reshape(4, 6)
_POS = np.linspace(0.25, 4.0, 24, dtype=np.float32).reshape(4, 6)
_ERF = np.vectorize(math.erf)
UNARY_CASES = {
    "abs": (_X, np.abs), "ceiling": (_X, np.ceil), "floor": (_X, np.floor),
    "negate": (_X, np.negative), "square": (_X, np.square), "square_root": (_POS, np.sqrt),
    "reciprocal_square_root": (_POS, lambda x: 1 / np.sqrt(x)), "exp": (_X, np.exp),
    "log": (_POS, np.log), "tanh": (_X, np.tanh), "sigmoid": (_X, lambda x: 1 / (1 + np.exp(-x))),
    "sine": (_X, np.sin), "cosine": (_X, np.cos),
    "gelu": (_X, lambda x: 0.5 * x * (1 + _ERF(x / np.sqrt(2)))),
    "hardswish": (_X, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "clamp": (_X, lambda x: np.clip(x, -0.5, 1.5)),
    "elu": (_X, lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    "leaky_relu": (_X, lambda x: np.where(x > 0, x, 0.1 * x)),
}


@parts.skip_unless(LIB is not None and LIB.api.xnn_define_unary is not None, "xnnpack",
                   "the library has no xnn_define_unary")
@pytest.mark.parametrize("op", sorted(UNARY_CASES))
def test_unary_operator_numbers_match_the_library(op):
    """Our enum xnn_unary_operator table, checked by running each op."""
    x, ref = UNARY_CASES[op]
    p = UnaryParams()
    p.clamp.min, p.clamp.max = -0.5, 1.5
    if op == "elu":
        p.elu_alpha = 0.7
    if op == "leaky_relu":
        p.leaky_relu_slope = 0.1
    got = _run_graph(lambda sg, i, o: LIB.api.xnn_define_unary(sg, UNARY[op], ctypes.byref(p),
                                                               i[0], o, 0), [x], x.shape)
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=2e-3, atol=2e-3, err_msg=op)


BINARY_CASES = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum,
                "prelu": lambda a, b: np.where(a > 0, a, a * b)}


@parts.skip_unless(LIB is not None and LIB.api.xnn_define_binary is not None, "xnnpack",
                   "the library has no xnn_define_binary")
@pytest.mark.parametrize("op", sorted(BINARY_CASES))
def test_binary_operator_numbers_match_the_library(op):
    a, b = _X, _POS[:1]  # broadcast the second operand over rows
    params = None if op in ("maximum", "minimum", "prelu") else ctypes.byref(
        BinaryParams(-math.inf, math.inf))
    got = _run_graph(lambda sg, i, o: LIB.api.xnn_define_binary(sg, BINARY[op], params, i[0],
                                                                i[1], o, 0), [a, b], a.shape)
    np.testing.assert_allclose(got, BINARY_CASES[op](a, b), rtol=1e-6, atol=1e-6, err_msg=op)


# ---- parity with executorch.runtime ---------------------------------------------------
_SLOW = pytest.mark.slow  # a big export the first time (then cached)


@pytest.mark.parametrize("name", ["mlp", "cnn_bn", "cnn_fp16", "zoo"] + [
    pytest.param(n, marks=_SLOW) for n in ("mobilenet_v2", "resnet18", "vit_tiny",
                                           "audio_encoder")])
def test_float_models_match_executorch_runtime(name):
    fx = get_fixture(name)
    program = pyruntime.Runtime.get().load_program(fx.pte_path)
    assert set(program.metadata("forward").backends) == {"XnnpackBackend"}
    method = program.load_method("forward")
    assert kinds(method).get("DelegateCall", 0) >= 1
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        got = method.execute(inputs)
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, f"{name} call {step} output {i}")


@pytest.mark.parametrize("tier", ["reference", "fast"])
@pytest.mark.parametrize("name", ["deeplabv3", "yolo", "whisper"])
def test_seed_families_match_executorch_runtime(name, tier):
    """DeepLabV3, YOLO and Whisper (STFT front end, KV-cache decode steps) lowered to
    XNNPACK with portable kernels around the delegates, on both tiers."""
    fx = get_fixture(name)
    method = load(fx, tier)
    assert kinds(method).get("DelegateCall", 0) >= 1
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        got = method.execute(inputs)
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, f"{name} [{tier}] call {step} output {i}")


@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_dynamic_batch_reshapes_one_runtime(tier):
    fx = get_fixture("mlp_dynamic")
    method = load(fx, tier)
    batches = [c[0].shape[0] for c in fx.calls]
    assert len(set(batches)) == len(batches) > 2  # grows and shrinks: 1, 5, 16, 3
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        got = method.execute(inputs)
        assert got[0].shape == (batches[step], 8)
        assert_close(got[0], expected[0], f"batch {batches[step]}")
    with pytest.raises(ExecuTorchError) as e:  # above the exported bound of 16
        method.execute([np.zeros((17, 16), np.float32)])
    assert e.value.code == ErrorCode.InvalidArgument


@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_partially_delegated_program(tier):
    """Two XNNPACK delegates around a portable cumsum (an op XNNPACK does not take)."""
    fx = get_fixture("partial")
    method = load(fx, tier)
    k = kinds(method)
    assert k.get("DelegateCall") == 2 and k.get("aten::cumsum.out") == 1, k
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        assert_close(method.execute(inputs)[0], expected[0], f"partial call {step}")


@pytest.mark.parametrize("name", ["quant_cnn", pytest.param("quant_mobilenet_v2", marks=_SLOW)])
def test_int8_models_within_one_quantization_step(name):
    fx = get_fixture(name)
    step = fx.meta["step"]
    assert step and step > 0
    method = load(fx)
    k = kinds(method)
    assert k.get("DelegateCall", 0) >= 1
    assert not any("quantize" in op for op in k), f"quantized ops left outside XNNPACK: {k}"
    for c, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        assert_close(method.execute(inputs)[0], expected[0], f"{name} call {c}",
                     tol=step * 1.001)


@pytest.mark.parametrize("name, weights", [("qd8_qc8w", (6, 1)), ("qd8_qb4w", (10, 4))])
def test_dynamically_quantized_linear(name, weights):
    """qd8 activations (quantized per token at run time) with per-channel int8 or
    blockwise 4-bit weights: the same library computes the same integers."""
    fx = get_fixture(name)
    method = load(fx)
    from pyruntime.delegates.xnnpack.blob import parse_blob

    bd = method.plan.delegates[0]
    graph = parse_blob(method.program._pte.delegate_blob(bd.processed, "test")).graph
    quant = {(v.xvalue_union[1].tensor_value.datatype, v.xvalue_union[1].quant_params[0])
             for v in graph.xvalues if v.xvalue_union[0] == 2}
    assert quant == {(9, 3), weights}, quant  # qdint8 per token + the weights' kind
    for c, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        assert_close(method.execute(inputs)[0], expected[0], f"{name} call {c}")


def test_weights_in_an_external_ptd():
    """XNNPACK weights tagged out to a .ptd: the blob names them by key (named data)."""
    fx = get_fixture("mlp_ptd")
    assert fx.ptd_path is not None
    program = pyruntime.Runtime.get().load_program(fx.pte_path, data_path=fx.ptd_path)
    method = program.load_method("forward")
    assert_close(method.execute(fx.calls[0])[0], fx.expected[0][0], "mlp with .ptd weights")
    with pytest.raises(ExecuTorchError) as e:  # without the .ptd: the missing key, named
        pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward")
    assert e.value.code == ErrorCode.NotFound
    assert "XnnpackBackend" in str(e.value) and "named data" in str(e.value)


def test_outputs_are_written_into_planned_memory_without_staging():
    """Zero-copy: the external values point at the method's tensors (inputs have slack)."""
    fx = get_fixture("mobilenet_v2")
    method = load(fx)
    method.execute(fx.calls[0])
    handle, = handles(method)
    (ext_in,), (ext_out,) = handle.inputs, handle.outputs
    assert ext_in.staging is None
    args = method.plan.chains[0].instructions[0].instr_args[1].args
    t_in, t_out = method.values[args[ext_in.ext_id]], method.values[args[ext_out.ext_id]]
    assert ext_in.ptr == t_in.data_ptr() and ext_out.ptr == t_out.data_ptr()


# ---- execute() on hand-made tensors ---------------------------------------------------
def _mlp_handle(**options):
    fx = get_fixture("mlp_dynamic")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    plan = prog._plan("forward")
    bd = plan.delegates[0]
    backend = backend_registry.get("XnnpackBackend")
    blob = prog._pte.delegate_blob(bd.processed, "test")
    return fx, backend, backend.init(blob, [], prog._named_data_map(None), options or None)


def test_input_without_slack_is_staged_and_exact():
    fx, backend, h = _mlp_handle()
    try:
        x = fx.calls[1][0]  # batch 5
        t_in = ETensor.from_array(x.copy(), dynamism=Dynamism.DYNAMIC_BOUND)  # no bytes after it
        t_out = ETensor.empty(6, (16, 8), dynamism=Dynamism.DYNAMIC_BOUND)
        backend.execute(h, [t_in, t_out])
        assert h.inputs[0].staging is not None  # XNNPACK may read 16 bytes past the input
        assert t_out.shape == (5, 8)
        assert_close(t_out.numpy().copy(), fx.expected[1][0], "staged input")
        with pytest.raises(ExecuTorchError, match="XnnpackBackend: input 0 is INT.*expects fp32"):
            backend.execute(h, [ETensor.from_array(np.zeros((5, 16), np.int32)), t_out])
        with pytest.raises(ExecuTorchError, match="must be a tensor"):
            backend.execute(h, [3, t_out])
        with pytest.raises(ExecuTorchError, match="rank"):  # a rank-3 output for a rank-2 tensor
            backend.execute(h, [ETensor.from_array(np.zeros((1, 5, 16), np.float32)), t_out])
        x = fx.calls[2][0]  # batch 16: a good call after the failures re-plans and runs
        backend.execute(h, [ETensor.from_array(x.copy()), t_out])
        assert_close(t_out.numpy().copy(), fx.expected[2][0], "after errors")
    finally:
        backend.destroy(h)
    with pytest.raises(ExecuTorchError) as e:
        backend.execute(h, [t_in, t_out])
    assert e.value.code == ErrorCode.DelegateInvalidHandle


def test_thread_count_option():
    backend = backend_registry.get("XnnpackBackend")
    old = backend.get_option("threads")
    try:
        backend.set_option("threads", 1)
        fx = get_fixture("cnn_bn")
        method = load(fx)
        assert handles(method)[0].threads == 1
        assert_close(method.execute(fx.calls[0])[0], fx.expected[0][0], "1 thread")
        with pytest.raises(ExecuTorchError):
            backend.set_option("threads", 0)
    finally:
        backend.set_option("threads", old)
    fx, backend, h = _mlp_handle(threads=3)  # a per-load option beats the backend's default
    assert h.threads == 3
    if h.lib.api.pthreadpool_get_threads_count is not None:
        assert h.lib.api.pthreadpool_get_threads_count(h.lib.threadpool(3)) == 3
    backend.destroy(h)


# ---- bad blobs and a missing library ---------------------------------------------------
def _blob_location(pte: bytes):
    prog = pyruntime.Runtime.get().load_program(pte)
    bd = prog._plan("forward").delegates[0]
    assert bd.processed.location == 1  # stored in a segment
    off, size = prog.segments[bd.processed.index]
    assert pte[off + 4:off + 8] == b"XH00"
    return off, size


def _patched(pte: bytes, pos: int, fmt: str, value) -> bytes:
    b = bytearray(pte)
    struct.pack_into(fmt, b, pos, value)
    return bytes(b)


def test_corrupted_blob_is_an_error_naming_the_backend():
    pte = get_fixture("cnn_bn").pte_path.read_bytes()
    off, size = _blob_location(pte)
    fb_off, fb_size = struct.unpack_from("<II", pte, off + 10)
    cases = {
        "flatbuffer size past the blob": (_patched(pte, off + 14, "<I", size * 4), None),
        "unknown identifier": (_patched(pte, off + fb_off + 4, "<4s", b"XN99"),
                               ErrorCode.DelegateInvalidCompatibility),
        "root offset past the end": (_patched(pte, off + fb_off, "<I", fb_size + 100), None),
        "truncated header": (_patched(pte, off + 8, "<H", 4), None),
    }
    for what, (bad, code) in cases.items():
        with pytest.raises(ExecuTorchError) as e:
            load(bad)
        assert "XnnpackBackend" in str(e.value), what
        if code is not None:
            assert e.value.code == code, what


def _first_conv_field(pte: bytes, off: int, field_id: int) -> int:
    """File position of field ``field_id`` of the first Conv2d node's table."""
    from pyruntime.cython_ext.flatbuf import Reader

    fb_off, fb_size = struct.unpack_from("<II", pte, off + 10)
    base = off + fb_off
    r = Reader(np.frombuffer(pte[base:base + fb_size], np.uint8))
    root = r.root()
    start, count = r.vector(r.uoffset(root.field_pos(1), "xnodes"), 4, "xnodes")
    for i in range(count):
        node = r.table(r.uoffset(start + 4 * i, "node"), "node")
        if r.scalar("u8", node.field_pos(0), "type") == 7:  # XNNConv2d
            conv = r.table(r.uoffset(node.field_pos(1), "conv"), "conv")
            assert conv.field_pos(field_id), "field absent (default value)"
            return base + conv.field_pos(field_id)
    raise AssertionError("no Conv2d node")


def test_node_parameters_that_disagree_with_the_weights_are_refused():
    """The library reads weights by the node's parameters: a conv whose channel count
    disagrees with its filter would read past the filter (this crashed before the check)."""
    fx = get_fixture("cnn_bn")
    pte = fx.pte_path.read_bytes()
    off, _ = _blob_location(pte)
    pos = _first_conv_field(pte, off, 10)  # group_input_channels
    assert struct.unpack_from("<I", pte, pos)[0] == 3  # RGB input
    with pytest.raises(ExecuTorchError, match="XnnpackBackend.*filter dims") as e:
        load(_patched(pte, pos, "<I", 17155))
    assert e.value.code == ErrorCode.InvalidProgram
    pos = _first_conv_field(pte, off, 1)  # padding_right: a huge output would be allocated
    with pytest.raises(ExecuTorchError, match="XnnpackBackend.*output dims"):
        load(_patched(pte, pos, "<I", 1 << 24))


def test_random_corruptions_never_crash():
    """Byte flips in the XNNGraph of four programs (conv/pool, int8, ~40 node types, qd8 +
    4-bit), in a child process (a crash would be a signal): every load either runs or
    raises ExecuTorchError."""
    code = f"""
import json, struct, sys
import numpy as np
sys.path.insert(0, {str(_REPO)!r})
import pyruntime
from pyruntime.cython_ext.errors import ExecuTorchError
from tests.delegates.xnnpack_fixtures import get_fixture
seen = {{}}
for name, n in (("cnn_bn", 300), ("quant_cnn", 300), ("zoo", 300), ("qd8_qb4w", 100)):
    fx = get_fixture(name)
    pte = fx.pte_path.read_bytes()
    prog = pyruntime.Runtime.get().load_program(pte)
    segs = [prog.segments[bd.processed.index] for bd in prog._plan("forward").delegates]
    off, size = max(segs, key=lambda s: s[1])  # the biggest XNNPACK blob
    fb_end = sum(struct.unpack_from("<II", pte, off + 10))
    for seed in range(n):
        rng = np.random.default_rng(seed)
        b = bytearray(pte)
        for _ in range(int(rng.integers(1, 4))):
            b[off + int(rng.integers(0, fb_end))] = int(rng.integers(0, 256))
        try:
            pyruntime.Runtime.get().load_program(bytes(b)).load_method("forward").execute(
                fx.calls[0])
            r = "ran"
        except ExecuTorchError as e:
            r = e.code.name
        seen[r] = seen.get(r, 0) + 1
print(json.dumps(seen))
"""
    env = {**os.environ, "PYRUNTIME_XNNPACK_MAX_BYTES": str(256 << 20)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, f"child died (rc {p.returncode}): {p.stderr[-2000:]}"
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert sum(seen.values()) == 1000 and seen.get("InvalidProgram", 0) > 300, seen


@pytest.fixture
def no_library(monkeypatch):
    monkeypatch.setattr(library, "find_library", lambda path=None: None)
    library.clear_cache()
    yield
    library.clear_cache()


def test_missing_library_is_a_clear_not_found_at_load(no_library):
    fx = get_fixture("mlp")
    from pyruntime.delegates.xnnpack import xnnpack_backend as backend

    assert not backend.is_available()
    assert "XnnpackBackend" not in backend_registry.available()
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    with pytest.raises(ExecuTorchError) as e:
        prog.load_method("forward")
    msg = str(e.value)
    assert e.value.code == ErrorCode.NotFound
    assert "XnnpackBackend" in msg and "pip install --no-deps executorch==1.5.1" in msg


def test_a_wrong_explicit_library_path_is_reported(monkeypatch, tmp_path):
    bogus = tmp_path / "libXNNPACK.so"
    bogus.write_bytes(b"not a shared library")
    monkeypatch.setenv(library.ENV, str(bogus))
    try:
        assert library.get_library() is None
        with pytest.raises(ExecuTorchError) as e:
            load(get_fixture("mlp"))
        assert e.value.code == ErrorCode.NotFound and str(bogus) in str(e.value)
        monkeypatch.setenv(library.ENV, LIB.path)  # the explicit path is honoured
        assert library.get_library().source == library.ENV
    finally:
        library.clear_cache()


_DEBIAN = sorted(Path("/usr/lib").glob("*/libXNNPACK.so.0"))


@parts.skip_unless(bool(_DEBIAN), "libxnnpack0", "no /usr/lib/*/libXNNPACK.so.0")
def test_debian_2022_library_runs_fp32_linear_programs(monkeypatch):
    """The old API (static shapes, setup_runtime, per-op define functions)."""
    monkeypatch.setenv(library.ENV, str(_DEBIAN[0]))
    library.clear_cache()
    try:
        lib = library.get_library()
        assert lib is not None and lib.level == "static", library.attempts
        assert "StaticTranspose" in lib.missing_nodes() and lib.supports("FullyConnected")
        for name in ("mlp", "partial"):
            fx = get_fixture(name)
            method = load(fx)
            for c, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
                assert_close(method.execute(inputs)[0], expected[0], f"{name} call {c} (Debian)")
        with pytest.raises(ExecuTorchError, match="StaticTranspose.*pip install") as e:
            load(get_fixture("cnn_bn"))  # NCHW<->NHWC transposes need a newer XNNPACK
        assert e.value.code == ErrorCode.NotSupported
        fx = get_fixture("mlp_dynamic")
        with pytest.raises(ExecuTorchError, match="no reshape API"):
            load(fx).execute(fx.calls[0])  # batch 1, built for 16
    finally:
        library.clear_cache()


def test_method_threads_setting_reaches_the_delegate():
    fx = get_fixture("cnn_bn")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    method = prog.load_method("forward", threads=1)
    assert handles(method)[0].threads == 1
    assert_close(method.execute(fx.calls[0])[0], fx.expected[0][0], "threads=1")
