"""Threads: a Method used from several threads at once is refused (InvalidState) and
never corrupted; different methods and programs load and run from many threads,
including the very first load in a fresh process (kernel registries filled once)."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import pyruntime
from tests.programs.fixtures import get_fixture
from tests.programs.small_programs import small_program

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_one_method_hammered_by_8_threads_is_refused_or_correct(tier):
    fx = get_fixture("mlp")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    m = prog.load_method("forward", tier=tier)
    oracle = prog.load_method("forward", tier=tier)  # the same tier, alone on one thread
    xs = [np.random.default_rng(k).standard_normal(fx.calls[0][0].shape).astype(np.float32)
          for k in range(8)]
    want = [oracle.execute([x])[0] for x in xs]
    ok, refused, wrong, other = [0] * 8, [0] * 8, [], []
    calls = [0] * 8
    start = threading.Barrier(8)

    def hammer(k):
        start.wait()
        for i in range(300):
            calls[k] += 1
            try:
                if i % 3 == 2:
                    m.set_input(xs[k], 0)  # racing the running loop must be refused too
                    ok[k] += 1
                    continue
                out = m.execute([xs[k]])[0]
            except pyruntime.ExecuTorchError as e:
                if e.code == pyruntime.ErrorCode.InvalidState and "already executing" in str(e):
                    refused[k] += 1
                else:
                    other.append(e)
                continue
            except Exception as e:  # noqa: BLE001 - anything else is a failure
                other.append(e)
                continue
            if np.array_equal(out, want[k]):
                ok[k] += 1
            else:
                wrong.append((k, i))

    ths = [threading.Thread(target=hammer, args=(k,)) for k in range(8)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not wrong, f"outputs computed on another thread's inputs: {wrong[:5]}"
    assert not other, other[:3]
    assert sum(calls) == 8 * 300 and sum(ok) + sum(refused) == sum(calls), (ok, refused)
    assert sum(ok) > 0
    # the method still works afterwards
    np.testing.assert_array_equal(m.execute([xs[0]])[0], want[0])


_FRESH = r"""
import sys, threading
import numpy as np
import pyruntime
path, tier = sys.argv[1], sys.argv[2]
prog = pyruntime.Runtime.get().load_program(path)
errors, checks = [], []
barrier = threading.Barrier(4)

def work(k):
    try:
        barrier.wait()  # every thread makes its first load at once: cold registries
        name = ("add_one", "mul_sub")[k % 2]
        m = prog.load_method(name, tier=tier)
        for i in range(50):
            x = np.full(3 if name == "add_one" else 2, float(k + i), np.float32)
            if name == "add_one":
                (out,) = m.execute([x])
                assert np.array_equal(out, x + 1), (name, out)
            else:
                y = x + 2
                a, b = m.execute([x, y])
                assert np.array_equal(a, x * y) and np.array_equal(b, x - y), (name, a, b)
        checks.append(k)
    except BaseException as e:
        errors.append(repr(e))

ths = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ths]
[t.join() for t in ths]
print("errors", errors)
print("done", sorted(checks))
"""


@pytest.mark.parametrize("tier", ["reference", "fast"])
def test_methods_load_and_run_from_threads_in_a_fresh_process(tier):
    pte = small_program("two_methods")[0]
    r = subprocess.run([sys.executable, "-c", _FRESH, str(pte), tier], capture_output=True,
                       text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "errors []" in r.stdout and "done [0, 1, 2, 3]" in r.stdout, r.stdout + r.stderr[-2000:]
