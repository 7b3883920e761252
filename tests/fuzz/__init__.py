"""Fuzz campaigns over pyruntime's inputs, every case in a child process.

A campaign runs cases ``start .. start+count`` of one target (``targets.py``)
in worker processes (``worker.py``). A worker runs many cases and reports
each; when one dies (segfault, abort) or stops answering, the case it was
running is recorded as a crash or a hang with its seed, and a fresh worker
continues with the next case. So a crash fails a test with the seed that
caused it instead of taking pytest down.

    from tests.fuzz import campaign
    report = campaign("fast", start=0, count=500)
    report.counts          # {'ran': .., 'loaded': .., 'rejected': .., 'other': 0, 'crash': 0, 'hang': 0}
    report.findings        # [(case, kind, detail), ...]

``python -m tests.fuzz --cases N`` runs longer campaigns (see ``__main__``).
"""
from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
OUTCOMES = ("ran", "loaded", "rejected", "other", "crash", "hang")


@dataclass
class Report:
    target: str
    counts: dict = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    findings: list = field(default_factory=list)  # (case, kind, detail)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, case: int, outcome: str, detail: str = "") -> None:
        self.counts[outcome] += 1
        if outcome in ("other", "crash", "hang"):
            self.findings.append((case, outcome, detail))

    def merge(self, other: "Report") -> None:
        for k, v in other.counts.items():
            self.counts[k] += v
        self.findings += other.findings

    def summary(self) -> str:
        c = self.counts
        return (f"{self.target}: {self.total} cases: {c['ran']} ran, {c['loaded']} loaded, "
                f"{c['rejected']} rejected, {c['crash']} crashes, {c['hang']} hangs, "
                f"{c['other']} other exceptions")


def _reader(stream, q):
    for line in iter(stream.readline, ""):
        q.put(line.rstrip("\n"))
    q.put(None)


def _start(target: str, start: int, count: int, errfile):
    # faulthandler prints the Python stack of a crash to the worker's stderr
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker", target, str(start),
                             str(count)], cwd=_REPO, env=env, stdout=subprocess.PIPE,
                            stderr=errfile, text=True)
    q: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
    return proc, q


def campaign(target: str, start: int = 0, count: int = 1000, case_timeout: float | None = None,
             ready_timeout: float = 900.0) -> Report:
    """Run ``count`` cases of ``target`` from ``start``; see the module doc. A case that
    takes longer than ``case_timeout`` (default: the target's) is reported as a hang."""
    from tests.fuzz.targets import get_target

    if case_timeout is None:
        case_timeout = get_target(target).case_timeout
    report = Report(target)
    nxt, end = start, start + count
    while nxt < end:
        errfile = tempfile.TemporaryFile("w+")
        proc, q = _start(target, nxt, end - nxt, errfile)
        running = None  # the case started and not yet reported
        timeout = ready_timeout
        try:
            while True:
                try:
                    line = q.get(timeout=timeout)
                except queue.Empty:
                    if running is None:
                        raise RuntimeError(f"fuzz worker for {target!r} did not start "
                                           f"within {timeout:.0f} s")
                    report.add(running, "hang", f"no answer within {case_timeout:.0f} s")
                    nxt = running + 1
                    break
                if line is None:  # the worker exited
                    rc = proc.wait()
                    if running is not None:
                        report.add(running, "crash", f"worker exit status {rc}: "
                                   f"{_tail(errfile)}")
                        nxt = running + 1
                    elif nxt < end:
                        raise RuntimeError(f"fuzz worker for {target!r} exited with status "
                                           f"{rc} before case {nxt}")
                    break
                if line == "ready":
                    timeout = case_timeout
                elif line.startswith("bad-source"):
                    raise RuntimeError(f"fuzz target {target!r}: an unmutated source "
                                       f"does not run ({line})")
                elif line.startswith("S "):
                    running = int(line.split()[1])
                elif line.startswith("R "):
                    _, case, outcome = line.split(" ", 2)
                    kind, _, detail = outcome.partition(" ")
                    report.add(int(case), kind, detail)
                    running = None
                    nxt = int(case) + 1
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            errfile.close()
    return report


def _tail(f, n: int = 600) -> str:
    """What a dead worker wrote last; for a fatal signal, the innermost frames of the
    faulthandler dump (where it crashed) rather than the outermost."""
    f.seek(0)
    text = f.read()
    at = text.rfind("Fatal Python error")
    if at >= 0:
        frames = [ln.strip() for ln in text[at:].splitlines() if ln.strip()][:12]
        return " | ".join(frames)[:n + 400]
    return " | ".join(text[-n:].splitlines())
