"""A fuzz worker: runs a range of cases of one target and reports each on stdout.

    python -m tests.fuzz.worker TARGET START COUNT

Protocol (one line each, flushed): ``ready`` once the sources loaded and ran
unmutated; ``S <case>`` before a case; ``R <case> <outcome>`` after it, where
an exception other than ExecuTorchError is ``R <case> other <Type>: <message>``.
A case that kills the process leaves an ``S`` without its ``R``: the parent
(``tests.fuzz.campaign``) reports that case as a crash.
"""
from __future__ import annotations

import sys

from tests.fuzz.targets import get_target, load_sources, prepare, run_case


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv) -> int:
    target = get_target(argv[0])
    start, count = int(argv[1]), int(argv[2])
    sources = load_sources(target)
    for s in sources:  # also compiles (or loads cached) kernels before the clock starts
        outcome = run_case(target, s.data, s.inputs) if s.data else "ran"
        if outcome != "ran":
            _say(f"bad-source {outcome}")
            return 2
    _say("ready")
    for case in range(start, start + count):
        source = sources[case % len(sources)]
        data, inputs = prepare(target, source, case)
        _say(f"S {case}")
        try:
            outcome = run_case(target, data, inputs)
        except Exception as e:  # noqa: BLE001 - the finding this harness looks for
            msg = f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
            outcome = f"other {msg}"
        _say(f"R {case} {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
