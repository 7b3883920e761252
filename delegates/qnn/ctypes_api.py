"""ctypes layouts of the QNN C API the bridge uses (x86_64), written from Qualcomm's
public API documentation and checked against the libraries of ``onnxruntime-qnn``.

Every handle is a ``c_void_p`` and every call returns ``Qnn_ErrorHandle_t`` (u64,
the error code in its low 16 bits). Functions are reached through the provider
tables the libraries hand out (``QnnInterface_getProviders``,
``QnnSystemInterface_getProviders``): nothing else is exported. Those tables only
grow at their end within API 2.x, so a slot index fixes a function.

Sizes checked on the libraries (the tests assert them): ``Qnn_QuantizeParams_t``
40, ``Qnn_TensorV1_t`` 112, ``Qnn_TensorV2_t`` 136, ``Qnn_Tensor_t`` 144,
``QnnSystemContext_GraphInfo_t`` 88.
"""
from __future__ import annotations

import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, Union, c_char_p, c_float, c_int, c_int32,
                    c_uint8, c_uint32, c_uint64, c_void_p)

QNN_SUCCESS = 0
BACKEND_ID_HTP = 6

# ---- data types (Qnn_DataType_t) -----------------------------------------------------
# code -> (name, element bytes, ExecuTorch ScalarTypes a tensor of it may have, the
# usual one first)
# ScalarType: Byte 0, Char 1, Short 2, Int 3, Long 4, Half 5, Float 6, Double 7, Bool 11,
# QInt8 12, QUInt8 13, QInt32 14, BFloat16 15, UInt16 27, UInt32 28, UInt64 29
DATATYPES = {
    0x0008: ("INT_8", 1, (1, 12)), 0x0016: ("INT_16", 2, (2,)), 0x0032: ("INT_32", 4, (3, 14)),
    0x0064: ("INT_64", 8, (4,)),
    0x0108: ("UINT_8", 1, (0, 13, 11)), 0x0116: ("UINT_16", 2, (27, 2)),
    0x0132: ("UINT_32", 4, (28, 3)), 0x0164: ("UINT_64", 8, (29, 4)),
    0x0216: ("FLOAT_16", 2, (5,)), 0x0226: ("BFLOAT_16", 2, (15,)), 0x0232: ("FLOAT_32", 4, (6,)),
    0x0264: ("FLOAT_64", 8, (7,)),
    0x0308: ("SFIXED_POINT_8", 1, (1, 12)), 0x0316: ("SFIXED_POINT_16", 2, (2,)),
    0x0332: ("SFIXED_POINT_32", 4, (3, 14)),
    0x0408: ("UFIXED_POINT_8", 1, (0, 13)), 0x0416: ("UFIXED_POINT_16", 2, (27, 2)),
    0x0432: ("UFIXED_POINT_32", 4, (28, 3)),
    0x0508: ("BOOL_8", 1, (11, 0)),
}
FIXED_POINT = {0x0308, 0x0316, 0x0332, 0x0408, 0x0416, 0x0432}

# Qnn_QuantizationEncoding_t
ENC_SCALE_OFFSET, ENC_AXIS_SCALE_OFFSET, ENC_BW_SCALE_OFFSET, ENC_BW_AXIS_SCALE_OFFSET = 0, 1, 2, 3
ENC_UNDEFINED = 0x7FFFFFFF
DEFINITION_DEFINED = 1
TENSORMEMTYPE_RAW = 0
TENSOR_TYPES = {0: "APP_WRITE", 1: "APP_READ", 2: "APP_READWRITE", 3: "NATIVE", 4: "STATIC",
                5: "NULL", 8: "UPDATEABLE_APP_WRITE", 9: "UPDATEABLE_APP_READ",
                10: "UPDATEABLE_APP_READWRITE", 11: "OPTIONAL_APP_WRITE",
                12: "OPTIONAL_APP_READ", 13: "OPTIONAL_APP_READWRITE"}

# ---- error codes ---------------------------------------------------------------------
_RANGES = ((1000, "common"), (2000, "property"), (3000, "op package"), (4000, "backend"),
           (5000, "context"), (6000, "graph"), (7000, "tensor"), (8000, "memory"),
           (9000, "signal"), (10000, "error"), (11000, "log"), (12000, "profile"),
           (13000, "perf infrastructure"), (14000, "device"), (15000, "global config"),
           (30000, "system"), (60000, "interface"))
