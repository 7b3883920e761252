"""Programs made by ExecuTorch 1.5.1's Cadence flow (``executorch.backends.cadence``: DSP
programs of ``cadence::*`` int8 kernels between portable ops, no delegate), cached on
disk like the other fixtures.

The flow, as the wheel's ``aot/export_example.py`` runs it: ``prepare_pt2`` with a
Cadence quantizer, one calibration call, ``convert_pt2``, ``torch.export``,
``apply_pre_edge_transform_passes`` (the fusion that rewrites quantized patterns to
``cadence::`` ops), ``_lower_ep_to_cadence_gen_etrecord``. The reference is the
PT2E-converted model on the same inputs (``fx.expected``): the quantizer's intended
int8 arithmetic, which the program must equal bit for bit.

On Python 3.11 the wheel's ``aot/fuse_ops.py`` imports ``typing.override`` (3.12+):
``cadence_ops()`` sets it to ``typing_extensions.override`` first, in the test process
only (a test-environment step; the package never imports Cadence's code).

    from tests.programs.cadence_fixtures import get_fixture
    fx = get_fixture("cnn")   # fx.pte_path, fx.calls, fx.expected
"""
from __future__ import annotations

import importlib.metadata
import sys
import tempfile
from dataclasses import dataclass, replace
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
    calls: list
    expected: list
    method: str = "forward"


@dataclass(frozen=True)
class Spec:
    version: str
    make: Callable[[], Any]
    calls: Callable[[], list]  # the first call also calibrates
    layer_norm: bool = False  # CadenceWithLayerNormQuantizer


def cadence_ops() -> None:
    """Import the Cadence flow's operator registrations (torch schemas of ``cadence::*``)."""
    import typing

    if not hasattr(typing, "override"):
        import typing_extensions

        typing.override = typing_extensions.override
    import executorch.backends.cadence.aot.ops_registrations  # noqa: F401


def _randn(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _mlp():
    import torch
    from torch import nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 10)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    torch.manual_seed(50)
    return MLP().eval()


def _cnn():
    """conv -> relu -> max-pool -> linear: quantized_conv2d_nhwc, quantized_relu,
    quantized_max_pool2d_nhwc, quantized_fully_connected."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 8 * 8, 10)

        def forward(self, x):
            return self.fc(F.max_pool2d(torch.relu(self.conv(x)), 2, 2).flatten(1))

    torch.manual_seed(51)
    return CNN().eval()


def _depthwise():
    """A depthwise strided convolution between two regular ones (3-D depthwise weights)."""
    import torch
    from torch import nn

    class DW(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, stride=2)
            self.c2 = nn.Conv2d(8, 4, 1)

        def forward(self, x):
            return self.c2(torch.relu(self.dw(torch.relu(self.c1(x)))))

    torch.manual_seed(52)
    return DW().eval()


def _block():
    """Layer norm, linear projections and two activation-by-activation matmuls:
    quantized_layer_norm, quantized_linear, quantized_matmul (CadenceWithLayerNormQuantizer)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(16)
            self.q, self.k, self.o = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 8)

        def forward(self, x):
            h = self.ln(x)
            a = torch.matmul(self.q(h), self.k(h).transpose(-1, -2))
            return self.o(torch.relu(torch.matmul(a, h)))

    torch.manual_seed(53)
    return Block().eval()


SPECS: dict[str, Spec] = {
    "mlp": Spec("1", _mlp, lambda: [[_randn(500, 4, 32)], [_randn(501, 4, 32)]]),
    "cnn": Spec("1", _cnn, lambda: [[_randn(510, 1, 3, 16, 16)], [_randn(511, 1, 3, 16, 16)]]),
    "depthwise": Spec("1", _depthwise, lambda: [[_randn(520, 1, 3, 12, 12)],
                                                [_randn(521, 1, 3, 12, 12)]]),
    "block": Spec("1", _block, lambda: [[_randn(530, 2, 6, 16)], [_randn(531, 2, 6, 16)]],
                  layer_norm=True),
}
NAMES = tuple(SPECS)


def _paths(name):
    return {ext: cache_dir() / f"cadence_{name}.{ext}" for ext in ("pte", "npz", "json", "key")}


def _data_exts(name):
    return [e for e in _paths(name) if e != "key"]


def _key(name) -> dict:
    return {"fixture": f"cadence_{name}", "version": SPECS[name].version,
            "format": FORMAT_VERSION, "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch")}


def _valid(name) -> bool:
    p = _paths(name)
    return fixture_cache.is_valid(p["key"], _key(name), {e: p[e] for e in _data_exts(name)})


def _build(name: str) -> None:
    import torch

    cadence_ops()
    from executorch.backends.cadence.aot.compiler import (
        _lower_ep_to_cadence_gen_etrecord, apply_pre_edge_transform_passes, convert_pt2,
        prepare_pt2)
    from executorch.backends.cadence.aot.quantizer.quantizer import (
        CadenceDefaultQuantizer, CadenceWithLayerNormQuantizer)

    spec = SPECS[name]
    p = _paths(name)
    p["key"].unlink(missing_ok=True)
    calls = spec.calls()
    example = tuple(torch.from_numpy(a) for a in calls[0])
    quantizer = (CadenceWithLayerNormQuantizer if spec.layer_norm else CadenceDefaultQuantizer)()
    prepared = prepare_pt2(spec.make(), example, quantizer)
    prepared(*example)  # calibration
    converted = convert_pt2(prepared)
    with torch.no_grad():
        expected = [[converted(*(torch.from_numpy(a) for a in c)).numpy()] for c in calls]
    ep = apply_pre_edge_transform_passes(torch.export.export(converted, example, strict=True),
                                         quantizer)
    with tempfile.TemporaryDirectory() as d:
        pte = _lower_ep_to_cadence_gen_etrecord(ep, output_dir=d).buffer
    _write(p["pte"], pte)
    fixture_cache.write_calls(p["npz"], p["json"], calls, expected)
    fixture_cache.write_key(p["key"], _key(name), {e: p[e] for e in _data_exts(name)})


_MEMO: dict[str, Fixture] = {}


def get_fixture(name: str) -> Fixture:
    if name not in _MEMO:
        if not _valid(name):
            with fixture_cache.lock(f"cadence_{name}"):
                if not _valid(name):
                    _build(name)
        p = _paths(name)
        calls, expected = fixture_cache.read_calls(p["npz"], p["json"])
        _MEMO[name] = Fixture(name, p["pte"], calls, expected)
    fx = _MEMO[name]
    return replace(fx, calls=[[a.copy() for a in c] for c in fx.calls])


if __name__ == "__main__":
    import time

    for n in sys.argv[1:] or NAMES:
        t = time.perf_counter()
        get_fixture(n)
        print(f"{n}: {time.perf_counter() - t:.1f}s", flush=True)
