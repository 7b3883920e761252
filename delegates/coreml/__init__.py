"""The CoreML bridge: ExecuTorch's ``CoreMLBackend`` payloads (made by ``CoreMLPartitioner``)
run on any OS by pyruntime's own MIL interpreter, and by Core ML on macOS.

Importing this package registers the backend; coremltools (for its generated
protobuf modules, ``pip install 'pyruntime[coreml]'``) is only looked for when a
program needs it, and its absence is a NotFound error at load naming the
backend. See ``backend.py`` for the engines and ``ops.py`` for what "fp16
semantics" means here.
"""
from pyruntime.delegates.coreml.backend import CoreMLBackend, CoreMLHandle
from pyruntime.delegates.registry import register_backend

coreml_backend = register_backend(CoreMLBackend())

__all__ = ["CoreMLBackend", "CoreMLHandle", "coreml_backend"]
