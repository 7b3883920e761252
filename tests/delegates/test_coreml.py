"""The CoreML bridge: programs lowered by ExecuTorch's own CoreMLPartitioner run in pyruntime
on our MIL interpreter, with the outputs torch gives for the same model and inputs.

Tolerances (max abs error over every output of every call):
* fp32 programs (``compute_precision=FLOAT32``): 1e-4 x max(1, max |ref|);
* fp16 programs (the default): ``FP16_FACTOR`` (2) x the error of the same model run in
  fp16 on the CPU by torch (``.half()``, fp16 inputs) against its fp32 run, plus 1e-4 x
  max(1, max |ref|). The interpreter rounds every op's result to fp16 as a device does and
  torch's CPU fp16 rounds at op boundaries too, so both errors have the same size: ours /
  torch's was 0.66 to 1.11 over the fixtures (``test_fp16_tolerances_are_derived`` prints
  them), and it must stay above 0.25, or the program was not computed in fp16 at all.
* int8 weight-compressed programs: the same, against the torch model with the same weight
  quantization applied (coreml_fixtures.fake_quantize_int8).

Also: the payload and blob readers against ExecuTorch's and coremltools' own, the KV cache
kept as Core ML state across decode calls, weight sharing across methods (CMJR), malformed
payloads, a missing coremltools, and that the runtime imports neither torch nor coremltools.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import Dynamism, ETensor
from pyruntime.delegates import backend_registry
from pyruntime.delegates.coreml.blobs import BlobFile
from pyruntime.delegates.coreml.payload import mlpackage_model_path, read_payload
from tests import parts
from tests.delegates.coreml_fixtures import get_fixture

parts.importorskip("coremltools", "coreml")
_REPO = Path(__file__).resolve().parents[2]
FP16_FACTOR = 2.0
MIN_FP16_RATIO = 0.25
FP32 = ["mlp_fp32"]
FP16 = ["mlp", "cnn_bn", "mobilenet_v2", "resnet18", "vit_tiny", "audio_encoder", "llama",
        "llama_kv", "mlp_int8", "llama_kv_int8"]


def load(src, method="forward", tier="reference"):
    return pyruntime.Runtime.get().load_program(src).load_method(method, tier=tier)


def run_calls(fx, method=None):
    m = method or load(fx.pte_path)
    return [[np.asarray(o, np.float32) for o in m.execute(c)] for c in fx.calls]


def max_err(got, want) -> float:
    return max(float(np.max(np.abs(g.astype(np.float64) - w))) for gs, ws in zip(got, want)
               for g, w in zip(gs, ws))


def ref_scale(fx) -> float:
    return max(1.0, max(float(np.max(np.abs(w))) for ws in fx.ref32 for w in ws))


def fp16_tolerance(fx) -> float:
    return FP16_FACTOR * max_err(fx.ref16, fx.ref32) + 1e-4 * ref_scale(fx)


def payload_of(pte: bytes, index: int = 0) -> tuple:
    """(file offset, size) of delegate ``index``'s payload inside the .pte."""
    prog = pyruntime.Runtime.get().load_program(pte)
    bd = prog._plan("forward").delegates[index]
    return prog.segments[bd.processed.index]


def flatten(files: dict) -> bytes:
    """ExecuTorch's flattened directory (files, then the byte-reversed JSON index) of
    ``files`` ({"a/b.txt": bytes}), written by our own hand for tests."""
    data, nodes = bytearray(), []

    def add_dir(name, tree):
        children = {}
        for k in sorted(tree):
            v = tree[k]
            if isinstance(v, dict):
                children[k] = add_dir(k, v)
            else:
                nodes.append({"children": {}, "dataRegion": {"offset": len(data),
                                                             "size": len(v)},
                              "kind": 0, "name": k})
                data.extend(v)
                children[k] = len(nodes) - 1
        nodes.append({"children": children, "dataRegion": {"offset": 0, "size": 0}, "kind": 1,
                      "name": name})
        return len(nodes) - 1

    tree: dict = {}
    for path, b in files.items():
        parts = path.split("/")
        d = tree
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = bytes(b)
    add_dir("lowered_module", tree)
    return bytes(data) + json.dumps({"nodes": nodes}, separators=(",", ":")).encode()[::-1]


def fixture_files(name) -> dict:
    pte = get_fixture(name).pte_path.read_bytes()
    off, size = payload_of(pte)
    return dict(read_payload(pte[off:off + size]).directory.files)


def init_direct(payload: bytes, named_data=None):
    return backend_registry.get("CoreMLBackend").init(payload, [], named_data)


