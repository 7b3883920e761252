"""Every op the Vulkan bridge registers, alone: each case of ``vulkan_op_fixtures`` (one op,
one dtype the partitioner delegates it in) must run inside a Vulkan delegate and match
torch eager on the same inputs.

Delegation is read from the payload: each output of a case must be a delegate output, and
tracing the VkGraph back from it, written by the case's op (or, for ops that only feed
others, such as prepack, casts and SymInt arithmetic, reached on the way).

Tolerances, against torch eager (fp16 cases: the fp32 model on the same fp16 inputs and
parameters), as ``|got - ref| <= ulps * eps * max(|ref|, 1)`` per element:
  * integer and bool outputs: exact;
  * fp32 (eps = 2**-23): ``Case.ulps``, from measuring every case on lavapipe with 2x
    headroom: 0 for ops that only move, select or compare values (exact), 1-8 for
    arithmetic (transcendentals, reductions, dot products; worst measured 4.0, bilinear
    resize, whose weights torch rounds in another order);
  * fp16 (eps = 2**-10): ``Case.fp16_ulps``, 0.6: our fp16 shaders read fp16, compute in
    fp32 and round once, to nearest even, on the store, so a result is within half an fp16
    ulp of the fp32 result, plus that result's own (fp32-sized) error; measured at most
    0.495. Rounding twice (fp16 arithmetic) or toward zero (lavapipe's plain conversion of
    a float32 texel) gives up to 1. Cases whose graph keeps an fp16 intermediate allow 1;
  * int8 (PT2E): at most ``QUANT_STEPS`` (1) output quantization step: we accumulate in
    integers, torch's fake-quant reference in fp32, so a value on a rounding boundary
    may move by one step (measured: 0 on these inputs).
Also: every registered op is a case here or listed in ``delegates/vulkan/README.md``, and
the SymInt arithmetic rejects division by zero and int64 overflow.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.vulkan import device as vkdevice
from pyruntime.delegates.vulkan.blob import parse_blob
from pyruntime.delegates.vulkan.ops import OPS, load_all
from pyruntime.delegates.vulkan.schema import VALUE_TYPES
from tests import parts

AVAILABLE, WHY = vkdevice.availability()
_README = Path(__file__).resolve().parents[2] / "delegates" / "vulkan" / "README.md"
QUANT_STEPS = 1.0
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10}
_VALUE_LIST = next(k for k, v in VALUE_TYPES.items() if v == "ValueList")

parts.importorskip("torch", "executorch")
from tests.delegates import vulkan_op_fixtures as vof  # noqa: E402  (needs torch)

CASES = vof.cases()
load_all()
needs_device = parts.skip_unless(AVAILABLE, "vulkan", f"VulkanBackend: {WHY}")


# ---- where an output comes from ------------------------------------------------------
@dataclass(frozen=True)
class Source:
    producer: str | None  # the op writing the value (None: a delegate input passed through)
    upstream: frozenset  # every op the value depends on inside the delegate


def delegate_sources(prog, method: str) -> dict:
    """{plan value index: Source} for every output of the method's Vulkan delegates."""
    plan = prog._plans[method]
    found = {}
    for chain in plan.chains or []:
        for ins in chain.instructions or []:
            _, call = ins.instr_args
            if call is None or call._kind != "DelegateCall":
                continue
            bd = plan.delegates[call.delegate_index]
            if bd.id == "VulkanBackend":
                graph = parse_blob(prog._pte.delegate_blob(bd.processed, "test")).graph
                outs = list(call.args)[len(call.args) - len(graph.output_ids):]
                found.update(zip(outs, _trace(graph)))
    return found


def _trace(graph) -> list[Source]:
    values, chain = graph.values, graph.chain

    def items(vid):
        code, node = values[vid].value
        return list(node.items or []) if code == _VALUE_LIST and node is not None else []
    writer = {}
    for k, c in enumerate(chain):
        for v in [c.args[-1]] + items(c.args[-1]):
            writer[v] = k

    def upstream(vid, seen):
        k = writer.get(vid)
        if k is not None and k not in seen:
            seen.add(k)
            for a in chain[k].args[:-1]:
                for v in [a] + items(a):
                    upstream(v, seen)
        return seen
    return [Source(chain[writer[v]].name if v in writer else None,
                   frozenset(chain[k].name for k in upstream(v, set())))
            for v in graph.output_ids]