_NAMES = {
    1000: "NOT_SUPPORTED", 1002: "MEM_ALLOC", 1003: "SYSTEM", 1004: "INVALID_ARGUMENT",
    1005: "OPERATION_NOT_PERMITTED", 1006: "PLATFORM_NOT_SUPPORTED",
    1008: "INCOMPATIBLE_BINARIES", 1009: "LOADING_BINARIES", 1010: "RESOURCE_UNAVAILABLE",
    1100: "GENERAL",
    5000: "CONTEXT_INVALID_ARGUMENT", 5001: "CONTEXT_DOES_NOT_EXIST",
    5002: "CONTEXT_INVALID_HANDLE", 5004: "CONTEXT_BINARY_VERSION",
    5005: "CONTEXT_CREATE_FROM_BINARY", 5008: "CONTEXT_BINARY_CONFIGURATION",
    5010: "CONTEXT_INVALID_CONFIG", 5011: "CONTEXT_BINARY_SUBOPTIMAL",
    30002: "SYSTEM_CONTEXT_OPERATION_FAILED", 30010: "SYSTEM_CONTEXT_MALFORMED_BINARY",
}


def error_code(status: int) -> int:
    """QNN_GET_ERROR_CODE: the error code is the low 16 bits of the handle."""
    return int(status) & 0xFFFF


def describe_error(status: int) -> str:
    code = error_code(status)
    name = _NAMES.get(code)
    if name is None:
        part = "unknown"
        for lo, what in _RANGES:
            if code >= lo:
                part = what
        name = f"{part} error"
    return f"{code} ({name})"


# ---- versions, interfaces ------------------------------------------------------------
class Version(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32), ("patch", c_uint32)]

    def __str__(self):
        return f"{self.major}.{self.minor}.{self.patch}"


class ApiVersion(Structure):
    _fields_ = [("core", Version), ("backend", Version)]


N_SLOTS = 44  # QNN function-table entries read (deviceFree is the last one used)
# slots of the QNN interface table (Qnn_Interface_t.v2_x)
SLOT = {"backendCreate": 1, "backendGetApiVersion": 3, "backendGetBuildId": 4,
        "backendFree": 8, "contextCreateFromBinary": 13, "contextFree": 14,
        "graphRetrieve": 20, "graphExecute": 21, "logCreate": 25, "logSetLogLevel": 26,
        "logFree": 27, "deviceCreate": 40, "deviceFree": 43}


class QnnInterface(Structure):
    """``QnnInterface_t``: id, provider name, API versions, then the function table."""
    _fields_ = [("backend_id", c_uint32), ("provider_name", c_char_p),
                ("api_version", ApiVersion), ("table", c_void_p * N_SLOTS)]


N_SYS_SLOTS = 4
SYS_SLOT = {"systemContextCreate": 0, "systemContextGetBinaryInfo": 1,
            "systemContextGetMetaData": 2, "systemContextFree": 3}


class QnnSystemInterface(Structure):
    _fields_ = [("backend_id", c_uint32), ("provider_name", c_char_p),
                ("system_api_version", Version), ("table", c_void_p * N_SYS_SLOTS)]


# ---- tensors -------------------------------------------------------------------------
class ScaleOffset(Structure):
    """float = (q + offset) * scale (QNN's offset is minus the zero point)."""
    _fields_ = [("scale", c_float), ("offset", c_int32)]


class AxisScaleOffset(Structure):
    _fields_ = [("axis", c_int32), ("num", c_uint32), ("scale_offset", POINTER(ScaleOffset))]


class BwScaleOffset(Structure):
    _fields_ = [("bitwidth", c_uint32), ("scale", c_float), ("offset", c_int32)]


class BwAxisScaleOffset(Structure):
    _fields_ = [("bitwidth", c_uint32), ("axis", c_int32), ("num", c_uint32),
                ("scales", POINTER(c_float)), ("offsets", POINTER(c_int32))]


class _Encoding(Union):
    _fields_ = [("scale_offset", ScaleOffset), ("axis_scale_offset", AxisScaleOffset),
                ("bw_scale_offset", BwScaleOffset), ("bw_axis_scale_offset", BwAxisScaleOffset),
                ("_largest", c_uint8 * 32)]


