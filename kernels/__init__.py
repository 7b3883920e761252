"""Operator kernels, keyed by exact ExecuTorch op name (``"aten::add.out"``).

>>> from pyruntime import kernels
>>> "aten::add.out" in kernels.registered_names()
True
"""
from pyruntime.kernels.registry import get_kernel, has_kernel, register, registered_names, Kernel

__all__ = ["get_kernel", "has_kernel", "register", "registered_names", "Kernel"]
