"""pyruntime: run ExecuTorch programs (.pte/.ptd) from Python, no C++ build.

The API mirrors ``executorch.runtime``::

    import pyruntime
    program = pyruntime.Runtime.get().load_program("model.pte")
    method = program.load_method("forward")
    outputs = method.execute([x])          # numpy arrays in, numpy arrays out

or in one line: ``pyruntime.load("model.pte").forward(x)``.
"""
from __future__ import annotations

import os as _os

# The wheel installs kernels/, delegates/, cython_ext/ and exporter/ inside this package
# (pyproject.toml's package-dir); in a source checkout they sit beside it, found here.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(__path__[0], "kernels")) and \
        _os.path.isfile(_os.path.join(_root, "kernels", "__init__.py")):
    __path__.append(_root)
del _os, _root

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError  # noqa: E402
from pyruntime.method import Method  # noqa: E402
from pyruntime.program import MethodMeta, Program, TensorInfo  # noqa: E402
from pyruntime.ptd import DataMap  # noqa: E402
from pyruntime.runtime import Runtime  # noqa: E402

__all__ = ["Runtime", "Program", "Method", "MethodMeta", "TensorInfo", "DataMap",
           "ExecuTorchError", "ErrorCode", "load", "Module"]


class Module:
    """A program whose methods are attributes: ``pyruntime.load(p).forward(x)``.

    Methods load on first use and stay loaded (so mutable state such as KV caches
    persists between calls). Each call returns the list of outputs.
    """

    def __init__(self, program: Program, tier: str = "fast", math: str | None = None):
        self.program = program
        self.tier = tier
        self.math = math
        self._methods = {}

    def method(self, name: str) -> Method:
        if name not in self._methods:
            self._methods[name] = self.program.load_method(name, tier=self.tier, math=self.math)
        return self._methods[name]

    def __getattr__(self, name):
        if name.startswith("_") or name not in self.program.method_names:
            raise AttributeError(name)
        m = self.method(name)
        return lambda *inputs: m.execute(inputs)

    def __dir__(self):
        return list(super().__dir__()) + self.program.method_names


def load(path, *, data_path=None, tier: str = "fast", math: str | None = None) -> Module:
    """Load a program for calling its methods directly: ``load(p).forward(x)``
    (``math="fast"``: faster arithmetic within a stated tolerance, ``pyruntime.mathmode``)."""
    return Module(Runtime.get().load_program(path, data_path=data_path), tier=tier, math=math)
