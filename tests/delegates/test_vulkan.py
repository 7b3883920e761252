"""The Vulkan bridge: programs lowered with ExecuTorch's VulkanPartitioner run in pyruntime
on a Vulkan device (lavapipe here) with our own shaders.

ExecuTorch's Python runtime cannot run these programs, so the references are torch eager
on the same inputs and pyruntime's run of the portable program of the same model:
  * fp32: max abs error <= 1e-4 x max(1, max|ref|);
  * fp16 (force_fp16): <= FP16_FACTOR (2) x the error of the same model run in fp16 on
    the CPU (torch eager, .half()), both against the fp32 eager reference. Our fp16 shaders
    store every tensor in fp16 and accumulate dot products in fp32, as torch's CPU half
    kernels do, so the errors are of the same order: measured ratios 1.00 (MLP), 1.06
    (CNN with batch norm), 0.91 (ViT); the factor 2 covers rounding at other points
    (fused bias and clamp, GELU and softmax computed in fp32) on other inputs and devices;
  * int8 (PT2E, q8ta ops): <= 2 output quantization steps (integer accumulation here,
    fp32 accumulation in torch: a value on a rounding boundary may move by one step).
Also: the payload reader, both tiers around mixed programs, dynamic shapes, compile
specs, corrupted payloads, missing ops, devices and the shader cache.

Skipped (with the reason) only where no Vulkan device exists."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates import backend_registry
from pyruntime.delegates.vulkan import device as vkdevice
from pyruntime.delegates.vulkan.blob import parse_blob
from tests import parts
from tests.delegates import vulkan_fixtures as vf

AVAILABLE, WHY = vkdevice.availability()
pytestmark = parts.skip_unless(AVAILABLE, "vulkan", f"VulkanBackend: {WHY}")
_REPO = Path(__file__).resolve().parents[2]
FP16_FACTOR = 2.0


def load(path, tier="reference"):
    return pyruntime.Runtime.get().load_program(path).load_method("forward", tier=tier)


def err(got, want) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - want))) if want.size else 0.0


def fp32_tol(want) -> float:
    return 1e-4 * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)


def tolerance(fx, i, j) -> float:
    want = fx.expected[i][j]
    if fx.meta.get("step"):
        return 2 * fx.meta["step"] + 1e-6
    if fx.half:
        return FP16_FACTOR * err(fx.half[i][j], want) + 1e-6
    return fp32_tol(want)


def run_calls(method, fx) -> list:
    return [[np.asarray(o) for o in method.execute(call)] for call in fx.calls]


def check(outs, fx, what, ref=None):
    ref = fx.expected if ref is None else ref
    for i, (got, want) in enumerate(zip(outs, ref)):
        assert len(got) == len(want), f"{what} call {i}: {len(got)} outputs, {len(want)} expected"
        for j, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape, f"{what} call {i} out {j}: {g.shape} != {w.shape}"
            e, tol = err(g, w), tolerance(fx, i, j)
            assert e <= tol, f"{what} call {i} out {j}: max abs error {e:.3g} > {tol:.3g}"


def delegate_blobs(path):
    prog = pyruntime.Runtime.get().load_program(path)
    plan = prog._pte.program.execution_plan[0]
    return prog, [(bd, prog._pte.delegate_blob(bd.processed, "test"))
                  for bd in plan.delegates or []]


# ---- parity --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", vf.NAMES)
def test_parity_with_torch_eager(name):
    """Every model on both tiers (the tier runs the portable ops between delegates)."""
    fx = vf.get_fixture(name)
    for tier in ("reference", "fast"):
        check(run_calls(load(fx.pte_path, tier), fx), fx, f"{name} ({tier})")


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in vf.NAMES if n not in vf.HALF])
def test_parity_with_the_portable_program(name):
    """The same inputs through pyruntime's fast tier on the portable program of the model."""
    fx = vf.get_fixture(name)
    portable = run_calls(load(vf.portable_program(fx), "fast"), fx)
    vulkan = run_calls(load(fx.pte_path), fx)
    check(vulkan, fx, f"{name} vs portable", ref=[[o.astype(np.float64) for o in c]
                                                  for c in portable])


def test_fp16_tolerance_is_derived_from_the_cpu_half_run():
    for name in vf.HALF:
        fx = vf.get_fixture(name)
        for i, outs in enumerate(fx.half):
            for j, h in enumerate(outs):
                e = err(h, fx.expected[i][j])
                # the CPU half run differs from fp32 (so the bound is not vacuous) but
                # stays far from the output scale
                assert 0 < e < 0.1 * max(1.0, float(np.max(np.abs(fx.expected[i][j])))), name


