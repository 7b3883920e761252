"""CoreMLBackend: ExecuTorch's CoreML delegate payloads, run by our MIL interpreter (any OS)
or by Core ML itself through coremltools (macOS).

``init`` reads the payload (``payload.py``), resolves a ``CMJR`` reference in
the program's named data, parses the ML Program (``model.py``) and compiles the
function the metadata names (``interpreter.py``); state inputs (iOS18 KV
caches) get zero-filled arrays that live as long as the handle. ``execute``
follows ExecuTorch's CoreML delegate: arguments are the inputs in
``metadata.json``'s ``inputNames`` order, then the outputs in ``outputNames``
order; each input is converted to the dtype the model declares (int64 token
ids to int32, float32 to float16 where the model takes fp16), and each result
is written to its output tensor in that tensor's dtype (iOS17+ programs return
fp16) after resizing it; rank-0 tensors travel as shape [1].

Which engine: ``$PYRUNTIME_COREML`` = ``interpreter`` (always ours),
``coreml`` (Core ML or an error), unset: Core ML where coremltools can predict
(macOS), the interpreter elsewhere and whenever Core ML fails to load a model.
"""
from __future__ import annotations

import os

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.coreml import native
from pyruntime.delegates.coreml.interpreter import CompiledFunction
from pyruntime.delegates.coreml.model import INSTALL_HINT, Var, load_program, np_dtype, proto_modules
from pyruntime.delegates.coreml.payload import BACKEND, mlpackage_model_path, payload_error, read_payload
from pyruntime.delegates.availability import PackageBackend
from pyruntime.delegates.bridge_checks import check_call, output_tensor, reading_payload

COMPUTE_UNITS = ("cpu_only", "cpu_and_gpu", "cpu_and_ne", "all")


class CoreMLHandle:
    """One initialized delegate: the compiled function (or a Core ML model) and its states."""

    def __init__(self, payload, program, function, compiled, engine, native_model=None,
                 specs=None):
        self.payload, self.program, self.function = payload, program, function
        self.compiled = compiled  # CompiledFunction (interpreter) or None
        self.engine = engine  # "interpreter" | "coreml"
        self.native = native_model
        self.specs = specs or {}
        self.states = compiled.new_states() if compiled is not None else {}
        self.n_in, self.n_out = len(payload.input_names), len(payload.output_names)
        self.closed = False
        if function is None:  # a compiled model on Core ML: it converts the arrays itself
            self.input_vars = [Var(n, None, None) for n in payload.input_names]
            self.output_pos = list(range(self.n_out))
            return
        byname = {v.name: v for v in function.inputs if not v.state}
        self.input_vars = []
        for name in payload.input_names:
            if name not in byname:
                raise payload_error(f"metadata input {name!r} is not an input of function "
                                    f"{function.name!r} (inputs: {', '.join(byname)})")
            self.input_vars.append(byname[name])
        outs = list(function.block.outputs)
        missing = [n for n in payload.output_names if n not in outs]
        if missing:
            raise payload_error(f"metadata outputs {missing} are not outputs of function "
                                f"{function.name!r} (outputs: {', '.join(outs)})")
        self.output_pos = [outs.index(n) for n in payload.output_names]

    @property
    def ops(self) -> dict:
        """MIL op type -> count in the function (what the interpreter runs)."""
        out: dict = {}
        for op in (self.function.block.ops if self.function is not None else []):
            out[op.type] = out.get(op.type, 0) + 1
        return out

    def reset_states(self) -> None:
        """Zero every state (a fresh KV cache), as when the delegate was loaded."""
        for v in self.states.values():
            v[...] = 0


def _specs(compile_specs) -> dict:
    out = {}
    for key, value in compile_specs or []:
        try:
            out[key] = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise ExecuTorchError(ErrorCode.InvalidProgram,
                                  f"{BACKEND}: compile spec {key!r} is not UTF-8") from None
    return out


