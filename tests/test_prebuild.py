"""The second process that builds the suite's fixtures while it runs (tests/prebuild.py)."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests import prebuild

CALLS: list = []


def _ok(x):
    CALLS.append(x)


def _fail(x):
    raise RuntimeError(f"export {x} broke")


def test_every_fixture_module_has_its_steps():
    """A new fixture module must be listed, or a whole-suite run builds it in the tests'
    own process only (correct, but slower from empty caches)."""
    tests = Path(prebuild.__file__).parent
    modules = {".".join(p.relative_to(tests.parent).with_suffix("").parts)
               for p in tests.rglob("*fixtures.py")}
    listed = {s.module for s in prebuild.steps()}
    assert modules == listed, (modules - listed, listed - modules)
    labels = [s.label for s in prebuild.steps()]
    assert len(labels) == len(set(labels))


def test_a_failing_step_is_logged_and_the_rest_still_run():
    CALLS.clear()
    log = io.StringIO()
    todo = [prebuild.Step(__name__, "_ok", (1,)), prebuild.Step(__name__, "_fail", ("x",)),
            prebuild.Step(__name__, "_ok", (2,))]
    assert prebuild.run(todo, log) == 1
    assert CALLS == [1, 2]
    text = log.getvalue()
    assert "test_prebuild._fail('x'): FAILED" in text and "export x broke" in text
    assert text.count("ready in") == 2


@pytest.mark.parametrize("env, n, want", [(None, 10, False), (None, prebuild.MIN_TESTS, True),
                                          ("0", 10**5, False), ("1", 1, True)])
def test_only_a_whole_suite_run_starts_it_unless_asked(monkeypatch, env, n, want):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    if env is None:
        monkeypatch.delenv(prebuild.ENV, raising=False)
    else:
        monkeypatch.setenv(prebuild.ENV, env)
    assert prebuild.wanted(n) is want
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert prebuild.wanted(n) is False


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_stop_ends_the_child_and_what_it_started():
    """An export's own child (export_llama, vela) must not outlive the run."""
    import subprocess
    import sys
    import time

    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print(p.pid, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    grandchild = int(proc.stdout.readline())
    prebuild.stop(proc)
    assert proc.returncode is not None
    for _ in range(100):  # killed: gone, or a zombie where nothing reaps orphans
        if not _running(grandchild):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"process {grandchild} outlived stop()")
    prebuild.stop(None)  # nothing started: nothing to do
    prebuild.stop(proc)  # already ended: nothing to do
