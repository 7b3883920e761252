"""Intra-op threads: kernels split into parts that the fast loop runs at once on its thread
pool (``cython_ext._loop``, ``BindContext.bind_split``). The parts write disjoint outputs in
the one-thread order, so every result is bit for bit the one-thread result (and so
ExecuTorch's), whatever the thread count, in fused groups, under an event tracer, from
several Python threads at once and after a fork."""
from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

import pyruntime
from tests.programs.fixtures import get_fixture
from tests.programs.small_programs import small_program


def _bits(arrays):
    return [np.ascontiguousarray(np.asarray(a)).view(np.uint8) for a in arrays]


def _split(m):
    return sum(1 for r in m._fast.calls.values() if len(r) > 2) + \
        sum(1 for _, r, _ in m._fast.fusions if len(r) > 2)


@pytest.fixture(scope="module")
def mobilenet():
    fx = get_fixture("mobilenet_v2")
    return fx, pyruntime.Runtime.get().load_program(fx.pte_path)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_mobilenet_v2_equals_executorch_at_every_thread_count(mobilenet, threads):
    fx, prog = mobilenet
    m = prog.load_method(fx.method, threads=threads)
    assert (_split(m) > 20) if threads > 1 else _split(m) == 0
    for inputs, expected in zip(fx.calls, fx.expected):
        for a, e in zip(_bits(m.execute(inputs)), _bits(expected)):
            assert np.array_equal(a, e)


def test_fused_groups_split_including_the_move(monkeypatch):
    """conv_fusion: every convolution split (the size threshold lowered), fused groups too,
    the one whose result is moved afterwards among them; bit for bit the one-thread run."""
    from pyruntime.kernels.conv import typed as conv

    monkeypatch.setattr(conv, "SPLIT_MACS", 0)
    pte, _ = small_program("conv_fusion")
    prog = pyruntime.Runtime.get().load_program(pte)
    x = np.random.default_rng(0).standard_normal((2, 3, 12, 12)).astype(np.float32)
    x[0, 0, 3, 3], x[1, 1, 1, 1] = np.nan, -np.inf
    one = [np.array(o) for o in prog.load_method("forward", threads=1).execute([x])]
    m = prog.load_method("forward", threads=3)
    fp = m._fast
    assert sum(len(r) > 2 for r in fp.calls.values()) == 6  # the convolutions alone
    assert [len(r) > 2 for _, r, _ in fp.fusions] == [True] * 5
    assert any(r[5] for _, r, _ in fp.fusions)  # a post call does the move
    for _ in range(3):
        for a, b in zip(_bits(m.execute([x])), _bits(one)):
            assert np.array_equal(a, b)


def test_tracer_runs_split_kernels_whole(mobilenet):
    from pyruntime.devtools import EventTracer

    fx, prog = mobilenet
    tracer = EventTracer()
    m = tracer.load_method(prog, fx.method, threads=2)
    assert _split(m) > 0
    out = m.execute(fx.calls[0])
    for a, e in zip(_bits(out), _bits(fx.expected[0])):
        assert np.array_equal(a, e)
    assert tracer.etdump().executions[0].instruction_outputs()


def test_methods_on_several_python_threads_at_once(mobilenet):
    """Two methods with threads=2 executing at once from two Python threads: one has the
    pool, the other runs its parts on its own thread; both stay exact."""
    fx, prog = mobilenet
    methods = [prog.load_method(fx.method, threads=2) for _ in range(3)]
    bad, errors = [], []

    def work(m):
        try:
            for _ in range(6):
                for inputs, expected in zip(fx.calls, fx.expected):
                    for a, e in zip(_bits(m.execute(inputs)), _bits(expected)):
                        if not np.array_equal(a, e):
                            bad.append(1)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(m,)) for m in methods]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=300)
    assert not errors and not bad and not any(t.is_alive() for t in ts)


_FORK = """
import os, sys, numpy as np, pyruntime
from tests.programs.fixtures import get_fixture
fx = get_fixture("mobilenet_v2")
m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method(fx.method, threads=2)
first = [np.array(o) for o in m.execute(fx.calls[0])]
pid = os.fork()
if pid == 0:  # the pool's workers are not in the child: it starts a new pool
    m2 = pyruntime.Runtime.get().load_program(fx.pte_path).load_method(fx.method, threads=2)
    ok = all(np.array_equal(a, np.array(b)) for a, b in zip(first, m.execute(fx.calls[0])))
    ok &= all(np.array_equal(a, np.array(b)) for a, b in zip(first, m2.execute(fx.calls[0])))
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("CHILD", os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_runs_split_kernels():
    get_fixture("mobilenet_v2")  # built here, not in the child
    p = subprocess.run([sys.executable, "-c", _FORK], capture_output=True, text=True,
                       timeout=600)
    assert "CHILD 0" in p.stdout, p.stdout + p.stderr[-2000:]


def test_inspect_counts_split_calls(mobilenet):
    import io

    from pyruntime.cli import inspect_ops

    fx, _ = mobilenet
    rt = pyruntime.Runtime.get()
    old = rt.threads
    try:
        rt.threads = 2
        out = io.StringIO()
        inspect_ops(fx.pte_path, out=out)
    finally:
        rt.threads = old
    conv = [line for line in out.getvalue().splitlines() if "aten::convolution.out" in line]
    assert conv and "split over 2 threads" in conv[0], out.getvalue()
