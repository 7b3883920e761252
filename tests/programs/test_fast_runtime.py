"""The fast tier as a runtime: the GIL is released while compiled kernels run,
memory stays flat over many executes, and a JumpFalse decided in the loop
agrees with the reference."""
from __future__ import annotations

import resource
import threading
import time

import numpy as np
import pytest

import pyruntime
from tests.programs.small_programs import small_program


@pytest.fixture(scope="module")
def big_chain():
    return small_program("big_chain")[0]


def test_python_thread_progresses_during_long_execute(big_chain):
    m = pyruntime.Runtime.get().load_program(big_chain).load_method("forward", tier="fast")
    assert m._fast.compiled == len(m._fast.flat)  # every instruction runs without the GIL
    x = np.ones(1 << 20, np.float32)
    m.execute([x])
    t = time.perf_counter()
    m.execute([x])
    one = time.perf_counter() - t
    ticks = 0
    done = threading.Event()

    def run():
        for _ in range(5):
            m.execute([x])
        done.set()

    th = threading.Thread(target=run)
    start = time.perf_counter()
    th.start()
    while not done.is_set():
        ticks += 1
    th.join()
    elapsed = time.perf_counter() - start
    assert elapsed > 0 and one > 0
    # With the GIL held for the whole execute this loop would barely advance; a
    # free main thread spins millions of times per second.
    assert ticks / elapsed > 20_000, (ticks, elapsed)


def test_two_methods_execute_in_parallel_threads(big_chain):
    prog = pyruntime.Runtime.get().load_program(big_chain)
    ms = [prog.load_method("forward", tier="fast") for _ in range(2)]
    xs = [np.full(1 << 20, k, np.float32) for k in (1, 2)]
    want = [m.execute([x])[0] for m, x in zip(ms, xs)]
    got = [None, None]

    def run(i):
        for _ in range(3):
            got[i] = ms[i].execute([xs[i]])[0]

    ths = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_same_method_from_two_threads_is_refused_not_corrupted(big_chain):
    m = pyruntime.Runtime.get().load_program(big_chain).load_method("forward", tier="fast")
    x = np.ones(1 << 20, np.float32)
    errors = []

    def run():
        try:
            for _ in range(5):
                m.execute([x])
        except pyruntime.ExecuTorchError as e:
            errors.append(e)

    ths = [threading.Thread(target=run) for _ in range(2)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    for e in errors:
        assert e.code == pyruntime.ErrorCode.InvalidState


@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_rss_does_not_grow_over_10000_executes(tier):
    pte, _ = small_program("linear_relu")
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier=tier)
    x = np.ones((2, 4), np.float32)
    for _ in range(1000):
        m.execute([x])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(10_000):
        m.execute([x])
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert after - before < 2048, f"max RSS grew by {after - before} KiB"  # ru_maxrss is KiB


def test_constant_weight_permutes_fold_into_views_and_trace_agrees():
    from tests.programs.fixtures import get_fixture

    fx = get_fixture("mlp")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    fast = prog.load_method("forward", tier="fast")
    assert len(fast._fast.folded) == 3  # one transposed weight per Linear
    ref = prog.load_method("forward", tier="reference")
    got = fast.execute(fx.calls[0])[0]
    np.testing.assert_allclose(got, ref.execute(fx.calls[0])[0], rtol=1e-5, atol=1e-6)
    traced = fast.trace(fx.calls[0])
    assert [n for _, n, _ in traced] == [n for _, n, _ in ref.trace(fx.calls[0])
                                          if n != "aten::permute_copy.out"]
    np.testing.assert_allclose(traced[-1][2][0], got, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_inputs_aliased_from_callers_are_rebound_without_leaking(tier):
    """Unplanned inputs alias the caller's arrays. A new array per call must not pile
    up (the method keeps only the current one alive), and the same array passed again
    with new contents is read afresh."""
    import gc
    import weakref

    pte = small_program("unplanned_inputs")[0]
    prog = pyruntime.Runtime.get().load_program(pte)
    assert not prog.metadata("forward").inputs[0].is_memory_planned
    m = prog.load_method("forward", tier=tier)
    oracle = prog.load_method("forward", tier=tier)
    old = []
    for k in range(50):
        x = np.full((2, 4), 0.1 * k, np.float32)
        np.testing.assert_array_equal(m.execute([x])[0], oracle.execute([x.copy()])[0])
        old.append(weakref.ref(x))
    del x
    gc.collect()
    assert sum(r() is not None for r in old) <= 1  # at most the array bound last
    if tier == "fast":
        t = m._fast.table
        assert len(t._regions) + len(t._row_regions) <= 4
    y = np.ones((2, 4), np.float32)
    first = m.execute([y])[0]
    y *= -3.0  # the same array, new contents
    np.testing.assert_array_equal(m.execute([y])[0], oracle.execute([y.copy()])[0])
    assert not np.array_equal(first, m.execute([y])[0])
