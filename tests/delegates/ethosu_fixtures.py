"""Arm-delegated program fixtures: exported by ExecuTorch's own Arm flow, cached on disk.

    from tests.delegates.ethosu_fixtures import get_fixture
    fx = get_fixture("cnn_u55")      # exported once, then read from the cache
    fx.pte_path, fx.tosa_path, fx.inputs, fx.meta

``*_u55`` / ``*_u65`` / ``*_u85``: ``EthosUQuantizer`` (symmetric config) then
``EthosUPartitioner`` for ``ethos-u55-128`` / ``ethos-u65-256`` / ``ethos-u85-256``
(``*_u85_128``, ``_512``, ``_2048``: the other Ethos-U85 sizes);
the program holds an ``EthosUBackend`` delegate (a vela command stream). ``tosa_path`` is the TOSA
graph vela compiled, which ExecuTorch writes out when asked to dump intermediate
artifacts: the oracle, run by the TOSA reference model. ``*_tosa_int`` /
``*_tosa_fp``: ``TOSAQuantizer`` + ``TOSAPartitioner`` for ``TOSA-1.0+INT``, and
``TOSAPartitioner`` alone for ``TOSA-1.0+FP``; the delegate is a ``TOSABackend``.
``meta`` records the delegate input's and output's quantisation (scale, zero point)
from the lowered graph, for going between the program's float tensors and the
delegate's int8 ones. Under torch 2.13 the quantizer needs
``exported.module(check_guards=False)``.

Path fixtures (``tests/delegates/test_ethosu_paths.py``): small programs for NPU paths
the models above never reach. ``ew16_*``: 16-bit elementwise ops, quantised with
``get_symmetric_a16w8_quantization_config``. ``tfl_*``: vela's TFL rounding, which it
programs for a TOSA RESCALE in ``DOUBLE_ROUND`` mode; ExecuTorch 1.5.1 writes every
RESCALE as ``SINGLE_ROUND``, so these are exported as usual and the TOSA graph is
given to vela with its RESCALEs switched to ``DOUBLE_ROUND`` (``double_round``); that
edited graph, the one vela compiled, is ``tosa_path``. ``ops_u85``: the Ethos-U85's
transposed and reversed OFMs, MIN pools, elementwise MIN/MAX/ABS of rescaled operands, a
broadcast and a scalar.

Cache: ``$PYRUNTIME_FIXTURES`` or ``<repo>/tests/.fixtures/``, files ``arm_<name>.*``;
the ``.key`` file (versions + hashes) is written last, so a partial build is redone.
Run ``python -m tests.delegates.ethosu_fixtures [names]`` to build ahead of the tests.
"""
from __future__ import annotations

import contextlib
import glob
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests import fixture_cache
from tests.fixture_cache import cache_dir, write_atomic as _write

FORMAT_VERSION = "1"


@dataclass(frozen=True)
class Spec:
    version: str
    model: str  # "mlp" | "cnn" | "mnv2" | "tfl" | "ew16" | "ops"
    target: str  # ethos-u55-128 | ethos-u85-256 | ... | TOSA-1.0+INT | TOSA-1.0+FP
    quant: str = "a8w8"  # "a16w8": 16-bit activations, 8-bit weights
    double_round: bool = False  # vela gets the TOSA graph with DOUBLE_ROUND RESCALEs


@dataclass(frozen=True)
class Fixture:
    name: str
    pte_path: Path
    tosa_path: Path | None
    inputs: list  # float32 program inputs
    meta: dict

    @property
    def spec(self) -> Spec:
        return SPECS[self.name]

    @property
    def calls(self) -> list:  # the shape other fixture modules have (tests/fuzz)
        return [self.inputs]


