"""Memory planning: the default plan is ExecuTorch's (same non_const_buffer_sizes
as its to_executorch() on the same model); memory_planner="best" is never larger
and smaller in total, and its programs still run correctly."""
from __future__ import annotations

import pytest

from pyruntime.exporter.memory_planning import collect_specs, plan_memory, verify_plan
from pyruntime.exporter.passes import graph_modules
from tests.exporter.helpers import (MODEL_NAMES, assert_close, eager_outputs,
                                    executorch_plan, export_fixture_model, run_executorch,
                                    run_pyruntime)
from tests.programs import fixtures


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_greedy_plan_equals_executorch(name):
    ours = export_fixture_model(name).non_const_buffer_sizes["forward"]
    theirs = executorch_plan(fixtures.get_fixture(name).pte_path)
    assert ours == theirs, f"{name}: ours {ours} vs ExecuTorch {theirs}"


def _replan(name: str, planner: str) -> list[int]:
    method = export_fixture_model(name).methods["forward"]
    sizes = plan_memory(method.gm, planner)
    for gm in graph_modules(method.gm):
        verify_plan(gm)
    return sizes


def test_best_plan_is_never_larger_and_smaller_in_total():
    greedy_total = best_total = 0
    for name in MODEL_NAMES:
        greedy = _replan(name, "greedy")
        best = _replan(name, "best")
        assert best[1] <= greedy[1], f"{name}: best {best} > greedy {greedy}"
        # the plan can never beat the bytes alive at the busiest moment
        method = export_fixture_model(name).methods["forward"]
        specs = collect_specs(method.gm)
        end = max((s.lifetime[1] for s in specs), default=0)
        live = [0] * (end + 1)
        for s in specs:
            for t in range(s.lifetime[0], s.lifetime[1] + 1):
                live[t] += s.allocated()
        assert best[1] >= max(live, default=0)
        greedy_total += greedy[1]
        best_total += best[1]
    _replan_all_greedy()  # leave the cached graphs as exported
    assert best_total < greedy_total


def _replan_all_greedy():
    for name in MODEL_NAMES:
        _replan(name, "greedy")


@pytest.mark.parametrize("name", ["vit_tiny", "llama_kv", "cond"])
def test_best_plan_programs_run(name):
    result = export_fixture_model(name, "best")
    assert result.non_const_buffer_sizes["forward"][1] < \
        executorch_plan(fixtures.get_fixture(name).pte_path)[1] or name == "cond"
    calls = fixtures.SPECS[name].calls()
    want = eager_outputs(name)
    for step, (e, o, w) in enumerate(zip(run_executorch(result.buffer, calls),
                                         run_pyruntime(result.buffer, calls), want)):
        assert_close(e, w, f"{name} executorch.runtime call {step}")
        assert_close(o, w, f"{name} pyruntime call {step}")


def test_constant_folding_shrinks_the_plan_and_still_runs():
    from pyruntime import exporter
    from tests.exporter.helpers import fixture_model

    name = "vit_tiny"
    spec = fixtures.SPECS[name]
    args = tuple(fixtures._to_torch(v) for v in spec.calls()[0])
    result = exporter.export(fixture_model(name), args, memory_planner="best",
                             fold_constants=True)
    assert result.non_const_buffer_sizes["forward"][1] < \
        _replan(name, "best")[1]
    _replan(name, "greedy")
    calls = spec.calls()
    want = eager_outputs(name)
    for step, (e, o, w) in enumerate(zip(run_executorch(result.buffer, calls),
                                         run_pyruntime(result.buffer, calls), want)):
        assert_close(e, w, f"{name} folded executorch.runtime call {step}")
        assert_close(o, w, f"{name} folded pyruntime call {step}")
