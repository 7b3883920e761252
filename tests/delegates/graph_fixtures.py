"""Fixtures of the delegates pyruntime runs as graphs of its own: ExecuTorch 1.5.1's
NativeBackend and MLX, exported with the real partitioners and cached on disk like the
other delegate fixtures.

* ``native``: ``NativePartitioner`` with its default transform passes (CSE,
  re-inplacing, view_copy collapsing; ``_check_ir_validity=False`` as the backend's docs
  say, since re-inplaced ops are not core ATen). ``external`` fixtures keep its default
  ``external_constants_tag="native_weights"``: their weights are in ``fx.ptd_path``.
* ``mlx``: ``MLXPartitioner``. The wheel ships the MLX schema but not its generated
  Python modules, without which the partitioner cannot import; ``_mlx_generated()``
  writes them once into the installed wheel with the wheel's own ``generate.py`` and
  ``flatc`` (the C++ loader step, whose templates the wheel lacks, is skipped). This
  is a test-environment step: pyruntime itself reads the payload with its own tables.

ExecuTorch's Python runtime runs neither, so the reference is torch eager on the same
inputs (``fx.expected``, the calls run in order on one module: a buffer mutated in one
call carries into the next).

    from tests.delegates.graph_fixtures import get_fixture
    fx = get_fixture("mlp", "mlx")   # fx.pte_path, fx.ptd_path, fx.calls, fx.expected

``python -m tests.delegates.graph_fixtures [native|mlx] [names]`` builds ahead of the tests.
"""
from __future__ import annotations

import importlib.metadata
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

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
    external: bool = False  # native: weights in a .ptd
    example: Callable[[], tuple] | None = None
    dynamic_shapes: Callable[[], Any] | None = None
    backends: tuple = ("native", "mlx")


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
                        example=lambda: (_randn(799, 4, 16),), dynamic_shapes=_batch_dim,
                        ),
    "state": Spec("1", _state, lambda: [[_randn(430 + i, 4, 8)] for i in range(3)],
                  external=True),
    "attention": Spec("1", _attention, _attn_calls),
    "zoo": Spec("1", _zoo, lambda: [[_randn(160, 1, 4, 8, 8)]]),
    "zoo2": Spec("1", _zoo2, lambda: [[_randn(161, 2, 8, 16), _randn(162, 2, 4, 8)]]),
}
BACKENDS = {"native": "NativeBackend", "mlx": "MLXBackend"}
NAMES = {b: tuple(n for n, s in SPECS.items() if b in s.backends) for b in BACKENDS}
# the three models of the issue (MLP, CNN, transformer) and the rest
MODELS = ("mlp", "cnn_bn", "vit_tiny")


# ---- cache --------------------------------------------------------------------------
def _external(name, backend) -> bool:
    return backend == "native" and SPECS[name].external


def _paths(name, backend):
    exts = ("pte", "npz", "json", "key") + (("ptd",) if _external(name, backend) else ())
    return {ext: cache_dir() / f"{backend}_{name}.{ext}" for ext in exts}


def _data_exts(name, backend):
    return [e for e in _paths(name, backend) if e != "key"]


def _key(name, backend) -> dict:
    return {"fixture": f"{backend}_{name}", "version": SPECS[name].version,
            "format": FORMAT_VERSION, "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch")}


def _valid(name, backend) -> bool:
    p = _paths(name, backend)
    return fixture_cache.is_valid(p["key"], _key(name, backend),
                                  {e: p[e] for e in _data_exts(name, backend)})


