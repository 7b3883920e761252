"""QNN-delegated program fixtures: exported by ExecuTorch's own Qualcomm exporter
(``to_edge_transform_and_lower_to_qnn``, ``QnnQuantizer``), run once by
``executorch.runtime``'s QnnBackend for the reference outputs, cached on disk.

    from tests.delegates.qnn_fixtures import get_fixture
    fx = get_fixture("mlp_fp16")   # exported + run once (all missing fixtures at once)
    fx.pte_path, fx.runs, fx.expected, fx.meta   # runs: [(method, inputs)], in order

Both ExecuTorch halves need a QNN device that the x86 HTP simulator accepts, so
the fixtures build ``tests/delegates/qnn_shim/qnn_htp_shim.c`` (a stand-in
``libQnnHtp.so`` that forwards to the real library and drops the SoC device
config) with the system C compiler into the cache, lay it out as a QNN SDK
(``qnn_sdk/lib/x86_64-linux-clang/`` with the real libraries beside it) and run
the exporter and the reference in a child process whose ``QNN_SDK_ROOT`` and
``LD_LIBRARY_PATH`` point there. pyruntime never loads the shim.

Cache: ``$PYRUNTIME_FIXTURES`` or ``<repo>/tests/.fixtures/``, files ``qnn_<name>.*``; the
``.key`` file (versions, library stamp, hashes) is written last, so a partial build
is redone. ``python -m tests.delegates.qnn_fixtures [names]`` builds ahead of the tests.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tests import fixture_cache
from tests.fixture_cache import cache_dir, write_atomic as _write

FORMAT_VERSION = "2"
_REPO = Path(__file__).resolve().parents[2]
SHIM_SOURCE = Path(__file__).resolve().parent / "qnn_shim" / "qnn_htp_shim.c"
SOC = "SM8650"


@dataclass(frozen=True)
class Fixture:
    name: str
    pte_path: Path
    runs: list  # [(method, [inputs])], run in order, one loaded method per name
    expected: list  # executorch.runtime's outputs per run
    meta: dict
    torch: list | None = None  # the float torch model's outputs per run (float I/O only)

    @property
    def calls(self) -> list:
        """The inputs of each run (what the fuzz targets read as ``fx.calls``)."""
        return [inputs for _, inputs in self.runs]


@dataclass(frozen=True)
class Spec:
    version: str
    make: Callable[[], Any]  # float module, or {method: module}
    runs: Callable[[], list]  # [(method, [np inputs])]
    example: Callable[[], dict] | None = None  # {method: example inputs} (default: 1st run)
    quant: str | None = None  # QnnQuantizer dtype ("8a8w", "16a16w", ...); None: fp16
    quant_io: str | None = None  # tag graph I/O quantized ("uint8"/"uint16")
    dynamic_shapes: Callable[[], Any] | None = None
    note: str = ""


def _randn(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _randint(seed: int, dtype, *shape: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, endpoint=True,
                                                dtype=dtype)


# ---- models (small: the HTP simulator and its graph preparation are slow) -------------
def _mlp():
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 8)).eval()


def _cnn_bn():
    """conv-BN-ReLU, max pool (explicit stride: ExecuTorch's builder reads it), conv-BN-
    ReLU, average pool (mean.dim does not prepare in fp16 on the host's HTP v68), linear."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from tests.programs.models import randomize_batchnorm

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.c2, self.b2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.b1(self.c1(x))), kernel_size=2, stride=2)
            x = F.relu(self.b2(self.c2(x)))
            return self.fc(F.avg_pool2d(x, 8).flatten(1))

    torch.manual_seed(1)
    return randomize_batchnorm(CNN(), lambda: torch.randn(4, 3, 16, 16))


def _mobilenet_v2():
    """MobileNetV2 (inverted residuals, depthwise convs, ReLU6, BN), width 0.35, a 32x32
    input and one block per stage (graph preparation time grows with the node count)."""
    import torch

    from tests.programs.models import MobileNetV2, randomize_batchnorm

    class Small(MobileNetV2):
        SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 1, 2), (6, 96, 1, 1)]

    torch.manual_seed(2)
    return randomize_batchnorm(Small(num_classes=10, width_mult=0.35),
                               lambda: torch.randn(2, 3, 32, 32))


