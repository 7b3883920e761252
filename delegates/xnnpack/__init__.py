"""The XNNPACK bridge: ExecuTorch's ``XnnpackBackend`` blobs run on a real XNNPACK
library through ctypes (see ``library.py`` for where the library comes from).

Importing this package registers the backend; the library itself is only
looked for when a program needs it. What each library gives (checked here):

* executorch 1.5.1 wheel (``libexecutorch_backend_xnnpack.so``): dynamic shapes and
  46 of the 47 XNNGraph node types (all but ScaledDotProductAttention, which
  ExecuTorch's own runtime rejects too); fp32, fp16, qs8/qu8, per-channel qc8,
  dynamically quantized qd8 with qc8/qc4/blockwise qb4 weights.
* tflite-runtime 2.14: static shapes; no BatchMatrixMultiply, Concatenate5, Exp,
  Log, Gelu, Sin, Cos, ReciprocalSquareRoot, no qd8; int8 linear layers with
  per-channel weights are refused by the library.
* Debian libxnnpack0 (2022): static shapes, fp32/qs8 subset; no StaticTranspose
  (so no CNN lowered by the partitioner), StaticSlice, Concatenate*,
  BatchMatrixMultiply, Copy, Exp, Log, Tanh, Gelu, Sin, Cos, ReciprocalSquareRoot.

A node the library lacks is a NotSupported error naming the node and how to get
a newer library; ``get_library().describe()`` lists what the loaded one lacks.
"""
from pyruntime.delegates.registry import register_backend
from pyruntime.delegates.xnnpack.backend import XnnpackBackend

xnnpack_backend = register_backend(XnnpackBackend())

__all__ = ["XnnpackBackend", "xnnpack_backend"]
