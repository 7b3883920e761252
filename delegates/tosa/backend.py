"""TOSABackend: a TOSA 1.0 flatbuffer run by the TOSA reference model.

``init`` checks the flatbuffer's identifier and reads the entry block's inputs and
outputs (``graph.py``); ``execute`` passes the DelegateCall's input tensors to
``tosa_reference_model.run`` in the block's input order (as the delegate receives
them: NCHW for 4-D tensors, int8 for a ``TOSA-1.0+INT`` graph), checks the status
and writes each result into its output tensor. The reference model is Arm's
golden model for the specification: integer graphs are bit-exact by definition,
float graphs compute in fp32 (``precise_mode``: fp64, for checking).
"""
from __future__ import annotations

import threading

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.availability import PackageBackend
from pyruntime.delegates.bridge_checks import check_call, output_tensor, reading_payload
from pyruntime.delegates.tosa.graph import BACKEND, read_graph

INSTALL_HINT = ("the TOSA reference model is not installed: pip install 'pyruntime[arm]' "
                "(tosa-tools; pip install --no-deps tosa-tools==2026.8.0 keeps your numpy)")
_LOCK = threading.Lock()  # one graph at a time through the reference model's global state


def reference_model():
    """The ``tosa_reference_model`` module, or ImportError."""
    import tosa_reference_model

    return tosa_reference_model


class TOSAHandle:
    def __init__(self, blob: bytes, graph, specs: dict, precise: bool):
        self.blob, self.graph, self.specs, self.precise = blob, graph, specs, precise
        self.n_in, self.n_out = len(graph.inputs), len(graph.outputs)
        self.closed = False


def _specs(compile_specs) -> dict:
    out = {}
    for key, value in compile_specs or []:
        out[key] = bytes(value).decode("utf-8", "replace")
    return out


class TOSABackend(PackageBackend):
    """The ``TOSABackend`` bridge (see the module docstring).

    >>> from pyruntime.delegates import backend_registry
    >>> b = backend_registry.get("TOSABackend")   # NotFound without tosa-tools
    """

    id = BACKEND
    install_hint = INSTALL_HINT

    def probe(self) -> None:
        reference_model()

    def init(self, processed, compile_specs, named_data, runtime_options=None):
        self.require_package()
        specs = _specs(compile_specs)
        blob = bytes(np.asarray(processed).reshape(-1).view(np.uint8)) \
            if isinstance(processed, np.ndarray) else bytes(processed)
        with reading_payload(f"{BACKEND} payload"):
            graph = read_graph(blob)
        for t in graph.inputs + graph.outputs:
            if t.dtype is None:
                raise ExecuTorchError(ErrorCode.NotSupported,
                                      f"{BACKEND}: graph tensor {t.name!r} has type "
                                      f"{t.dtype_name}, which the bridge cannot exchange")
        precise = bool((runtime_options or {}).get("precise", False))
        return TOSAHandle(blob, graph, specs, precise)

    def execute(self, h: TOSAHandle, args) -> None:
        check_call(BACKEND, h, args, "the graph")
        inputs = []
        for i, spec in enumerate(h.graph.inputs):
            t = args[i]
            a = t.numpy() if isinstance(t, ETensor) else np.asarray(t)
            if a.dtype != spec.dtype:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{BACKEND}: input {i} ({spec.name!r}) is {a.dtype}, the "
                                      f"graph takes {spec.dtype_name}")
            if tuple(a.shape) != spec.shape and a.size == int(np.prod(spec.shape)):
                a = a.reshape(spec.shape)  # rank differences only (e.g. a scalar as [1])
            if tuple(a.shape) != spec.shape:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{BACKEND}: input {i} ({spec.name!r}) has shape "
                                      f"{list(a.shape)}, the graph takes {list(spec.shape)}")
            inputs.append(np.ascontiguousarray(a))
        trm = reference_model()
        with _LOCK:
            try:
                outs, status = trm.run(h.blob, inputs, precise_mode=int(h.precise))
            except Exception as e:  # noqa: BLE001 - the binding raises RuntimeError and others
                raise ExecuTorchError(ErrorCode.DelegateInvalidCompatibility,
                                      f"{BACKEND}: the reference model rejected the graph: "
                                      f"{type(e).__name__}: {e}") from e
        if status.name != "TOSA_VALID":
            raise ExecuTorchError(ErrorCode.Internal,
                                  f"{BACKEND}: the reference model returned {status.name}")
        if len(outs) != h.n_out:
            raise ExecuTorchError(ErrorCode.Internal,
                                  f"{BACKEND}: the reference model returned {len(outs)} outputs, "
                                  f"the graph declares {h.n_out}")
        for j, value in enumerate(outs):
            t = output_tensor(BACKEND, args, j, h.n_in)
            v = np.asarray(value)
            if v.size == int(np.prod(t.sizes)) and v.shape != tuple(t.sizes):
                v = v.reshape(t.sizes)
            t.write(v)

    def destroy(self, h: TOSAHandle) -> None:
        if h is not None:
            h.closed = True
