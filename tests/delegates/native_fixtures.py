"""NativeBackend-delegated program fixtures: exported with ExecuTorch 1.5.1's
``NativePartitioner`` and its default transform passes (CSE, re-inplacing, view_copy
collapsing; ``_check_ir_validity=False`` as the backend's docs say, since re-inplaced
ops are not core ATen), cached on disk like the other delegate fixtures.

ExecuTorch's Python runtime has no NativeBackend, so the reference is torch eager on the
same inputs (``fx.expected``, the calls run in order on one module: a buffer mutated in
one call carries into the next). ``external`` fixtures keep the partitioner's default
``external_constants_tag="native_weights"``: their weights are in ``fx.ptd_path``.

    from tests.delegates.native_fixtures import get_fixture
    fx = get_fixture("mlp")   # fx.pte_path, fx.ptd_path, fx.calls, fx.expected

``python -m tests.delegates.native_fixtures [names]`` builds ahead of the tests.
"""
from __future__ import annotations

import importlib.metadata
import io
import json
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tests import fixture_cache
from tests.delegates.vulkan_fixtures import _batch_dim, _randn, _vit, _zoo, _zoo2
from tests.fixture_cache import cache_dir, write_atomic as _write

FORMAT_VERSION = "1"
WEIGHTS_TAG = "native_weights"  # NativePartitioner's default external_constants_tag


@dataclass(frozen=True)
class Fixture:
    name: str
    pte_path: Path
    ptd_path: Path | None
    calls: list
    expected: list
    method: str = "forward"


@dataclass(frozen=True)
class Spec:
    version: str
    make: Callable[[], Any]
    calls: Callable[[], list]
    external: bool = False
    example: Callable[[], tuple] | None = None
    dynamic_shapes: Callable[[], Any] | None = None


def _model(factory: str):
    def make():
        from tests.programs import models

        return getattr(models, factory)()
    return make