SPECS = {
    "mlp_u55": Spec("1", "mlp", "ethos-u55-128"),
    "cnn_u55": Spec("1", "cnn", "ethos-u55-128"),
    "mnv2_u55": Spec("1", "mnv2", "ethos-u55-128"),  # ~2 minutes of export, once
    "cnn_u65": Spec("1", "cnn", "ethos-u65-256"),  # its fast scratch: memory region 2
    "mlp_u85": Spec("1", "mlp", "ethos-u85-256"),
    "cnn_u85": Spec("1", "cnn", "ethos-u85-256"),
    "mlp_u85_128": Spec("1", "mlp", "ethos-u85-128"),
    "cnn_u85_128": Spec("1", "cnn", "ethos-u85-128"),
    "mnv2_u85": Spec("1", "mnv2", "ethos-u85-256"),  # ~2 minutes of export, once
    "mnv2_u85_128": Spec("1", "mnv2", "ethos-u85-128"),  # ~2 minutes of export, once
    # several weight decoders: 2 (512 MACs) and 4 (2048), each with a stream of its own
    "mlp_u85_512": Spec("1", "mlp", "ethos-u85-512"),
    "cnn_u85_512": Spec("1", "cnn", "ethos-u85-512"),
    "mlp_u85_2048": Spec("1", "mlp", "ethos-u85-2048"),
    "cnn_u85_2048": Spec("1", "cnn", "ethos-u85-2048"),
    "mlp_tosa_int": Spec("1", "mlp", "TOSA-1.0+INT"),
    "cnn_tosa_int": Spec("1", "cnn", "TOSA-1.0+INT"),
    "mlp_tosa_fp": Spec("1", "mlp", "TOSA-1.0+FP"),
    "cnn_tosa_fp": Spec("1", "cnn", "TOSA-1.0+FP"),
    # path fixtures (see the module doc)
    "tfl_u55": Spec("1", "tfl", "ethos-u55-128", double_round=True),
    "tfl_u65": Spec("1", "tfl", "ethos-u65-256", double_round=True),
    "ew16_u55": Spec("1", "ew16", "ethos-u55-128", quant="a16w8"),
    "ew16_u65": Spec("1", "ew16", "ethos-u65-256", quant="a16w8"),
    "tfl_u85": Spec("1", "tfl", "ethos-u85-256", double_round=True),
    "ew16_u85": Spec("1", "ew16", "ethos-u85-256", quant="a16w8"),
    "ops_u85": Spec("1", "ops", "ethos-u85-256"),
}
NAMES = tuple(SPECS)
SHAPES = {"mlp": (2, 32), "cnn": (1, 3, 32, 32), "mnv2": (1, 3, 96, 96)}
# multi-input path models: (shape, half range of the uniform inputs) per input. ew16:
# a and b stay inside +-8, where the a16w8 observer's scale floor (2^-12) gives both the
# same scale, so vela fuses a + b and a - b into one 16-bit-scale-mode operation; their
# sum needs a larger (non power of two) output scale; c has a scale of its own.
PATH_INPUTS = {"tfl": (((1, 4, 8, 8), 2.0), ((1, 8, 8, 8), 2.0)),
               "ew16": (((1, 8, 4, 4), 6.0), ((1, 8, 4, 4), 6.0), ((1, 8, 4, 4), 20.0)),
               "ops": (((1, 8, 6, 6), 2.0), ((1, 8, 6, 6), 3.0), ((1, 8, 1, 1), 2.0))}
_DEPS = ("torch", "executorch", "ethos-u-vela", "tosa-tools")


def unavailable_reason() -> str | None:
    """Why the Arm flow cannot export here (None: it can)."""
    for dist in ("ethos-u-vela", "tosa-tools"):
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return (f"{dist} is not installed (pip install --no-deps ethos-u-vela==5.2.0 "
                    "tosa-tools==2026.8.0)")
    # found, not imported: importing ExecuTorch's Arm backend (torch, its passes) takes
    # seconds, and tests whose fixtures are cached never need it
    for mod in ("executorch.backends.arm.ethosu", "tosa_serializer", "tosa_reference_model"):
        try:
            if importlib.util.find_spec(mod) is None:
                return f"{mod} is not installed"
        except (ImportError, ValueError) as e:
            return f"{mod} cannot be found: {e}"
    return None


def make_model(kind: str):
    from tests.programs import models

    if kind == "mlp":
        return models.make_mlp()
    if kind == "cnn":
        return models.make_cnn_bn()
    if kind in PATH_INPUTS:
        return _path_model(kind)
    return models.make_mobilenet_v2(96)


