"""Vulkan-delegated program fixtures: exported with ExecuTorch's ``VulkanPartitioner``,
cached on disk (like ``tests/delegates/xnnpack_fixtures.py``).

ExecuTorch's Python runtime has no Vulkan backend, so the reference is torch eager on
the same inputs (``fx.expected``); fp16 fixtures also keep the same model run in fp16
on the CPU (``fx.half``), from which the tests derive their tolerance. Each fixture
names the portable program of the same model: a program fixture of
``tests/programs/fixtures.py`` (same factory, same input shapes) or one exported here.

    from tests.delegates.vulkan_fixtures import get_fixture
    fx = get_fixture("resnet18")   # fx.pte_path, fx.calls, fx.expected, fx.meta, fx.portable_path

Cache: ``$PYRUNTIME_FIXTURES`` or ``<repo>/tests/.fixtures/``, files ``vulkan_<name>.*``; the
``.key`` file (versions + hashes) is written last, so a partial build is redone.
``python -m tests.delegates.vulkan_fixtures [names]`` builds ahead of the tests.
"""
from __future__ import annotations

import importlib.metadata
import io
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tests import fixture_cache
from tests.fixture_cache import cache_dir, write_atomic as _write

FORMAT_VERSION = "1"


@dataclass(frozen=True)
class Fixture:
    name: str
    pte_path: Path
    calls: list  # input lists, run in order on one loaded method
    expected: list  # torch eager outputs per call
    half: list  # the model run in fp16 on the CPU (fp16 fixtures), else []
    meta: dict
    portable_path: Path | None = None
    method: str = "forward"


@dataclass(frozen=True)
class Spec:
    version: str
    make: Callable[[], Any]  # -> module (eval, or a PT2E-converted GraphModule)
    calls: Callable[[], list]
    options: dict = field(default_factory=dict)  # VulkanPartitioner compile options
    example: Callable[[], tuple] | None = None
    dynamic_shapes: Callable[[], Any] | None = None
    portable: str | None = None  # a tests/programs fixture of the same model, or None: own
    quant: bool = False  # int8: meta["step"] is the output quantization step
    webgpu: bool = False  # lowered with WebGPUPartitioner (it writes VulkanBackend payloads)


