"""Run Python code in a new process, as a user's program would start: the repository on
``PYTHONPATH``, its own imports and caches. The tests that check what a new process
imports, links or compiles print one JSON line last; ``run_json`` returns it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def repo_env() -> dict:
    """This process's environment with the repository first on ``PYTHONPATH`` (what is
    there already kept after it): for a child that builds fixtures."""
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_json(code: str, *args, env: dict | None = None, base: dict | None = None,
             timeout: float = 600):
    """The last stdout line of ``python -c code *args``, parsed as JSON. The child's
    environment is ``base`` (default: this process's) plus ``env``, with the repository
    on ``PYTHONPATH``; a non-zero exit fails the test with the child's stderr."""
    full = {**(os.environ if base is None else base), **(env or {}), "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO, env=full,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])