def _mlx_generated() -> None:
    """Write the MLX schema's generated Python modules into the installed wheel, once."""
    import importlib.util

    root = Path(list(importlib.util.find_spec("executorch").submodule_search_locations)[0])
    ser = root / "backends" / "mlx" / "serialization"

    def done() -> bool:  # written last below: the package init, after the schema modules
        return (ser / "mlx_graph_schema.py").exists() and \
            (ser / "_generated" / "__init__.py").exists()

    if done():
        return
    with fixture_cache.lock("mlx_generated"):
        if done():
            return
        spec = importlib.util.spec_from_file_location("_mlx_generate", ser / "generate.py")
        gen = importlib.util.module_from_spec(spec)
        sys.modules["_mlx_generate"] = gen  # its dataclasses look their module up
        spec.loader.exec_module(gen)
        schema = gen.parse_fbs(gen.SCHEMA_FBS)
        gen.run_flatc(str(root / "data" / "bin" / "flatc"))
        gen._fixup_flatc_imports()
        for fn, out in ((gen.generate_python_schema, gen.GENERATED_SCHEMA_PY),
                        (gen.generate_python_serializers, gen.GENERATED_SERIALIZERS),
                        (gen.generate_inspector, gen.GENERATED_INSPECTOR)):
            Path(out).write_text(fn(schema))
        names = sorted([t.name for t in schema.tables] + [e.name for e in schema.enums] +
                       [x.name for x in schema.structs] + [u.name for u in schema.unions])
        pkg = "executorch.backends.mlx.serialization._generated.mlx_delegate"
        (gen.GENERATED_DIR / "__init__.py").write_text(
            "".join(f"from {pkg}.{n} import {n}\n" for n in names) + f"\n__all__ = {names!r}\n")


# ---- build --------------------------------------------------------------------------
def _torch_args(call):
    import torch

    return tuple(torch.from_numpy(a.copy()) for a in call)


def _lower(ep, name: str, backend: str):
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    if backend == "mlx":
        _mlx_generated()
        from executorch.backends.mlx.partitioner import MLXPartitioner

        return to_edge_transform_and_lower(ep, partitioner=[MLXPartitioner()])
    from executorch.backends.native.partitioner import NativePartitioner
    from executorch.backends.native.passes import get_default_passes

    part = NativePartitioner(external_constants_tag=WEIGHTS_TAG if _external(name, backend)
                             else None)
    return to_edge_transform_and_lower(
        ep, partitioner=[part], transform_passes=get_default_passes(),
        compile_config=EdgeCompileConfig(_check_ir_validity=False))


def export(name: str, backend: str) -> tuple[bytes, bytes | None]:
    """(.pte, .ptd or None) of fixture ``name`` lowered for ``backend``."""
    import torch

    spec = SPECS[name]
    example = spec.example() if spec.example else tuple(spec.calls()[0])
    dyn = spec.dynamic_shapes() if spec.dynamic_shapes else None
    with torch.no_grad():
        ep = torch.export.export(spec.make(), _torch_args(example), dynamic_shapes=dyn)
        prog = _lower(ep, name, backend).to_executorch()
    ptd = None
    if _external(name, backend):
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


def _build(name: str, backend: str) -> None:
    spec = SPECS[name]
    p = _paths(name, backend)
    p["key"].unlink(missing_ok=True)
    pte, ptd = export(name, backend)
    calls = spec.calls()
    expected = _eager(spec, calls)
    _write(p["pte"], pte)
    if ptd is not None:
        _write(p["ptd"], ptd)
    fixture_cache.write_calls(p["npz"], p["json"], calls, expected)
    fixture_cache.write_key(p["key"], _key(name, backend),
                            {e: p[e] for e in _data_exts(name, backend)})


_MEMO: dict[tuple, Fixture] = {}


def get_fixture(name: str, backend: str = "native") -> Fixture:
    if backend not in SPECS[name].backends:
        raise KeyError(f"fixture {name!r} is not made for {backend}")
    key = (name, backend)
    if key not in _MEMO:
        if not _valid(name, backend):
            with fixture_cache.lock(f"{backend}_{name}"):
                if not _valid(name, backend):
                    _build(name, backend)
        p = _paths(name, backend)
        calls, expected = fixture_cache.read_calls(p["npz"], p["json"])
        _MEMO[key] = Fixture(name, p["pte"], p.get("ptd"), calls, expected)
    fx = _MEMO[key]
    return replace(fx, calls=[[a.copy() for a in c] for c in fx.calls])


if __name__ == "__main__":
    import time

    which = [a for a in sys.argv[1:] if a in BACKENDS] or list(BACKENDS)
    for b in which:
        for n in [a for a in sys.argv[1:] if a not in BACKENDS] or NAMES[b]:
            t = time.perf_counter()
            get_fixture(n, b)
            print(f"{b} {n}: {time.perf_counter() - t:.1f}s", flush=True)
