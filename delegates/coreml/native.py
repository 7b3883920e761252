"""Core ML itself, through coremltools, where it can predict (macOS).

Untested here: coremltools on Linux has no ``libcoremlpython`` (``predict`` raises
"only supported on macOS"), and no CI machine of this project runs macOS. It
is kept small: the payload's model directory is written to a temporary
folder, loaded with ``MLModel`` (an mlpackage) or ``CompiledMLModel`` (an
mlmodelc) with the compute units of the compile specs and the function the
payload names, and run with one ``MLState`` per handle when the model has
states. Any failure to load raises ExecuTorchError, and the bridge falls back
to the interpreter unless ``PYRUNTIME_COREML=coreml``.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.coreml.payload import BACKEND

_UNITS = {"cpu_only": "CPU_ONLY", "cpu_and_gpu": "CPU_AND_GPU", "cpu_and_ne": "CPU_AND_NE",
          "all": "ALL"}


def available() -> bool:
    """True where coremltools can run models (macOS with its native extension)."""
    if sys.platform != "darwin":
        return False
    try:
        import coremltools.libcoremlpython  # noqa: F401
        return True
    except ImportError:
        return False


class NativeModel:
    def __init__(self, payload, units: str):
        try:
            import coremltools as ct
        except ImportError as e:
            raise ExecuTorchError(ErrorCode.NotFound, f"{BACKEND}: coremltools: {e}") from None
        self.tmp = Path(tempfile.mkdtemp(prefix="pyruntime_coreml_"))
        try:
            for path, data in payload.directory.files.items():
                dst = self.tmp / path
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(bytes(data))
            cu = getattr(ct.ComputeUnit, _UNITS[units])
            kw = {"compute_units": cu}
            if payload.function_name:
                kw["function_name"] = payload.function_name
            if payload.compiled:
                self.model = ct.models.CompiledMLModel(str(self.tmp / "model.mlmodelc"), **kw)
            else:
                self.model = ct.models.MLModel(str(self.tmp / "model.mlpackage"), **kw)
            self.state = self.model.make_state() if _has_state(self.model) else None
        except Exception as e:  # noqa: BLE001 - Core ML's errors are plain exceptions
            self.close()
            raise ExecuTorchError(ErrorCode.InvalidProgram,
                                  f"{BACKEND}: Core ML could not load the model: {e}") from e

    def predict(self, inputs: dict) -> dict:
        try:
            kw = {"state": self.state} if self.state is not None else {}
            out = self.model.predict(inputs, **kw)
        except Exception as e:  # noqa: BLE001
            raise ExecuTorchError(ErrorCode.Internal, f"{BACKEND}: Core ML predict: {e}") from e
        return {k: np.asarray(v) for k, v in out.items()}

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _has_state(model) -> bool:
    try:
        return len(model.get_spec().description.state) > 0
    except Exception:  # noqa: BLE001 - compiled models have no spec
        return hasattr(model, "make_state")