class QuantizeParams(Structure):
    _anonymous_ = ("u",)
    _fields_ = [("definition", c_uint32), ("encoding", c_uint32), ("u", _Encoding)]


class ClientBuffer(Structure):
    _fields_ = [("data", c_void_p), ("size", c_uint32)]


class _Memory(Union):
    _fields_ = [("client_buf", ClientBuffer), ("mem_handle", c_void_p)]


class SparseParams(Structure):
    _fields_ = [("type", c_uint32), ("num_specified", c_uint32), ("num_sparse_dims", c_uint32)]


class TensorV1(Structure):
    _anonymous_ = ("mem",)
    _fields_ = [("id", c_uint32), ("name", c_void_p), ("type", c_uint32),
                ("data_format", c_uint32), ("data_type", c_uint32),
                ("quant", QuantizeParams), ("rank", c_uint32), ("dims", POINTER(c_uint32)),
                ("mem_type", c_uint32), ("mem", _Memory)]


class TensorV2(Structure):
    _anonymous_ = ("mem",)
    _fields_ = TensorV1._fields_ + [("is_dynamic_dims", POINTER(c_uint8)),
                                    ("sparse", SparseParams), ("is_produced", c_uint8)]


class _TensorUnion(Union):
    _fields_ = [("v1", TensorV1), ("v2", TensorV2)]


class Tensor(Structure):
    """``Qnn_Tensor_t``: version (1 or 2) and the tensor (V2 extends V1's prefix)."""
    _anonymous_ = ("u",)
    _fields_ = [("version", c_uint32), ("u", _TensorUnion)]


# ---- context binary info (QnnSystemContext) -----------------------------------------
class GraphInfoV1(Structure):
    _fields_ = [("name", c_char_p), ("num_inputs", c_uint32), ("inputs", POINTER(Tensor)),
                ("num_outputs", c_uint32), ("outputs", POINTER(Tensor))]


class GraphInfoV2(Structure):
    _fields_ = GraphInfoV1._fields_ + [("num_updateable", c_uint32),
                                       ("updateable", POINTER(Tensor))]


class GraphInfoV3(Structure):
    _fields_ = GraphInfoV2._fields_ + [("blob_info_size", c_uint32), ("blob_info", c_void_p),
                                       ("start_op", c_uint32), ("end_op", c_uint32)]


class _GraphInfoUnion(Union):
    _fields_ = [("v1", GraphInfoV1), ("v2", GraphInfoV2), ("v3", GraphInfoV3)]


class GraphInfo(Structure):
    _anonymous_ = ("u",)
    _fields_ = [("version", c_uint32), ("u", _GraphInfoUnion)]


class BinaryInfoV1(Structure):
    _fields_ = [("backend_id", c_uint32), ("build_id", c_char_p), ("core_api", Version),
                ("backend_api", Version), ("soc_version", c_char_p),
                ("hw_info_blob_version", Version), ("context_blob_version", Version),
                ("hw_info_blob_size", c_uint32), ("hw_info_blob", c_void_p),
                ("context_blob_size", c_uint64), ("num_context_tensors", c_uint32),
                ("context_tensors", POINTER(Tensor)), ("num_graphs", c_uint32),
                ("graphs", POINTER(GraphInfo))]


class BinaryInfoV2(Structure):
    _fields_ = BinaryInfoV1._fields_ + [("platform_info", c_void_p)]


class BinaryInfoV3(Structure):
    _fields_ = [("backend_id", c_uint32), ("build_id", c_char_p), ("core_api", Version),
                ("backend_api", Version), ("soc_version", c_char_p),
                ("context_blob_version", Version), ("context_blob_size", c_uint64),
                ("num_context_tensors", c_uint32), ("context_tensors", POINTER(Tensor)),
                ("num_graphs", c_uint32), ("graphs", POINTER(GraphInfo)),
                ("platform_info", c_void_p), ("metadata_size", c_uint32),
                ("metadata", c_void_p), ("soc_model", c_uint32)]


class _BinaryInfoUnion(Union):
    _fields_ = [("v1", BinaryInfoV1), ("v2", BinaryInfoV2), ("v3", BinaryInfoV3)]


class BinaryInfo(Structure):
    _anonymous_ = ("u",)
    _fields_ = [("version", c_uint32), ("u", _BinaryInfoUnion)]


