"""ETDumps recorded by ExecuTorch's own runtime, cached next to the program fixtures.

    from tests.devtools.reference_dumps import reference_dump
    rd = reference_dump("mlp")                 # tests/programs/fixtures.py fixture
    rd = reference_dump("partial", xnnpack=True)
    rd.etdp, rd.bin, rd.fixture                # paths, and the fixture (calls, pte_path)

The dump is made by ``executorch.runtime`` with ``enable_etdump=True`` and a
debug buffer, running every call of the fixture in order on one loaded method
(``calls=1``: only the first). Cache: the fixture cache dir, files
``etdump_<fixture>[_<calls>].{etdp,bin,key}``; the key (versions, the .pte's
hash, the files' hashes) is written last, so a partial build is redone.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from dataclasses import dataclass
from pathlib import Path

FORMAT = "1"


@dataclass(frozen=True)
class ReferenceDump:
    fixture: object
    etdp: Path
    bin: Path


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _debug_buffer_size(pte_path, n_calls: int) -> int:
    """An upper bound of what the C++ runtime logs: per kernel its trailing argument(s),
    per delegate call every argument, 64 bytes of alignment each, and the outputs."""
    from math import prod

    from pyruntime.cython_ext.dtypes import element_size
    from pyruntime.runtime import Runtime

    prog = Runtime.get().load_program(pte_path)
    total = 0
    for plan in prog._plans.values():
        vals = plan.values or []

        def nbytes(j):
            _, v = vals[j].val
            if v is None:
                return 0
            if v._kind == "Tensor":
                return prod(v.sizes or []) * element_size(v.scalar_type) + 64
            if v._kind in ("TensorList", "OptionalTensorList"):
                return sum(nbytes(k) for k in (v.items or []) if k >= 0)
            return 0
        for chain in plan.chains or []:
            for ins in chain.instructions or []:
                _, a = ins.instr_args
                if a._kind == "KernelCall" and a.args:
                    total += nbytes(a.args[-1])
                elif a._kind == "DelegateCall":
                    total += sum(nbytes(j) for j in a.args or [])
        total += sum(nbytes(j) for j in plan.outputs or [])
    return total * n_calls + (1 << 20)


def reference_dump(name: str, xnnpack: bool = False, calls: int | None = None) -> ReferenceDump:
    if xnnpack:
        from tests.delegates.xnnpack_fixtures import cache_dir, get_fixture
    else:
        from tests.programs.fixtures import cache_dir, get_fixture
    fx = get_fixture(name)
    n = len(fx.calls) if calls is None else calls
    stem = f"etdump_{'xnnpack_' if xnnpack else ''}{name}" + ("" if calls is None else f"_{calls}")
    d = cache_dir()
    etdp, binf, keyf = d / f"{stem}.etdp", d / f"{stem}.bin", d / f"{stem}.key"
    key = {"format": FORMAT, "executorch": importlib.metadata.version("executorch"),
           "pte": _sha(fx.pte_path), "calls": n}
    try:
        saved = json.loads(keyf.read_text())
        if {k: saved.get(k) for k in key} == key and saved["etdp"] == _sha(etdp) \
                and saved["bin"] == _sha(binf):
            return ReferenceDump(fx, etdp, binf)
    except (OSError, ValueError, KeyError):
        pass
    keyf.unlink(missing_ok=True)
    _record(fx, n, etdp, binf, xnnpack)
    key.update(etdp=_sha(etdp), bin=_sha(binf))
    tmp = keyf.with_name(f"{keyf.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(key, indent=1))
    os.replace(tmp, keyf)
    return ReferenceDump(fx, etdp, binf)


def _record(fx, n, etdp: Path, binf: Path, xnnpack: bool) -> None:
    import numpy as np
    import torch
    from executorch.runtime import Runtime

    from tests.programs.fixtures import _import_runtime_libs

    _import_runtime_libs()
    size = _debug_buffer_size(fx.pte_path, n)
    program = Runtime.get().load_program(fx.pte_path, enable_etdump=True,
                                         debug_buffer_size=size)
    method = program.load_method(getattr(fx, "method", "forward"))
    for call in fx.calls[:n]:
        method.execute([torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v
                        for v in call])
    tmp_e = etdp.with_name(f"{etdp.name}.tmp{os.getpid()}")
    tmp_b = binf.with_name(f"{binf.name}.tmp{os.getpid()}")
    program.write_etdump_result_to_file(str(tmp_e), str(tmp_b))
    _trim(tmp_e, tmp_b)
    os.replace(tmp_e, etdp)
    os.replace(tmp_b, binf)


def _trim(etdp: Path, binf: Path) -> None:
    """Drop the unused tail of the debug buffer (the runtime writes all of it)."""
    from math import prod

    from pyruntime.cython_ext.dtypes import element_size
    from pyruntime.devtools import ETDump

    dump = ETDump.load(etdp)
    end = 0
    for run in dump.runs:
        for e in run.debug_events:
            refs = e.value.value if e.value.kind == "TensorList" else [e.value.value]
            for t in refs if e.value.kind in ("Tensor", "TensorList") else []:
                n = prod(t.sizes) * element_size(t.scalar_type)
                if n:
                    end = max(end, t.offset + n)
    data = binf.read_bytes()
    binf.write_bytes(data[:end])