def _randn(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _tokens(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 128, size=(1, n), dtype=np.int64)


def _model(factory: str, *args):
    def make():
        from tests.programs import models

        return getattr(models, factory)(*args)
    return make


def _vit():
    """ViT-tiny-like, smaller: 32x32 images, 16 patches + cls, 2 blocks of 3 heads."""
    import torch
    from tests.programs import models

    torch.manual_seed(4)
    return models.ViT(image=32, patch=8, dim=96, depth=2, heads=3, num_classes=100).eval()


def _audio():
    """Whisper-like encoder, smaller: 40 mels x 64 frames, 2 blocks of width 128."""
    import torch
    from tests.programs import models

    torch.manual_seed(5)
    return models.AudioEncoder(n_mels=40, n_frames=64, dim=128, heads=4, layers=2).eval()


def _zoo():
    """Ops beyond the model zoo: group norm, transposed and dilated depthwise convolutions,
    hardshrink, log10, pixel shuffle, bilinear and nearest resize, flip, pad, avg pool,
    repeat, strided slices; amax / sum / mean stay portable (two delegates)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Zoo(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1)
            self.gn = nn.GroupNorm(2, 8)
            self.deconv = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
            self.fc = nn.Linear(13, 6)

        def forward(self, x):
            y = self.gn(self.conv(x))
            y = (F.hardshrink(y, 0.3) + torch.log10(torch.abs(y) + 1) +
                 F.leaky_relu(y, 0.1) * F.hardswish(y))
            y = self.dw(y) - torch.clamp(y, -0.5, 0.5)
            z = self.deconv(y)
            p = F.pixel_shuffle(y, 2)
            p = F.interpolate(p, size=(12, 12), mode="bilinear", align_corners=False)
            p = F.interpolate(p, scale_factor=2.0, mode="nearest")
            p = F.avg_pool2d(F.pad(torch.flip(p, [3]), (1, 1, 1, 1)), 2)
            q = torch.softmax(self.fc(p), dim=-1)
            r = torch.amax(z, dim=(2, 3)) + torch.sum(z, dim=1).mean()
            return q, r, p.repeat(1, 2, 1, 1)[:, :, ::2, 1:7]

    torch.manual_seed(30)
    return Zoo().eval()


def _zoo2():
    """More ops: split, index_select, bmm, sum / amax / mean / argmax, log_softmax,
    layer_norm, where, pow, minimum, unfold, cat, clamp, hardtanh (relu6), hardsigmoid."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Zoo2(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)
            self.register_buffer("idx", torch.tensor([3, 0, 2, 2]))

        def forward(self, x, w):
            h = self.fc(x)  # [2, 8, 16]
            a, b = torch.split(h, [6, 10], dim=-1)
            s = torch.sigmoid(a).sum(dim=-1, keepdim=True) + \
                torch.tanh(b).amax(dim=-1, keepdim=True)
            t = torch.transpose(h, 1, 2)
            u = torch.index_select(t, 1, self.idx)
            v = torch.bmm(u, t[:, :8, :])
            m = torch.maximum(torch.exp(-torch.abs(v)), torch.sqrt(torch.abs(v) + 1e-3)) / \
                (torch.rsqrt(v * v + 1) + 1)
            c = torch.where(v > 0.1, F.silu(v),
                            torch.pow(v, 2.0) - torch.minimum(v, torch.zeros_like(v)))
            g = F.log_softmax(c + m, dim=1) * w + torch.mean(h, dim=(1, 2), keepdim=True)[:, :, :1]
            lnorm = F.layer_norm(h, (16,)) * 0.5 + torch.clamp(h, min=-0.2) - F.relu6(h) + \
                F.hardsigmoid(h)
            return (g, s, torch.argmax(h, dim=-1), lnorm.unfold(2, 4, 4),
                    torch.cat([u, -u], dim=1).permute(2, 0, 1))

    torch.manual_seed(32)
    return Zoo2().eval()


def _flatten():
    """conv -> flatten -> linear with a dynamic batch: the graph sizes its view with a SymInt."""
    import torch
    from torch import nn

    torch.manual_seed(31)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * 8 * 8, 10)).eval()


def _quant_cnn():
    from tests.programs import models

    return models.make_quant_cnn()[1]


def _dim(name, lo, hi):
    from torch.export import Dim

    return Dim(name, min=lo, max=hi)


def _batch_dim():
    return ({0: _dim("batch", 1, 16)},)


def _kv_calls():
    return [[_tokens(650 + p, 1), np.array([p], np.int64)] for p in range(4)]


