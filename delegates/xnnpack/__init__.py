"""The XNNPACK bridge: ExecuTorch's ``XnnpackBackend`` blobs run on a real XNNPACK
library through ctypes (see ``library.py`` for where the library comes from).

Importing this package registers the backend; the library itself is only
looked for when a program needs it.
"""
from delegates.registry import register_backend
from delegates.xnnpack.backend import XnnpackBackend

backend = register_backend(XnnpackBackend())

__all__ = ["XnnpackBackend", "backend"]
