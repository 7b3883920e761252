"""Shared helpers: export each model once per session, run it in both runtimes."""
from __future__ import annotations

import copy
import functools
import tempfile
from pathlib import Path

import numpy as np

from pyruntime import exporter
import pyruntime
from tests.programs import fixtures

# Models exported by our exporter and checked in both runtimes (fixture specs give
# the factory, the example inputs, dynamic shapes and the calls to run in order).
MODEL_NAMES = ("mlp", "cnn_bn", "mobilenet_v2", "resnet18", "vit_tiny", "llama_kv",
               "llama_sdpa_kv", "mlp_dynamic", "cond", "quant_cnn")


@functools.lru_cache(maxsize=None)
def fixture_model(name: str):
    """The fixture's torch module, built once (PT2E calibration is slow)."""
    fixtures._import_runtime_libs()  # llama custom ops / quantized kernels for torch
    return fixtures.SPECS[name].make()


@functools.lru_cache(maxsize=None)
def export_fixture_model(name: str, planner: str = "greedy") -> exporter.ExportResult:
    spec = fixtures.SPECS[name]
    example = spec.example() if spec.example else spec.calls()[0]
    args = tuple(fixtures._to_torch(v) for v in example)
    dynamic_shapes = spec.dynamic_shapes() if spec.dynamic_shapes else None
    return exporter.export(fixture_model(name), args, dynamic_shapes=dynamic_shapes,
                           memory_planner=planner)


@functools.lru_cache(maxsize=None)
def eager_outputs(name: str) -> list:
    """torch eager outputs of the fixture calls, on a copy (KV caches mutate)."""
    return fixtures.eager_outputs(name, copy.deepcopy(fixture_model(name)))


def _write(data: bytes, suffix: str) -> Path:
    f = tempfile.NamedTemporaryFile(suffix=suffix, delete=False)
    f.write(data)
    f.close()
    return Path(f.name)


def run_executorch(pte: bytes, calls, method="forward", ptd: bytes | None = None) -> list:
    """Run ``calls`` in order on one loaded method of executorch.runtime."""
    import torch
    from executorch.runtime import Runtime

    fixtures._import_runtime_libs()
    path = _write(pte, ".pte")
    data_path = str(_write(ptd, ".ptd")) if ptd is not None else None
    program = Runtime.get().load_program(str(path), data_path=data_path)
    loaded = program.load_method(method)
    out = []
    for call in calls:
        inputs = [torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v for v in call]
        out.append([o.detach().clone().numpy() if isinstance(o, torch.Tensor) else o
                    for o in loaded.execute(inputs)])
    return out


def run_pyruntime(pte: bytes, calls, method="forward", ptd: bytes | None = None) -> list:
    data_path = _write(ptd, ".ptd") if ptd is not None else None
    program = pyruntime.Runtime.get().load_program(pte, data_path=data_path)
    loaded = program.load_method(method, tier="reference")
    return [[np.array(o, copy=True) if isinstance(o, np.ndarray) else o
             for o in loaded.execute([v.copy() if isinstance(v, np.ndarray) else v
                                      for v in call])] for call in calls]


def assert_close(got, want, where: str, rel: float = 1e-4):
    """Float: max abs error <= rel * max(1, max |want|); integers and bools exact."""
    assert len(got) == len(want), f"{where}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        g = np.asarray(g)
        assert g.shape == w.shape, f"{where} output {i}: shape {g.shape} != {w.shape}"
        if w.dtype.kind in "fc":
            tol = rel * max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
            err = float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
            assert err <= tol, f"{where} output {i}: max abs error {err:.3g} > {tol:.3g}"
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{where} output {i}")


def executorch_plan(pte_path) -> list[int]:
    """``non_const_buffer_sizes`` of a .pte's forward method (read with pyruntime)."""
    meta = pyruntime.Runtime.get().load_program(pte_path).metadata("forward")
    return [0] + [meta.memory_planned_buffer_size(i)
                  for i in range(meta.num_memory_planned_buffers())]
