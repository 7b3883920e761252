"""Imports every kernel family module so that its kernels register."""
import importlib
import pkgutil

from pyruntime import kernels

_SKIP = {"registry", "families", "promote", "fast", "blas_lib", "args", "libm"}  # helpers: no kernels

for _m in pkgutil.iter_modules(kernels.__path__):
    if _m.name not in _SKIP and not _m.name.startswith("_"):
        importlib.import_module(f"pyruntime.kernels.{_m.name}")
