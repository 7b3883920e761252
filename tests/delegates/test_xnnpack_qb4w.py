"""8da4w XNNPACK delegates on pyruntime's own int4 kernels under math="fast"
(``delegates.xnnpack.qb4w``, ``kernels.quantized.typed_qb4w``).

The oracle is executorch.runtime on the same program (the fixture's expected outputs):
within the math="fast" bound, 1e-4 x max(1, |ref|), measured at 1.2e-7 here. The exact
mode keeps XNNPACK (tests/delegates/test_xnnpack*.py hold it bit for bit). Threaded runs
split output channels, never a sum, so every execute at any thread count, beside a busy
process, is the one-thread result bit for bit.
"""
from __future__ import annotations

import numpy as np

import pyruntime
from pyruntime.delegates.xnnpack import library, qb4w
from pyruntime.delegates.xnnpack.blob import parse_blob
from pyruntime.instructions import Op
from tests import parts
from tests.delegates.xnnpack_fixtures import get_fixture
from tests.test_thread_determinism import _busy

LIB = library.get_library()
pytestmark = parts.skip_unless(LIB is not None and LIB.level == "dynamic", "xnnpack",
                               f"XnnpackBackend: {library.unavailable_reason()}")
BOUND = 1e-4  # math="fast": |ours - executorch| <= BOUND * max(1, |executorch|)


def _delegates(m):
    return {pc for pc, ins in enumerate(m._fast.flat) if ins.op is Op.DELEGATE}


def _graphs(path):
    """(parsed XNNPACK graph, the program's named data) per delegate."""
    prog = pyruntime.Runtime.get().load_program(path)
    plan = prog._plan("forward")
    return [(parse_blob(prog._pte.delegate_blob(bd.processed, "delegate")),
             prog._named_data_map(None)) for bd in plan.delegates]


def test_the_fixture_runs_on_our_kernels_within_the_bound():
    """torchao 8da4w linear-relu-linear (biases, a relu clamp, an internal value between
    the linears): recognized, run on our kernels, within the bound of executorch.runtime."""
    fx = get_fixture("qd8_qb4w")
    ((xb, named),) = _graphs(fx.pte_path)
    lins = qb4w.linears(xb, named)
    assert [(lin.input, lin.output, lin.source, lin.lo) for lin in lins] == \
        [(0, None, -1, 0.0), (None, 1, 0, -np.inf)]
    assert all(lin.bias is not None and lin.group == 32 for lin in lins)
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    for threads in (1, 2):
        m = prog.load_method("forward", math="fast", threads=threads)
        assert _delegates(m) <= m._fast.fast_math
        for inputs, expected in zip(fx.calls, fx.expected):
            (got,) = m.execute(inputs)
            ref = expected[0]
            err = np.max(np.abs(np.asarray(got) - ref) / np.maximum(1, np.abs(ref)))
            assert err <= BOUND, f"threads={threads}: {err:.3g} x max(1, |ref|)"
    exact = prog.load_method("forward", math="exact")
    assert not (_delegates(exact) & exact._fast.fast_math)


def test_other_graphs_stay_on_xnnpack():
    """A graph with anything else (int8 per-channel weights here) is not taken."""
    ((xb, named),) = _graphs(get_fixture("qd8_qc8w").pte_path)
    assert qb4w.linears(xb, named) is None
    fx = get_fixture("qd8_qc8w")
    m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward", math="fast")
    assert not (_delegates(m) & m._fast.fast_math)


def test_split_calls_equal_the_one_thread_result_every_time():
    """The tiny 8da4w LLM program (linears reading the graph's inputs only, so split into
    parts when a call has enough work: its prefills), a prefill and decode steps per fresh
    load: every execute at threads 2 and 3, idle and beside a busy process, equals the
    one-thread result bit for bit."""
    parts.importorskip("executorch", "executorch")
    from tests.llm.fixtures import get_llm

    fx = get_llm("llama3_2", "8da4w")
    prog = pyruntime.Runtime.get().load_program(fx.pte)
    rng = np.random.default_rng(3)
    prompt = rng.integers(1, 300, (1, 40)).astype(np.int64)
    steps = [[prompt, np.array([0], np.int64)]] + [
        [np.array([[int(t)]], np.int64), np.array([40 + i], np.int64)]
        for i, t in enumerate(rng.integers(1, 300, 12))]

    def run(threads):
        m = prog.load_method("forward", math="fast", threads=threads)
        assert _delegates(m) <= m._fast.fast_math
        return [np.array(m.execute(s)[0]) for s in steps]
    want = run(1)
    bad = []
    for busy in (False, True):
        for threads in (2, 3):
            for rnd in range(6):
                if busy:
                    with _busy():
                        got = run(threads)
                else:
                    got = run(threads)
                bad += [(busy, threads, rnd, i) for i, (g, w) in enumerate(zip(got, want))
                        if not np.array_equal(g, w)]
    assert not bad, f"executes differing from the one-thread result: {bad[:10]}"


def test_inspect_counts_the_calls_on_our_kernels():
    from tests.test_cli import cli

    fx = get_fixture("qd8_qb4w")
    rc, out, err = cli("inspect", "--ops", "--math", "fast", fx.pte_path)
    assert rc == 0, err
    assert ("1  delegate calls: 1 compiled, 0 through Python (1 on pyruntime's own kernels "
            "with fast math)") in out
    rc, out, err = cli("inspect", "--ops", fx.pte_path)
    assert rc == 0 and "1  delegate calls: 1 compiled, 0 through Python\n" in out
