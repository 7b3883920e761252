"""Golden-reference program fixtures for parity tests.

Each fixture is a small model exported with the real ExecuTorch exporter and
run in ``executorch.runtime``; the .pte, the inputs and the reference outputs
are cached on disk so that parity tests only pay for the export once::

    from tests.programs.fixtures import get_fixture, FIXTURE_NAMES
    fx = get_fixture("mlp")       # builds once, then read from the cache
    fx.pte_path, fx.method        # Path to the .pte, "forward"
    fx.calls                      # list of input lists, run IN ORDER on ONE loaded method
    fx.expected                   # executorch.runtime's outputs, one list per call

Cache: ``$PYRUNTIME_FIXTURES`` or ``<repo>/tests/.fixtures/``. Per fixture:
``<name>.pte``, ``<name>.npz`` (tensor inputs/outputs), ``<name>.json``
(structure: which inputs are scalars, their values) and ``<name>.key``
(versions + file hashes; written last, so a fixture without a valid key is
rebuilt). Every file is written to a temporary name and renamed into place.

CLI: ``python -m tests.programs.fixtures --list-ops [names...]`` prints, per
fixture, the operators and instruction kinds of its execution plan.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

FORMAT_VERSION = "2"  # 2: expected outputs from executorch.runtime in a new process
_REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- public types


@dataclass(frozen=True)
class Fixture:
    name: str
    pte_path: Path
    method: str
    calls: list  # list[list[np.ndarray | int | float | bool]]
    expected: list  # list[list[np.ndarray]]
    ptd_path: Path | None = None


@dataclass(frozen=True)
class Spec:
    """How to build one fixture. ``make`` returns the module that is exported and
    that serves as the eager reference; ``calls`` returns the seeded inputs."""

    version: str
    make: Callable[[], Any]
    calls: Callable[[], list]
    example: Callable[[], tuple] | None = None  # export example; default: first call
    dynamic_shapes: Callable[[], Any] | None = None
    lower: str = "to_edge_transform_and_lower"  # or "to_edge"
    quantized: bool = False  # outputs are int8-quantized: compare loosely
    method: str = "forward"
    # ops outside core ATen the program keeps (ExecuTorch has kernels for them), e.g.
    # ("unfold", "view_as_real") for an STFT front end: EdgeCompileConfig's exception list
    edge_exceptions: tuple = ()
    notes: str = ""
    extra: dict = field(default_factory=dict)


# ----------------------------------------------------------------- fixture definitions


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _randn(seed: int, *shape: int) -> np.ndarray:
    return _rng(seed).standard_normal(shape).astype(np.float32)


def _tokens(seed: int, n: int, vocab: int = 128) -> np.ndarray:
    return _rng(seed).integers(0, vocab, size=(1, n), dtype=np.int64)


def _pos(p: int) -> np.ndarray:
    return np.array([p], dtype=np.int64)


def _cond_inputs() -> list:
    calls = []
    for i, sign in enumerate((1, -1, 1, 1, -1)):
        x = _randn(900 + i, 2, 16)
        if np.sign(x.sum()) != sign:
            x = -x
        calls.append([x])
    return calls


def _whisper_calls() -> list:
    audio = _randn(1200, 1, 2048)
    tokens = _rng(1201).integers(0, 64, size=5)
    return [[audio, np.array([[t]], dtype=np.int64), _pos(p)] for p, t in enumerate(tokens)]


def _llama_sdpa_calls() -> list:
    calls = [[_tokens(700, 4), _pos(0)]]  # prefill 4 tokens
    calls += [[_tokens(701 + p, 1), _pos(p)] for p in (4, 5, 6)]  # then decode
    return calls


def _m(factory: str) -> Callable[[], Any]:
    def make():
        from tests.programs import models

        return getattr(models, factory)()

    return make


def _make_quant_cnn():
    from tests.programs import models

    return models.make_quant_cnn()[1]


def _mlp_dynamic_shapes():
    from torch.export import Dim

    return ({0: Dim("batch", min=1, max=16)},)


def _llama_sdpa_dynamic_shapes():
    from torch.export import Dim

    return ({1: Dim("seq", min=1, max=31)}, None)


SPECS: dict[str, Spec] = {
    "mlp": Spec("1", _m("make_mlp"), lambda: [[_randn(100, 4, 32)], [_randn(101, 4, 32)]]),
    "cnn_bn": Spec("1", _m("make_cnn_bn"),
                   lambda: [[_randn(110, 2, 3, 32, 32)], [_randn(111, 2, 3, 32, 32)]]),
    "mobilenet_v2": Spec("1", _m("make_mobilenet_v2"),
                         lambda: [[_randn(120, 1, 3, 96, 96)], [_randn(121, 1, 3, 96, 96)]]),
    "resnet18": Spec("1", _m("make_resnet18"),
                     lambda: [[_randn(130, 1, 3, 64, 64)], [_randn(131, 1, 3, 64, 64)]]),
    "vit_tiny": Spec("1", _m("make_vit_tiny"),
                     lambda: [[_randn(140, 1, 3, 64, 64)], [_randn(141, 1, 3, 64, 64)]]),
    "audio_encoder": Spec("1", _m("make_audio_encoder"),
                          lambda: [[_randn(150, 1, 80, 200)], [_randn(151, 1, 80, 200)]]),
    "llama": Spec("1", _m("make_llama"), lambda: [[_tokens(600, 8)], [_tokens(601, 8)]]),
    "llama_kv": Spec("1", _m("make_llama_kv"),
                     lambda: [[_tokens(650 + p, 1), _pos(p)] for p in range(5)]),
    "llama_sdpa_kv": Spec(
        "1", _m("make_llama_sdpa_kv"), _llama_sdpa_calls,
        example=lambda: (_tokens(699, 2), _pos(0)),
        dynamic_shapes=_llama_sdpa_dynamic_shapes,
        notes="prefill [1,4] at pos 0, then decode steps at pos 4,5,6",
    ),
    "mlp_dynamic": Spec(
        "1", _m("make_mlp_dynamic"),
        lambda: [[_randn(800 + b, b, 16)] for b in (1, 5, 16, 3)],
        example=lambda: (_randn(799, 4, 16),),
        dynamic_shapes=_mlp_dynamic_shapes,
    ),
    "cond": Spec("1", _m("make_cond"), _cond_inputs),
    "quant_cnn": Spec(
        "1", _make_quant_cnn,
        lambda: [[_randn(1000, 1, 3, 32, 32)], [_randn(1001, 1, 3, 32, 32)]],
        lower="to_edge", quantized=True,
    ),
    "deeplabv3": Spec("1", _m("make_deeplabv3"),
                      lambda: [[_randn(1100, 1, 3, 64, 64)], [_randn(1101, 1, 3, 64, 64)]]),
    "yolo": Spec("1", _m("make_yolo"),
                 lambda: [[_randn(1110, 1, 3, 64, 64)], [_randn(1111, 1, 3, 64, 64)]]),
    "whisper": Spec("1", _m("make_whisper"), _whisper_calls,
                    edge_exceptions=("unfold", "view_as_real"),
                    notes="log-mel (STFT) + encoder + one decoder step per call, KV cache"),
    "quant_cnn_bn": Spec(
        "1", _m("make_quant_cnn_bn"),
        lambda: [[_randn(1020, 1, 3, 32, 32)], [_randn(1021, 1, 3, 32, 32)]],
        lower="to_edge", quantized=True,
        notes="int8 PT2E, 3 conv+BN+ReLU+max-pool stages: dequantized weights in planned memory",
    ),
    "quant_mobilenet_v2": Spec(
        "1", _m("make_quant_mobilenet_v2"),
        lambda: [[_randn(1010, 1, 3, 96, 96)], [_randn(1011, 1, 3, 96, 96)]],
        lower="to_edge", quantized=True,
        notes="int8 PT2E, portable quantized ops: bit-identical to executorch.runtime",
    ),
}

FIXTURE_NAMES: tuple[str, ...] = tuple(SPECS)


# ----------------------------------------------------------------- cache


def cache_dir() -> Path:
    env = os.environ.get("PYRUNTIME_FIXTURES")
    return Path(env) if env else _REPO / "tests" / ".fixtures"


def _versions() -> dict:
    return {
        "format": FORMAT_VERSION,
        "torch": importlib.metadata.version("torch"),
        "executorch": importlib.metadata.version("executorch"),
    }


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_atomic(path: Path, write: Callable[[Any], None]) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _paths(name: str) -> dict[str, Path]:
    d = cache_dir()
    return {ext: d / f"{name}.{ext}" for ext in ("pte", "npz", "json", "key")}


def _expected_key(name: str) -> dict:
    return {"fixture": name, "version": SPECS[name].version, **_versions()}


def _cache_valid(name: str) -> bool:
    p = _paths(name)
    try:
        key = json.loads(p["key"].read_text())
    except (OSError, ValueError):
        return False
    if {k: key.get(k) for k in _expected_key(name)} != _expected_key(name):
        return False
    files = key.get("files", {})
    try:
        return all(files.get(ext) == _sha256(p[ext]) for ext in ("pte", "npz", "json"))
    except OSError:
        return False


@contextlib.contextmanager
def _build_lock(name: str):
    """Serialize concurrent builders of one fixture (e.g. pytest-xdist workers)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: atomic renames still keep the cache consistent
        yield
        return
    with open(cache_dir() / f"{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _load(name: str) -> Fixture:
    p = _paths(name)
    meta = json.loads(p["json"].read_text())
    with np.load(p["npz"], allow_pickle=False) as npz:
        calls = []
        expected = []
        for ci, call in enumerate(meta["calls"]):
            inputs = []
            for ii, kind in enumerate(call["inputs"]):
                if kind["type"] == "tensor":
                    inputs.append(npz[f"call{ci}_in{ii}"])
                else:
                    inputs.append({"int": int, "float": float, "bool": bool}[kind["type"]](kind["value"]))
            calls.append(inputs)
            expected.append([npz[f"call{ci}_out{oi}"] for oi in range(call["n_outputs"])])
    return Fixture(name=name, pte_path=p["pte"], method=meta["method"], calls=calls,
                   expected=expected, ptd_path=None)


_MEMO: dict[str, Fixture] = {}


def get_fixture(name: str, rebuild: bool = False) -> Fixture:
    """Return fixture ``name``, exporting and running it first if the cache is stale."""
    if name not in SPECS:
        raise KeyError(f"unknown fixture {name!r}; known: {', '.join(FIXTURE_NAMES)}")
    if rebuild or name not in _MEMO:
        if rebuild or not _cache_valid(name):
            with _build_lock(name):
                if rebuild or not _cache_valid(name):
                    _build(name)
        _MEMO[name] = _load(name)
    fx = _MEMO[name]
    # fresh arrays per caller: a runtime under test may write into its inputs
    return replace(fx, calls=[[_copy(v) for v in c] for c in fx.calls],
                   expected=[[o.copy() for o in outs] for outs in fx.expected])


def _copy(value):
    return value.copy() if isinstance(value, np.ndarray) else value


# ----------------------------------------------------------------- build (torch + executorch)


def _to_torch(value):
    import torch

    return torch.from_numpy(value.copy()) if isinstance(value, np.ndarray) else value


def _to_numpy(value) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone().contiguous().numpy()  # outputs may alias planned memory
    return np.asarray(value)


def export_program(name: str) -> bytes:
    """Export fixture ``name`` with the real ExecuTorch exporter; return the .pte bytes."""
    import torch
    from executorch.exir import to_edge, to_edge_transform_and_lower

    spec = SPECS[name]
    _import_runtime_libs()
    module = spec.make()
    example = spec.example() if spec.example else spec.calls()[0]
    args = tuple(_to_torch(v) for v in example)
    dynamic_shapes = spec.dynamic_shapes() if spec.dynamic_shapes else None
    with torch.no_grad():
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes)
    lower = {"to_edge": to_edge, "to_edge_transform_and_lower": to_edge_transform_and_lower}
    config = {"compile_config": edge_config(spec.edge_exceptions)} if spec.edge_exceptions else {}
    return lower[spec.lower](ep, **config).to_executorch().buffer


