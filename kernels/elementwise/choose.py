"""The binder of each elementwise op with a typed kernel: the typed one (float32/float64
and the int cases ``typed.py`` and ``typed_select.py`` name, broadcast) where it binds,
else the any-dtype kernel's (``generic_bind.HELD``: every dtype, casts and promotions)."""
from __future__ import annotations

from pyruntime.kernels.elementwise import generic_binary, generic_unary  # noqa: F401 - fill HELD
from pyruntime.kernels.elementwise import typed, typed_select
from pyruntime.kernels.elementwise.generic_bind import HELD
from pyruntime.kernels.fast import register_choice

_TYPED = {
    **typed.BINARY, **typed.UNARY, **typed_select.COMPARE,
    "aten::add.Scalar_out": typed.bind_add_scalar,
    "aten::mul.Scalar_out": typed.bind_mul_scalar,
    "aten::hardtanh.out": typed.bind_hardtanh,
    "aten::clamp.out": typed.bind_clamp,
    "aten::gelu.out": typed.bind_gelu,
    "aten::logical_not.out": typed_select.bind_logical_not,
    "aten::where.self_out": typed_select.bind_where,
}

for _op, _typed in _TYPED.items():
    register_choice(_op, _typed, HELD[_op])
