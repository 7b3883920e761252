"""XNNPACK-delegated program fixtures: exported with ExecuTorch's ``XnnpackPartitioner``,
run once in ``executorch.runtime``, cached on disk (like ``tests/programs/fixtures.py``).

    from tests.delegates.xnnpack_fixtures import get_fixture
    fx = get_fixture("mobilenet_v2")   # exported + run once, then read from the cache
    fx.pte_path, fx.calls, fx.expected, fx.meta

Cache: ``$PYRUNTIME_FIXTURES`` or ``<repo>/tests/.fixtures/``, files ``xnnpack_<name>.*``;
the ``.key`` file (versions + hashes) is written last, so a partial build is redone.
Run ``python -m tests.delegates.xnnpack_fixtures [names]`` to build ahead of the tests.
"""
from __future__ import annotations

import importlib.metadata
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
    expected: list  # executorch.runtime's outputs per call
    meta: dict
    ptd_path: Path | None = None  # the weights, for programs exported with external weights


@dataclass(frozen=True)
class Spec:
    version: str
    make: Callable[[], Any]  # -> module to export (eval, or a PT2E-converted GraphModule)
    calls: Callable[[], list]
    example: Callable[[], tuple] | None = None
    dynamic_shapes: Callable[[], Any] | None = None
    meta: Callable[[Any], dict] = field(default=lambda module: {})
    external_weights: bool = False  # XNNPACK weights in a .ptd ("model") instead of the .pte
    edge_exceptions: tuple = ()  # aten ops kept outside core ATen (tests/programs/fixtures.py)


def _randn(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _model(factory: str):
    def make():
        from tests.programs import models

        return getattr(models, factory)()
    return make


def _partial_model():
    """linear-relu -> cumsum (not an XNNPACK op: a portable kernel) -> linear: two delegates."""
    import torch
    from torch import nn

    class Partial(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 32)
            self.fc2 = nn.Linear(32, 8)

        def forward(self, x):
            h = torch.cumsum(torch.relu(self.fc1(x)), dim=-1)
            return self.fc2(h)

    torch.manual_seed(20)
    return Partial().eval()


def _zoo_model():
    """Many XNNPACK node types in one graph: elementwise, pooling, cat/slice/pad, deconv,
    resize, prelu, softmax, bmm."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Zoo(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1)
            self.deconv = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.prelu = nn.PReLU(8)
            self.fc = nn.Linear(16, 16)

        def forward(self, x, w):
            y = self.conv(x)
            y = F.hardswish(y) + torch.sigmoid(y) * torch.tanh(y)
            y = self.prelu(y)
            y = F.elu(y) - F.leaky_relu(y, 0.2) + F.hardtanh(y, -0.5, 0.5)
            y = torch.cat([y, torch.abs(y), -y], dim=1)
            y = F.max_pool2d(F.avg_pool2d(y, 2), 2, 1)
            z = self.deconv(y[:, :8])
            z = F.pad(z, (1, 1, 1, 1))
            z = F.interpolate(z, size=(10, 10), mode="bilinear", align_corners=False)
            a = torch.sqrt(torch.abs(z) + 1) * torch.exp(-torch.square(z))
            b = torch.floor(z) + torch.ceil(z) + torch.sin(z) + torch.cos(z)
            c = torch.log(torch.abs(z) + 1) + torch.rsqrt(z * z + 1)
            z = torch.maximum(a, torch.minimum(b, c)) / (torch.abs(z) + 1) - z
            f = self.fc(z.reshape(1, 4, 100)[:, :, :16])
            att = torch.softmax(torch.bmm(f, w), dim=-1)
            q = torch.cat([f, f * 2, f + 1, f - 1], dim=-1)
            return att, F.gelu(z).permute(0, 2, 3, 1), torch.cat([q, q, -q, q, q], dim=1)

    torch.manual_seed(21)
    return Zoo().eval()


def _fp16_cnn():
    """A half-precision conv net: fp16 values and fp16 XNNPACK kernels end to end."""
    import torch
    from torch import nn

    torch.manual_seed(23)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2),
                         nn.Hardtanh(-1, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4)).eval().half()


def _batch_dim():
    from torch.export import Dim

    return ({0: Dim("batch", min=1, max=16)},)


def _quantize(model, inputs, per_channel=True):
    """PT2E int8 with XNNPACKQuantizer; returns the converted module."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=per_channel))
    prepared = prepare_pt2e(torch.export.export(model, (inputs[0],)).module(), quantizer)
    with torch.no_grad():
        for x in inputs:
            prepared(x)
    return convert_pt2e(prepared)


def _quant_cnn():
    from tests.programs import models

    return models.make_quant_cnn()[1]  # the PT2E-converted module


def _quant_mobilenet():
    import torch
    from tests.programs import models

    model = models.make_mobilenet_v2()
    g = torch.Generator().manual_seed(5)
    return _quantize(model, [torch.randn(1, 3, 96, 96, generator=g) for _ in range(4)])


def _linear_stack():
    import torch
    from torch import nn

    torch.manual_seed(22)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32)).eval()