def edge_config(exceptions=()):
    """EdgeCompileConfig keeping ``exceptions`` (aten op names) out of core-ATen checks."""
    import torch
    from executorch.exir import EdgeCompileConfig

    return EdgeCompileConfig(_core_aten_ops_exception_list=[
        getattr(torch.ops.aten, n).default for n in exceptions])


def _import_runtime_libs() -> None:
    """Register the custom llama ops and quantized kernels with torch and the runtime."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401


def run_reference_runtime(pte: bytes | Path, calls: list, method: str = "forward") -> list:
    """Run ``calls`` in order on one loaded method in executorch.runtime."""
    from executorch.runtime import Runtime

    _import_runtime_libs()
    program = Runtime.get().load_program(pte if isinstance(pte, bytes) else Path(pte))
    loaded = program.load_method(method)
    return [[_to_numpy(o) for o in loaded.execute([_to_torch(v) for v in call])] for call in calls]


_FRESH_CHILD = """
import pickle, sys
from tests.programs.fixtures import run_reference_runtime
with open(sys.argv[1], "rb") as f:
    pte, calls, method = pickle.load(f)
with open(sys.argv[2], "wb") as f:
    pickle.dump(run_reference_runtime(pte, calls, method), f)
"""


def run_reference_runtime_fresh(pte: bytes, calls: list, method: str = "forward") -> list:
    """``run_reference_runtime`` in a new process that does nothing else first: what a
    user's program running the file gets. In a process that did other work first,
    executorch.runtime's outputs can follow what that work was: on an Intel Xeon, llama_kv
    (a KV cache in mutable buffers, whose initial state the .pte leaves unset) gave three
    sets of outputs, up to 111 of 128 per step an ulp or two apart: in a new process (the
    bits pyruntime gives), after another model's export, and after a torch forward pass
    with the custom ops loaded. On an AMD EPYC the test fixtures built in-process matched.
    The cause inside executorch was not isolated."""
    import pickle
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        args, out = Path(d) / "args.pkl", Path(d) / "out.pkl"
        args.write_bytes(pickle.dumps((bytes(pte), calls, method)))
        p = subprocess.run([sys.executable, "-c", _FRESH_CHILD, str(args), str(out)],
                           cwd=_REPO, env={**os.environ, "PYTHONPATH": str(_REPO)},
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"executorch.runtime in a new process failed (rc {p.returncode}):"
                               f"\n{p.stderr[-3000:]}")
        return pickle.loads(out.read_bytes())


def eager_outputs(name: str, module=None) -> list:
    """Torch eager outputs for every call of fixture ``name``, run in order on one
    module (so state such as KV caches carries over). ``module`` defaults to a
    freshly built ``SPECS[name].make()``."""
    import torch
    from torch.utils._pytree import tree_leaves

    spec = SPECS[name]
    _import_runtime_libs()
    module = spec.make() if module is None else module
    with torch.no_grad():
        return [[_to_numpy(o) for o in tree_leaves(module(*[_to_torch(v) for v in call]))]
                for call in spec.calls()]


def _input_kind(value) -> dict:
    if isinstance(value, np.ndarray):
        return {"type": "tensor", "dtype": str(value.dtype), "shape": list(value.shape)}
    for t, n in ((bool, "bool"), (int, "int"), (float, "float")):
        if isinstance(value, t):
            return {"type": n, "value": value}
    raise TypeError(f"fixture input of unsupported type {type(value).__name__}")


def _build(name: str) -> None:
    spec = SPECS[name]
    p = _paths(name)
    p["key"].unlink(missing_ok=True)  # invalid until every file is in place
    t0 = time.perf_counter()
    pte = export_program(name)
    t1 = time.perf_counter()
    calls = spec.calls()
    expected = run_reference_runtime_fresh(pte, calls, spec.method)
    t2 = time.perf_counter()

    arrays, meta_calls = {}, []
    for ci, (call, outs) in enumerate(zip(calls, expected)):
        for ii, v in enumerate(call):
            if isinstance(v, np.ndarray):
                arrays[f"call{ci}_in{ii}"] = v
        for oi, o in enumerate(outs):
            arrays[f"call{ci}_out{oi}"] = o
        meta_calls.append({"inputs": [_input_kind(v) for v in call], "n_outputs": len(outs),
                           "outputs": [{"dtype": str(o.dtype), "shape": list(o.shape)} for o in outs]})
    meta = {"name": name, "method": spec.method, "quantized": spec.quantized, "notes": spec.notes,
            "export_s": round(t1 - t0, 3), "run_s": round(t2 - t1, 3), "calls": meta_calls}

    _write_atomic(p["pte"], lambda f: f.write(pte))
    _write_atomic(p["npz"], lambda f: np.savez(f, **arrays))
    _write_atomic(p["json"], lambda f: f.write(json.dumps(meta, indent=1).encode()))
    key = {**_expected_key(name), "files": {e: _sha256(p[e]) for e in ("pte", "npz", "json")}}
    _write_atomic(p["key"], lambda f: f.write(json.dumps(key, indent=1).encode()))


# ----------------------------------------------------------------- CLI


def program_summary(pte_path: Path) -> list[dict]:
    """Per execution plan: sorted operator names and instruction-kind counts."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(Path(pte_path).read_bytes()).program
    plans = []
    for plan in program.execution_plan:
        ops = sorted({f"{op.name}.{op.overload}" if op.overload else op.name
                      for op in plan.operators})
        kinds: dict[str, int] = {}
        for chain in plan.chains:
            for instr in chain.instructions:
                k = type(instr.instr_args).__name__
                kinds[k] = kinds.get(k, 0) + 1
        delegates = sorted({d.id for d in plan.delegates})
        plans.append({"method": plan.name, "operators": ops, "instructions": kinds,
                      "delegates": delegates})
    return plans


