"""Skips that cannot hide: under CI (``CI=true``) a test skipped for a missing vendor part
or extra fails the run, naming the part and its install step (``tests/parts.py``); so
does a skip that gives no part and does not say it is not applicable here. Every run
ends with one line saying what was skipped and why.

A run of the whole suite also builds its fixtures in a second process meanwhile
(``tests/prebuild.py``)."""
from __future__ import annotations

import os
from collections import Counter

import pytest

from tests import parts, prebuild

_skips: Counter = Counter()  # (part or None, reason) -> tests
_ci_failures: list = []  # module-level skips under CI (they cannot become a test failure)


def _reason(rep) -> str:
    lr = rep.longrepr
    text = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


def _ci_message(reason: str) -> str | None:
    """Why this skip fails under CI, or None where it stays a skip."""
    if reason.startswith(parts.NOT_APPLICABLE):
        return None
    part = parts.part_of(reason)
    if part is None:
        return (f"CI: a test was skipped without naming a missing part or saying it is not "
                f"applicable here ({reason}); give its reason with tests/parts.py")
    return f"CI: {reason}; .ci/run should have installed it with: {parts.PARTS[part].install}"


def _record(rep) -> str | None:
    if not rep.skipped or hasattr(rep, "wasxfail"):
        return None
    reason = _reason(rep)
    _skips[(parts.part_of(reason), reason)] += 1
    return _ci_message(reason) if parts.in_ci() else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    msg = _record(rep)
    if msg is not None:
        rep.outcome, rep.longrepr = "failed", msg


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    msg = _record(outcome.get_result())
    if msg is not None:
        _ci_failures.append(f"{collector.nodeid}: {msg}")


def pytest_configure(config):
    # under CI, the slowest tests close the log: what a run from empty caches spends its
    # time on (the run's budget, README)
    if os.environ.get("CI") == "true" and not config.option.durations:
        config.option.durations = 25


def pytest_collection_finish(session):
    # a whole-suite run builds the fixtures in a second process meanwhile (tests/prebuild.py)
    if not session.config.option.collectonly:
        session.config._prebuild = prebuild.start(len(session.items))


def pytest_sessionfinish(session, exitstatus):
    prebuild.stop(getattr(session.config, "_prebuild", None))
    if _ci_failures and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    for line in _ci_failures:
        tr.write_line(line, red=True, bold=True)
    if not _skips:
        tr.write_line("skipped: nothing")
        return
    by_part: Counter = Counter()
    why: dict = {}
    for (part, reason), n in _skips.items():
        key = part or ("not applicable" if reason.startswith(parts.NOT_APPLICABLE) else "other")
        by_part[key] += n
        why.setdefault(key, reason)
    tr.write_line("skipped: " + "; ".join(f"{k} x{n} ({why[k][:120]})"
                                          for k, n in by_part.most_common()))