def _vit():
    """ViT-tiny-like encoder: conv patch embedding, learned positions, pre-norm blocks
    (fused qkv, softmax attention, GELU MLP), per-token head (no class-token squeeze:
    squeeze_copy does not prepare in fp16 on the host's HTP v68)."""
    import torch
    from torch import nn

    class Attn(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h, self.qkv, self.o = h, nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.h, d // self.h).permute(
                2, 0, 3, 1, 4).unbind(0)
            a = torch.softmax(q @ k.transpose(-1, -2) * (d // self.h) ** -0.5, dim=-1)
            return self.o((a @ v).transpose(1, 2).reshape(b, t, d))

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.n1, self.attn, self.n2 = nn.LayerNorm(d), Attn(d, h), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

        def forward(self, x):
            x = x + self.attn(self.n1(x))
            return x + self.mlp(self.n2(x))

    class ViT(nn.Module):
        def __init__(self, image=32, patch=8, d=64, depth=2, heads=2, classes=10):
            super().__init__()
            self.embed = nn.Conv2d(3, d, patch, patch)
            self.pos = nn.Parameter(0.02 * torch.randn(1, (image // patch) ** 2, d))
            self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(depth)])
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

        def forward(self, x):
            x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
            return self.head(self.norm(self.blocks(x)))

    torch.manual_seed(4)
    return ViT().eval()


def _llama():
    """A Llama-style decoder: token embedding, RMSNorm, rotary embeddings, causal
    softmax attention, SwiGLU MLP, tied-free output head; fixed 8-token window."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Parameter(torch.empty(d).uniform_(0.5, 1.5))

        def forward(self, x):
            return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.w

    class Layer(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h, self.hd = h, d // h
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
            self.w1, self.w3 = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
            self.w2 = nn.Linear(2 * d, d, bias=False)

        def rope(self, x, cos, sin):
            x1, x2 = x[..., :self.hd // 2], x[..., self.hd // 2:]
            return x * cos + torch.cat([-x2, x1], dim=-1) * sin

        def forward(self, x, cos, sin, mask):
            b, t, d = x.shape
            hx = self.n1(x)
            q, k, v = (w(hx).reshape(b, t, self.h, self.hd).transpose(1, 2)
                       for w in (self.wq, self.wk, self.wv))
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            a = torch.softmax(q @ k.transpose(-1, -2) * self.hd ** -0.5 + mask, dim=-1)
            x = x + self.wo((a @ v).transpose(1, 2).reshape(b, t, d))
            hx = self.n2(x)
            return x + self.w2(F.silu(self.w1(hx)) * self.w3(hx))

    class Llama(nn.Module):
        def __init__(self, vocab=64, d=32, h=2, layers=2, t=8):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList([Layer(d, h) for _ in range(layers)])
            self.norm, self.out = RMSNorm(d), nn.Linear(d, vocab, bias=False)
            hd = d // h
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            ang = torch.arange(t).float()[:, None] * inv[None]
            self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1))
            self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1))
            self.register_buffer("mask", torch.triu(torch.full((t, t), -1e4), 1))

        def forward(self, tokens):
            x = self.emb(tokens)
            for layer in self.layers:
                x = layer(x, self.cos, self.sin, self.mask)
            return self.out(self.norm(x))

    torch.manual_seed(6)
    return Llama().eval()


def _two_methods():
    """Two methods lowered together: one context binary holding both graphs, carried
    by both methods' delegates (same signature), as ExecuTorch's multi-method export."""
    import torch
    from torch import nn

    torch.manual_seed(7)
    return {"forward": nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval(),
            "decode": nn.Sequential(nn.Linear(8, 8), nn.Sigmoid()).eval()}


def _stateful():
    """A mutable buffer updated every call (delegated: kept inside the QNN delegate)."""
    import torch
    from torch import nn

    class Acc(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", torch.zeros(2, 8))
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            self.acc.add_(self.fc(x))
            return self.acc * 0.5

    torch.manual_seed(8)
    return Acc().eval()


def _add():
    from torch import nn

    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    return Add()


def _runs(method, *calls):
    return lambda: [(method, list(c)) for c in calls]


SPECS: dict[str, Spec] = {
    "mlp_fp16": Spec("1", _mlp, _runs("forward", [_randn(10, 4, 16)], [_randn(11, 4, 16)])),
    "mlp_int8": Spec("1", _mlp, _runs("forward", [_randn(12, 4, 16)], [_randn(13, 4, 16)]),
                     quant="8a8w"),
    "mlp_u8_io": Spec("1", _mlp, _runs("forward", [_randint(14, np.uint8, 4, 16)],
                                       [_randint(15, np.uint8, 4, 16)]),
                      example=lambda: {"forward": (_randn(16, 4, 16),)},
                      quant="8a8w", quant_io="uint8",
                      note="graph inputs and outputs quantized uint8 (TagQuantIO)"),
    "add_u16": Spec("1", _add, _runs("forward", [_randint(20, np.uint16, 1, 2, 3, 8),
                                                 _randint(21, np.uint16, 1, 2, 3, 8)],
                                     [_randint(22, np.uint16, 1, 2, 3, 8),
                                      _randint(23, np.uint16, 1, 2, 3, 8)]),
                    example=lambda: {"forward": (_randn(24, 1, 2, 3, 8), _randn(25, 1, 2, 3, 8))},
                    quant="16a16w", quant_io="uint16",
                    note="uint16 graph I/O (ExecuTorch's own dynamic-shape variant of this test "
                         "does not prepare here: 'Dynamic Tensor is not supported!')"),
    "cnn_bn_fp16": Spec("1", _cnn_bn, _runs("forward", [_randn(30, 1, 3, 16, 16)],
                                            [_randn(31, 1, 3, 16, 16)])),
    "cnn_bn_int8": Spec("1", _cnn_bn, _runs("forward", [_randn(32, 1, 3, 16, 16)]),
                        quant="8a8w"),
    "mobilenet_v2_fp16": Spec("1", _mobilenet_v2, _runs("forward", [_randn(40, 1, 3, 32, 32)])),
    "mobilenet_v2_int8": Spec("1", _mobilenet_v2, _runs("forward", [_randn(41, 1, 3, 32, 32)]),
                              quant="8a8w"),
    "vit_fp16": Spec("1", _vit, _runs("forward", [_randn(50, 1, 3, 32, 32)])),
    "llama_fp16": Spec("1", _llama, _runs(
        "forward", [np.random.default_rng(60).integers(0, 64, (1, 8)).astype(np.int32)])),
    "two_methods": Spec("1", _two_methods, lambda: [("forward", [_randn(70, 2, 16)]),
                                                    ("decode", [_randn(71, 2, 8)]),
                                                    ("forward", [_randn(72, 2, 16)])]),
    "stateful_fp16": Spec("1", _stateful, _runs("forward", [_randn(80, 2, 8)], [_randn(81, 2, 8)],
                                                [_randn(82, 2, 8)])),
}
NAMES = tuple(SPECS)


# ---- the shim and the fake SDK ---------------------------------------------------------


def compiler() -> str | None:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return shutil.which(cc)
    return None


def real_library_dir() -> str | None:
    """The folder of the QNN libraries pyruntime would load (nothing is loaded here)."""
    from pyruntime.delegates.qnn import library

    if os.environ.get("PYRUNTIME_QNN_REAL_DIR"):  # set by shim_env() for the child process
        return os.environ["PYRUNTIME_QNN_REAL_DIR"]
    explicit = os.environ.get(library.ENV)
    dirs = [explicit] if explicit else [d for _, d in library.candidates()]
    for d in dirs:
        if os.path.isfile(os.path.join(d, library.HTP)) and \
                os.path.isfile(os.path.join(d, library.SYSTEM)):
            return os.path.realpath(d)
    return None


_STAMPS: dict = {}


def _stamp(path: str) -> str:
    """Size and a hash of the first and last MiB: which library build (not when it was
    installed, so a reinstall keeps the cache)."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _STAMPS:
        with open(path, "rb") as f:
            h = hashlib.blake2b(f.read(1 << 20), digest_size=8)
            f.seek(max(0, st.st_size - (1 << 20)))
            h.update(f.read())
        _STAMPS[key] = f"{st.st_size}:{h.hexdigest()}"
    return _STAMPS[key]


def unavailable_reason() -> str | None:
    """Why the fixtures cannot be built here (None if they can)."""
    if real_library_dir() is None:
        return "no QNN library (pip install --no-deps onnxruntime-qnn==2.7.0)"
    if compiler() is None:
        return "no C compiler to build the test shim (tests/delegates/qnn_shim)"
    try:
        importlib.metadata.version("executorch")
        importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "executorch and torch are needed to export the fixtures"
    return None


def sdk_root() -> Path:
    """A QNN-SDK-shaped folder in the cache holding the shim as ``libQnnHtp.so`` and the
    real libraries beside it (built or refreshed when the shim or the library changed)."""
    real = real_library_dir()
    if real is None:
        raise RuntimeError(unavailable_reason())
    root = cache_dir() / "qnn_sdk"
    libdir = root / "lib" / "x86_64-linux-clang"
    real_htp = os.path.join(real, "libQnnHtp.so")
    key = hashlib.sha256(SHIM_SOURCE.read_bytes() + real_htp.encode() +
                         _stamp(real_htp).encode()).hexdigest()
    stamp = root / "shim.key"
    with _lock("shim"):
        if stamp.is_file() and stamp.read_text() == key and (libdir / "libQnnHtp.so").is_file():
            return root
        stamp.unlink(missing_ok=True)
        libdir.mkdir(parents=True, exist_ok=True)
        for entry in libdir.iterdir():
            entry.unlink()
        cc = compiler()
        if cc is None:
            raise RuntimeError(unavailable_reason())
        out = libdir / "libQnnHtp.so"
        cmd = [cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(SHIM_SOURCE), "-ldl",
               "-lpthread", "-Wl,-soname,libQnnHtp.so", "-Wl,-z,nodelete",
               f'-DQNN_SHIM_REAL="{real_htp}"']
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"building the QNN test shim failed: {' '.join(cmd)}\n{r.stderr}")
        for lib in os.listdir(real):
            if lib.endswith(".so") and lib != "libQnnHtp.so":
                (libdir / lib).symlink_to(os.path.join(real, lib))
        if (libdir / "libHtpPrepare.so").exists() and not (libdir / "libQnnHtpPrepare.so").exists():
            (libdir / "libQnnHtpPrepare.so").symlink_to(os.path.join(real, "libHtpPrepare.so"))
        libs = Path(real).parent / "onnxruntime_qnn.libs"  # the wheel's bundled libc++
        link = root / "lib" / "onnxruntime_qnn.libs"
        if link.is_symlink() or link.exists():
            link.unlink()
        if libs.is_dir():
            link.symlink_to(libs)
        stamp.write_text(key)
    return root


def shim_env() -> dict:
    """The environment of a process in which ExecuTorch's QNN exporter and runtime work
    on the simulator (QNN_SDK_ROOT set: without it the exporter downloads an SDK)."""
    root = sdk_root()
    env = dict(os.environ)
    env["PYRUNTIME_QNN_REAL_DIR"] = real_library_dir()
    libdir = str(root / "lib" / "x86_64-linux-clang")
    env["QNN_SDK_ROOT"] = str(root)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"]
                                       if env.get("LD_LIBRARY_PATH") else "")
    env["PYTHONPATH"] = str(_REPO) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYRUNTIME_QNN_LIB_DIR", None)
    return env


# ---- cache ------------------------------------------------------------------------------
def _paths(name):
    return {ext: cache_dir() / f"qnn_{name}.{ext}" for ext in ("pte", "npz", "json", "key")}


def _key(name) -> dict:
    real = real_library_dir() or ""
    return {"fixture": f"qnn_{name}", "version": SPECS[name].version, "format": FORMAT_VERSION,
            "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch"),
            "qnn": _stamp(os.path.join(real, "libQnnHtp.so")) if real else "",
            "shim": hashlib.sha256(SHIM_SOURCE.read_bytes()).hexdigest()[:16]}


