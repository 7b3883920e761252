"""What a new process pays before its first execute: the reference tier never imports
Numba (only a program using a libm op compiles its ufuncs), and the fast tier with its
kernels cached links them without Numba's compiler (tests/kernels/test_objcache.py)."""
from __future__ import annotations

from pathlib import Path

from tests.child import run_json
from tests.programs.small_programs import small_program

REPO = Path(__file__).resolve().parents[1]

_CHILD = """
import json, sys
import numpy as np
import pyruntime
prog = pyruntime.Runtime.get().load_program(sys.argv[1])
m = prog.load_method("forward", tier="reference")
out = m.execute([np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)])[0]
print(json.dumps({"numba": "numba" in sys.modules, "out": out.tolist()}))
"""


def test_the_reference_tier_does_not_import_numba():
    pte, _ = small_program("linear_relu")
    got = run_json(_CHILD, pte, timeout=300)
    assert got["numba"] is False
    assert len(got["out"]) == 2 and min(min(r) for r in got["out"]) >= 0  # the relu ran


_FAST_CHILD = """
import json, sys
import numpy as np
import pyruntime
m = pyruntime.Runtime.get().load_program(sys.argv[1]).load_method("forward")
out = m.execute([np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)])[0]
print(json.dumps({"numba": "numba" in sys.modules, "compiled": m._fast.compiled,
                  "pending": m.pending_kernels, "out": out.tolist()}))
"""


def test_the_fast_tier_with_cached_kernels_does_not_import_numba():
    """Every kernel linked from the object cache: the kernel modules' Numba objects stay
    placeholders (kernels.fast.deferred), even with the compile notice on (a terminal)."""
    pte, _ = small_program("linear_relu")
    def child(**extra):
        return run_json(_FAST_CHILD, pte, env={"PYRUNTIME_PROGRESS": "1", **extra},
                        timeout=1800)

    warm = child(PYRUNTIME_COMPILE="sync")  # compiles what the caches lack
    got = child()
    assert got["numba"] is False, got
    assert got["compiled"] == warm["compiled"] > 0 and got["pending"] == 0
    assert got["out"] == warm["out"]
