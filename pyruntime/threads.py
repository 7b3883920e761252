"""The ``threads=`` setting: intra-op parallelism of the kernels.

A Method runs with its own ``threads`` (default: the Runtime's, which defaults
to the number of cores). On the fast tier it is fixed at load: the heavy kernels
are split into that many parts, run at once on the execute loop's thread pool
(``cython_ext._loop``). It also sizes OpenBLAS's pool (the few kernels that call
BLAS, ``kernels.blas_lib``, and numpy's matmul), applied before each execute: a
process-wide library setting, so two methods running concurrently with different
values share whichever was applied last.
"""
from __future__ import annotations

import os

from pyruntime.kernels.blas_lib import set_blas_threads

_default = max(1, os.cpu_count() or 1)
_applied = None


def default_threads() -> int:
    return _default


def set_default_threads(n: int) -> None:
    global _default
    _default = _check(n)


def _check(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be a positive int, got {n!r}")
    return n


def apply(n: int) -> None:
    global _applied
    if n != _applied:
        set_blas_threads(n)
        _applied = n
