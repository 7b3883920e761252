"""pyruntime.kernels.fast.deferred: the kernel modules import without Numba, and once Numba is
needed every placeholder is replaced by Numba's own object wherever compiled code or a
binder could find it."""
from __future__ import annotations

from pathlib import Path

from tests.child import run_json

REPO = Path(__file__).resolve().parents[2]

_CHILD = r"""
import json, sys, types
import numpy as np
from pyruntime.kernels import fast
from pyruntime.kernels.fast import deferred
from pyruntime.kernels.fast.deferred import njit, overload, types as nbtypes, value

for name in fast.kernel_modules():
    __import__(name)
import pyruntime.kernels.libm, pyruntime.llm.sampling  # the other modules taking Numba's names here
report = {"numba_after_import": "numba" in sys.modules}


def twice(x):
    raise NotImplementedError


@overload(twice)
def _twice(x):
    if isinstance(x, nbtypes.Integer):  # the module's types: Numba's own by typing time
        return lambda x: x * 2


@njit(inline="always")
def add_one(x):
    return twice(x) + 1


def make(k):
    @njit
    def f(x):
        return add_one(x) + k
    return f


closure_fn = make(10)


@njit
def ratio(a, b):  # Numba's default error model would raise ZeroDivisionError here
    return a / b


external = value(lambda: "made", "a value")
report["placeholder_types"] = sorted({type(o).__name__ for o in (add_one, closure_fn, external)})
report["called"] = closure_fn(np.int64(3))  # a placeholder called from Python: materializes
report["numba_after_call"] = "numba" in sys.modules and deferred.loaded()
report["external"] = external if isinstance(external, str) else repr(external)
report["ieee"] = [str(ratio(1.0, 0.0)), str(njit(lambda a, b: a / b)(-1.0, 0.0)),
                  str(njit(error_model="python")(lambda a, b: a / b).targetoptions)]

left = []
seen = set()


def scan(obj, where, depth=0):
    if isinstance(obj, deferred._Placeholder):
        left.append(where)
    elif depth < 2 and isinstance(obj, (tuple, list)):
        for i, x in enumerate(obj):
            scan(x, f"{where}[{i}]", depth + 1)
    elif depth < 2 and isinstance(obj, dict):
        for k, x in obj.items():
            scan(x, f"{where}[{k!r}]", depth + 1)
    elif isinstance(obj, types.FunctionType) and id(obj) not in seen:
        seen.add(id(obj))
        for i, c in enumerate(obj.__closure__ or ()):
            try:
                scan(c.cell_contents, f"{where}.<cell {i}>", depth + 1)
            except ValueError:
                pass


for modname, mod in list(sys.modules.items()):
    if mod is not None and modname.startswith(("kernels", "pyruntime", "__main__")) \
            and modname != "pyruntime.kernels.fast.deferred":
        for k, v in list(vars(mod).items()):
            scan(v, f"{modname}.{k}")
report["left"] = left
from numba.core.registry import CPUDispatcher
import pyruntime.kernels.fast.nb as nb
report["real"] = [isinstance(nb.desc, CPUDispatcher), type(deferred.carray).__name__,
                  isinstance(njit(lambda x: x), CPUDispatcher)]
print(json.dumps(report))
"""


def test_kernel_modules_import_without_numba_and_materialize_completely():
    got = run_json(_CHILD)
    assert got["numba_after_import"] is False
    assert got["placeholder_types"] == ["_Function", "_Placeholder"]
    assert got["called"] == 3 * 2 + 1 + 10  # the overload registered, the closure patched
    assert got["numba_after_call"] is True
    assert got["external"] == "made"
    assert got["left"] == []
    assert got["real"] == [True, "function", True]
    # _cache.NJIT_DEFAULTS: IEEE division by default, before and after materializing;
    # an explicit option still wins
    assert got["ieee"][:2] == ["inf", "-inf"]
    assert "'error_model': 'python'" in got["ieee"][2]


def test_njit_defaults_are_part_of_the_cache_key(monkeypatch):
    """Compiled code depends on NJIT_DEFAULTS, which live in a file left out of the source
    hash: changing them must still change every kernel's cache key."""
    from pyruntime.kernels.fast import _cache

    src = REPO / "kernels" / "fast" / "ordered.py"
    before = _cache.source_key(src)
    monkeypatch.setattr(_cache, "NJIT_DEFAULTS", {"error_model": "python"})
    monkeypatch.setattr(_cache, "_KEYS", {})
    assert _cache.source_key(src) != before


def test_no_kernel_module_imports_numba_at_module_level():
    """Kernel files (and the delegates' and runtime's compiled code) take Numba's names from
    kernels.fast.deferred (imports inside a function, run only on Numba's path, are fine):
    one top-level `from numba import` would make every fast-tier load pay for Numba again."""
    import re

    offenders = []
    for path in sorted(p for d in ("kernels", "delegates", "pyruntime")
                       for p in (REPO / d).rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"(from numba\b|import numba\b)", line):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line}")
    assert offenders == []