def _state():
    """A buffer the graph adds each input into (re-inplaced ``add_``), then a linear layer:
    a BUFFER_MUTATION output the delegate keeps as state across executes."""
    import torch
    from torch import nn

    class State(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", torch.zeros(4, 8))
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            self.acc.add_(x)
            return torch.sigmoid(self.fc(self.acc))

    torch.manual_seed(40)
    return State().eval()


def _attention():
    """The two ops the partitioner claims that the portable library lacks: causal
    ``scaled_dot_product_attention`` and ``matmul`` (4-D by 4-D, 3-D by 2-D)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 6))

        def forward(self, q, k, v):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            b = F.scaled_dot_product_attention(q, k, v, attn_mask=q[:, :, :, :5] > 0,
                                               scale=0.3)
            return torch.matmul(a + b, k.transpose(-1, -2)), torch.matmul(v[0], self.w)

    torch.manual_seed(41)
    return Attention().eval()


def _attn_calls():
    return [[_randn(420 + i, 1, 2, 5, 8) for i in range(3)]]


SPECS: dict[str, Spec] = {
    "mlp": Spec("1", _model("make_mlp"), lambda: [[_randn(100, 4, 32)], [_randn(101, 4, 32)]],
                external=True),
    "cnn_bn": Spec("1", _model("make_cnn_bn"), lambda: [[_randn(110, 2, 3, 32, 32)]]),
    "vit_tiny": Spec("1", _vit, lambda: [[_randn(140, 1, 3, 32, 32)]], external=True),
    "mlp_dynamic": Spec("1", _model("make_mlp_dynamic"),
                        lambda: [[_randn(800 + b, b, 16)] for b in (1, 5, 16, 3)],
                        example=lambda: (_randn(799, 4, 16),), dynamic_shapes=_batch_dim),
    "state": Spec("1", _state, lambda: [[_randn(430 + i, 4, 8)] for i in range(3)],
                  external=True),
    "attention": Spec("1", _attention, _attn_calls),
    "zoo": Spec("1", _zoo, lambda: [[_randn(160, 1, 4, 8, 8)]]),
    "zoo2": Spec("1", _zoo2, lambda: [[_randn(161, 2, 8, 16), _randn(162, 2, 4, 8)]]),
}
NAMES = tuple(SPECS)
# the three models of the issue (MLP, CNN, transformer) and the rest
MODELS = ("mlp", "cnn_bn", "vit_tiny")


# ---- cache --------------------------------------------------------------------------
def _paths(name):
    exts = ("pte", "npz", "json", "key") + (("ptd",) if SPECS[name].external else ())
    return {ext: cache_dir() / f"native_{name}.{ext}" for ext in exts}


def _data_exts(name):
    return [e for e in _paths(name) if e != "key"]


def _key(name) -> dict:
    return {"fixture": f"native_{name}", "version": SPECS[name].version,
            "format": FORMAT_VERSION, "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch")}


def _valid(name) -> bool:
    p = _paths(name)
    return fixture_cache.is_valid(p["key"], _key(name), {e: p[e] for e in _data_exts(name)})


# ---- build --------------------------------------------------------------------------
def _torch_args(call):
    import torch

    return tuple(torch.from_numpy(a.copy()) for a in call)


def export(name: str) -> tuple[bytes, bytes | None]:
    """(.pte, .ptd or None) of fixture ``name`` lowered with NativePartitioner."""
    import torch
    from executorch.backends.native.partitioner import NativePartitioner
    from executorch.backends.native.passes import get_default_passes
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    spec = SPECS[name]
    example = spec.example() if spec.example else tuple(spec.calls()[0])
    dyn = spec.dynamic_shapes() if spec.dynamic_shapes else None
    with torch.no_grad():
        ep = torch.export.export(spec.make(), _torch_args(example), dynamic_shapes=dyn)
        part = NativePartitioner(external_constants_tag=WEIGHTS_TAG if spec.external else None)
        prog = to_edge_transform_and_lower(
            ep, partitioner=[part], transform_passes=get_default_passes(),
            compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch()
    ptd = None
    if spec.external:
        with tempfile.TemporaryDirectory() as d:
            prog.write_tensor_data_to_file(d)
            ptd = (Path(d) / f"{WEIGHTS_TAG}.ptd").read_bytes()
    return prog.buffer, ptd


def _eager(spec: Spec, calls: list) -> list:
    import torch

    module = spec.make()
    outs = []
    with torch.no_grad():
        for call in calls:
            res = module(*_torch_args(call))
            res = res if isinstance(res, (tuple, list)) else (res,)
            outs.append([r.numpy() for r in res])
    return outs


def _build(name: str) -> None:
    spec = SPECS[name]
    p = _paths(name)
    p["key"].unlink(missing_ok=True)
    pte, ptd = export(name)
    calls = spec.calls()
    expected = _eager(spec, calls)
    arrays = {f"c{i}_in{j}": a for i, c in enumerate(calls) for j, a in enumerate(c)}
    arrays.update({f"c{i}_out{j}": o for i, outs in enumerate(expected)
                   for j, o in enumerate(outs)})
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    _write(p["pte"], pte)
    if ptd is not None:
        _write(p["ptd"], ptd)
    _write(p["npz"], npz.getvalue())
    _write(p["json"], json.dumps({"calls": [[len(c), len(o)] for c, o in
                                            zip(calls, expected)]}).encode())
    fixture_cache.write_key(p["key"], _key(name), {e: p[e] for e in _data_exts(name)})


_MEMO: dict[str, Fixture] = {}


def get_fixture(name: str) -> Fixture:
    if name not in _MEMO:
        if not _valid(name):
            with fixture_cache.lock(f"native_{name}"):
                if not _valid(name):
                    _build(name)
        p = _paths(name)
        meta = json.loads(p["json"].read_text())
        with np.load(p["npz"]) as z:
            calls = [[z[f"c{i}_in{j}"] for j in range(n_in)]
                     for i, (n_in, _) in enumerate(meta["calls"])]
            expected = [[z[f"c{i}_out{j}"] for j in range(n_out)]
                        for i, (_, n_out) in enumerate(meta["calls"])]
        _MEMO[name] = Fixture(name, p["pte"], p.get("ptd"), calls, expected)
    fx = _MEMO[name]
    return replace(fx, calls=[[a.copy() for a in c] for c in fx.calls])


if __name__ == "__main__":
    import time

    for n in sys.argv[1:] or NAMES:
        t = time.perf_counter()
        get_fixture(n)
        print(f"{n}: {time.perf_counter() - t:.1f}s", flush=True)