def _qd8_qc8w():
    """Dynamically quantized activations (per token), int8 per-channel weights (PT2E)."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model, x = _linear_stack(), torch.from_numpy(_randn(190, 3, 64))
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    prepared(x)
    return convert_pt2e(prepared)


def _qd8_qb4w():
    """torchao 8da4w: dynamic int8 activations, 4-bit weights in blocks of 32 (bf16 scales)."""
    import torch
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, PerGroup, quantize_

    model = _linear_stack()
    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4,
                                                           weight_granularity=PerGroup(32)))
    return model


def _whisper_calls():
    from tests.programs.fixtures import SPECS

    return SPECS["whisper"].calls()


def _output_step(module) -> dict:
    """The output's quantization scale (one step), read from the last dequantize node."""
    step = None
    for node in module.graph.nodes:
        if node.op == "call_function" and "dequantize_per_tensor" in str(node.target):
            step = float(node.args[1])
    return {"step": step}


SPECS: dict[str, Spec] = {
    "mlp": Spec("1", _model("make_mlp"), lambda: [[_randn(100, 4, 32)], [_randn(101, 4, 32)]]),
    "cnn_bn": Spec("1", _model("make_cnn_bn"), lambda: [[_randn(110, 2, 3, 32, 32)]]),
    "mobilenet_v2": Spec("1", _model("make_mobilenet_v2"),
                         lambda: [[_randn(120, 1, 3, 96, 96)], [_randn(121, 1, 3, 96, 96)]]),
    "resnet18": Spec("1", _model("make_resnet18"), lambda: [[_randn(130, 1, 3, 64, 64)]]),
    "vit_tiny": Spec("1", _model("make_vit_tiny"), lambda: [[_randn(140, 1, 3, 64, 64)]]),
    "audio_encoder": Spec("1", _model("make_audio_encoder"), lambda: [[_randn(150, 1, 80, 200)]]),
    "mlp_dynamic": Spec("1", _model("make_mlp_dynamic"),
                        lambda: [[_randn(800 + b, b, 16)] for b in (1, 5, 16, 3)],
                        example=lambda: (_randn(799, 4, 16),), dynamic_shapes=_batch_dim),
    "cnn_fp16": Spec("1", _fp16_cnn, lambda: [[_randn(185, 1, 3, 16, 16).astype(np.float16)]]),
    "zoo": Spec("2", _zoo_model, lambda: [[_randn(180, 1, 4, 8, 8), _randn(181, 1, 16, 5)]]),
    "mlp_ptd": Spec("1", _model("make_mlp"), lambda: [[_randn(102, 4, 32)]],
                    external_weights=True),
    "partial": Spec("1", _partial_model, lambda: [[_randn(160, 3, 16)], [_randn(161, 3, 16)]]),
    "quant_cnn": Spec("1", _quant_cnn, lambda: [[_randn(1000, 1, 3, 32, 32)],
                                                [_randn(1001, 1, 3, 32, 32)]], meta=_output_step),
    "qd8_qc8w": Spec("1", _qd8_qc8w, lambda: [[_randn(191, 3, 64)], [_randn(192, 3, 64)]]),
    "qd8_qb4w": Spec("1", _qd8_qb4w, lambda: [[_randn(193, 3, 64)], [_randn(194, 3, 64)]]),
    "quant_mobilenet_v2": Spec("1", _quant_mobilenet, lambda: [[_randn(170, 1, 3, 96, 96)]],
                               meta=_output_step),
    # the seed's families (tests/programs/family_models.py): convs, matmuls in XNNPACK; the
    # rest (STFT, KV-cache writes, box decode pieces XNNPACK lacks) on portable kernels
    "deeplabv3": Spec("1", _model("make_deeplabv3"), lambda: [[_randn(1100, 1, 3, 64, 64)]]),
    "yolo": Spec("1", _model("make_yolo"), lambda: [[_randn(1110, 1, 3, 64, 64)]]),
    "whisper": Spec("1", _model("make_whisper"), lambda: _whisper_calls()[:3],
                    edge_exceptions=("unfold", "view_as_real")),
}
NAMES = tuple(SPECS)


