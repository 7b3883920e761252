"""The value records a resolved ``NPTG`` graph is made of (read by graph.py, ops.py and
backend.py)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A tensor's dtype and its largest sizes (static: the sizes); ``dynamic`` when any
    dimension ranges."""
    name: str
    scalar_type: int
    sizes: tuple
    dim_order: tuple
    dynamic: bool


@dataclass(frozen=True, slots=True)
class Ref:
    """A value made in the graph (a tensor, an int from ``sym_size``, a tensor list)."""
    name: str
