"""The on-disk cache of exported test fixtures, shared by every fixture module.

Fixtures live in ``tests/.fixtures`` (or ``$PYRUNTIME_FIXTURES``), one file per
artifact (``<prefix>_<name>.pte``, ``.npz``, ``.json``, ...) and a ``.key`` file:
a JSON object of what the fixture was made from (spec version, library versions)
plus the sha256 of every artifact. A fixture is rebuilt when its key differs or an
artifact is missing or changed; builds are serialised across processes (pytest-xdist
workers, fuzz children) by a lock file per fixture.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    env = os.environ.get("PYRUNTIME_FIXTURES")
    return Path(env) if env else _REPO / "tests" / ".fixtures"


def versions(*dists: str) -> dict:
    """``{dist: installed version}``: a fixture made by one torch/executorch is stale under
    another."""
    return {d: importlib.metadata.version(d) for d in dists}


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def is_valid(key_path: Path, key: dict, files: dict) -> bool:
    """Whether the key at ``key_path`` records ``key`` and the current hash of every path
    in ``files`` (``{label: path}``)."""
    try:
        stored = json.loads(Path(key_path).read_text())
        return ({k: stored.get(k) for k in key} == key and
                all(stored["files"].get(e) == sha256(p) for e, p in files.items()))
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return False


def write_key(key_path: Path, key: dict, files: dict) -> None:
    """Record ``key`` and the hashes of ``files``; written last, so a build interrupted
    before it leaves the fixture invalid."""
    stored = {**key, "files": {e: sha256(p) for e, p in files.items()}}
    write_atomic(key_path, json.dumps(stored, indent=1).encode())


def write_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def lock(stem: str):
    """An exclusive lock on ``<cache>/<stem>.lock`` for building one fixture."""
    import fcntl

    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"{stem}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_calls(npz_path: Path, json_path: Path, calls: list, expected: list) -> None:
    """Save input lists and their expected output lists (``c{i}_in{j}``, ``c{i}_out{j}``
    in the .npz, the counts in the .json); ``read_calls`` gives them back."""
    import io

    import numpy as np

    arrays = {f"c{i}_in{j}": a for i, c in enumerate(calls) for j, a in enumerate(c)}
    arrays.update({f"c{i}_out{j}": o for i, outs in enumerate(expected)
                   for j, o in enumerate(outs)})
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(npz_path, buf.getvalue())
    write_atomic(json_path, json.dumps({"calls": [[len(c), len(o)] for c, o in
                                                  zip(calls, expected)]}).encode())


def read_calls(npz_path: Path, json_path: Path) -> tuple[list, list]:
    """(calls, expected) as ``write_calls`` saved them."""
    import numpy as np

    counts = json.loads(Path(json_path).read_text())["calls"]
    with np.load(npz_path) as z:
        return ([[z[f"c{i}_in{j}"] for j in range(n_in)] for i, (n_in, _) in enumerate(counts)],
                [[z[f"c{i}_out{j}"] for j in range(n_out)]
                 for i, (_, n_out) in enumerate(counts)])