# ---- parity with torch ---------------------------------------------------------------------
@pytest.mark.parametrize("name", FP32)
def test_fp32_programs_match_torch(name):
    fx = get_fixture(name)
    got = run_calls(fx)
    tol = 1e-4 * ref_scale(fx)
    assert max_err(got, fx.ref32) <= tol, f"{name}: {max_err(got, fx.ref32):.3g} > {tol:.3g}"


@pytest.mark.parametrize("name", FP16)
def test_fp16_programs_match_torch_within_fp16_error(name):
    fx = get_fixture(name)
    got = run_calls(fx)
    for g, w in zip(got, fx.ref32):
        assert [o.shape for o in g] == [o.shape for o in w]
    err, tol = max_err(got, fx.ref32), fp16_tolerance(fx)
    assert err <= tol, f"{name}: max abs error {err:.3g} > {tol:.3g} " \
                       f"(torch fp16 error {max_err(fx.ref16, fx.ref32):.3g})"


def test_fp16_semantics_round_every_op():
    """The fp16 program's outputs are fp16 values (the final cast widens them exactly), and
    they differ from the fp32 program's on the same weights: rounding happened inside."""
    a, b = get_fixture("mlp"), get_fixture("mlp_fp32")
    x = a.calls[0][0]
    y16 = load(a.pte_path).execute([x])[0]
    y32 = load(b.pte_path).execute([x])[0]
    assert np.array_equal(y16, y16.astype(np.float16).astype(np.float32))
    assert not np.array_equal(y16, y32)
    assert np.max(np.abs(y16 - y32)) < 1e-2


def test_fp16_tolerances_are_derived():
    """Prints our error next to torch's fp16 error per fixture (pytest -s to see them)."""
    for name in FP16:
        fx = get_fixture(name)
        ours, theirs = max_err(run_calls(fx), fx.ref32), max_err(fx.ref16, fx.ref32)
        print(f"{name:14s} ours {ours:9.3g}  torch fp16 {theirs:9.3g}  ratio "
              f"{ours / max(theirs, 1e-12):5.2f}  tol {fp16_tolerance(fx):9.3g}")
        assert ours <= fp16_tolerance(fx)
        assert ours >= MIN_FP16_RATIO * theirs, f"{name}: no fp16 rounding visible"


@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_fast_tier_runs_the_delegate_too(tier):
    fx = get_fixture("cnn_bn")
    got = run_calls(fx, load(fx.pte_path, tier=tier))
    assert max_err(got, fx.ref32) <= fp16_tolerance(fx)


# ---- state (iOS18 KV cache) ------------------------------------------------------------------
def test_kv_cache_state_persists_across_calls_and_resets_on_load():
    fx = get_fixture("llama_kv")
    m = load(fx.pte_path)
    handle = m._delegate_handles[0][1]
    assert handle.states and all(v.dtype == np.float16 for v in handle.states.values())
    assert "read_state" in handle.ops and "write_state" in handle.ops
    outs = run_calls(fx, m)
    assert any(np.any(v) for v in handle.states.values())  # the cache was written
    # The same last call on a fresh method (empty cache) gives another answer.
    fresh = load(fx.pte_path).execute(fx.calls[-1])[0]
    assert not np.allclose(fresh, outs[-1][0], atol=1e-3)
    handle.reset_states()
    assert not any(np.any(v) for v in handle.states.values())
    again = run_calls(fx, m)
    assert max_err(again, outs) == 0.0


def test_ios17_and_later_outputs_stay_fp16_and_are_converted():
    fx = get_fixture("mlp_int8")  # iOS17 target: the program's output is fp16
    m = load(fx.pte_path)
    fn = m._delegate_handles[0][1].function
    assert fn.opset == "CoreML7"
    assert [v for op in fn.block.ops for v in op.outputs if v.name in fn.block.outputs][0].dtype \
        == "fp16"
    out = m.execute(fx.calls[0])[0]
    assert out.dtype == np.float32  # the ExecuTorch output's dtype


# ---- int8 weight compression -----------------------------------------------------------------
@pytest.mark.parametrize("name,op", [("mlp_int8", "constexpr_affine_dequantize"),
                                     ("llama_kv_int8", "constexpr_blockwise_shift_scale")])
