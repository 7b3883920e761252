"""ctypes prototypes for the XNNPACK C API (written from the public ``xnnpack.h``).

Only the subgraph/runtime API the bridge drives is declared. Every handle is a
``c_void_p`` (a bare Python int would be truncated to 32 bits), every function
returns ``enum xnn_status``. A function the loaded library lacks is ``None``:
callers pick among alternatives (``xnn_define_unary`` vs the per-op
``xnn_define_tanh``, ``create_runtime_v4`` vs ``v2``, ...).
"""
from __future__ import annotations

import ctypes
from ctypes import POINTER, c_double, c_float, c_int, c_int32, c_size_t, c_uint16, c_uint32, \
    c_void_p

XNN_INVALID_VALUE_ID = 0xFFFFFFFF
XNN_MAX_TENSOR_DIMS = 6
XNN_EXTRA_BYTES = 16
XNN_VALUE_FLAG_EXTERNAL_INPUT = 0x1
XNN_VALUE_FLAG_EXTERNAL_OUTPUT = 0x2

STATUS = {0: "success", 1: "uninitialized", 2: "invalid_parameter", 3: "invalid_state",
          4: "unsupported_parameter", 5: "unsupported_hardware", 6: "out_of_memory",
          7: "reallocation_required", 8: "deprecated"}


class ExternalValue(ctypes.Structure):
    """``struct xnn_external_value { uint32_t id; void* data; }``"""
    _fields_ = [("id", c_uint32), ("data", c_void_p)]


class BinaryParams(ctypes.Structure):
    """``struct xnn_binary_params { double output_min, output_max; }``"""
    _fields_ = [("output_min", c_double), ("output_max", c_double)]


class _Clamp(ctypes.Structure):
    _fields_ = [("min", c_float), ("max", c_float)]


class UnaryParams(ctypes.Union):
    """``union xnn_unary_params { clamp {min, max}; elu {alpha}; leaky_relu {negative_slope}; }``"""
    # padded: newer headers may add larger members, and the library copies the whole union
    _fields_ = [("clamp", _Clamp), ("elu_alpha", c_float), ("leaky_relu_slope", c_float),
                ("_reserved", ctypes.c_uint8 * 64)]


# enum xnn_unary_operator (xnnpack.h of 2025-2026; checked against the library by the tests)
UNARY = {
    "abs": 0, "approxgelu": 1, "bankers_rounding": 2, "ceiling": 3, "clamp": 4, "convert": 5,
    "cosine": 6, "elu": 7, "exp": 8, "floor": 9, "gelu": 10, "hardswish": 11, "leaky_relu": 12,
    "log": 13, "negate": 14, "reciprocal_square_root": 15, "sigmoid": 16, "sine": 17,
    "square_root": 18, "square": 19, "tanh": 20,
}
# enum xnn_binary_operator
BINARY = {"add": 0, "subtract": 1, "multiply": 2, "divide": 3, "maximum": 4, "minimum": 5,
          "copysign": 6, "squared_difference": 7, "prelu": 8}

_vp, _u32, _sz, _f32 = c_void_p, c_uint32, c_size_t, c_float
_pu32, _psz, _pf32 = POINTER(c_uint32), POINTER(c_size_t), POINTER(c_float)
_ids = lambda n: [_u32] * n  # noqa: E731