def test_fp16_programs_store_half_tensors_and_stage_fp32():
    fx = vf.get_fixture("mlp_fp16")
    m = load(fx.pte_path)
    (_, h), = m._delegate_handles
    tensors = [v for v in h.graph.values if hasattr(v, "staging")]
    assert {t.dtype.name for t in tensors} == {"float16"}
    g = h.graph
    assert {g.values[i].staging.name for i in g.inputs + g.outputs} == {"float32"}
    assert m.execute(fx.calls[0])[0].dtype == np.float32


@pytest.mark.parametrize("name", vf.WEBGPU)
def test_webgpu_programs_carry_the_vulkan_payload_of_the_same_model(name):
    """WebGPUPartitioner wraps VulkanPartitioner: its programs name VulkanBackend, with
    payloads byte for byte those of the Vulkan-lowered model (run by this bridge, parity
    above)."""
    fx = vf.get_fixture(name)
    _, web = delegate_blobs(fx.pte_path)
    _, vk = delegate_blobs(vf.get_fixture(name.removeprefix("webgpu_")).pte_path)
    assert [bd.id for bd, _ in web] == ["VulkanBackend"] * len(vk)
    assert [bytes(b) for _, b in web] == [bytes(b) for _, b in vk]


# ---- the payload and its graph ----------------------------------------------------------
def test_payload_header_graph_and_describe():
    fx = vf.get_fixture("vit_tiny")
    _, blobs = delegate_blobs(fx.pte_path)
    assert len(blobs) > 2  # attention splits the model into several delegates
    backend = backend_registry.get("VulkanBackend")
    seen = set()
    for bd, blob in blobs:
        assert bd.id == "VulkanBackend"
        raw = bytes(np.asarray(blob).reshape(-1).view(np.uint8))
        assert raw[4:8] == b"VH00" and int.from_bytes(raw[8:10], "little") == 30
        vb = parse_blob(blob)
        names = backend.describe_payload(blob)
        assert names == [c.name for c in vb.graph.chain] and names
        seen.update(names)
        for c in vb.graph.chain:  # the output is the last argument
            assert c.args and all(0 <= a < len(vb.graph.values) for a in c.args)
    assert {"aten.linear.default", "aten._softmax.default", "aten.native_layer_norm.default",
            "aten.bmm.default", "aten.gelu.default"} <= seen


def test_mixed_program_runs_portable_kernels_between_delegates():
    fx = vf.get_fixture("llama_kv")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    meta = prog.metadata("forward")
    assert meta.instruction_kinds.get("DelegateCall", 0) > 2
    assert meta.instruction_kinds.get("KernelCall", 0) > 0  # index_put, copy_, ...
    assert set(meta.backends) == {"VulkanBackend"}


