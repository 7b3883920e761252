"""The OpenCL tier's machinery: each family's OpenCL C is ``kernels/<family>/opencl.py``,
beside its reference (``reference*.py``) and compiled (``typed*.py``, ``generic*.py``) tiers, each binder
registered under the exact op name (``api.register_cl``). ``device`` chooses the
device and builds and caches the programs; ``pyruntime.clplan`` maps a method onto it.
Needs ``pyopencl`` (the ``[opencl]`` extra) and an OpenCL driver."""
from __future__ import annotations

FAMILIES = ("conv", "elementwise", "index", "linalg", "llm", "norm", "pool", "quantized",
            "reduce", "shape", "softmax", "upsample")


def load_families() -> None:
    import importlib

    for f in FAMILIES:
        importlib.import_module(f"pyruntime.kernels.{f}.opencl")
