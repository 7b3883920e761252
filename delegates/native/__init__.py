"""The NativeBackend bridge: ExecuTorch's ``NativePartitioner`` payloads (``NPTG``, a
serialised fx graph of core ATen ops) run on pyruntime's portable kernels.

Importing this package registers the backend; it needs nothing beyond pyruntime.
"""
from pyruntime.delegates.native.backend import NativeBackend, NativeHandle
from pyruntime.delegates.registry import register_backend

native_backend = register_backend(NativeBackend())

__all__ = ["NativeBackend", "NativeHandle", "native_backend"]