_FP16 = {"force_fp16": True}
SPECS: dict[str, Spec] = {
    "mlp": Spec("1", _model("make_mlp"), lambda: [[_randn(100, 4, 32)], [_randn(101, 4, 32)]],
                portable="mlp"),
    "mlp_dynamic": Spec("1", _model("make_mlp_dynamic"),
                        lambda: [[_randn(800 + b, b, 16)] for b in (1, 5, 16, 3)],
                        example=lambda: (_randn(799, 4, 16),), dynamic_shapes=_batch_dim,
                        portable="mlp_dynamic"),
    "cnn_bn": Spec("1", _model("make_cnn_bn"), lambda: [[_randn(110, 2, 3, 32, 32)]],
                   portable="cnn_bn"),
    "mobilenet_v2": Spec("1", _model("make_mobilenet_v2"), lambda: [[_randn(120, 1, 3, 96, 96)]],
                         portable="mobilenet_v2"),
    "resnet18": Spec("1", _model("make_resnet18"), lambda: [[_randn(130, 1, 3, 64, 64)]],
                     portable="resnet18"),
    "vit_tiny": Spec("1", _vit, lambda: [[_randn(140, 1, 3, 32, 32)]]),
    "audio_encoder": Spec("1", _audio, lambda: [[_randn(150, 1, 40, 64)]]),
    "llama": Spec("1", _model("make_llama"), lambda: [[_tokens(600, 8)], [_tokens(601, 8)]],
                  portable="llama"),
    "llama_kv": Spec("1", _model("make_llama_kv"), _kv_calls, portable="llama_kv"),
    "quant_cnn": Spec("1", _quant_cnn, lambda: [[_randn(1000, 1, 3, 32, 32)],
                                                [_randn(1001, 1, 3, 32, 32)]],
                      portable="quant_cnn", quant=True),
    "flatten_dynamic": Spec("1", _flatten, lambda: [[_randn(170 + b, b, 3, 8, 8)]
                                                   for b in (2, 1, 4)],
                            example=lambda: (_randn(169, 2, 3, 8, 8),),
                            dynamic_shapes=lambda: ({0: _dim("batch", 1, 4)},)),
    "zoo": Spec("1", _zoo, lambda: [[_randn(160, 1, 4, 8, 8)]]),
    "zoo2": Spec("1", _zoo2, lambda: [[_randn(161, 2, 8, 16), _randn(162, 2, 4, 8)]]),
    "mlp_fp16": Spec("1", _model("make_mlp"), lambda: [[_randn(100, 4, 32)]], _FP16,
                     portable="mlp"),
    "cnn_bn_fp16": Spec("1", _model("make_cnn_bn"), lambda: [[_randn(110, 2, 3, 32, 32)]], _FP16,
                        portable="cnn_bn"),
    "vit_tiny_fp16": Spec("1", _vit, lambda: [[_randn(140, 1, 3, 32, 32)]], _FP16),
    # ExecuTorch's WebGPU frontend wraps VulkanPartitioner: the same payloads, run by the
    # same bridge
    "webgpu_mlp": Spec("1", _model("make_mlp"), lambda: [[_randn(100, 4, 32)]], portable="mlp",
                       webgpu=True),
    "webgpu_cnn_bn": Spec("1", _model("make_cnn_bn"), lambda: [[_randn(110, 2, 3, 32, 32)]],
                          portable="cnn_bn", webgpu=True),
    "webgpu_vit_tiny": Spec("1", _vit, lambda: [[_randn(140, 1, 3, 32, 32)]], webgpu=True),
}
WEBGPU = tuple(n for n, s in SPECS.items() if s.webgpu)
NAMES = tuple(SPECS)
FLOAT = tuple(n for n, s in SPECS.items() if not s.quant and not s.options.get("force_fp16"))
HALF = tuple(n for n, s in SPECS.items() if s.options.get("force_fp16"))


# ---- cache --------------------------------------------------------------------------
def _paths(name):
    exts = ("pte", "npz", "json", "key") + (() if SPECS[name].portable else ("portable.pte",))
    return {ext: cache_dir() / f"vulkan_{name}.{ext}" for ext in exts}


def _data_exts(name):
    return [e for e in _paths(name) if e != "key"]


def _key(name) -> dict:
    return {"fixture": f"vulkan_{name}", "version": SPECS[name].version,
            "format": FORMAT_VERSION, "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch")}


def _valid(name) -> bool:
    p = _paths(name)
    return fixture_cache.is_valid(p["key"], _key(name), {e: p[e] for e in _data_exts(name)})


def _lock(name):
    return fixture_cache.lock(f"vulkan_{name}")


# ---- build --------------------------------------------------------------------------
def _torch_args(call):
    import torch

    return tuple(torch.from_numpy(a.copy()) for a in call)


def _eager(spec: Spec, calls: list, half: bool = False) -> list:
    """A fresh module run on ``calls`` in order (a KV cache carries over between calls)."""
    import torch

    module = spec.make()
    if half:
        module = module.half()
    outs = []
    with torch.no_grad():
        for call in calls:
            args = [a.half() if half and a.is_floating_point() else a for a in _torch_args(call)]
            res = module(*args)
            res = res if isinstance(res, (tuple, list)) else (res,)
            outs.append([r.float().numpy() for r in res])
    return outs


def _output_step(module) -> float | None:
    step = None
    for node in module.graph.nodes:
        if node.op == "call_function" and "dequantize_per_tensor" in str(node.target):
            step = float(node.args[1])
    return step