def _valid(name) -> bool:
    p = _paths(name)
    return fixture_cache.is_valid(p["key"], _key(name), {e: p[e] for e in ("pte", "npz", "json")})


def _lock(name):
    return fixture_cache.lock(f"qnn_{name}")


# ---- export and reference (in the child process) ----------------------------------------
def _quantize(module, examples, quant: str, dynamic_shapes=None):
    import torch
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = QnnQuantizer(soc_model=getattr(QcomChipset, SOC))
    quantizer.set_default_quant_config(getattr(QuantDtype, f"use_{quant}"),
                                       is_conv_per_channel=True, is_linear_per_channel=True)
    args = tuple(torch.from_numpy(a.copy()) for a in examples[0])
    ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
    prepared = prepare_pt2e(ep.module(), quantizer)
    with torch.no_grad():
        for ex in examples:
            prepared(*(torch.from_numpy(a.copy()) for a in ex))
    return convert_pt2e(prepared)


def export(name: str) -> tuple[bytes, dict]:
    """Lower fixture ``name`` with ExecuTorch's QNN exporter (needs ``shim_env()``)."""
    import torch
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec, generate_qnn_executorch_compiler_spec,
        to_edge_transform_and_lower_to_qnn,
    )

    spec = SPECS[name]
    made = spec.make()
    modules = made if isinstance(made, dict) else {"forward": made}
    runs = spec.runs()
    if spec.example:
        examples = {m: tuple(ex) for m, ex in spec.example().items()}
    else:
        examples = {}
        for m, inputs in runs:
            examples.setdefault(m, tuple(inputs))
    dyn = spec.dynamic_shapes() if spec.dynamic_shapes else None
    if spec.quant:
        modules = {m: _quantize(mod, [examples[m]], spec.quant, dyn)
                   for m, mod in modules.items()}
    compile_spec = generate_qnn_executorch_compiler_spec(
        soc_model=getattr(QcomChipset, SOC),
        backend_options=generate_htp_compiler_spec(use_fp16=spec.quant is None))
    passes = None
    if spec.quant_io:
        from executorch.backends.qualcomm._passes import TagQuantIO
        from executorch.backends.qualcomm._passes.qnn_pass_manager import QnnPassManager
        from executorch.backends.qualcomm.utils.constants import (
            QCOM_PASS_ACTIVATE_KEY, QCOM_PASS_ARGS_KWARGS_DEFAULTS_KEY,
        )

        dtype = getattr(torch, spec.quant_io)
        passes = QnnPassManager().get_capture_program_passes()
        passes[TagQuantIO][QCOM_PASS_ACTIVATE_KEY] = True
        passes[TagQuantIO][QCOM_PASS_ARGS_KWARGS_DEFAULTS_KEY]["get_quant_io_dtype_fn"] = (
            lambda n: dtype if n.op == "placeholder" and not n.name.startswith(("b_", "p_"))
            or n.op == "call_function" and any(u.op == "output" for u in n.users) else None)
    args = {m: tuple(torch.from_numpy(a.copy()) for a in ex) for m, ex in examples.items()}
    if len(modules) == 1:
        (m, mod), = modules.items()
        edge = to_edge_transform_and_lower_to_qnn(mod, args[m], compile_spec,
                                                  dynamic_shapes=dyn, passes_job=passes)
    else:
        edge = to_edge_transform_and_lower_to_qnn(modules, args, compile_spec,
                                                  passes_job=passes)
    meta = {"methods": sorted(modules), "note": spec.note, "quant": spec.quant,
            "quant_io": spec.quant_io, "lowered": {}}
    for m in modules:
        ops = {}
        for node in edge.exported_program(m).graph.nodes:
            if node.op == "call_function":
                t = str(getattr(node.target, "__name__", node.target))
                t = "delegate" if "executorch_call_delegate" in t else t
                if t != "getitem":
                    ops[t] = ops.get(t, 0) + 1
        meta["lowered"][m] = ops
    config = None
    if spec.quant_io:  # the program's I/O tensors take the delegate's integer dtype
        from executorch.backends.qualcomm._passes import BuildQuantIo
        from executorch.exir.capture._config import ExecutorchBackendConfig

        config = ExecutorchBackendConfig(passes=[BuildQuantIo()])
    return edge.to_executorch(config).buffer, meta


