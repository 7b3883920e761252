"""Runtime: the entry point, mirroring ``executorch.runtime.Runtime``."""
from __future__ import annotations

import os

from pyruntime.delegates import backend_registry
from pyruntime.kernels.registry import registered_names
from pyruntime import mathmode, threads as threads_mod
from pyruntime.program import Program


class _OperatorRegistry:
    @property
    def operator_names(self) -> set[str]:
        return set(registered_names())


class Runtime:
    """``Runtime.get()`` returns the process-wide runtime.

    >>> import pyruntime
    >>> rt = pyruntime.Runtime.get()
    >>> "aten::add.out" in rt.operator_registry.operator_names
    True
    """

    _instance = None

    def __init__(self):
        self.backend_registry = backend_registry
        self.operator_registry = _OperatorRegistry()

    @property
    def threads(self) -> int:
        """Default intra-op thread count of methods loaded from now on (default: cores)."""
        return threads_mod.default_threads()

    @threads.setter
    def threads(self, n: int) -> None:
        threads_mod.set_default_threads(n)

    @property
    def math(self) -> str:
        """Default math mode of methods loaded from now on: ``"exact"`` (ExecuTorch's numbers
        bit for bit) or ``"fast"`` (``pyruntime.mathmode``); ``$PYRUNTIME_MATH`` sets it
        for a process."""
        return mathmode.default_math()

    @math.setter
    def math(self, mode: str) -> None:
        mathmode.set_default_math(mode)

    @classmethod
    def get(cls) -> "Runtime":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def load_program(self, data, *, data_path=None, verification=None) -> Program:
        """Load a .pte from a path (memory-mapped), bytes or a binary file object.

        ``data_path``: a .ptd file (or list of them) holding external tensors.
        ``verification`` is accepted for API compatibility; every load is fully checked.
        """
        if isinstance(data, os.PathLike):
            data = os.fspath(data)
        return Program(data, data_path=data_path)
