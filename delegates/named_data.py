"""Named data lookup shared by the bridges: a key in the program's named data or in the
data map passed at load (``.ptd``), as the flat bytes a payload reader starts from."""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.interface import payload_bytes


def named_bytes(named_data, key: str, backend: str, where: str) -> np.ndarray:
    """The bytes stored under ``key`` (a read-only uint8 view); NotFound naming the key,
    the backend and ``where`` it was wanted otherwise."""
    data = None
    if named_data is not None:
        try:
            data = named_data.get(key)
        except (ExecuTorchError, LookupError):
            data = None
    if data is None:
        raise ExecuTorchError(ErrorCode.NotFound,
                              f"{backend}: {where}: named data {key!r} is not in the program's "
                              "named data nor in the data map passed at load (.ptd)")
    return payload_bytes(data)


def sized_named_bytes(named_data, key: str, size: int, backend: str, where: str,
                      error) -> np.ndarray:
    """``named_bytes`` holding at least the ``size`` bytes the payload says it has;
    ``error(msg)`` (the bridge's payload error) when it is shorter."""
    data = named_bytes(named_data, key, backend, where)
    if len(data) < size:
        raise error(f"{where}: named data {key!r} has {len(data)} bytes, the graph says {size}")
    return data