def test_int8_weights_dequantize_within_half_a_step(name, op):
    """Each decompressed weight is within half a quantization step (max|w| / 127 per output
    channel) of the float weight, give or take the fp16 rounding of scale and result."""
    fx = get_fixture(name)
    h = load(fx.pte_path)._delegate_handles[0][1]
    assert op in h.ops
    from tests.delegates.coreml_fixtures import SPECS

    # the converter names a weight after its parameter: p_<name with _>_to_fp16_quantized
    weights = {"p_" + n.replace(".", "_"): p.detach().numpy()
               for n, p in SPECS[name].make().named_parameters() if n.endswith("weight")}
    consts = h.compiled.consts
    checked = 0
    for o in (o for o in h.function.block.ops if o.type == op):
        key = o.outputs[0].name.split("_to_fp16")[0]
        if key not in weights:
            continue
        w, ref = consts[o.outputs[0].name], weights[key]
        step = np.abs(ref).max(axis=1, keepdims=True) / 127
        # half a step, plus the fp16 rounding of the stored scale (times |q| <= 127) and of
        # the dequantized value (|w| <= 127 steps): 2^-11 relative each
        bound = step * (0.5 + 2 * 127 * 2.0 ** -11) + 1e-7
        assert np.all(np.abs(w.astype(np.float64) - ref) <= bound), o.name
        checked += 1
    assert checked >= 1


# ---- weight sharing across methods (CMJR) -----------------------------------------------------
def test_multifunction_program_shares_one_model_through_named_data():
    fx = get_fixture("mlp_multi")
    pte = fx.pte_path.read_bytes()
    prog = pyruntime.Runtime.get().load_program(pte)
    assert set(prog.method_names) == {"forward", "single"}
    off, size = payload_of(pte)
    assert pte[off:off + 4] == b"CMJR"
    x = fx.calls[0][0]
    y = load(pte).execute([x])[0]
    y1 = load(pte, "single").execute([x[:1]])[0]
    assert max_err([[y]], fx.ref32) <= fp16_tolerance(fx)
    assert np.allclose(y1, y[:1], atol=2e-3)
    for m in ("forward", "single"):
        assert load(pte, m)._delegate_handles[0][1].function.name == m


# ---- the readers against ExecuTorch's and coremltools' own ------------------------------------
def test_directory_reader_matches_executorch_unflatten(tmp_path):
    from executorch.backends.apple.coreml import executorchcoreml

    pte = get_fixture("cnn_bn").pte_path.read_bytes()
    off, size = payload_of(pte)
    payload = read_payload(pte[off:off + size])
    assert payload.input_names == ["x"] and len(payload.output_names) == 1
    assert not payload.compiled and payload.function_name is None
    executorchcoreml.unflatten_directory_contents(pte[off:off + size], str(tmp_path))
    theirs = {str(p.relative_to(tmp_path / "lowered_module")): p.read_bytes()
              for p in tmp_path.rglob("*") if p.is_file()}
    ours = {k: bytes(v) for k, v in payload.directory.files.items()}
    assert ours == theirs
    assert mlpackage_model_path(payload.directory) == \
        "model.mlpackage/Data/com.apple.CoreML/model.mlmodel"
    # our writer round-trips through our reader, names with quotes, braces and backslashes too
    odd = {**ours, 'model.mlpackage/a"b}{\\c': b"x"}
    assert {k: bytes(v) for k, v in read_payload(flatten(odd)).directory.files.items()} == odd


def test_blob_reader_matches_coremltools(tmp_path):
    from coremltools.libmilstoragepython import _BlobStorageReader, _BlobStorageWriter

    path = str(tmp_path / "w.bin")
    rng = np.random.default_rng(0)
    cases = {"fp16": rng.standard_normal(37).astype(np.float16),
             "fp32": rng.standard_normal(5).astype(np.float32),
             "int8": rng.integers(-128, 128, 70).astype(np.int8),
             "uint8": rng.integers(0, 256, 9).astype(np.uint8),
             "int16": rng.integers(-999, 999, 6).astype(np.int16),
             "uint16": rng.integers(0, 999, 6).astype(np.uint16),
             "int32": rng.integers(-9999, 9999, 4).astype(np.int32),
             "uint32": rng.integers(0, 9999, 4).astype(np.uint32),
             "int4": rng.integers(-8, 8, 11).astype(np.int8),
             "uint1": rng.integers(0, 2, 13).astype(np.uint8),
             "uint2": rng.integers(0, 4, 13).astype(np.uint8),
             "uint3": rng.integers(0, 8, 13).astype(np.uint8),
             "uint4": rng.integers(0, 16, 13).astype(np.uint8),
             "uint6": rng.integers(0, 64, 13).astype(np.uint8)}
    writer = _BlobStorageWriter(path)
    method = {"fp32": "float"}
    # (the writer takes fp16 as its uint16 bit patterns, as coremltools' serializer passes it)
    offsets = {k: getattr(writer, f"write_{method.get(k, k)}_data")(
        np.ascontiguousarray(v.view(np.uint16) if k == "fp16" else v)) for k, v in cases.items()}
    del writer
    ours = BlobFile(np.fromfile(path, np.uint8), "w.bin")
    reader = _BlobStorageReader(path)
    for k, v in cases.items():
        got = ours.read(offsets[k], k, v.shape)
        assert np.array_equal(got, v), k
        if k in ("fp16", "fp32", "int8", "uint8", "int16", "uint16", "int32", "uint32"):
            theirs = np.asarray(getattr(reader, f"read_{method.get(k, k)}_data")(offsets[k]))
            if k == "fp16":
                theirs = theirs.astype(np.uint16).view(np.float16)
            assert np.array_equal(theirs, v), k
    with pytest.raises(ExecuTorchError, match="CoreMLBackend.*holds fp16"):
        ours.read(offsets["fp16"], "fp32", (37,))


