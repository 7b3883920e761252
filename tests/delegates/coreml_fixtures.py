"""CoreML-delegated program fixtures: exported with ExecuTorch's ``CoreMLPartitioner``,
with torch eager references (fp32, and the same model in fp16 on the CPU), cached on disk.

    from tests.delegates.coreml_fixtures import get_fixture
    fx = get_fixture("mlp")         # exported + referenced once, then read from the cache
    fx.pte_path, fx.calls, fx.ref32, fx.ref16, fx.meta

No runtime can run these programs on Linux (``executorch.runtime`` has no
CoreMLBackend, coremltools cannot predict), so the references are torch's:
``ref32`` the float32 model, ``ref16`` the model in float16 (``.half()``, fp16
inputs) on the CPU. Calls run in order on one model instance (the KV-cache
decoder's cache carries over). The int8 variants' references apply the same
weight quantization (symmetric per output channel, ``max|w| / 127``, to every
Linear weight with more than 2048 elements, as ``linear_quantize_weights``
does) to the torch model.

Cache: ``$PYRUNTIME_FIXTURES`` or ``<repo>/tests/.fixtures/``, files ``coreml_<name>.*``;
the ``.key`` file (versions + hashes) is written last, so a partial build is redone.
Run ``python -m tests.delegates.coreml_fixtures [names]`` to build ahead of the tests.
"""
from __future__ import annotations

import importlib.metadata
import io
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from tests import fixture_cache
from tests.fixture_cache import cache_dir, write_atomic as _write

FORMAT_VERSION = "1"


@dataclass(frozen=True)
class Fixture:
    name: str
    pte_path: Path
    calls: list  # input lists, run in order on one loaded method
    ref32: list  # torch fp32 outputs per call
    ref16: list  # torch fp16 (CPU) outputs per call, as float32
    meta: dict
    method: str = "forward"


@dataclass(frozen=True)
class Spec:
    version: str
    make: Callable  # -> torch module
    calls: Callable[[], list]
    specs: Callable[[], dict] = field(default=lambda: {})  # generate_compile_specs kwargs
    int8: bool = False  # fake-quantize the reference's large Linear weights like coremltools
    methods: tuple = ()  # extra methods (name, example args): a multifunction (CMJR) program


def _randn(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _tokens(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 128, (1, n)).astype(np.int64)


def _model(factory: str, *args):
    def make():
        from tests.programs import models

        return getattr(models, factory)(*args)
    return make


def _small_mobilenet_v2():
    """MobileNetV2 (models.MobileNetV2's blocks: 1x1 expand, depthwise 3x3, ReLU6, linear
    bottleneck, residual adds) with fewer repeats: its export takes a quarter of the time."""
    import torch
    from tests.programs import models

    class SmallMobileNetV2(models.MobileNetV2):
        SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 2, 2), (6, 96, 1, 1)]

    torch.manual_seed(2)
    return models.randomize_batchnorm(SmallMobileNetV2(num_classes=100),
                                      lambda: torch.randn(2, 3, 64, 64))


def _decode_calls():
    """Four decode steps of the KV-cache decoder: token t at position p."""
    toks = _tokens(310, 4)[0]
    return [[toks[p:p + 1].reshape(1, 1), np.array([p], np.int64)] for p in range(4)]


def _specs(**kw):
    def make():
        import coremltools as ct

        out = {}
        if kw.get("fp32"):
            out["compute_precision"] = ct.precision.FLOAT32
        if kw.get("target"):
            out["minimum_deployment_target"] = getattr(ct.target, kw["target"])
        if kw.get("int8"):
            out["op_linear_quantizer_config"] = {"mode": "linear_symmetric", "dtype": "int8",
                                                 "granularity": "per_channel"}
        return out
    return make


SPECS: dict = {
    "mlp": Spec("1", _model("make_mlp"), lambda: [[_randn(300, 4, 32)], [_randn(301, 4, 32)]]),
    "mlp_fp32": Spec("1", _model("make_mlp"), lambda: [[_randn(302, 4, 32)]],
                     specs=_specs(fp32=True)),
    "mlp_int8": Spec("3", _model("make_mlp"), lambda: [[_randn(303, 4, 32)]],
                     specs=_specs(target="iOS17", int8=True), int8=True),
    "mlp_multi": Spec("1", _model("make_mlp"), lambda: [[_randn(304, 4, 32)]],
                      specs=_specs(target="iOS18"), methods=(("single", (1, 32)),)),
    "cnn_bn": Spec("1", _model("make_cnn_bn"), lambda: [[_randn(305, 1, 3, 64, 64)]]),
    "mobilenet_v2": Spec("1", _small_mobilenet_v2,
                         lambda: [[_randn(306, 1, 3, 64, 64)]]),
    "resnet18": Spec("1", _model("make_resnet18", 64), lambda: [[_randn(307, 1, 3, 64, 64)]]),
    "vit_tiny": Spec("1", _model("make_vit_tiny"), lambda: [[_randn(308, 1, 3, 64, 64)]]),
    "audio_encoder": Spec("1", _model("make_audio_encoder"),
                          lambda: [[_randn(309, 1, 80, 200)]]),
    "llama": Spec("1", _model("make_llama"), lambda: [[_tokens(311, 8)]]),
    "llama_kv": Spec("1", _model("make_llama_kv"), _decode_calls, specs=_specs(target="iOS18")),
    "llama_kv_int8": Spec("3", _model("make_llama_kv"), _decode_calls,
                          specs=_specs(target="iOS18", int8=True), int8=True),
}
NAMES = tuple(SPECS)


