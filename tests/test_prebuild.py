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
