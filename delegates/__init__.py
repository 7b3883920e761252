"""Delegates: the backend interface and one bridge per vendor runtime.

A backend mirrors ExecuTorch's contract (spec section 6): ``is_available()``,
``init(processed, compile_specs, named_data) -> handle``,
``execute(handle, args)``, ``destroy(handle)``, registered under the id the
``.pte`` names (``"XnnpackBackend"``, ...).

>>> from pyruntime.delegates import backend_registry
>>> "XnnpackBackend" in backend_registry.known_ids()
True
"""
from pyruntime.delegates.interface import BackendInterface
from pyruntime.delegates.registry import backend_registry, register_backend

__all__ = ["BackendInterface", "backend_registry", "register_backend"]