def _path_model(kind: str):
    import torch
    from torch import nn

    class TflPaths(nn.Module):
        """A convolution (per-channel scales), a MUL and an ADD with one operand
        rescaled: every output stage behind a RESCALE."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1)

        def forward(self, x, z):
            return self.conv(x) * z + z

    class Elementwise16(nn.Module):
        def forward(self, a, b, c):
            return a + b, a - b, a * c, a + c

    class Ops(nn.Module):
        """Elementwise MIN/MAX/ABS of differently scaled operands (one broadcast, one a
        scalar), a transposition, a reversal and a minimum over H and W."""

        def forward(self, x, y, z):
            return (torch.minimum(x, y), torch.maximum(x, z), torch.abs(x - y),
                    x.permute(0, 1, 3, 2), torch.flip(y, dims=[3]),
                    torch.amin(x, dim=(2, 3), keepdim=True), x * y,
                    torch.maximum(y, torch.tensor(0.75)))

    torch.manual_seed(0)
    return {"tfl": TflPaths, "ew16": Elementwise16, "ops": Ops}[kind]().eval()


def model_input(kind: str, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPES[kind]).astype(np.float32)


def model_inputs(kind: str, seed: int = 0) -> list:
    """The program's float inputs: one standard-normal tensor, or ``PATH_INPUTS``'s."""
    if kind not in PATH_INPUTS:
        return [model_input(kind, seed)]
    rng = np.random.default_rng(seed)
    return [rng.uniform(-r, r, shape).astype(np.float32) for shape, r in PATH_INPUTS[kind]]


def double_round(tosa: bytes) -> bytes:
    """The TOSA graph with every RESCALE's rounding mode set to DOUBLE_ROUND (patched in
    place: ExecuTorch writes the field, SINGLE_ROUND, so it is in the flatbuffer)."""
    import struct

    from tosa.Op import Op
    from tosa.RescaleAttribute import RescaleAttribute
    from tosa.RoundingMode import RoundingMode
    from tosa.TosaGraph import TosaGraph

    buf = bytearray(tosa)
    graph = TosaGraph.GetRootAs(buf, 0)
    n = 0
    for r in range(graph.RegionsLength()):
        region = graph.Regions(r)
        for b in range(region.BlocksLength()):
            block = region.Blocks(b)
            for i in range(block.OperatorsLength()):
                op = block.Operators(i)
                if op.Op() != Op.RESCALE:
                    continue
                t = op.Attribute()
                attr = RescaleAttribute()
                attr.Init(t.Bytes, t.Pos)
                field = attr._tab.Offset(6)  # rounding_mode (field 1)
                if field == 0 or attr.RoundingMode() != RoundingMode.SINGLE_ROUND:
                    raise RuntimeError(f"RESCALE {i}: rounding mode {attr.RoundingMode()}, "
                                       "expected an explicit SINGLE_ROUND")
                struct.pack_into("<I", buf, attr._tab.Pos + field, RoundingMode.DOUBLE_ROUND)
                n += 1
    if n == 0:
        raise RuntimeError("the TOSA graph has no RESCALE to switch to DOUBLE_ROUND")
    return bytes(buf)


# ---- cache --------------------------------------------------------------------------------
def _paths(name):
    return {ext: cache_dir() / f"arm_{name}.{ext}" for ext in ("pte", "tosa", "json", "key")}


def _key(name) -> dict:
    versions = {}
    for d in _DEPS:
        try:
            versions[d] = importlib.metadata.version(d)
        except importlib.metadata.PackageNotFoundError:
            versions[d] = None
    return {"fixture": f"arm_{name}", "version": SPECS[name].version,
            "format": FORMAT_VERSION, **versions}


def _files(name):
    return ("pte", "json") + (("tosa",) if SPECS[name].target.startswith("ethos") else ())


def _valid(name) -> bool:
    p = _paths(name)
    return fixture_cache.is_valid(p["key"], _key(name), {e: p[e] for e in _files(name)})


def _lock(name):
    return fixture_cache.lock(f"arm_{name}")


# ---- export -------------------------------------------------------------------------------
def _qparams(graph) -> dict:
    """Scale and zero point of the quantize feeding the delegate and of the dequantize
    reading its output."""
    q = d = None
    for node in graph.nodes:
        t = str(node.target)
        if "quantize_per_tensor" in t and "dequantize" not in t and q is None:
            q = [float(node.args[1]), int(node.args[2])]
        if "dequantize_per_tensor" in t:
            d = [float(node.args[1]), int(node.args[2])]
    return {"input_q": q, "output_q": d}


def export(name: str, workdir: str) -> tuple[bytes, dict]:
    """Export fixture ``name`` with the Arm flow; intermediates go to ``workdir``."""
    import torch
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from executorch.backends.arm.quantizer import (EthosUQuantizer, TOSAQuantizer,
                                                   get_symmetric_a16w8_quantization_config,
                                                   get_symmetric_quantization_config)

    spec = SPECS[name]
    module = make_model(spec.model).eval()
    example = tuple(torch.from_numpy(a) for a in model_inputs(spec.model, 123))
    if spec.target.startswith("ethos"):
        from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner

        cs = EthosUCompileSpec(spec.target).dump_intermediate_artifacts_to(workdir)
        quantizer, partitioner = EthosUQuantizer(cs), EthosUPartitioner(cs)
    else:
        from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
        from executorch.backends.arm.tosa.partitioner import TOSAPartitioner

        cs = TosaCompileSpec(spec.target)
        quantizer = TOSAQuantizer(cs) if "INT" in spec.target else None
        partitioner = TOSAPartitioner(cs)
    config = get_symmetric_a16w8_quantization_config() if spec.quant == "a16w8" \
        else get_symmetric_quantization_config()
    with torch.no_grad(), _double_round_for_vela(spec.double_round):
        ep = torch.export.export(module, example)
        if quantizer is not None:
            quantizer.set_global(config)
            prepared = prepare_pt2e(ep.module(check_guards=False), quantizer)
            for seed in range(4):  # calibration
                prepared(*(torch.from_numpy(a) for a in model_inputs(spec.model, 200 + seed)))
            ep = torch.export.export(convert_pt2e(prepared), example)
        edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
        meta = _qparams(edge.exported_program().graph)
        pte = edge.to_executorch().buffer
    meta.update(target=spec.target, model=spec.model)
    return pte, meta


@contextlib.contextmanager
def _double_round_for_vela(on: bool):
    """While exporting: vela gets the TOSA graph with DOUBLE_ROUND RESCALEs."""
    if not on:
        yield
        return
    from unittest import mock

    from executorch.backends.arm.ethosu import backend as arm_ethosu

    compile_ = arm_ethosu.vela_compile
    with mock.patch.object(arm_ethosu, "vela_compile",
                           lambda tosa, *a, **k: compile_(double_round(tosa), *a, **k)):
        yield


def _build(name: str) -> None:
    p = _paths(name)
    p["key"].unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"arm_{name}_") as tmp:
        pte, meta = export(name, tmp)
        tosa = None
        if SPECS[name].target.startswith("ethos"):
            found = sorted(glob.glob(os.path.join(tmp, "output_tag*.tosa")))
            if len(found) != 1:
                raise RuntimeError(f"expected one dumped TOSA graph in {tmp}, found {found}")
            tosa = Path(found[0]).read_bytes()
            if SPECS[name].double_round:  # the graph vela was given
                tosa = double_round(tosa)
    _write(p["pte"], pte)
    if tosa is not None:
        _write(p["tosa"], tosa)
    _write(p["json"], json.dumps(meta, indent=1).encode())
    fixture_cache.write_key(p["key"], _key(name), {e: p[e] for e in _files(name)})


_MEMO: dict = {}


def get_fixture(name: str) -> Fixture:
    if name not in _MEMO:
        if not _valid(name):
            with _lock(name):
                if not _valid(name):
                    _build(name)
        p = _paths(name)
        meta = json.loads(p["json"].read_text())
        spec = SPECS[name]
        tosa = p["tosa"] if spec.target.startswith("ethos") else None
        _MEMO[name] = Fixture(name, p["pte"], tosa, model_inputs(spec.model, 7), meta)
    return _MEMO[name]


def delegate_blob(pte_path: Path):
    """(payload bytes, compile specs) of the program's first delegate."""
    from pyruntime import Program

    prog = Program(pte_path.read_bytes())
    d = prog._pte.program.execution_plan[0].delegates[0]
    blob = np.asarray(prog._pte.delegate_blob(d.processed, "fixture")).reshape(-1).view(np.uint8)
    specs = [(c.key, bytes(c.value) if c.value is not None else b"")
             for c in d.compile_specs or []]
    return bytes(blob), specs, d.id


if __name__ == "__main__":
    import time

    for n in sys.argv[1:] or NAMES:
        t = time.perf_counter()
        get_fixture(n)
        print(f"{n}: {time.perf_counter() - t:.1f}s")
