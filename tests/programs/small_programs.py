"""Tiny programs exported by ExecuTorch for runtime-semantics tests (cached like fixtures).

``small_program(name)`` returns ``(pte_path, ptd_path_or_None)``; each builder is a
few lines of torch, so tests can state exactly which runtime feature they exercise.
"""
from __future__ import annotations

import json
from pathlib import Path

from tests.programs.fixtures import _versions, _write_atomic, cache_dir

VERSION = "1"


def _linear_relu():
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(4, 3)

        def forward(self, x):
            return torch.relu(self.l(x))

    return M(), (torch.randn(2, 4),), {}


def _relu_neg():
    """Two kernels that compile in seconds (two unary ops): for the tests that
    compile from an empty cache."""
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x).neg()

    return M(), (torch.randn(2, 4),), {}


def _mutable_buffer():
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", torch.zeros(3))

        def forward(self, x):
            self.acc.add_(x)
            return self.acc * 1.0

    return M(), (torch.ones(3),), {}


def _initialized_state():
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", torch.arange(3.0) + 10)

        def forward(self, x):
            self.state.add_(x)
            return self.state * 1.0

    return M(), (torch.ones(3),), {}


def _initialized_state_program():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    return _export(_initialized_state, ExecutorchBackendConfig(
        passes=[InitializedMutableBufferPass(["state"])]))


def _big_chain():
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            for _ in range(20):
                x = torch.relu(x * 1.5 - 0.25)
            return x

    return M(), (torch.ones(1 << 20),), {}


def _chain400():
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            for _ in range(200):
                x = x * 1.0001
                x = x + 0.5
            return x

    return M(), (torch.ones(1),), {}


def _two_methods():
    import torch

    class A(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class B(torch.nn.Module):
        def forward(self, x, y):
            return x * y, x - y

    return {"add_one": (A(), (torch.ones(3),)), "mul_sub": (B(), (torch.ones(2), torch.ones(2)))}


def _dynamic():
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            return x.reshape(-1) * 2

    b = torch.export.Dim("b", min=1, max=8)
    return M(), (torch.ones(4, 3),), {"dynamic_shapes": ({0: b},)}


def _scalar_input():
    import torch

    class M(torch.nn.Module):
        def forward(self, x, k: int):
            return x * k

    return M(), (torch.ones(2), 3), {}


def _conv_fusion():
    """Every shape of conv + batch norm + activation the fast tier fuses (crossed clamp
    bounds, min > max, among them), and one it must not: a conv output also returned."""
    import torch
    from torch import nn

    torch.manual_seed(5)

    def bn(c):
        b = nn.BatchNorm2d(c)
        b.running_mean.uniform_(-1, 1)
        b.running_var.uniform_(0.5, 2)
        b.weight.data.uniform_(0.5, 1.5)
        b.bias.data.uniform_(-0.5, 0.5)
        return b

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), bn(8)  # + ReLU6
            self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=True), bn(8)
            self.c3 = nn.Conv2d(8, 16, 1)  # conv (bias) + relu
            self.c4, self.b4 = nn.Conv2d(16, 8, 1, bias=False), bn(8)  # conv + bn only
            self.c5, self.b5 = nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False), bn(8)
            self.c6 = nn.Conv2d(8, 4, 1)

        def forward(self, x):
            a = nn.functional.relu6(self.b1(self.c1(x)))
            b = nn.functional.hardtanh(self.b2(self.c2(a)), -1.0, 2.0)
            c = torch.relu(self.c3(b))
            d = self.b4(self.c4(c)) + a
            raw = self.c5(d)  # returned too: not fused
            e = torch.relu(self.b5(raw))
            f = torch.clamp(self.c6(e), 1.0, -1.0)  # crossed bounds: max wins, fused too
            return e, raw, f

    return M(), (torch.randn(2, 3, 12, 12),), {}


def _conv_fusion_shared():
    """Intermediates with a second reader: a fused group may end only before them."""
    import torch
    from torch import nn

    torch.manual_seed(6)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
            self.c2, self.b2 = nn.Conv2d(8, 8, 1, bias=False), nn.BatchNorm2d(8)
            self.c3 = nn.Conv2d(8, 4, 3, padding=1)

        def forward(self, x):
            y = self.b1(self.c1(x))
            a = torch.relu(y) + y  # the batch norm's out read twice: conv + bn only
            d = self.c2(a)
            e = self.b2(d) * d  # the conv's out read by the batch norm and mul: no fusion
            g = torch.clamp(self.c3(e), -1.0, 1.0)
            return g * g  # the clamp's out read twice by one instruction: fused

    m = M()
    for b in (m.b1, m.b2):
        b.running_mean.uniform_(-1, 1)
        b.running_var.uniform_(0.5, 2)
    return m, (torch.randn(2, 3, 10, 10),), {}


def _export(builder, config=None):
    import torch
    from executorch.exir import to_edge

    spec = builder()
    if isinstance(spec, dict):
        eps = {n: torch.export.export(m.eval(), args) for n, (m, args) in spec.items()}
        edge = to_edge(eps)
    else:
        m, args, kw = spec
        edge = to_edge(torch.export.export(m.eval(), args, **kw))
    return edge.to_executorch(config) if config is not None else edge.to_executorch()


def _external_linear():
    from executorch.exir import ExecutorchBackendConfig

    return _export(_linear_relu, ExecutorchBackendConfig(external_constants=True))


def _unplanned_inputs():
    """Inputs left out of the memory plan: the runtime aliases the caller's arrays."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
        alloc_graph_input=False))
    return _export(_linear_relu, config)


BUILDERS = {
    "linear_relu": lambda: _export(_linear_relu),
    "relu_neg": lambda: _export(_relu_neg),
    "mutable_buffer": lambda: _export(_mutable_buffer),
    "two_methods": lambda: _export(_two_methods),
    "dynamic": lambda: _export(_dynamic),
    "scalar_input": lambda: _export(_scalar_input),
    "external_linear": _external_linear,
    "initialized_state": _initialized_state_program,
    "big_chain": lambda: _export(_big_chain),
    "chain400": lambda: _export(_chain400),
    "unplanned_inputs": _unplanned_inputs,
    "conv_fusion": lambda: _export(_conv_fusion),
    "conv_fusion_shared": lambda: _export(_conv_fusion_shared),
}


def small_program(name: str) -> tuple[Path, Path | None]:
    d = cache_dir() / "small"
    d.mkdir(parents=True, exist_ok=True)
    pte, ptd, key = d / f"{name}.pte", d / f"{name}.ptd", d / f"{name}.key"
    want = json.dumps({"v": VERSION, **_versions()})
    if not (pte.exists() and key.exists() and key.read_text() == want):
        et = BUILDERS[name]()
        if name.startswith("external"):
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                et.write_tensor_data_to_file(tmp)
                (blob,) = list(Path(tmp).glob("*.ptd"))
                data = blob.read_bytes()
            _write_atomic(ptd, lambda f: f.write(data))
        _write_atomic(pte, lambda f: f.write(et.buffer))
        _write_atomic(key, lambda f: f.write(want.encode()))
    return pte, (ptd if ptd.exists() else None)