@dataclass(frozen=True)
class Run:
    outputs: list  # per call: every output of the method
    sources: list  # per output: its Source, or None (not written by a Vulkan delegate)


@functools.lru_cache(maxsize=None)
def run_group(group: str) -> Run:
    b = vof.get_bundle()
    prog = pyruntime.Runtime.get().load_program(b.pte_path)
    method = prog.load_method(group, tier="reference")
    src = delegate_sources(prog, group)
    outs = [[np.asarray(o).copy() for o in method.execute([a.copy() for a in call])]
            for call in b.calls[group]]
    return Run(outs, [src.get(v) for v in prog._plans[group].outputs])


# ---- comparison ----------------------------------------------------------------------
def ulps_error(got, want, dtype: str) -> float:
    """max |got - want| / (eps * max(|want|, 1)); NaN must match NaN."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan), "NaN positions differ"
    if not (~nan).any():
        return 0.0
    d = np.abs(g - w)[~nan] / (EPS[dtype] * np.maximum(np.abs(w[~nan]), 1.0))
    return float(np.max(d)) if d.size else 0.0


def check_case(case, run: Run, b) -> None:
    group, k, n = b.outputs[case.name]
    steps = b.steps[group]
    for i, (outs, ref) in enumerate(zip(run.outputs, b.expected[group])):
        for j in range(k, k + n):
            got, want = outs[j], ref[j]
            what = f"{case.name} call {i} output {j - k}"
            assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
            if steps and steps[j]:
                e = float(np.max(np.abs(got - want))) / steps[j] if got.size else 0.0
                assert e <= QUANT_STEPS + 1e-3, f"{what}: {e:.2f} quantization steps"
            elif want.dtype.kind in "biu":
                assert got.dtype.kind == want.dtype.kind, f"{what}: {got.dtype} != {want.dtype}"
                bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
                assert not bad.size, (f"{what}: {bad.size} of {got.size} differ, first at "
                                      f"{bad[0]}: {got.reshape(-1)[bad[0]]} != "
                                      f"{want.reshape(-1)[bad[0]]}")
            else:
                dt = "float16" if case.dtype == "float16" else "float32"
                tol = case.fp16_ulps if dt == "float16" else case.ulps
                e = ulps_error(got, want, dt)
                assert e <= tol, f"{what}: {e:.3g} ulps ({dt}) > {tol}"


# ---- tests ---------------------------------------------------------------------------
@needs_device
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op_runs_in_the_delegate_and_matches_torch(case):
    b = vof.get_bundle()
    run = run_group(case.method)
    group, k, n = b.outputs[case.name]
    for j in range(n):
        src = run.sources[k + j]
        assert src is not None, (f"{case.name} output {j}: not written by a Vulkan delegate "
                                 f"(the partitioner left it to portable kernels)")
        if case.final:
            assert src.producer == case.op, (f"{case.name} output {j}: written by "
                                             f"{src.producer}, not {case.op}")
        else:
            assert case.op in src.upstream, (f"{case.name} output {j}: {case.op} not among "
                                             f"the delegate ops feeding it {sorted(src.upstream)}")
    check_case(case, run, b)


@needs_device
def test_float16_stores_round_to_nearest_even():
    """The float32 -> float16 cast on values chosen at the rounding edges (ties at several
    exponents, subnormals, the overflow threshold, infinities, NaN, signed zero), against
    numpy's cast (round to nearest, ties to even, as torch)."""
    case = next(c for c in CASES if c.name ==
                "dim_order_ops._to_dim_order_copy.default-to_float16-float32")
    b = vof.get_bundle()
    group, k, _ = b.outputs[case.name]
    ulp1 = np.float32(2.0 ** -10)
    edges = [1 + ulp1 / 2, 1 + 3 * ulp1 / 2, 1 + ulp1 / 2 + 2 ** -20, 1 + ulp1 / 2 - 2 ** -20,
             2 ** -25, 3 * 2 ** -25, 2 ** -24, 5 * 2 ** -26, 2 ** -14 - 2 ** -25, 2 ** -14,
             65504, 65519.996, 65520, 1e9, np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-30, 1e-45,
             -(1 + ulp1 / 2), -3 * 2 ** -25, 3.14159, 1024 + 0.5, 1024 + 1.5, 2049, 2051]
    rng = np.random.default_rng(3)
    x = np.concatenate([np.array(edges, np.float32),
                        (rng.standard_normal(105 - len(edges)) * 100).astype(np.float32)])
    call = [a.copy() for a in b.calls[group][0]]
    slot = sum(len(c.args) for c in vof.groups()[group][:vof.groups()[group].index(case)])
    call[slot] = x.reshape(call[slot].shape)
    prog = pyruntime.Runtime.get().load_program(b.pte_path)
    got = np.asarray(prog.load_method(group, tier="reference").execute(call)[k]).reshape(-1)
    with np.errstate(over="ignore"):  # the edge values past 65504: inf, as wanted
        want = x.astype(np.float16)
    assert got.dtype == np.float16
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero(got.view(np.uint16)[~nan] != want.view(np.uint16)[~nan])
    assert not bad.size, [(float(x[~nan][i]), float(got[~nan][i]), float(want[~nan][i]))
                          for i in bad[:8]]


