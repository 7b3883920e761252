"""Which kernel modules register a binder for each op, kept on disk between processes.

Importing every kernel module to find one op's binder costs a new process 0.1-0.2 s
(about 50 modules, 340 Numba dispatchers); a program binds a handful of families. So
the first full import records, for each op, the modules whose import registered a
binder for it, and later processes import only those. The record is keyed by a hash
of every source file under ``kernels/`` and ``cython_ext/``: any edit there rebuilds
it. A record that cannot be read is rebuilt; one that a full import would contradict
is never written (see ``kernels.fast._load_binders``).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
_VERSION = 3  # 2: modules in family folders; 3: one binder per op (choose.py)


def sources_key() -> str:
    h = hashlib.sha256(str(_VERSION).encode())
    for pkg in ("kernels", "cython_ext"):
        for f in sorted((_ROOT / pkg).rglob("*.py")):
            h.update(f.relative_to(_ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _path(key: str) -> Path:
    from pyruntime.kernels.fast._cache import cache_root

    return Path(cache_root()) / f"binders-{key}.json"


def read() -> dict | None:
    """{op name: [module, ...]} for these sources, or None."""
    try:
        data = json.loads(_path(sources_key()).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(
            isinstance(v, list) and all(isinstance(m, str) and m.startswith("pyruntime.kernels.")
                                        for m in v) for v in data.values()):
        return None
    return data


def write(index: dict) -> None:
    path = _path(sources_key())
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(index, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