def run_torch(name: str, runs: list) -> list | None:
    """The float torch model's outputs for ``runs`` (None for integer-I/O fixtures)."""
    import torch

    spec = SPECS[name]
    if spec.quant_io:
        return None
    made = spec.make()
    modules = made if isinstance(made, dict) else {"forward": made}
    out = []
    with torch.no_grad():
        for m, inputs in runs:
            res = modules[m](*(torch.from_numpy(a.copy()) for a in inputs))
            res = res if isinstance(res, (tuple, list)) else (res,)
            out.append([r.detach().float().numpy() for r in res])
    return out


def run_reference(pte: bytes | Path, runs: list) -> list:
    import torch
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    methods = {}
    out = []
    for m, inputs in runs:
        if m not in methods:
            methods[m] = program.load_method(m)
        res = methods[m].execute([torch.from_numpy(a.copy()) for a in inputs])
        out.append([o.detach().clone().numpy() for o in res])
    return out


def _build(name: str) -> None:
    import io

    p = _paths(name)
    p["key"].unlink(missing_ok=True)
    t0 = time.perf_counter()
    pte, meta = export(name)
    t1 = time.perf_counter()
    runs = SPECS[name].runs()
    expected = run_reference(pte, runs)
    reference = run_torch(name, runs)
    meta.update({"runs": [[m, len(c), len(o)] for (m, c), o in zip(runs, expected)],
                 "export_s": round(t1 - t0, 1), "reference_s": round(time.perf_counter() - t1, 2)})
    arrays = {f"r{i}_in{j}": a for i, (_, c) in enumerate(runs) for j, a in enumerate(c)}
    arrays.update({f"r{i}_out{j}": o for i, outs in enumerate(expected)
                   for j, o in enumerate(outs)})
    if reference is not None:  # the float model in torch, for context (not the oracle)
        arrays.update({f"r{i}_torch{j}": o for i, outs in enumerate(reference)
                       for j, o in enumerate(outs)})
        meta["torch"] = True
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    _write(p["pte"], pte)
    _write(p["npz"], npz.getvalue())
    _write(p["json"], json.dumps(meta, indent=1).encode())
    fixture_cache.write_key(p["key"], _key(name), {e: p[e] for e in ("pte", "npz", "json")})