def readme_ops() -> dict:
    """{op: reason} from the README's table of ops never delegated."""
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", _README.read_text(), re.M)
    return dict(rows)


def test_every_registered_op_is_covered_or_listed():
    load_all()
    covered, listed = {c.op for c in CASES}, readme_ops()
    assert not covered & set(listed), f"both a case and listed: {sorted(covered & set(listed))}"
    missing = sorted(set(OPS) - covered - set(listed))
    assert not missing, f"registered ops with no case and no README entry: {missing}"
    stale = sorted((covered | set(listed)) - set(OPS))
    assert not stale, f"cases or README entries of ops the bridge does not register: {stale}"
    assert all(len(why) > 20 for why in listed.values())


def test_listed_ops_are_really_not_delegated():
    """The README's claims, checked against the partitioner: an op it lists is either
    unknown to ExecuTorch's Vulkan op registry or known and removed before serialization
    (a reason naming the pass)."""
    from executorch.backends.vulkan.op_registry import vulkan_supported_ops

    registry = {getattr(k, "__name__", k) for k in vulkan_supported_ops}
    for op, why in readme_ops().items():
        if op in registry:
            assert re.search(r"Transform|Pass|decompos|edge|internal|lower", why), (op, why)
        else:
            assert "registry" in why, (op, why)


# ---- SymInt arithmetic -----------------------------------------------------------------
class _FakeGraph:
    """Just what the SymInt builders read: values and ival."""

    def __init__(self, a, b):
        from pyruntime.delegates.vulkan.graph import SymInt

        self.values = [a, b, SymInt(0)]

    def ival(self, vid, where, default=None):
        return int(self.values[vid])


@pytest.mark.parametrize("name,a,b,want", [
    ("add", 7, 3, 10), ("sub", 7, 3, 4), ("mul", 7, -3, -21), ("floordiv", -7, 2, -4),
    ("floordiv", 7, -2, -4), ("lt", 2, 3, 1), ("gt", 2, 3, 0), ("ge", 3, 3, 1),
    ("le", 4, 3, 0), ("eq", 3, 3, 1)])
def test_symint_ops(name, a, b, want):
    g = _FakeGraph(a, b)
    OPS[name](g, [0, 1, 2], f"op 0 ({name})")()
    assert g.values[2].value == want


@pytest.mark.parametrize("name,a,b", [("floordiv", 7, 0), ("floordiv", 0, 0),
                                      ("add", 2 ** 62, 2 ** 62), ("sub", -2 ** 63, 1),
                                      ("mul", 2 ** 32, 2 ** 31), ("floordiv", -2 ** 63, -1)])
def test_symint_division_by_zero_and_overflow_raise(name, a, b):
    load_all()
    g = _FakeGraph(a, b)
    plan = OPS[name](g, [0, 1, 2], f"op 0 ({name})")
    with pytest.raises(ExecuTorchError) as e:
        plan()
    assert e.value.code == ErrorCode.InvalidArgument
    msg = str(e.value)
    assert name in msg and str(a) in msg and str(b) in msg, msg
