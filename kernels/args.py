"""Argument checks shared by the reference kernel families."""
from __future__ import annotations

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError


def wrap_dim(op: str, dim: int, ndim: int, arg: str = "dim") -> int:
    """Wrap a possibly negative dim; a rank-0 tensor accepts dims 0 and -1 like ATen."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{op}: {arg}: expected a dim in [{-n}, {n - 1}], got {dim}")
    return dim % n
