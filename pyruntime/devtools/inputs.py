"""Input and output sets in ``.npz`` files, as the CLI reads and writes them.

Keys ``set{k}_arg{i}`` hold input ``i`` of execute ``k`` (several sets run in
order on one loaded method); any other keys (``arr_0``, ``x``, ...) are one set
in the order of the digits in their names. Outputs of several sets are written
as ``set{k}_out{j}``; of one set as ``output_{j}``.

>>> import numpy as np, io
>>> f = io.BytesIO(); np.savez(f, set0_arg0=np.ones(2), set1_arg0=np.zeros(2)); _ = f.seek(0)
>>> [len(s) for s in read_input_sets(f)]
[1, 1]
"""
from __future__ import annotations

import re

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError

_SET_KEY = re.compile(r"^set(\d+)_arg(\d+)$")


def _digit_order(key: str):
    digits = "".join(ch for ch in key if ch.isdigit())
    return (int(digits) if digits else 0, key)


def read_input_sets(path, meta=None) -> list[list]:
    """The input sets in ``path``; with a ``MethodMeta``, 0-d arrays for non-tensor
    inputs become Python scalars."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"cannot read inputs from {path}: {e}") from e
    matched = {k: _SET_KEY.match(k) for k in arrays}
    if arrays and all(matched.values()):
        sets: dict[int, dict[int, np.ndarray]] = {}
        for k, m in matched.items():
            sets.setdefault(int(m.group(1)), {})[int(m.group(2))] = arrays[k]
        out = []
        for k in sorted(sets):
            args = sets[k]
            if sorted(args) != list(range(len(args))):
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{path}: set {k} has arguments {sorted(args)}, expected "
                                      f"set{k}_arg0 .. set{k}_arg{len(args) - 1}")
            out.append([args[i] for i in range(len(args))])
    elif any(matched.values()):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{path}: mixes set{{k}}_arg{{i}} keys with others "
                              f"({sorted(k for k, m in matched.items() if not m)})")
    else:
        out = [[arrays[k] for k in sorted(arrays, key=_digit_order)]]
    if meta is not None:
        from pyruntime.program import TensorInfo

        out = [[a.item() if a.ndim == 0 and i < len(meta.inputs)
                and not isinstance(meta.inputs[i], TensorInfo) else a
                for i, a in enumerate(s)] for s in out]
    return out


def write_output_sets(path, output_sets: list[list]) -> None:
    """Outputs of one set as ``output_{j}``; of several as ``set{k}_out{j}``."""
    if len(output_sets) == 1:
        arrays = {f"output_{j}": np.asarray(o) for j, o in enumerate(output_sets[0])}
    else:
        arrays = {f"set{k}_out{j}": np.asarray(o)
                  for k, outs in enumerate(output_sets) for j, o in enumerate(outs)}
    np.savez(path, **arrays)


def random_inputs(meta, rng) -> list:
    """Random inputs of a method's declared types and sizes (``rng``: a numpy Generator):
    normal floats, small non-negative integers, random bools; non-tensor inputs take
    their traced values."""
    return [_random_input(info, rng) for info in meta.inputs]


def _random_input(info, rng):
    from pyruntime.program import TensorInfo

    if not isinstance(info, TensorInfo):
        return info.value
    if info.dtype == np.bool_:
        return rng.random(info.sizes) > 0.5
    if info.dtype.kind in "iu":
        return rng.integers(0, 8, info.sizes).astype(info.dtype)
    return rng.standard_normal(info.sizes).astype(info.dtype)
