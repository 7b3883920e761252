"""Every MIL op family, imported so that each registers its ops in ``ops.OPS`` (the
families import the registry from ``ops``; nothing imports back)."""
from __future__ import annotations


def load_families() -> None:
    from pyruntime.delegates.coreml import (ops_const, ops_elementwise, ops_nn,  # noqa: F401
                                  ops_recurrent, ops_reduce, ops_tensor)
