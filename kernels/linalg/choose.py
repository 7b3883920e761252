"""The binder of each matrix product: the typed kernel (float32/float64, every operand of
the out's dtype, ``typed.py``) where it binds, else the generic one (``generic.py``)."""
from __future__ import annotations

from pyruntime.kernels.fast import register_choice
from pyruntime.kernels.linalg import generic, typed

register_choice("aten::mm.out", typed.bind_mm, generic.bind_mm_any)
register_choice("aten::bmm.out", typed.bind_bmm, generic.bind_bmm_any)
register_choice("aten::addmm.out", typed.bind_addmm, generic.bind_addmm_any)
register_choice("aten::linear.out", typed.bind_linear, generic.bind_linear_any)
