"""Finding and loading an XNNPACK library (ctypes), and what it can do.

Search order (first that loads wins):

1. an explicit path: ``find_library(path)`` or ``$PYRUNTIME_XNNPACK_LIB``
   (if set, nothing else is tried: a wrong path is an error, not a fallback);
2. the ``executorch`` wheel's ``executorch/lib/libexecutorch_backend_xnnpack.so``,
   found without importing executorch (``pip install --no-deps executorch==1.5.1``);
3. ``tflite-runtime``'s interpreter extension (exports XNNPACK, no reshape API);
4. Debian's ``libXNNPACK.so.0`` (``apt-get install libxnnpack0``: the 2022 API,
   fp32/qs8 subset, static shapes).

>>> lib = get_library()                      # None when no library is found
>>> # lib.describe() -> "XNNPACK from executorch (...): API modern, 47/47 node types"
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
from dataclasses import dataclass, field

from pyruntime.delegates.shared_library import LibrarySearch, package_dirs
from pyruntime.delegates.xnnpack.ctypes_api import STATUS, XnnApi

ENV = "PYRUNTIME_XNNPACK_LIB"
INSTALL_HINT = (
    "no XNNPACK library was found. Install one: `pip install --no-deps executorch==1.5.1` "
    "(ships executorch/lib/libexecutorch_backend_xnnpack.so; no torch needed) or "
    "`pip install 'pyruntime[xnnpack]'`; or set PYRUNTIME_XNNPACK_LIB to a libXNNPACK shared "
    "library (Debian: `apt-get install libxnnpack0`, fp32 subset only)")

# ExecuTorch's serialized XNNDatatype -> the library's enum xnn_datatype. They agree up to 9
# and differ from 10 up (XNNPACK appends to its enum, so one table serves every version).
ET_TO_XNN_DATATYPE = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9,
                      10: 12,  # qbint4
                      11: 10,  # qpint8
                      12: 11,  # int32
                      13: 13,  # pfp32
                      14: 14}  # bf16

# node type -> alternatives, each a tuple of functions that must all exist
_UNARY_LEGACY = {"Sigmoid": "sigmoid", "Floor": "floor", "SquareRoot": "square_root",
                 "ReciprocalSquareRoot": "reciprocal_square_root", "Ceiling": "ceiling",
                 "Gelu": "gelu", "Hardswish": "hardswish", "Log": "log", "Negate": "negate",
                 "Square": "square", "Abs": "abs", "Sin": "sin", "Cos": "cos", "Tanh": "tanh",
                 "Exp": "exp", "Clamp": "clamp", "LeakyReLU": "leaky_relu", "ELU": "elu"}
_BINARY_LEGACY = {"Add": "add2", "Subtract": "subtract", "Multiply": "multiply2",
                  "Div": "divide", "Maximum": "maximum2", "Minimum": "minimum2"}
NODE_REQUIREMENTS: dict[str, list[tuple[str, ...]]] = {
    **{n: [("xnn_define_unary",), (f"xnn_define_{f}",)] for n, f in _UNARY_LEGACY.items()},
    **{n: [("xnn_define_binary",), (f"xnn_define_{f}",)] for n, f in _BINARY_LEGACY.items()},
    "PReLU": [("xnn_define_prelu",), ("xnn_define_binary",)],
    "Softmax": [("xnn_define_softmax",)],
    "Convert": [("xnn_define_convert",), ("xnn_define_unary",)],
    "FullyConnected": [("xnn_define_fully_connected",)],
    "Conv2d": [("xnn_define_convolution_2d",)],
    "DepthwiseConv2d": [("xnn_define_depthwise_convolution_2d",)],
    "ConvTranspose2d": [("xnn_define_deconvolution_2d",)],
    "AvgPooling2d": [("xnn_define_average_pooling_2d",)],
    "MaxPooling2d": [("xnn_define_max_pooling_2d",)],
    "ArgMaxPooling2d": [("xnn_define_argmax_pooling_2d",)],
    "GlobalAvgPooling2d": [("xnn_define_global_average_pooling_2d",)],
    "StaticTranspose": [("xnn_define_static_transpose",)],
    "StaticReshape": [("xnn_define_static_reshape",)],
    "StaticSlice": [("xnn_define_static_slice",)],
    "StaticConstantPad": [("xnn_define_static_constant_pad",)],
    "StaticResizeBilinear2D": [("xnn_define_static_resize_bilinear_2d",)],
    **{f"Concatenate{k}": [(f"xnn_define_concatenate{k}",), ("xnn_define_concatenate",)]
       for k in (2, 3, 4, 5)},
    "BatchMatrixMultiply": [("xnn_define_batch_matrix_multiply",)],
    "Copy": [("xnn_define_copy",)],
    "ScaledDotProductAttention": [],  # removed from XNNPACK; ExecuTorch's runtime rejects it too
}
VALUE_REQUIREMENTS = {
    "per-tensor quantized (qs8/qu8/qs32)": ("xnn_define_quantized_tensor_value",),
    "per-channel quantized (qc8/qc32)": ("xnn_define_channelwise_quantized_tensor_value",),
    "per-channel 4-bit (qc4w)": ("xnn_define_channelwise_quantized_tensor_value_v2",),
    "blockwise 4-bit (qb4w)": ("xnn_define_blockwise_quantized_tensor_value",),
    "dynamically quantized (qd8)": ("xnn_define_dynamically_quantized_tensor_value",),
}


@dataclass
class XnnLibrary:
    """A loaded XNNPACK: its path, where it came from, its functions and API level."""

    path: str
    source: str
    api: XnnApi
    cdll: ctypes.CDLL = field(repr=False)
    _pools: dict = field(default_factory=dict, repr=False)
    _pool_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def level(self) -> str:
        """``"dynamic"``: reshape API (dynamic shapes, ``setup_runtime_v2``);
        ``"static"``: shapes fixed at definition (``setup_runtime``)."""
        if self.api.has("xnn_reshape_external_value", "xnn_reshape_runtime",
                        "xnn_get_external_value_shape", "xnn_setup_runtime_v2"):
            return "dynamic"
        return "static"

    def supports(self, node: str) -> bool:
        return any(self.api.has(*alt) for alt in NODE_REQUIREMENTS.get(node, []))

    def supported_nodes(self) -> list[str]:
        return sorted(n for n in NODE_REQUIREMENTS if self.supports(n))

    def missing_nodes(self) -> list[str]:
        return sorted(n for n in NODE_REQUIREMENTS if not self.supports(n))

    def supported_values(self) -> list[str]:
        return ["fp32/fp16"] + [k for k, req in VALUE_REQUIREMENTS.items() if self.api.has(*req)]

    def describe(self) -> str:
        n = len(NODE_REQUIREMENTS)
        s = (f"XNNPACK from {self.source} ({self.path}): {self.level} shapes, "
             f"{len(self.supported_nodes())}/{n} node types, values: "
             f"{', '.join(self.supported_values())}")
        missing = self.missing_nodes()
        return s + (f"; lacks {', '.join(missing)}" if missing else "")

    def threadpool(self, threads: int):
        """A process-wide pthreadpool of ``threads`` threads (None: run on the caller)."""
        if threads <= 1 or self.api.pthreadpool_create is None:
            return None
        with self._pool_lock:
            pool = self._pools.get(threads)
            if pool is None:
                pool = self.api.pthreadpool_create(threads)
                self._pools[threads] = pool  # kept for the life of the process
            return pool


# ---- candidates ----------------------------------------------------------------
def candidates() -> list[tuple[str, str]]:
    """(source, path) pairs to try, in order (the explicit path is handled by find_library)."""
    out = []
    for d in package_dirs("executorch"):
        out.append(("executorch", os.path.join(d, "lib", "libexecutorch_backend_xnnpack.so")))
    for d in package_dirs("tflite_runtime"):
        out += [("tflite-runtime", p)
                for p in sorted(glob.glob(os.path.join(d, "_pywrap_tensorflow_interpreter*.so")))]
    found = ctypes.util.find_library("XNNPACK")
    debian = [found] if found else []
    debian += sorted(glob.glob("/usr/lib/*/libXNNPACK.so*")) + sorted(
        glob.glob("/usr/lib/libXNNPACK.so*")) + sorted(glob.glob("/usr/local/lib/libXNNPACK.so*"))
    out += [("debian", p) for p in dict.fromkeys(debian)]
    return [(s, p) for s, p in dict.fromkeys(out) if os.sep not in p or os.path.exists(p)]


def load_library(path: str, source: str = "path") -> XnnLibrary:
    """Load ``path`` with ctypes and initialize XNNPACK; raises OSError if it is not usable."""
    cdll = ctypes.CDLL(path)  # by absolute path: the wheel's RUNPATH ($ORIGIN) finds its deps
    api = XnnApi(cdll)
    need = ("xnn_initialize", "xnn_create_subgraph", "xnn_define_tensor_value",
            "xnn_invoke_runtime", "xnn_delete_runtime", "xnn_delete_subgraph")
    missing = [n for n in need if n not in api.present]
    if missing:
        raise OSError(f"{path} does not export the XNNPACK subgraph API (missing "
                      f"{', '.join(missing)})")
    if not (api.has("xnn_create_runtime_v4", "xnn_create_workspace") or api.has(
            "xnn_create_runtime_v3") or api.has("xnn_create_runtime_v2")):
        raise OSError(f"{path} has no xnn_create_runtime_v2/v3/v4")
    if not (api.has("xnn_setup_runtime_v2") or api.has("xnn_setup_runtime")):
        raise OSError(f"{path} has no xnn_setup_runtime")
    status = api.xnn_initialize(None)
    if status != 0:
        raise OSError(f"xnn_initialize failed: {STATUS.get(status, status)}")
    return XnnLibrary(path=path, source=source, api=api, cdll=cdll)


_search = LibrarySearch(ENV, INSTALL_HINT)
attempts = _search.attempts  # why each candidate of the last search was rejected


def find_library(path: str | None = None) -> XnnLibrary | None:
    """The first usable XNNPACK library (see the module docstring), or None."""
    return _search.find(path, candidates, load_library)


def get_library() -> XnnLibrary | None:
    """``find_library()``, cached per value of $PYRUNTIME_XNNPACK_LIB."""
    return _search.cached(os.environ.get(ENV), find_library)


clear_cache = _search.clear
unavailable_reason = _search.unavailable_reason


__all__ = ["XnnLibrary", "find_library", "get_library", "load_library", "candidates",
           "clear_cache", "unavailable_reason", "ET_TO_XNN_DATATYPE", "INSTALL_HINT"]
