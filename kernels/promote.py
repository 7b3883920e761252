"""ATen type promotion for numpy reference kernels.

numpy's own rules differ from torch's in the cases kernels hit most: an int
tensor with a Python float gives float64 in numpy but float32 in torch, and
bfloat16 is not a numpy builtin. ``result_type`` follows torch: dimensioned
tensors outrank zero-dim tensors, which outrank Python scalars; a lower-rank
participant only matters when its category (bool < int < float < complex) is
higher.

>>> import numpy as np
>>> result_type(np.zeros(3, np.int32), 2.5)
dtype('float32')
>>> result_type(np.zeros(3, np.float16), np.zeros((), np.float64))
dtype('float16')
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from pyruntime.cython_ext.tensor import ETensor

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)


def category(dt: np.dtype) -> int:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return 0
    if dt.kind in "iu":
        return 1
    if dt.kind == "f" or dt == BF16:
        return 2
    if dt.kind == "c":
        return 3
    return 2 if "float" in dt.name else 1


def promote_types(a, b) -> np.dtype:
    """torch.promote_types for two dtypes."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if BF16 in (a, b):
        other = b if a == BF16 else a
        if other == F16:
            return F32
        if category(other) < 2:
            return BF16
        return other
    if {a, b} == {np.dtype(np.uint64), np.dtype(np.int64)}:
        return np.dtype(np.int64)
    return np.promote_types(a, b)


def _dtype_of(x):
    if isinstance(x, ETensor):
        return x.dtype, x.ndim
    if isinstance(x, np.ndarray):
        return x.dtype, x.ndim
    return None, None


def _scalar_dtype(s) -> np.dtype:
    if isinstance(s, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(s, (int, np.integer)):
        return np.dtype(np.int64)
    if isinstance(s, complex):
        return np.dtype(np.complex64)
    return F32  # torch's default float dtype


def result_type(*args) -> np.dtype:
    """Promoted dtype of tensors / arrays / Python scalars under torch's rules."""
    dim_t = zero_t = scal = None
    for x in args:
        if x is None:
            continue
        dt, nd = _dtype_of(x)
        if dt is None:
            sdt = _scalar_dtype(x)
            scal = sdt if scal is None else (
                sdt if category(sdt) > category(scal) else scal)
        elif nd > 0:
            dim_t = dt if dim_t is None else promote_types(dim_t, dt)
        else:
            zero_t = dt if zero_t is None else promote_types(zero_t, dt)
    result = dim_t
    for lower in (zero_t, scal):
        if lower is None:
            continue
        if result is None:
            result = lower
        elif category(lower) > category(result):
            result = lower if lower is zero_t else _default_for(category(lower), lower)
    if result is None:
        raise ValueError("result_type needs at least one argument")
    return result


def _default_for(cat: int, dt: np.dtype) -> np.dtype:
    if cat == 1:
        return np.dtype(np.int64)
    if cat == 2:
        return F32
    if cat == 3:
        return np.dtype(np.complex64)
    return dt


def compute_dtype(dt: np.dtype) -> np.dtype:
    """Dtype to compute in: half-precision floats compute in float32 like ATen's CPU kernels."""
    dt = np.dtype(dt)
    return F32 if dt in (F16, BF16) else dt


def arr(x):
    """numpy view of an ETensor; other values unchanged."""
    return x.numpy() if isinstance(x, ETensor) else x
