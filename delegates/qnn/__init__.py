"""The Qualcomm QNN bridge: ExecuTorch's ``QnnBackend`` delegates (QNN context binaries
made by ``to_edge_transform_and_lower_to_qnn``) run on Qualcomm's QNN HTP library
through ctypes. On x86_64 that library is the HTP simulator shipped in the
``onnxruntime-qnn`` wheels (``pip install --no-deps onnxruntime-qnn==2.7.0``, or
``pip install 'pyruntime[qnn]'``); ``library.py`` says where else it is looked for.

Importing this package registers the backend; the library is only loaded when a
program needs it. What runs: HTP context binaries with fp32/fp16 and quantized
(8/16-bit fixed point, per-tensor and per-channel) tensors, several graphs per
binary (one per method, selected by the method's name), mutable buffers kept
in the delegate as ExecuTorch does, on a device made for the SoC the compile
spec names. Not run: online-prepare (DLC) payloads, custom op packages,
GPU/DSP/LPAI programs.

Files: ``payload.py`` (header and compile spec), ``ctypes_api.py`` (QNN structs
and function tables), ``library.py`` (finding and loading the libraries, backend
and devices, QNN's log), ``context.py`` (binary info, shared contexts),
``backend.py`` (the backend), ``verify.py`` (opt-in child-process check of
untrusted binaries: ``PYRUNTIME_QNN_VERIFY=1``).
"""
from pyruntime.delegates.qnn.backend import QnnBackend
from pyruntime.delegates.registry import register_backend

qnn_backend = register_backend(QnnBackend())

__all__ = ["QnnBackend", "qnn_backend"]
