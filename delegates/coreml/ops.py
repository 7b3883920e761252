"""The MIL op registry and the helpers op families share.

An op is a Python function registered under its MIL name; its parameters are
the op's inputs, named as in the MIL spec, with the spec's defaults, so the
signature is the schema. The interpreter passes the values it has (numpy
arrays, Python scalars for rank-0 constants, strings, lists) as keywords.

``fp16 semantics``: float16 operands reach an op already widened to float32
(``upcast=True``, the default) and the interpreter rounds the op's result to
the output type the program declares, so every op computes in fp32 and
rounds once to fp16 (round to nearest even), as Core ML's fp16 GPU/ANE
kernels do. Layout ops (reshape, transpose, slices, ...) register with
``upcast=False``: they move values without arithmetic; so do ops that are one
numpy ufunc (add, mul, relu, clip, exp, comparisons, ...): numpy's float16
loops compute each element in float32 and round once, the same definition.

    @mil_op("relu")
    def relu(x):
        return np.maximum(x, 0)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.coreml.payload import BACKEND


@dataclass(frozen=True)
class OpImpl:
    name: str
    fn: Callable
    upcast: bool  # widen float16 operands to float32 before the call
    stateful: bool  # gets the handle's state store as ``_states``
    params: frozenset  # the keyword names fn accepts


OPS: dict = {}


def mil_op(*names: str, upcast: bool = True, stateful: bool = False):
    import inspect

    def deco(fn):
        params = frozenset(p for p in inspect.signature(fn).parameters if p != "_states")
        for n in names:
            if n in OPS:
                raise ExecuTorchError(ErrorCode.RegistrationAlreadyRegistered,
                                      f"{BACKEND}: MIL op {n!r} registered twice")
            OPS[n] = OpImpl(n, fn, upcast, stateful, params)
        return fn
    return deco


def op_error(msg: str, code=ErrorCode.InvalidArgument) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND}: {msg}")


# ---- argument helpers ---------------------------------------------------------------------
def ival(v) -> int:
    """A scalar int from a rank-0/1-element array or Python int."""
    a = np.asarray(v)
    if a.size != 1:
        raise op_error(f"expected one integer, got shape {list(a.shape)}")
    return int(a.reshape(()))


def ilist(v) -> list:
    return [int(e) for e in np.asarray(v).reshape(-1).tolist()]


def blist(v, n: int) -> list:
    if v is None:
        return [False] * n
    out = [bool(e) for e in np.asarray(v).reshape(-1).tolist()]
    if len(out) != n:
        raise op_error(f"mask of length {len(out)} for rank {n}")
    return out


def fval(v) -> float:
    return float(np.asarray(v).reshape(()))


def axis_of(axis, rank: int) -> int:
    a = ival(axis)
    if not -rank <= a < max(rank, 1):
        raise op_error(f"axis {a} out of range for rank {rank}")
    return a % max(rank, 1)


def axes_of(axes, rank: int):
    if axes is None:
        return tuple(range(rank))
    return tuple(sorted({axis_of(a, rank) for a in np.asarray(axes).reshape(-1)}))


def channel_bcast(p, rank: int) -> np.ndarray:
    """A per-channel parameter (C,) shaped to broadcast on the channel axis (-3) of a
    rank-``rank`` tensor, as MIL's prelu and softplus_parametric define it."""
    p = np.asarray(p)
    if p.ndim == 0 or p.size == 1:
        return p.reshape(())
    if rank < 3:
        raise op_error(f"a per-channel parameter needs a tensor of rank >= 3, got rank {rank}")
    ch = rank - 3
    shape = [1] * rank
    shape[ch] = p.size
    return p.reshape(shape)


# MIL dtype strings (cast's ``dtype``, reduce_arg*'s ``output_dtype``) -> numpy
DTYPE_STRINGS = {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64,
                 "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
                 "int32": np.int32, "int64": np.int64, "uint32": np.uint32, "bool": np.bool_}


def dtype_of_string(s) -> np.dtype:
    s = str(s.item() if isinstance(s, np.ndarray) else s)
    if s not in DTYPE_STRINGS:
        raise op_error(f"unknown dtype string {s!r} (known: {', '.join(DTYPE_STRINGS)})")
    return np.dtype(DTYPE_STRINGS[s])


def cast_to(x, dt) -> np.ndarray:
    """MIL cast: floats to ints truncate toward zero, saturating at the type's range
    (NaN becomes 0); everything else as numpy casts."""
    x = np.asarray(x)
    dt = np.dtype(dt)
    if dt.kind in "iu" and x.dtype.kind == "f":
        info = np.iinfo(dt)
        with np.errstate(invalid="ignore"):
            t = np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0)
        return np.clip(t, info.min, info.max).astype(dt)
    if dt == np.bool_:
        return x != 0
    return x.astype(dt)


def call_kernel(name: str, args: list, outs: list) -> list:
    """Run a pyruntime reference kernel (``kernels/``) on numpy operands: arrays are wrapped as
    ETensors, ``outs`` is [(numpy dtype, shape)]; returns the output arrays."""
    from pyruntime.cython_ext.dtypes import from_numpy_dtype
    from pyruntime.cython_ext.tensor import Dynamism, ETensor
    from pyruntime.kernels.registry import get_kernel

    wrapped = [ETensor.from_array(a) if isinstance(a, np.ndarray) else a for a in args]
    tensors = [ETensor.empty(from_numpy_dtype(np.dtype(dt)), shape, dynamism=Dynamism.DYNAMIC_BOUND)
               for dt, shape in outs]
    get_kernel(name).fn(*wrapped, *tensors)
    return [t.numpy() for t in tensors]