def test_inspect_shows_the_delegate_ops():
    fx = vf.get_fixture("cnn_bn")
    r = subprocess.run([sys.executable, "-m", "pyruntime", "inspect", str(fx.pte_path)],
                       capture_output=True, text=True, cwd=_REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    # batch 2: the partitioner keeps the convolutions portable; batch norm, relu and pooling
    # run in two delegates
    assert "[1] VulkanBackend:" in r.stdout
    assert "aten._native_batch_norm_legit_no_training.default" in r.stdout
    assert "aten.max_pool2d_with_indices.default" in r.stdout


# ---- execution --------------------------------------------------------------------------
def test_dynamic_batch_replans_and_reuses_the_recording():
    fx = vf.get_fixture("mlp_dynamic")
    m = load(fx.pte_path)
    (_, h), = m._delegate_handles
    outs = []
    records = []
    for call in fx.calls + fx.calls[:1]:
        outs.append([np.asarray(o) for o in m.execute(call)])
        records.append(h.key)
    check(outs[:len(fx.calls)], fx, "mlp_dynamic")
    check(outs[-1:], fx, "mlp_dynamic repeated", ref=fx.expected[:1])
    assert [k[0][0] for k in records] == [1, 5, 16, 3, 1]


def test_record_once_resubmit(monkeypatch):
    fx = vf.get_fixture("resnet18")
    m = load(fx.pte_path)
    (_, h), = m._delegate_handles
    calls = []
    monkeypatch.setattr(h.cmds, "record", lambda d: calls.append(d))
    for _ in range(3):
        m.execute(fx.calls[0])
    assert calls == []  # same shapes: the command buffer recorded at init is resubmitted


def test_compile_specs_force_fp16_and_overrides():
    """force_fp16 on an fp32 payload stores its tensors in fp16 (the numbers of the fp16
    export); storage and layout overrides change nothing in the numbers."""
    fx, fx16 = vf.get_fixture("mlp"), vf.get_fixture("mlp_fp16")
    prog, ((bd, blob),) = delegate_blobs(fx.pte_path)
    backend = backend_registry.get("VulkanBackend")
    x = fx.calls[0][0]

    def run(specs):
        h = backend.init(blob, specs, prog._named_data_map(None))
        try:
            out = ETensor.from_array(np.zeros_like(fx.expected[0][0]))
            backend.execute(h, [ETensor.from_array(x), out])
            return out.numpy().copy()
        finally:
            backend.destroy(h)
    plain = run([])
    assert err(plain, fx.expected[0][0]) <= fp32_tol(fx.expected[0][0])
    half = run([("force_fp16", b"\x01")])
    np.testing.assert_array_equal(half, load(fx16.pte_path).execute(fx16.calls[0])[0])
    for st in (0, 1, 2):
        for ml in (0, 1, 2):
            spec = [("storage_type_override", st.to_bytes(4, "little")),
                    ("memory_layout_override", ml.to_bytes(4, "little"))]
            np.testing.assert_array_equal(run(spec), plain)
    for bad in ([("storage_type_override", b"\x00")], [("memory_layout_override",
                                                         (7).to_bytes(4, "little"))]):
        with pytest.raises(ExecuTorchError, match="VulkanBackend: compile spec"):
            backend.init(blob, bad, prog._named_data_map(None))


# ---- errors -------------------------------------------------------------------------------
def _patched(fx, old: bytes, new: bytes) -> bytes:
    data = fx.pte_path.read_bytes()
    assert data.count(old) >= 1 and len(old) == len(new)
    return data.replace(old, new)


def test_an_op_we_lack_raises_at_load_naming_it():
    fx = vf.get_fixture("mlp")
    data = _patched(fx, b"aten.relu.default", b"aten.relu.defaulx")
    with pytest.raises(ExecuTorchError) as e:
        load(data)
    assert e.value.code == ErrorCode.NotSupported
    assert "VulkanBackend" in str(e.value) and "aten.relu.defaulx" in str(e.value)


def test_corrupted_payloads_raise_our_error():
    fx = vf.get_fixture("cnn_bn")
    data = fx.pte_path.read_bytes()
    at = data.find(b"VH00") - 4
    rng = np.random.default_rng(7)
    outcomes = {"rejected": 0, "ran": 0}
    for case in range(40):
        bad = bytearray(data)
        if case == 0:
            bad[at + 4:at + 8] = b"VX00"  # magic
        elif case == 1:
            bad[at + 10:at + 14] = (1 << 30).to_bytes(4, "little")  # flatbuffer offset
        else:
            for k in rng.integers(at, at + 1200, 4):
                bad[k] ^= 1 << int(rng.integers(0, 8))
        try:
            load(bytes(bad)).execute(fx.calls[0])
            outcomes["ran"] += 1
        except ExecuTorchError as e:
            assert "VulkanBackend" in str(e), str(e)
            outcomes["rejected"] += 1
    assert outcomes["rejected"] >= 2


def test_missing_device_and_bad_device_choice(monkeypatch):
    monkeypatch.setattr(vkdevice, "_probe", (False, "no Vulkan device (test)"))
    with pytest.raises(ExecuTorchError, match="VulkanBackend.*no Vulkan device") as e:
        backend_registry.get("VulkanBackend")
    assert e.value.code == ErrorCode.NotFound
    monkeypatch.undo()
    r = subprocess.run([sys.executable, "-c", "from pyruntime.delegates.vulkan.device import get_device; "
                        "get_device()"], capture_output=True, text=True, cwd=_REPO,
                       env={**os.environ, "PYRUNTIME_VULKAN_DEVICE": "99"}, timeout=120)
    assert r.returncode != 0 and "matches no device" in r.stderr


def test_missing_glslc_is_a_clear_error(tmp_path):
    code = ("from pyruntime.delegates.vulkan import shaders\n"
            "try:\n    shaders.spirv('unary', (('OP', 1),))\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    env = {**os.environ, "PYRUNTIME_CACHE": str(tmp_path), "PYRUNTIME_GLSLC": "/nonexistent"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_REPO,
                       env=env, timeout=120)
    assert "ExecuTorchError" in r.stdout and "glslc" in r.stdout, r.stdout + r.stderr


def test_shader_cache_is_keyed_by_source(tmp_path, monkeypatch):
    from pyruntime.delegates.memo import Memo
    from pyruntime.delegates.vulkan import shaders

    monkeypatch.setenv("PYRUNTIME_CACHE", str(tmp_path))
    monkeypatch.setattr(shaders, "_compiled", Memo())
    code = shaders.spirv("copy", (("FILL", 1), ("T_Y", "float")))
    assert code[:4] == b"\x03\x02\x23\x07"  # SPIR-V magic
    files = list((tmp_path / "vulkan").glob("copy-*.spv"))
    assert len(files) == 1
    monkeypatch.setattr(shaders, "_compiled", Memo())
    monkeypatch.setenv("PYRUNTIME_GLSLC", "/nonexistent")  # cached: glslc is not needed
    assert shaders.spirv("copy", (("FILL", 1), ("T_Y", "float"))) == code
