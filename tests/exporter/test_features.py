"""Exporter features on small models: two methods, weights in a .ptd, mutable
state with an initial value, dynamic shapes with views and size arithmetic.
Each runs in both runtimes against torch eager, and the default plan equals
the one ExecuTorch's own exporter makes for the same model."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.export import Dim

from pyruntime import exporter
from pyruntime.ptd import DataMap
from tests.exporter.helpers import assert_close, run_executorch, run_pyruntime


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x) + 1


class MulSub(torch.nn.Module):
    def forward(self, x, y):
        return x * y, x - y


class Accumulate(torch.nn.Module):
    """A buffer with a non-zero initial state, updated on every call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.arange(6.0).reshape(2, 3) + 10)

    def forward(self, x):
        self.state.add_(x)
        return self.state * 2


class DynamicView(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(12, 5)

    def forward(self, x):
        b = x.shape[0]
        y = torch.relu(self.lin(x.reshape(b, -1)))
        return y.view(b * 5), y.sum(0)


def _executorch_plans(methods: dict) -> dict:
    """non_const_buffer_sizes per method from ExecuTorch's own exporter."""
    from executorch.exir import to_edge

    eps = {name: torch.export.export(m, args, dynamic_shapes=ds)
           for name, (m, args, ds) in methods.items()}
    et = to_edge(eps).to_executorch()
    return {p.name: list(p.non_const_buffer_sizes) for p in et.executorch_program.execution_plan}


def _eager(module, calls):
    module = copy.deepcopy(module)
    with torch.no_grad():
        outs = [module(*[torch.from_numpy(v.copy()) for v in call]) for call in calls]
    return [[o.numpy() for o in (out if isinstance(out, tuple) else (out,))] for out in outs]


def _check(result, module, calls, method="forward"):
    want = _eager(module, calls)
    for runner in (run_executorch, run_pyruntime):
        got = runner(result.buffer, calls, method, ptd=result.data)
        for step, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, f"{runner.__name__} {method} call {step}")


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_two_methods_share_constants():
    torch.manual_seed(0)
    affine = Affine().eval()
    methods = {"forward": (affine, (torch.randn(2, 4),), None),
               "mul_sub": (MulSub(), (torch.ones(2), torch.ones(2)), None),
               "again": (affine, (torch.randn(2, 4),), None)}
    result = exporter.export(methods=methods)
    _check(result, affine, [[_randn(2, 4, seed=1)], [_randn(2, 4, seed=2)]])
    _check(result, affine, [[_randn(2, 4, seed=3)]], "again")
    _check(result, MulSub(), [[_randn(2, seed=4), _randn(2, seed=5)]], "mul_sub")
    assert result.non_const_buffer_sizes == _executorch_plans(methods)
    weight = affine.lin.weight.detach().numpy().tobytes()
    assert result.buffer.count(weight) == 1  # de-duplicated across methods


def test_external_weights_go_to_ptd():
    torch.manual_seed(1)
    model = Affine().eval()
    inline = exporter.export(model, (torch.randn(2, 4),))
    result = exporter.export(model, (torch.randn(2, 4),), external_constants=True)
    assert result.data is not None
    weight = model.lin.weight.detach().numpy().tobytes()
    assert weight not in result.buffer and weight in inline.buffer
    data = DataMap.load(result.data)
    assert {"lin.weight", "lin.bias"} <= set(data.keys())
    assert bytes(data.get("lin.weight")) == weight
    _check(result, model, [[_randn(2, 4, seed=6)]])


def test_mutable_buffer_keeps_state_and_initial_value():
    model = Accumulate()
    result = exporter.export(model, (torch.ones(2, 3),))
    calls = [[_randn(2, 3, seed=s)] for s in range(3)]
    _check(result, model, calls)
    plan = _executorch_plans({"forward": (Accumulate(), (torch.ones(2, 3),), None)})
    assert result.non_const_buffer_sizes == plan


def test_dynamic_batch_with_views_and_size_arithmetic():
    torch.manual_seed(2)
    model = DynamicView().eval()
    ds = ({0: Dim("b", min=1, max=8)},)
    result = exporter.export(model, (torch.randn(4, 3, 4),), dynamic_shapes=ds)
    _check(result, model, [[_randn(b, 3, 4, seed=b)] for b in (1, 8, 3)])
    assert result.non_const_buffer_sizes == _executorch_plans(
        {"forward": (model, (torch.randn(4, 3, 4),), ds)})


@pytest.mark.parametrize("planner", ["greedy", "best"])
def test_cli_writes_a_loadable_program(tmp_path, planner):
    import pyruntime
    from pyruntime.exporter.__main__ import main

    out = tmp_path / "mlp.pte"
    assert main(["tests.programs.models:make_mlp", "--shape", "4x32", "--out", str(out),
                 "--planner", planner]) == 0
    program = pyruntime.Runtime.get().load_program(out)
    assert program.load_method("forward", tier="reference").execute([_randn(4, 32)])[0].shape == (4, 10)