def _child(names: list[str]) -> int:
    """Build ``names`` in this process (started by ``build`` with ``shim_env()``)."""
    failed = 0
    for n in names:
        t = time.perf_counter()
        try:
            _build(n)
            print(f"qnn fixture {n}: {time.perf_counter() - t:.1f}s", file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 - report every failing fixture, build the rest
            failed += 1
            import traceback

            traceback.print_exc()
            print(f"qnn fixture {n}: FAILED {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            _write(cache_dir() / f"qnn_{n}.error", f"{type(e).__name__}: {e}".encode())
    return 1 if failed else 0


def build(names=None) -> None:
    """Build every missing fixture of ``names`` (default: all) in one child process."""
    names = [n for n in (names or NAMES) if not _valid(n)]
    if not names:
        return
    with _lock("build"):
        names = [n for n in names if not _valid(n)]
        if not names:
            return
        for n in names:
            (cache_dir() / f"qnn_{n}.error").unlink(missing_ok=True)
        r = subprocess.run([sys.executable, "-m", "tests.delegates.qnn_fixtures", "--child",
                            *names], env=shim_env(), cwd=str(_REPO), capture_output=True,
                           text=True)
        if r.returncode not in (0, 1):  # 1: some fixtures failed (their .error says why)
            raise RuntimeError(f"building QNN fixtures {names} crashed (exit {r.returncode}):\n"
                               f"{r.stderr[-4000:]}")


_MEMO: dict[str, Fixture] = {}


def get_fixture(name: str) -> Fixture:
    if name not in _MEMO:
        if not _valid(name):
            build()  # every missing fixture at once: one child, one torch import
        if not _valid(name):
            err = cache_dir() / f"qnn_{name}.error"
            why = err.read_text() if err.is_file() else "no error recorded"
            raise RuntimeError(f"QNN fixture {name!r} could not be built: {why}")
        p = _paths(name)
        meta = json.loads(p["json"].read_text())
        with np.load(p["npz"]) as z:
            runs = [(m, [z[f"r{i}_in{j}"] for j in range(n_in)])
                    for i, (m, n_in, _) in enumerate(meta["runs"])]
            expected = [[z[f"r{i}_out{j}"] for j in range(n_out)]
                        for i, (_, _, n_out) in enumerate(meta["runs"])]
            ref = [[z[f"r{i}_torch{j}"] for j in range(n_out)]
                   for i, (_, _, n_out) in enumerate(meta["runs"])] if meta.get("torch") else None
        _MEMO[name] = Fixture(name, p["pte"], runs, expected, meta, ref)
    fx = _MEMO[name]
    return replace(fx, runs=[(m, [a.copy() for a in c]) for m, c in fx.runs],
                   expected=[[o.copy() for o in c] for c in fx.expected])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        sys.exit(_child(sys.argv[2:]))
    t = time.perf_counter()
    build(sys.argv[1:] or None)
    for n in sys.argv[1:] or NAMES:
        try:
            fx = get_fixture(n)
            print(f"{n}: ok {fx.meta.get('lowered')} (export {fx.meta.get('export_s')}s)")
        except RuntimeError as e:
            print(f"{n}: {e}")
    print(f"total {time.perf_counter() - t:.1f}s")
