"""The ``math=`` setting: ExecuTorch's numbers bit for bit, or faster arithmetic.

``"exact"`` (the default) computes what ``executorch.runtime``'s kernels compute: every
product rounded before its add, sums in the C++ loops' order, libm's transcendentals.
``"fast"`` lets the fast tier's hot kernels trade that for speed without changing what
a result means: fused multiply-adds (FMA), reassociated and blocked sums, vector
approximations of exp / tanh / erf. Float outputs stay within 1e-4 x max(1, |ref|) of
the exact ones on the parity programs, int8 programs within one quantisation step
(``docs/NUMERICS.md`` has the measured errors). A fast result is the same at every
thread count and on every run, but may differ in the last bits between CPUs (FMA or
not, vector width).

The mode is fixed when a method loads, like ``threads``: ``load_method(..., math=)``,
else ``Runtime.get().math``, else ``$PYRUNTIME_MATH``, else ``"exact"``. It applies to
the fast tier; the reference tier is the exact definition and the OpenCL tier is
exact too (``Method.math`` says which mode a method runs).

>>> import pyruntime
>>> pyruntime.Runtime.get().math
'exact'
"""
from __future__ import annotations

import os

MODES = ("exact", "fast")
_default = None  # set_default_math's value; None: $PYRUNTIME_MATH or "exact"


def check_math(mode, where: str = "math") -> str:
    """``mode`` if it is one of ``MODES``, else ValueError naming ``where``."""
    if mode not in MODES:
        raise ValueError(f"{where} must be 'exact' or 'fast', got {mode!r}")
    return mode


def default_math() -> str:
    if _default is not None:
        return _default
    return check_math(os.environ.get("PYRUNTIME_MATH") or "exact", "$PYRUNTIME_MATH")


def set_default_math(mode: str) -> None:
    global _default
    _default = check_math(mode)
