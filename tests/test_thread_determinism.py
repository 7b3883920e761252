"""Determinism under threads: every parity program, executed many times in one process at
several intra-op thread counts, idle and beside a busy process, and through a MethodPool
driven from several Python threads, gives the one-thread result bit for bit every time
(and that result is executorch.runtime's, as ``tests/programs/test_parity.py`` measures).

A test that executes once cannot see a race: issue 28's fused-convolution race (a fused
group's final out sharing memory with a dequantized weight that other parts still read)
gave an int8 CNN wrong outputs in 163 of 200 runs at threads=2 while every single-run test
passed, and in 200 of 200 at threads=3.

Programs with state (KV caches in mutable buffers) run their whole call sequence on a
fresh load per round, so every execute is compared with the same step of the one-thread
sequence.
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import pyruntime
from pyruntime.pool import MethodPool
from tests.programs.fixtures import FIXTURE_NAMES, get_fixture
from tests.programs.test_parity import BIT_IDENTICAL, FAST_MATH_USED, assert_output_parity

EXECUTES = 100  # per program and thread count
STATEFUL = ("llama_kv", "llama_sdpa_kv", "whisper")  # KV caches carried between calls


def _bits(arrays):
    return [np.ascontiguousarray(np.asarray(a)).view(np.uint8).copy() for a in arrays]


@contextlib.contextmanager
def _busy():
    """One process spinning on a core while the block runs, so the pool's threads are
    preempted at varying points (on a 2-core machine that moves every part's timing)."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        p.kill()
        p.wait()


def _one_thread(name, math="exact"):
    """(fixture, program, the one-thread outputs of each call, checked against
    executorch.runtime: bit for bit where the program is, else the parity bound)."""
    fx = get_fixture(name)
    prog = pyruntime.Runtime.get().load_program(fx.pte_path, data_path=fx.ptd_path)
    m = prog.load_method(fx.method, threads=1, math=math)
    want = []
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        got = m.execute(inputs)
        for i, (g, e) in enumerate(zip(got, expected)):
            if name in BIT_IDENTICAL and math == "exact":
                assert np.array_equal(_bits([g])[0], _bits([e])[0]), \
                    f"{name} call {step} output {i}: threads=1 differs from executorch.runtime"
            else:
                assert_output_parity(g, e, f"{name} call {step} output {i}")
        want.append(_bits(got))
    return fx, prog, want


def _stress(fx, prog, want, threads, executes=EXECUTES, math="exact"):
    """How many of ``executes`` runs at ``threads`` differ from the one-thread bits, and
    the first one that did."""
    calls, stateful = fx.calls, fx.name in STATEFUL
    m = prog.load_method(fx.method, threads=threads, math=math)
    bad, first = 0, None
    for k in range(executes):
        step = k % len(calls)
        if stateful and step == 0 and k:
            m = prog.load_method(fx.method, threads=threads, math=math)  # state starts over
        got = _bits(m.execute(calls[step]))
        if any(not np.array_equal(a, b) for a, b in zip(got, want[step])) \
                or len(got) != len(want[step]):
            bad += 1
            first = first if first is not None else k
    return bad, first


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_execute_equals_the_one_thread_result(name):
    fx, prog, want = _one_thread(name)
    report = []

    def rounds(load, counts):
        for threads in counts:
            bad, first = _stress(fx, prog, want, threads)
            if bad:
                report.append(f"threads={threads} ({load}): {bad} of {EXECUTES} differ "
                              f"(first at execute {first})")

    rounds("idle", (2, 3, 4))
    with _busy():
        rounds("beside a busy process", (2, 3))
    assert not report, f"{name}: " + "; ".join(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", FAST_MATH_USED)
def test_fast_math_executes_equal_the_one_thread_fast_result(name):
    """``math="fast"`` splits its kernels into parts as the exact mode does (output planes,
    rows, columns, each computed as in one thread): its results are the same at every
    thread count and on every run, though not executorch.runtime's bits."""
    fx, prog, want = _one_thread(name, math="fast")
    report = []
    for load, counts in (("idle", (2, 3)), ("beside a busy process", (2,))):
        with _busy() if load != "idle" else contextlib.nullcontext():
            for threads in counts:
                bad, first = _stress(fx, prog, want, threads, EXECUTES // 2, math="fast")
                if bad:
                    report.append(f"threads={threads} ({load}): {bad} of {EXECUTES // 2} "
                                  f"differ (first at execute {first})")
    assert not report, f"{name} [math=fast]: " + "; ".join(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n not in STATEFUL])
def test_a_method_pool_on_several_python_threads_equals_the_one_thread_result(name):
    """Four Python threads share a MethodPool of three copies at threads=2: copies run at
    once, one holding the intra-op pool while the others run their parts themselves."""
    fx, prog, want = _one_thread(name)
    pool = MethodPool(prog, fx.method, size=3, threads=2)
    bad, errors = [], []

    def work(seed):
        try:
            for k in range(EXECUTES // 4):
                step = (k + seed) % len(fx.calls)
                got = _bits(pool.execute(fx.calls[step]))
                if any(not np.array_equal(a, b) for a, b in zip(got, want[step])):
                    bad.append((seed, k))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    with _busy():
        ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=600)
    pool.close()
    assert not errors, errors
    assert not any(t.is_alive() for t in ts), "a pool thread did not finish"
    assert not bad, f"{name}: {len(bad)} of {EXECUTES} pool executes differ: {bad[:5]}"
