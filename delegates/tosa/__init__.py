"""The TOSA bridge: ExecuTorch's ``TOSABackend`` payloads (made by ``TOSAPartitioner``, a
TOSA 1.0 flatbuffer) run by the TOSA reference model (``tosa_reference_model`` from the
``tosa-tools`` wheel, ``pip install 'pyruntime[arm]'``).

Importing this package registers the backend; the reference model is only imported when
a program needs it, and its absence is a NotFound error at load naming the backend.
"""
from pyruntime.delegates.registry import register_backend
from pyruntime.delegates.tosa.backend import TOSABackend, TOSAHandle

tosa_backend = register_backend(TOSABackend())

__all__ = ["TOSABackend", "TOSAHandle", "tosa_backend"]
