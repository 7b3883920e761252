"""The ``QnnBackend`` payload and its compile spec.

Payload (ExecuTorch's ``QnnContextCustomProtocol``)::

    0..3    u32 magic 0x5678ABCD
    4..11   i64 signature (a timestamp; ExecuTorch's cache key for shared contexts)
    12..19  u64 size of the context binary
    20..255 zero
    256..   the QNN context binary

A payload whose first four bytes are not the magic is a raw context binary as a
whole (ExecuTorch's ``from_context_binary`` flow); its signature is then a hash
of the bytes. Every size is checked against the payload before a view is made.

Compile spec ``qnn_compile_spec``: a ``QnnExecuTorchOptions`` flatbuffer
(``backends/qualcomm/serialization/qc_compiler_spec.fbs``: SoC, HTP arch and
precision, backend type, log and profile levels, ...), read with
``cython_ext.flatbuf`` into a ``QnnOptions``.
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.flatbuf import Reader, read_table
from pyruntime.delegates.interface import payload_bytes

BACKEND = "QnnBackend"
MAGIC = 0x5678ABCD
HEADER_SIZE = 256
COMPILE_SPEC_KEY = "qnn_compile_spec"


def payload_error(msg: str, code=ErrorCode.InvalidProgram) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND} payload: {msg}")


@dataclass
class Payload:
    signature: int  # context cache key
    binary: np.ndarray  # the QNN context binary (uint8 view into the payload)
    has_header: bool


def parse_payload(blob) -> Payload:
    """Split a delegate payload into its signature and context binary (see the module doc)."""
    buf = payload_bytes(blob)
    n = len(buf)
    if n == 0:
        raise payload_error("empty payload")
    if n >= 4 and struct.unpack_from("<I", buf, 0)[0] == MAGIC:
        if n < HEADER_SIZE:
            raise payload_error(f"{n} bytes is too short for the {HEADER_SIZE}-byte header")
        signature, size = struct.unpack_from("<qQ", buf, 4)
        if size == 0:
            raise payload_error("the header says the context binary is empty")
        if size > n - HEADER_SIZE:
            raise payload_error(f"the header says the context binary has {size} bytes, the "
                                f"payload holds {n - HEADER_SIZE} after the header")
        return Payload(signature, buf[HEADER_SIZE:HEADER_SIZE + size], True)
    digest = hashlib.blake2b(memoryview(np.ascontiguousarray(buf)), digest_size=8).digest()
    return Payload(struct.unpack("<q", digest)[0], buf, False)


# ---- compile spec ---------------------------------------------------------------------
SOC_MODELS = {0: "UNKNOWN_SM", 30: "SM8350", 36: "SM8450", 39: "SA8295", 42: "SM8475",
              43: "SM8550", 45: "SXR1230P", 46: "SSG2115P", 52: "SA8255", 53: "SXR2230P",
              57: "SM8650", 58: "SSG2125P", 60: "SC8380XP", 69: "SM8750", 72: "SA8797",
              75: "SXR2330P", 77: "QCS9100", 87: "SM8850", 93: "QCM6490", 95: "SAR2230P",
              96: "SW6100", 97: "SM8845"}


def soc_name(soc_model: int) -> str:
    """``SM8650 (57)``: a SoC model number with its name where known."""
    name = SOC_MODELS.get(soc_model)
    return f"{name} ({soc_model})" if name else f"model {soc_model}"


BACKEND_TYPES = {0: "undefined", 1: "gpu", 2: "htp", 3: "dsp", 4: "lpai"}
HTP_PRECISIONS = {0: "quantized", 1: "fp16"}

_I32 = "i32"
SCHEMA = {
    "QnnExecuTorchOptions": [
        ("soc_info", 0, ("table", "SocInfo")),
        ("backend_options", 1, ("table", "BackendOptions")),
        ("library_path", 2, "str"), ("log_level", 3, _I32), ("online_prepare", 4, "bool"),
        ("dump_intermediate_outputs", 5, "bool"), ("profile_level", 6, _I32),
        ("shared_buffer", 7, "bool"), ("is_from_context_binary", 8, "bool"),
        ("saver", 9, "bool"), ("saver_output_dir", 10, "str"),
        # 11: op_package_options (custom op packages: not supported, only detected)
        ("op_package_options", 11, ("table", "OpPackageOptions")),
        ("use_mha2sha", 12, "bool"),
    ],
    "SocInfo": [("soc_model", 0, _I32), ("htp_info", 1, ("table", "HtpInfo"))],
    "HtpInfo": [("htp_arch", 0, _I32), ("vtcm_size_in_mb", 1, "u32")],
    "BackendOptions": [("backend_type", 0, _I32),
                       ("htp_options", 1, ("table", "HtpOptions"))],
    "HtpOptions": [("max_sf_buf_size", 0, _I32), ("performance_mode", 1, _I32),
                   ("precision", 2, _I32), ("pd_session", 3, _I32), ("use_conv_hmx", 4, "bool"),
                   ("use_dlbc", 5, "bool"), ("use_fold_relu", 6, "bool"),
                   ("use_multi_contexts", 7, "bool"), ("use_weight_sharing", 8, "bool"),
                   ("use_slc_allocator", 9, "bool")],
    "OpPackageOptions": [("op_package_infos", 0, ("vec_table", "OpPackageInfo"))],
    "OpPackageInfo": [("op_package_name", 0, "str")],
}


@dataclass
class QnnOptions:
    soc_model: int = 0
    htp_arch: int = 0
    backend_type: int = 2  # htp
    precision: int | None = None
    online_prepare: bool = False
    is_from_context_binary: bool = False
    shared_buffer: bool = False
    use_weight_sharing: bool = False
    op_packages: int = 0

    def describe(self) -> str:
        soc = SOC_MODELS.get(self.soc_model, str(self.soc_model))
        arch = f"V{self.htp_arch}" if self.htp_arch else "unset"
        prec = HTP_PRECISIONS.get(self.precision, "unset") if self.precision is not None else "unset"
        return (f"{BACKEND_TYPES.get(self.backend_type, self.backend_type)} backend, SoC {soc}, "
                f"HTP arch {arch}, precision {prec}")


def parse_compile_specs(specs) -> QnnOptions:
    """The ``qnn_compile_spec`` entry of a delegate's compile specs (defaults if absent)."""
    value = None
    for key, v in specs or []:
        if key == COMPILE_SPEC_KEY:
            value = v
    if value is None:
        return QnnOptions()
    buf = payload_bytes(value)
    r = Reader(buf, ErrorCode.InvalidProgram, f"{BACKEND} compile spec ({COMPILE_SPEC_KEY})")
    node = read_table(r.root(), "QnnExecuTorchOptions", SCHEMA)
    o = QnnOptions(online_prepare=node.online_prepare,
                   is_from_context_binary=node.is_from_context_binary,
                   shared_buffer=node.shared_buffer)
    if node.soc_info is not None:
        o.soc_model = node.soc_info.soc_model
        if node.soc_info.htp_info is not None:
            o.htp_arch = node.soc_info.htp_info.htp_arch
    bo = node.backend_options
    if bo is not None:
        o.backend_type = bo.backend_type
        if bo.htp_options is not None:
            o.precision = bo.htp_options.precision
            o.use_weight_sharing = bo.htp_options.use_weight_sharing
    if node.op_package_options is not None:
        o.op_packages = len(node.op_package_options.op_package_infos or [])
    return o