# ---- malformed payloads ----------------------------------------------------------------------
def _model_bytes(files) -> bytes:
    return bytes(files["model.mlpackage/Data/com.apple.CoreML/model.mlmodel"])


def _with_model(files, mutate) -> dict:
    """``files`` with the Model protobuf changed by ``mutate(model)``."""
    from pyruntime.delegates.coreml.model import proto_modules

    Model_pb2, _ = proto_modules()
    m = Model_pb2.Model()
    m.ParseFromString(_model_bytes(files))
    mutate(m)
    out = dict(files)
    out["model.mlpackage/Data/com.apple.CoreML/model.mlmodel"] = m.SerializeToString()
    return out


def _rename_first(op_type, new):
    def mutate(m):
        blk = m.mlProgram.functions["main"].block_specializations[
            m.mlProgram.functions["main"].opset]
        next(o for o in blk.operations if o.type == op_type).type = new
    return mutate


def test_malformed_payloads_raise_errors_naming_the_backend():
    files = {k: bytes(v) for k, v in fixture_files("mlp").items()}
    good = flatten(files)
    meta = "metadata.json"
    cases = {
        "empty": b"",
        "truncated index": good[:-10],
        "index only": good[len(good) - 50:],
        "not reversed JSON": good[:-1] + b"x",
        "offset out of range": _bad_offset(good),
        "bad protobuf": flatten({**files, "model.mlpackage/Data/com.apple.CoreML/model.mlmodel":
                                 b"\xff\xff\xff\xff garbage"}),
        "no metadata": flatten({k: v for k, v in files.items() if k != meta}),
        "metadata not JSON": flatten({**files, meta: b"{inputNames"}),
        "unknown input name": flatten({**files, meta: json.dumps(
            {"inputNames": ["nope"], "outputNames": ["aten_linear_default_2"]}).encode()}),
        "weights truncated": flatten({**files, "model.mlpackage/Data/com.apple.CoreML/weights/"
                                      "weight.bin": files["model.mlpackage/Data/com.apple."
                                                          "CoreML/weights/weight.bin"][:200]}),
        "CMJR without named data": b"CMJR" + json.dumps({"version": 1, "key": "k"}).encode(),
        "CMJR not JSON": b"CMJR{",
    }
    for what, payload in cases.items():
        with pytest.raises(ExecuTorchError) as e:
            init_direct(payload)
        assert "CoreMLBackend" in str(e.value), what
        assert e.value.code in (ErrorCode.InvalidProgram, ErrorCode.NotFound), (what, e.value)


def _bad_offset(good: bytes) -> bytes:
    """The payload with the first file's dataRegion offset pushed past the data."""
    index, end = json.JSONDecoder().raw_decode(good[::-1].decode("latin1"))
    index["nodes"][0]["dataRegion"]["offset"] = len(good) * 2
    return good[:len(good) - end] + json.dumps(index).encode()[::-1]


def test_corrupted_payload_inside_the_pte_fails_at_load():
    pte = bytearray(get_fixture("mlp").pte_path.read_bytes())
    off, size = payload_of(bytes(pte))
    pte[off + size - 1] = ord("x")  # the index's opening brace
    with pytest.raises(ExecuTorchError, match="CoreMLBackend") as e:
        load(bytes(pte))
    assert "delegate 0" in str(e.value)


def test_unsupported_op_is_named_at_load():
    files = _with_model(fixture_files("mlp"), _rename_first("relu", "not_a_mil_op"))
    with pytest.raises(ExecuTorchError, match="MIL op 'not_a_mil_op'") as e:
        init_direct(flatten(files))
    assert e.value.code == ErrorCode.NotSupported and "CoreMLBackend" in str(e.value)