# ---- cache --------------------------------------------------------------------------
def _paths(name):
    exts = ("pte", "npz", "json", "key") + (("ptd",) if SPECS[name].external_weights else ())
    return {ext: cache_dir() / f"xnnpack_{name}.{ext}" for ext in exts}


def _data_exts(name):
    return [e for e in _paths(name) if e != "key"]


def _key(name) -> dict:
    return {"fixture": f"xnnpack_{name}", "version": SPECS[name].version,
            "format": FORMAT_VERSION, "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch")}


def _valid(name) -> bool:
    p = _paths(name)
    return fixture_cache.is_valid(p["key"], _key(name), {e: p[e] for e in _data_exts(name)})


def _lock(name):
    return fixture_cache.lock(f"xnnpack_{name}")


def export(name: str) -> tuple[bytes, bytes | None, dict]:
    """Export fixture ``name`` with XnnpackPartitioner; returns (.pte, .ptd or None, meta)."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    spec = SPECS[name]
    module = spec.make()
    example = spec.example() if spec.example else tuple(spec.calls()[0])
    args = tuple(torch.from_numpy(a.copy()) for a in example)
    dyn = spec.dynamic_shapes() if spec.dynamic_shapes else None
    with torch.no_grad():
        if spec.external_weights:  # tag every constant for the "model" .ptd (strict export)
            from executorch.exir.passes.external_constants_pass import (
                delegate_external_constants_pass_unlifted,
            )

            tagged = torch.export.export(module, args, dynamic_shapes=dyn, strict=True).module()
            delegate_external_constants_pass_unlifted(tagged, gen_tag_fn=lambda node: "model")
            ep = torch.export.export(tagged, args, dynamic_shapes=dyn, strict=True)
        else:
            ep = torch.export.export(module, args, dynamic_shapes=dyn)
    config = {}
    if spec.edge_exceptions:
        from tests.programs.fixtures import edge_config

        config["compile_config"] = edge_config(spec.edge_exceptions)
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()],
                                      **config).to_executorch()
    ptd = bytes(pte._tensor_data["model"]) if spec.external_weights else None
    return pte.buffer, ptd, spec.meta(module)


def run_reference(pte: bytes | Path, calls: list, ptd: Path | None = None) -> list:
    import torch
    from executorch.runtime import Runtime

    if ptd is not None:
        method = Runtime.get().load_program(pte, data_path=str(ptd)).load_method("forward")
    else:
        method = Runtime.get().load_program(pte).load_method("forward")
    return [[o.detach().clone().numpy() for o in method.execute(
        [torch.from_numpy(a.copy()) for a in call])] for call in calls]


def _build(name: str) -> None:
    p = _paths(name)
    p["key"].unlink(missing_ok=True)
    pte, ptd, meta = export(name)
    calls = SPECS[name].calls()
    if ptd is not None:
        _write(p["pte"], pte)
        _write(p["ptd"], ptd)
        expected = run_reference(p["pte"], calls, p["ptd"])
    else:
        expected = run_reference(pte, calls)
    arrays = {f"c{i}_in{j}": a for i, c in enumerate(calls) for j, a in enumerate(c)}
    arrays.update({f"c{i}_out{j}": o
                   for i, outs in enumerate(expected) for j, o in enumerate(outs)})
    meta = {**meta, "calls": [[len(c), len(o)] for c, o in zip(calls, expected)]}
    import io

    npz = io.BytesIO()
    np.savez(npz, **arrays)
    _write(p["pte"], pte)
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
        _MEMO[name] = Fixture(name, p["pte"], calls, expected, meta, p.get("ptd"))
    fx = _MEMO[name]
    return replace(fx, calls=[[a.copy() for a in c] for c in fx.calls],
                   expected=[[o.copy() for o in c] for c in fx.expected])


if __name__ == "__main__":
    import time

    for n in sys.argv[1:] or NAMES:
        t = time.perf_counter()
        get_fixture(n)
        print(f"{n}: {time.perf_counter() - t:.1f}s")