def _cache_pattern_graphs() -> None:
    """ExecuTorch 1.5.1 registers its rope pattern functions before ``lru_cache`` wraps them,
    so every VulkanPartitioner call exports the pattern graphs again (20-40 s on 2 cores).
    Cache them as that wrapper meant to (the graphs are only matched against)."""
    import functools

    import executorch.backends.vulkan.patterns  # noqa: F401  (registers the patterns)
    from executorch.backends.vulkan.patterns.pattern_registry import fusable_patterns

    for entry in fusable_patterns.values():
        fn = entry.get_graphs_fn
        if fn is not None and not hasattr(fn, "cache_info"):
            entry.get_graphs_fn = functools.lru_cache(maxsize=1)(fn)


def export(name: str) -> tuple[bytes, bytes | None, dict]:
    """Export fixture ``name`` with VulkanPartitioner; returns (.pte, own portable .pte or
    None, meta)."""
    import torch
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    _cache_pattern_graphs()
    spec = SPECS[name]
    module = spec.make()
    example = spec.example() if spec.example else tuple(spec.calls()[0])
    dyn = spec.dynamic_shapes() if spec.dynamic_shapes else None
    if spec.webgpu:
        from executorch.backends.webgpu.partitioner import WebGPUPartitioner as Partitioner
    else:
        Partitioner = VulkanPartitioner
    with torch.no_grad():
        ep = torch.export.export(module, _torch_args(example), dynamic_shapes=dyn)
        pte = to_edge_transform_and_lower(
            ep, partitioner=[Partitioner(dict(spec.options))]).to_executorch().buffer
        portable = None if spec.portable else to_edge_transform_and_lower(ep).to_executorch().buffer
    meta = {"step": _output_step(module)} if spec.quant else {}
    return pte, portable, meta


def _build(name: str) -> None:
    spec = SPECS[name]
    p = _paths(name)
    p["key"].unlink(missing_ok=True)
    pte, portable, meta = export(name)
    calls = spec.calls()
    expected = _eager(spec, calls)
    half = _eager(spec, calls, half=True) if spec.options.get("force_fp16") else []
    arrays = {f"c{i}_in{j}": a for i, c in enumerate(calls) for j, a in enumerate(c)}
    for tag, res in (("out", expected), ("half", half)):
        arrays.update({f"c{i}_{tag}{j}": o for i, outs in enumerate(res)
                       for j, o in enumerate(outs)})
    meta = {**meta, "calls": [[len(c), len(o)] for c, o in zip(calls, expected)],
            "half": bool(half), "portable": spec.portable}
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    _write(p["pte"], pte)
    if portable is not None:
        _write(p["portable.pte"], portable)
    _write(p["npz"], npz.getvalue())
    _write(p["json"], json.dumps(meta, indent=1).encode())
    fixture_cache.write_key(p["key"], _key(name), {e: p[e] for e in _data_exts(name)})


_MEMO: dict[str, Fixture] = {}


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
            expected = [[z[f"c{i}_out{j}"] for j in range(n_out)]
                        for i, (_, n_out) in enumerate(meta["calls"])]
            half = [[z[f"c{i}_half{j}"] for j in range(n_out)]
                    for i, (_, n_out) in enumerate(meta["calls"])] if meta["half"] else []
        _MEMO[name] = Fixture(name, p["pte"], calls, expected, half, meta, p.get("portable.pte"))
    fx = _MEMO[name]
    return replace(fx, calls=[[a.copy() for a in c] for c in fx.calls])


def portable_program(fx: Fixture) -> Path:
    """The portable .pte of the fixture's model (a shared program fixture, or our own)."""
    if fx.portable_path is not None:
        return fx.portable_path
    from tests.programs.fixtures import get_fixture as program_fixture

    return program_fixture(fx.meta["portable"]).pte_path


if __name__ == "__main__":
    import time

    for n in sys.argv[1:] or NAMES:
        t = time.perf_counter()
        get_fixture(n)
        print(f"{n}: {time.perf_counter() - t:.1f}s", flush=True)
