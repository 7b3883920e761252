"""The checks every bridge makes on the way in and out, worded the same for all: a payload
reader's unexpected exception, a destroyed handle, too few DelegateCall arguments, an
output argument that is not a tensor.
"""
from __future__ import annotations

from contextlib import contextmanager

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor


@contextmanager
def reading_payload(what: str):
    """Any exception but an ExecuTorchError raised inside becomes InvalidProgram naming
    ``what`` (``"XnnpackBackend blob"``): a malformed payload must never escape as a crash.

    >>> with reading_payload("X payload"):
    ...     {}["k"]
    Traceback (most recent call last):
    pyruntime.cython_ext.errors.ExecuTorchError: [InvalidProgram 0x23] X payload: KeyError: 'k'
    """
    try:
        yield
    except ExecuTorchError:
        raise
    except Exception as e:  # noqa: BLE001
        raise ExecuTorchError(ErrorCode.InvalidProgram, f"{what}: {type(e).__name__}: {e}") \
            from e


def check_call(backend: str, h, args, what: str) -> None:
    """``h`` is not destroyed and ``args`` hold its ``h.n_in`` inputs and ``h.n_out``
    outputs (``what``: the model, the graph, ... the message says has them)."""
    if h.closed:
        raise ExecuTorchError(ErrorCode.DelegateInvalidHandle, f"{backend}: handle destroyed")
    if len(args) < h.n_in + h.n_out:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{backend}: {len(args)} arguments, {what} has {h.n_in} inputs "
                              f"and {h.n_out} outputs")


def output_tensor(backend: str, args, j: int, offset: int) -> ETensor:
    """``args[offset + j]``, output ``j``, checked to be a tensor."""
    t = args[offset + j]
    if not isinstance(t, ETensor):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{backend}: output {j} must be a tensor, got {type(t).__name__}")
    return t
