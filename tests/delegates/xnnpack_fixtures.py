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

import contextlib
import hashlib
import importlib.metadata
import json
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

FORMAT_VERSION = "1"
_REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Fixture:
    name: str
    pte_path: Path
    calls: list  # input lists, run in order on one loaded method
    expected: list  # executorch.runtime's outputs per call
    meta: dict


@dataclass(frozen=True)
class Spec:
    version: str
    make: Callable[[], Any]  # -> module to export (eval, or a PT2E-converted GraphModule)
    calls: Callable[[], list]
    example: Callable[[], tuple] | None = None
    dynamic_shapes: Callable[[], Any] | None = None
    meta: Callable[[Any], dict] = field(default=lambda module: {})


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
    return _make_quant_cnn_via_models()


def _make_quant_cnn_via_models():
    from tests.programs import models

    return models.make_quant_cnn()[1]


def _quant_mobilenet():
    import torch
    from tests.programs import models

    model = models.make_mobilenet_v2()
    g = torch.Generator().manual_seed(5)
    return _quantize(model, [torch.randn(1, 3, 96, 96, generator=g) for _ in range(4)])


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
    "partial": Spec("1", _partial_model, lambda: [[_randn(160, 3, 16)], [_randn(161, 3, 16)]]),
    "quant_cnn": Spec("1", _quant_cnn, lambda: [[_randn(1000, 1, 3, 32, 32)],
                                                [_randn(1001, 1, 3, 32, 32)]], meta=_output_step),
    "quant_mobilenet_v2": Spec("1", _quant_mobilenet, lambda: [[_randn(170, 1, 3, 96, 96)]],
                               meta=_output_step),
}
NAMES = tuple(SPECS)


# ---- cache --------------------------------------------------------------------------
def cache_dir() -> Path:
    env = os.environ.get("PYRUNTIME_FIXTURES")
    return Path(env) if env else _REPO / "tests" / ".fixtures"


def _paths(name):
    return {ext: cache_dir() / f"xnnpack_{name}.{ext}" for ext in ("pte", "npz", "json", "key")}


def _key(name) -> dict:
    return {"fixture": f"xnnpack_{name}", "version": SPECS[name].version,
            "format": FORMAT_VERSION, "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch")}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _valid(name) -> bool:
    p = _paths(name)
    try:
        key = json.loads(p["key"].read_text())
        return ({k: key.get(k) for k in _key(name)} == _key(name) and
                all(key["files"].get(e) == _sha256(p[e]) for e in ("pte", "npz", "json")))
    except (OSError, ValueError, KeyError, AttributeError):
        return False


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def _lock(name):
    cache_dir().mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(cache_dir() / f"xnnpack_{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def export(name: str) -> tuple[bytes, dict]:
    """Export fixture ``name`` with XnnpackPartitioner; returns (.pte bytes, meta)."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    spec = SPECS[name]
    module = spec.make()
    example = spec.example() if spec.example else tuple(spec.calls()[0])
    args = tuple(torch.from_numpy(a.copy()) for a in example)
    dyn = spec.dynamic_shapes() if spec.dynamic_shapes else None
    with torch.no_grad():
        ep = torch.export.export(module, args, dynamic_shapes=dyn)
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    return pte.buffer, spec.meta(module)


def run_reference(pte: bytes, calls: list) -> list:
    import torch
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    return [[o.detach().clone().numpy() for o in method.execute(
        [torch.from_numpy(a.copy()) for a in call])] for call in calls]


def _build(name: str) -> None:
    p = _paths(name)
    p["key"].unlink(missing_ok=True)
    pte, meta = export(name)
    calls = SPECS[name].calls()
    expected = run_reference(pte, calls)
    arrays = {f"c{i}_in{j}": a for i, c in enumerate(calls) for j, a in enumerate(c)}
    arrays.update({f"c{i}_out{j}": o for i, outs in enumerate(expected) for j, o in enumerate(outs)})
    meta = {**meta, "calls": [[len(c), len(o)] for c, o in zip(calls, expected)]}
    import io

    npz = io.BytesIO()
    np.savez(npz, **arrays)
    _write(p["pte"], pte)
    _write(p["npz"], npz.getvalue())
    _write(p["json"], json.dumps(meta, indent=1).encode())
    key = {**_key(name), "files": {e: _sha256(p[e]) for e in ("pte", "npz", "json")}}
    _write(p["key"], json.dumps(key, indent=1).encode())


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
        _MEMO[name] = Fixture(name, p["pte"], calls, expected, meta)
    fx = _MEMO[name]
    return replace(fx, calls=[[a.copy() for a in c] for c in fx.calls],
                   expected=[[o.copy() for o in c] for c in fx.expected])


if __name__ == "__main__":
    import time

    for n in sys.argv[1:] or NAMES:
        t = time.perf_counter()
        get_fixture(n)
        print(f"{n}: {time.perf_counter() - t:.1f}s")