class CoreMLBackend(PackageBackend):
    """The ``CoreMLBackend`` bridge (see the module docstring).

    >>> from pyruntime.delegates import backend_registry
    >>> b = backend_registry.get("CoreMLBackend")   # NotFound without coremltools
    """

    id = BACKEND
    install_hint = INSTALL_HINT

    def probe(self) -> None:
        proto_modules()

    # ---- init ------------------------------------------------------------------------
    def init(self, processed, compile_specs, named_data, runtime_options=None):
        specs = _specs(compile_specs)
        opts = runtime_options or {}
        units = str(opts.get("compute_unit", specs.get("compute_units", "all")))
        if units not in COMPUTE_UNITS:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: compute_units {units!r} (valid: "
                                  f"{', '.join(COMPUTE_UNITS)})")
        mode = os.environ.get("PYRUNTIME_COREML", "").strip().lower() or "auto"
        if mode not in ("auto", "interpreter", "coreml"):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: PYRUNTIME_COREML={mode!r} (interpreter, coreml or "
                                  "unset)")
        with reading_payload(f"{BACKEND} payload"):
            return self._init(processed, named_data, specs, units, mode)

    def _init(self, processed, named_data, specs, units, mode):
        payload = read_payload(processed, named_data)
        d = payload.directory
        use_native = mode == "coreml" or (mode == "auto" and native.available())
        if payload.compiled and not use_native:
            raise ExecuTorchError(
                ErrorCode.NotSupported,
                f"{BACKEND}: the payload holds a compiled model (model.mlmodelc, "
                "CoreMLBackend.MODEL_TYPE.COMPILED_MODEL), which only Core ML on macOS can run; "
                "export with the default MODEL_TYPE.MODEL (an mlpackage) to run it here")
        program = function = None
        if not payload.compiled:
            program = load_program(d, mlpackage_model_path(d))
            fname = payload.function_name or program.default_function
            if fname not in program.functions:
                raise payload_error(f"the ML Program has no function {fname!r} (functions: "
                                    f"{', '.join(program.functions)})")
            function = program.functions[fname]
        if use_native:
            try:
                model = native.NativeModel(payload, units)
                return CoreMLHandle(payload, program, function, None, "coreml", model, specs)
            except ExecuTorchError:
                if mode == "coreml" or payload.compiled:
                    raise
        return CoreMLHandle(payload, program, function, CompiledFunction(function),
                            "interpreter", None, specs)

    # ---- execute ---------------------------------------------------------------------
    def execute(self, h: CoreMLHandle, args) -> None:
        check_call(BACKEND, h, args, "the model")
        env = {}
        for i, var in enumerate(h.input_vars):
            env[var.name] = _input_array(args[i], var, i)
        if h.engine == "coreml":
            results = h.native.predict(env)
            values = [results[n] for n in h.payload.output_names]
        else:
            outs = h.compiled.run(env, h.states)
            values = [outs[p] for p in h.output_pos]
        for j, value in enumerate(values):
            t = output_tensor(BACKEND, args, j, h.n_in)
            v = np.asarray(value)
            if t.ndim == 0 and v.size == 1:
                v = v.reshape(())
            t.write(v)

    def destroy(self, h: CoreMLHandle) -> None:
        if h is not None:
            h.closed = True
            h.states = {}
            if h.native is not None:
                h.native.close()


def _input_array(t, var, i) -> np.ndarray:
    if not isinstance(t, ETensor):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{BACKEND}: input {i} ({var.name}) must be a tensor, got "
                              f"{type(t).__name__}")
    a = t.numpy()
    if a.ndim == 0:
        a = a.reshape(1)  # ExecuTorch's delegate passes rank-0 tensors as shape [1]
    if var.shape is not None:
        ok = len(var.shape) == a.ndim and all(s is None or s == n for s, n in
                                              zip(var.shape, a.shape))
        if not ok:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: input {i} ({var.name}) has shape {list(a.shape)}, "
                                  f"the model takes {list(var.shape)}")
    if var.dtype is None:  # Core ML converts (compiled models)
        return np.array(a)
    dt = np_dtype(var.dtype)
    if dt is None:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: input {var.name!r} has type {var.dtype}")
    return a.astype(dt)  # a copy: the arena may change before the state is written