# ---- cache --------------------------------------------------------------------------------
def _paths(name):
    return {ext: cache_dir() / f"coreml_{name}.{ext}" for ext in ("pte", "npz", "json", "key")}


def _key(name) -> dict:
    return {"fixture": f"coreml_{name}", "version": SPECS[name].version,
            "format": FORMAT_VERSION, "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch"),
            "coremltools": importlib.metadata.version("coremltools")}


def _valid(name) -> bool:
    p = _paths(name)
    return fixture_cache.is_valid(p["key"], _key(name), {e: p[e] for e in ("pte", "npz", "json")})


def _lock(name):
    return fixture_cache.lock(f"coreml_{name}")


# ---- export and references ----------------------------------------------------------------
def _torch_args(call, half=False):
    import torch

    out = []
    for a in call:
        t = torch.from_numpy(np.array(a))
        out.append(t.half() if half and t.is_floating_point() else t)
    return tuple(out)


def export(name: str) -> bytes:
    """Export fixture ``name`` with CoreMLPartitioner; returns the .pte bytes."""
    import torch
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower

    spec = SPECS[name]
    module = spec.make()
    compile_specs = CoreMLBackend.generate_compile_specs(**spec.specs())
    with torch.no_grad():
        progs = {"forward": torch.export.export(module, _torch_args(spec.calls()[0]))}
        for mname, shape in spec.methods:
            progs[mname] = torch.export.export(module, (torch.zeros(shape),))
    lowered = to_edge_transform_and_lower(
        progs if spec.methods else progs["forward"],
        partitioner=[CoreMLPartitioner(compile_specs=compile_specs)])
    return lowered.to_executorch().buffer


def fake_quantize_int8(module):
    """Weights as ``linear_quantize_weights`` (linear_symmetric, int8, per channel) leaves
    them: every Linear weight over 2048 elements rounded to ``scale * round(w / scale)``,
    ``scale = max|w| / 127`` per output channel."""
    import torch

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.Linear) and m.weight.numel() > 2048:
                # as the converter does: the fp16 weight, an fp16 scale, w / scale divided
                # in fp16, rounded half to even
                w = m.weight.detach().numpy().astype(np.float16)
                scale = (np.abs(w.astype(np.float32)).max(axis=1, keepdims=True) /
                         np.float32(127)).astype(np.float16)
                scale[scale == 0] = 1
                q = np.clip(np.round(w / scale), -127, 127)
                m.weight.copy_(torch.from_numpy((q.astype(np.float32) * scale.astype(
                    np.float32)).astype(np.float16).astype(np.float32)))
    return module


def reference(name: str, half: bool) -> list:
    """torch eager outputs of every call, in order on one model instance."""
    import torch

    spec = SPECS[name]
    module = spec.make()
    if spec.int8:
        module = fake_quantize_int8(module)
    if half:
        module = module.half()
    outs = []
    with torch.no_grad():
        for call in spec.calls():
            res = module(*_torch_args(call, half))
            res = res if isinstance(res, (tuple, list)) else (res,)
            outs.append([r.float().numpy().copy() for r in res])
    return outs


def _build(name: str) -> None:
    p = _paths(name)
    p["key"].unlink(missing_ok=True)
    pte = export(name)
    calls = SPECS[name].calls()
    ref32, ref16 = reference(name, False), reference(name, True)
    arrays = {f"c{i}_in{j}": a for i, c in enumerate(calls) for j, a in enumerate(c)}
    for tag, ref in (("r32", ref32), ("r16", ref16)):
        arrays.update({f"c{i}_{tag}{j}": o for i, outs in enumerate(ref)
                       for j, o in enumerate(outs)})
    meta = {"calls": [[len(c), len(o)] for c, o in zip(calls, ref32)]}
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    _write(p["pte"], pte)
    _write(p["npz"], npz.getvalue())
    _write(p["json"], json.dumps(meta, indent=1).encode())
    fixture_cache.write_key(p["key"], _key(name), {e: p[e] for e in ("pte", "npz", "json")})


_MEMO: dict = {}


def get_fixture(name: str) -> Fixture:
    if name not in _MEMO:
        if not _valid(name):
            with _lock(name):
                if not _valid(name):
                    _build(name)
        p = _paths(name)
        meta = json.loads(p["json"].read_text())
        with np.load(p["npz"]) as z:
            calls = [[z[f"c{i}_in{j}"] for j in range(n_in)]
                     for i, (n_in, _) in enumerate(meta["calls"])]
            refs = [[[z[f"c{i}_{tag}{j}"] for j in range(n_out)]
                     for i, (_, n_out) in enumerate(meta["calls"])] for tag in ("r32", "r16")]
        _MEMO[name] = Fixture(name, p["pte"], calls, refs[0], refs[1], meta)
    fx = _MEMO[name]
    return replace(fx, calls=[[a.copy() for a in c] for c in fx.calls])


if __name__ == "__main__":
    import time

    for n in sys.argv[1:] or NAMES:
        t = time.perf_counter()
        get_fixture(n)
        print(f"{n}: {time.perf_counter() - t:.1f}s")