def test_compiled_model_payload_is_macos_only():
    files = {"metadata.json": json.dumps({"inputNames": ["x"], "outputNames": ["y"]}).encode(),
             "model.mlmodelc/model.mil": b"program(1.0)", "model.mlmodelc/coremldata.bin": b"\0"}
    with pytest.raises(ExecuTorchError, match="only Core ML on macOS") as e:
        init_direct(flatten(files))
    assert e.value.code == ErrorCode.NotSupported


def test_cmjr_reference_resolves_in_named_data_and_names_a_missing_key():
    from pyruntime.ptd import DataMap

    flat = flatten(fixture_files("mlp"))
    ref = b"CMJR" + json.dumps({"version": 1, "key": "coreml_x"}).encode()
    h = init_direct(ref, DataMap({"coreml_x": (np.frombuffer(flat, np.uint8), None)}))
    x = get_fixture("mlp").calls[0][0]
    out = ETensor.empty(6, (4, 10), dynamism=Dynamism.DYNAMIC_BOUND)
    backend_registry.get("CoreMLBackend").execute(h, [ETensor.from_array(x), out])
    assert out.numpy().shape == (4, 10)
    with pytest.raises(ExecuTorchError, match="CoreMLBackend.*'coreml_y'"):
        init_direct(b"CMJR" + json.dumps({"key": "coreml_y"}).encode(),
                    DataMap({"coreml_x": (np.frombuffer(flat, np.uint8), None)}))


def test_wrong_input_shape_is_an_error():
    fx = get_fixture("mlp")
    with pytest.raises(ExecuTorchError):
        load(fx.pte_path).execute([np.zeros((3, 32), np.float32)])


def test_random_payload_corruptions_never_crash():
    """Byte flips in the payload (index, protobuf, weights): each load runs or raises
    ExecuTorchError; never another exception."""
    files = {k: bytes(v) for k, v in fixture_files("mlp").items()}
    good = flatten(files)
    x = ETensor.from_array(get_fixture("mlp").calls[0][0])
    backend = backend_registry.get("CoreMLBackend")
    outcomes = {"ran": 0, "rejected": 0}
    for seed in range(150):
        rng = np.random.default_rng(seed)
        b = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        try:
            h = backend.init(bytes(b), [], None)
            backend.execute(h, [x, ETensor.empty(6, (4, 10), dynamism=Dynamism.DYNAMIC_BOUND)])
            outcomes["ran"] += 1
        except ExecuTorchError as e:
            assert "CoreMLBackend" in str(e)
            outcomes["rejected"] += 1
    assert outcomes["ran"] and outcomes["rejected"], outcomes


# ---- environment ------------------------------------------------------------------------------
def _child(code: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=_REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


def test_runtime_imports_neither_torch_nor_coremltools():
    fx = get_fixture("mlp")
    r = _child(f"""
import sys, numpy as np, pyruntime
m = pyruntime.Runtime.get().load_program({str(fx.pte_path)!r}).load_method("forward")
m.execute([np.zeros((4, 32), np.float32)])
print(sorted(k for k in ("torch", "coremltools", "executorch") if k in sys.modules))
""")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]", r.stdout


def test_missing_coremltools_is_a_clear_not_found_at_load():
    fx = get_fixture("mlp")
    r = _child(f"""
import sys
sys.modules["coremltools"] = None  # as if not installed
import pyruntime
try:
    pyruntime.Runtime.get().load_program({str(fx.pte_path)!r}).load_method("forward")
except pyruntime.ExecuTorchError as e:
    print(e.code.name, e)
""")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("NotFound") and "CoreMLBackend" in r.stdout and \
        "pyruntime[coreml]" in r.stdout, r.stdout


def test_engine_switch_and_compute_units():
    fx = get_fixture("mlp")
    r = _child(f"""
import pyruntime
m = pyruntime.Runtime.get().load_program({str(fx.pte_path)!r}).load_method("forward")
print(m._delegate_handles[0][1].engine)
""", env={"PYRUNTIME_COREML": "interpreter"})
    assert r.returncode == 0 and r.stdout.strip() == "interpreter", r.stderr[-2000:]
    r = _child(f"""
import pyruntime
try:
    pyruntime.Runtime.get().load_program({str(fx.pte_path)!r}).load_method("forward")
except pyruntime.ExecuTorchError as e:
    print(e)
""", env={"PYRUNTIME_COREML": "bogus"})
    assert "PYRUNTIME_COREML" in r.stdout, r.stdout + r.stderr[-2000:]
    with pytest.raises(ExecuTorchError, match="compute_units"):
        backend_registry.get("CoreMLBackend").init(flatten(fixture_files("mlp")),
                                                   [("compute_units", b"gpu_only")], None)