def main(argv: list[str] | None = None) -> int:
    import argparse
    import warnings

    warnings.filterwarnings("ignore")  # exporter deprecation noise would drown the listing
    parser = argparse.ArgumentParser(prog="python -m tests.programs.fixtures", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"fixtures (default: all of {', '.join(FIXTURE_NAMES)})")
    parser.add_argument("--list-ops", action="store_true", help="print operators and instruction kinds")
    parser.add_argument("--rebuild", action="store_true", help="ignore the cache and rebuild")
    args = parser.parse_args(argv)
    names = args.names or list(FIXTURE_NAMES)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        parser.error(f"unknown fixture(s) {unknown}; known: {', '.join(FIXTURE_NAMES)}")

    total = time.perf_counter()
    for name in names:
        t0 = time.perf_counter()
        fx = get_fixture(name, rebuild=args.rebuild)
        dt = time.perf_counter() - t0
        size = fx.pte_path.stat().st_size
        meta = json.loads(_paths(name)["json"].read_text())
        print(f"== {name}: {fx.pte_path.name} {size / 1e6:.2f} MB, {len(fx.calls)} call(s); "
              f"ready in {dt:.1f} s (when built: export {meta['export_s']:.1f} s, "
              f"executorch.runtime {meta['run_s']:.2f} s)", flush=True)
        if args.list_ops:
            for plan in program_summary(fx.pte_path):
                print(f"  method {plan['method']}: instructions {plan['instructions']}"
                      + (f", delegates {plan['delegates']}" if plan["delegates"] else ""))
                for op in plan["operators"]:
                    print(f"    {op}", flush=True)
    print(f"total {time.perf_counter() - total:.1f} s, cache {cache_dir()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