# name -> argument types (the return type is always enum xnn_status = int)
PROTOTYPES: dict[str, list] = {
    "xnn_initialize": [_vp],
    "xnn_create_subgraph": [_u32, _u32, POINTER(_vp)],
    "xnn_delete_subgraph": [_vp],
    # values
    "xnn_define_tensor_value": [_vp, c_int, _sz, _psz, _vp, _u32, _u32, _pu32],
    "xnn_define_quantized_tensor_value": [_vp, c_int, c_int32, _f32, _sz, _psz, _vp, _u32, _u32,
                                          _pu32],
    "xnn_define_channelwise_quantized_tensor_value": [_vp, c_int, _pf32, _sz, _sz, _psz, _vp,
                                                      _u32, _u32, _pu32],
    "xnn_define_channelwise_quantized_tensor_value_v2": [_vp, c_int, c_int32, _pf32, _sz, _sz,
                                                         _psz, _vp, _u32, _u32, _pu32],
    "xnn_define_blockwise_quantized_tensor_value": [_vp, c_int, c_int32, POINTER(c_uint16), _sz,
                                                    _sz, _sz, _psz, _vp, _u32, _u32, _pu32],
    "xnn_define_dynamically_quantized_tensor_value": [_vp, c_int, _sz, _sz, _psz, _u32, _u32,
                                                      _pu32],
    # generic elementwise
    "xnn_define_unary": [_vp, c_int, POINTER(UnaryParams)] + _ids(3),
    "xnn_define_binary": [_vp, c_int, POINTER(BinaryParams)] + _ids(4),
    # linear algebra and convolutions
    "xnn_define_fully_connected": [_vp, _f32, _f32] + _ids(5),
    "xnn_define_convolution_2d": [_vp] + _ids(11) + [_sz, _sz, _f32, _f32] + _ids(5),
    "xnn_define_deconvolution_2d": [_vp] + _ids(13) + [_sz, _sz, _f32, _f32] + _ids(5),
    "xnn_define_depthwise_convolution_2d": [_vp] + _ids(11) + [_sz, _f32, _f32] + _ids(5),
    "xnn_define_batch_matrix_multiply": [_vp] + _ids(4),
    # pooling
    "xnn_define_average_pooling_2d": [_vp] + _ids(8) + [_f32, _f32] + _ids(3),
    "xnn_define_max_pooling_2d": [_vp] + _ids(10) + [_f32, _f32] + _ids(3),
    "xnn_define_argmax_pooling_2d": [_vp] + _ids(10),
    "xnn_define_global_average_pooling_2d": [_vp, _f32, _f32] + _ids(3),
    # shape and data movement
    "xnn_define_softmax": [_vp] + _ids(3),
    "xnn_define_static_transpose": [_vp, _sz, _psz] + _ids(3),
    "xnn_define_static_reshape": [_vp, _sz, _psz] + _ids(3),
    "xnn_define_static_slice": [_vp, _sz, _psz, _psz] + _ids(3),
    "xnn_define_static_constant_pad": [_vp, _psz, _psz, _f32] + _ids(3),
    "xnn_define_static_resize_bilinear_2d": [_vp, _sz, _sz] + _ids(3),
    # the axis is int32_t in new headers, size_t in 2022's: a size_t argument serves both
    "xnn_define_concatenate2": [_vp, _sz] + _ids(4),
    "xnn_define_concatenate3": [_vp, _sz] + _ids(5),
    "xnn_define_concatenate4": [_vp, _sz] + _ids(6),
    "xnn_define_concatenate5": [_vp, _sz] + _ids(7),
    "xnn_define_concatenate": [_vp, c_int32, _sz, _pu32, _u32, _u32],
    "xnn_define_copy": [_vp] + _ids(3),
    "xnn_define_convert": [_vp] + _ids(3),
    "xnn_define_prelu": [_vp] + _ids(4),
    # per-op elementwise (2022 API; deprecated, still exported by newer libraries)
    "xnn_define_clamp": [_vp, _f32, _f32] + _ids(3),
    "xnn_define_leaky_relu": [_vp, _f32] + _ids(3),
    "xnn_define_elu": [_vp, _f32] + _ids(3),
    "xnn_define_add2": [_vp, _f32, _f32] + _ids(4),
    "xnn_define_subtract": [_vp, _f32, _f32] + _ids(4),
    "xnn_define_multiply2": [_vp, _f32, _f32] + _ids(4),
    "xnn_define_divide": [_vp, _f32, _f32] + _ids(4),
    "xnn_define_maximum2": [_vp] + _ids(4),
    "xnn_define_minimum2": [_vp] + _ids(4),
    **{f"xnn_define_{op}": [_vp] + _ids(3) for op in (
        "abs", "ceiling", "floor", "hardswish", "negate", "sigmoid", "square", "square_root",
        "reciprocal_square_root", "log", "gelu", "tanh", "exp", "sin", "cos")},
    # runtime
    "xnn_create_workspace": [POINTER(_vp)],
    "xnn_release_workspace": [_vp],
    "xnn_create_runtime_v4": [_vp, _vp, _vp, _vp, _u32, POINTER(_vp)],
    "xnn_create_runtime_v3": [_vp, _vp, _vp, _u32, POINTER(_vp)],
    "xnn_create_runtime_v2": [_vp, _vp, _u32, POINTER(_vp)],
    "xnn_reshape_external_value": [_vp, _u32, _sz, _psz],
    "xnn_reshape_runtime": [_vp],
    "xnn_get_external_value_shape": [_vp, _u32, _psz, _psz],
    "xnn_setup_runtime_v2": [_vp, _sz, POINTER(ExternalValue)],
    "xnn_setup_runtime": [_vp, _sz, POINTER(ExternalValue)],
    "xnn_invoke_runtime": [_vp],
    "xnn_delete_runtime": [_vp],
}

# pthreadpool (exported beside XNNPACK by the executorch wheel and Debian's libpthreadpool)
THREADPOOL_PROTOTYPES = {
    "pthreadpool_create": (c_void_p, [c_size_t]),
    "pthreadpool_destroy": (None, [c_void_p]),
    "pthreadpool_get_threads_count": (c_size_t, [c_void_p]),
}


class XnnApi:
    """The library's functions with prototypes applied; missing ones are ``None``."""

    def __init__(self, cdll: ctypes.CDLL):
        self.cdll = cdll
        self.present: set[str] = set()
        for name, argtypes in PROTOTYPES.items():
            fn = _symbol(cdll, name)
            if fn is not None:
                fn.argtypes = argtypes
                fn.restype = c_int
                self.present.add(name)
            setattr(self, name, fn)
        for name, (restype, argtypes) in THREADPOOL_PROTOTYPES.items():
            fn = _symbol(cdll, name)
            if fn is not None:
                fn.argtypes = argtypes
                fn.restype = restype
            setattr(self, name, fn)

    def has(self, *names: str) -> bool:
        return all(n in self.present for n in names)


def _symbol(cdll, name):
    try:
        return getattr(cdll, name)
    except AttributeError:
        return None
