"""Build the test fixtures in a second process while the suite runs.

From empty caches about half of the suite's time is exporting fixtures (torch.export,
ExecuTorch's lowering, vela, coremltools, export_llama), almost all of it on one core,
while most tests run on one core too. So a whole-suite run (``tests/conftest.py``
starts this at collection) builds the fixtures the suite will use in a child process, at
a lower priority, from the last tests' end backwards (``steps()``): the tests build what
they reach first themselves, and the two meet in the middle. Every fixture module already
serialises its builds across processes (a lock file per fixture, rechecked after taking
it), so a test that reaches a fixture the child is building waits for it, and one the
child has not reached yet is built by the test as before. A step that fails is written
to the log and skipped: the test that needs the fixture builds it again and reports the
error where it belongs.

Run by hand: ``python -m tests.prebuild [--list]``. ``PYRUNTIME_PREBUILD=0`` keeps the
suite from starting it; ``=1`` starts it for any selection of tests.
"""
from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
ENV = "PYRUNTIME_PREBUILD"
MIN_TESTS = 5000  # a selection this large is the whole suite (or most of it)


@dataclass(frozen=True)
class Step:
    """One fixture: ``module.function(*args)`` builds it if the cache lacks it."""
    module: str
    function: str
    args: tuple = ()

    @property
    def label(self) -> str:
        args = ", ".join(repr(a) if len(repr(a)) < 40 else "..." for a in self.args)
        return f"{self.module.rsplit('.', 1)[-1]}.{self.function}({args})"

    def run(self) -> None:
        getattr(importlib.import_module(self.module), self.function)(*self.args)


def _each(module: str, names_attr: str, function: str = "get_fixture") -> list:
    names = getattr(importlib.import_module(module), names_attr)
    return [Step(module, function, (n,)) for n in names]


def steps() -> list:
    """Every fixture the suite builds, in the reverse of the order the tests reach them
    (pytest runs tests/delegates first, then devtools, ..., llm, opencl, programs)."""
    from tests.delegates import graph_fixtures
    from tests.llm import fixtures as llm

    out = [Step("tests.llm.fixtures", "ensure", (llm.CI_SET,)),
           Step("tests.llm.multimodal_fixtures", "get_multimodal", ("llava", "portable")),
           Step("tests.llm.speech_fixtures", "get_whisper", ("portable",))]
    out += _each("tests.programs.cadence_fixtures", "NAMES")
    out += _each("tests.programs.fixtures", "FIXTURE_NAMES")
    out += _each("tests.delegates.xnnpack_fixtures", "NAMES")
    out.append(Step("tests.delegates.vulkan_op_fixtures", "get_bundle"))
    out += _each("tests.delegates.vulkan_fixtures", "NAMES")
    out.append(Step("tests.delegates.qnn_fixtures", "build"))
    for backend, names in graph_fixtures.NAMES.items():
        out += [Step("tests.delegates.graph_fixtures", "get_fixture", (n, backend))
                for n in names]
    out += _each("tests.delegates.ethosu_fixtures", "NAMES")
    out += _each("tests.delegates.coreml_fixtures", "NAMES")
    return out


def run(todo, log=sys.stdout) -> int:
    """Run ``todo`` (Steps) in order; a failing step is logged and skipped. The number
    that failed."""
    failed = 0
    for step in todo:
        t0 = time.perf_counter()
        try:
            step.run()
            log.write(f"{step.label}: ready in {time.perf_counter() - t0:.1f} s\n")
        except Exception:  # noqa: BLE001 - the test that needs it reports it
            failed += 1
            log.write(f"{step.label}: FAILED after {time.perf_counter() - t0:.1f} s\n"
                      f"{traceback.format_exc()}\n")
        log.flush()
    return failed


def wanted(n_tests: int) -> bool:
    """Whether a run of ``n_tests`` tests starts the child: not for a small selection,
    not with ``PYRUNTIME_PREBUILD=0``, not in an xdist worker."""
    want = os.environ.get(ENV)
    if want == "0" or os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    return want == "1" or n_tests >= MIN_TESTS


def start(n_tests: int):
    """The child process for a run of ``n_tests`` tests (``subprocess.Popen``), or None
    where it is not ``wanted``."""
    import subprocess

    from tests import fixture_cache
    from tests.child import repo_env

    if not wanted(n_tests):
        return None
    cache = fixture_cache.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    env = repo_env()
    with open(cache / "prebuild.log", "w") as log:
        return subprocess.Popen([sys.executable, "-m", "tests.prebuild"], cwd=_REPO, env=env,
                                stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc) -> None:
    """End the child and everything it started (an export's own child process)."""
    import signal

    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.prebuild", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the steps, build nothing")
    args = ap.parse_args(argv)
    todo = steps()
    if args.list:
        print("\n".join(s.label for s in todo))
        return 0
    # the tests' own process comes first when both want the CPU. (Not fewer torch threads:
    # a calibrated fixture's scales depend on the float sums' order, and the tests compare
    # it with a model they calibrate in their own process.)
    os.nice(10)
    import logging
    import warnings

    warnings.filterwarnings("ignore")  # the exporters' deprecation chatter: the log says
    logging.disable(logging.WARNING)  # what was built, in how long, and what failed
    t0 = time.perf_counter()
    failed = run(todo)
    print(f"{len(todo)} steps, {failed} failed, {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