# ---- device configs ------------------------------------------------------------------
DEVICE_CONFIG_CUSTOM, HTP_DEVICE_CONFIG_SOC = 0, 0


class DeviceConfig(Structure):
    """``QnnDevice_Config_t``: option, then a union whose first member is a pointer."""
    _fields_ = [("option", c_uint32), ("custom", c_void_p)]


class HtpSocConfig(Structure):
    """``QnnHtpDevice_CustomConfig_t`` with the SoC option. Its union sits at byte 4 in
    QNN <= 2.37 headers (what ExecuTorch 1.5.1 is built with) and at byte 8 in the
    2.47+ libraries (a pointer member joined it): the SoC model is written at both."""
    _fields_ = [("option", c_uint32), ("soc_at_4", c_uint32), ("soc_at_8", c_uint32),
                ("zero", c_uint32 * 9)]


# ---- function prototypes -------------------------------------------------------------
_st = c_uint64  # Qnn_ErrorHandle_t
_vp, _pvp = c_void_p, POINTER(c_void_p)
# QnnLog_Callback_t(const char* fmt, QnnLog_Level_t level, uint64_t timestamp, va_list args);
# on x86_64 a va_list argument is passed as a pointer to its __va_list_tag
LOG_CALLBACK = CFUNCTYPE(None, c_char_p, c_int, c_uint64, c_void_p)
PROTOTYPES = {
    "backendCreate": CFUNCTYPE(_st, _vp, _pvp, _pvp),
    "backendGetApiVersion": CFUNCTYPE(_st, POINTER(ApiVersion)),
    "backendGetBuildId": CFUNCTYPE(_st, POINTER(c_char_p)),
    "backendFree": CFUNCTYPE(_st, _vp),
    "contextCreateFromBinary": CFUNCTYPE(_st, _vp, _vp, _pvp, _vp, c_uint64, _pvp, _vp),
    "contextFree": CFUNCTYPE(_st, _vp, _vp),
    "graphRetrieve": CFUNCTYPE(_st, _vp, c_char_p, _pvp),
    "graphExecute": CFUNCTYPE(_st, _vp, POINTER(Tensor), c_uint32, POINTER(Tensor), c_uint32,
                              _vp, _vp),
    "logCreate": CFUNCTYPE(_st, LOG_CALLBACK, c_int, _pvp),
    "logSetLogLevel": CFUNCTYPE(_st, _vp, c_int),
    "logFree": CFUNCTYPE(_st, _vp),
    "deviceCreate": CFUNCTYPE(_st, _vp, _pvp, _pvp),
    "deviceFree": CFUNCTYPE(_st, _vp),
}
SYS_PROTOTYPES = {
    "systemContextCreate": CFUNCTYPE(_st, _pvp),
    "systemContextGetBinaryInfo": CFUNCTYPE(_st, _vp, _vp, c_uint64, POINTER(POINTER(BinaryInfo)),
                                            POINTER(c_uint64)),
    "systemContextFree": CFUNCTYPE(_st, _vp),
}
GET_PROVIDERS = (_st, [POINTER(POINTER(POINTER(QnnInterface))), POINTER(c_uint32)])
GET_SYS_PROVIDERS = (_st, [POINTER(POINTER(POINTER(QnnSystemInterface))), POINTER(c_uint32)])

# QnnLog_Level_t
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_VERBOSE, LOG_DEBUG = 1, 2, 3, 4, 5
LOG_LEVELS = {1: "ERROR", 2: "WARN", 3: "INFO", 4: "VERBOSE", 5: "DEBUG"}


class Functions:
    """The functions of one provider table, typed (a missing slot is ``None``)."""

    def __init__(self, table, prototypes: dict, slots: dict):
        for name, proto in prototypes.items():
            addr = table[slots[name]]
            setattr(self, name, proto(addr) if addr else None)
        self.addresses = {name: table[slots[name]] or 0 for name in prototypes}


def sizes() -> dict:
    return {"QuantizeParams": ctypes.sizeof(QuantizeParams), "TensorV1": ctypes.sizeof(TensorV1),
            "TensorV2": ctypes.sizeof(TensorV2), "Tensor": ctypes.sizeof(Tensor),
            "GraphInfo": ctypes.sizeof(GraphInfo), "BinaryInfo": ctypes.sizeof(BinaryInfo)}
