"""The binder of ``_conj_physical.out``: the elementwise copy for real dtypes (the
conjugate of a real number is itself), else the complex kernel (``typed.py``)."""
from __future__ import annotations

from pyruntime.kernels.complex import typed
from pyruntime.kernels.elementwise import generic_unary  # noqa: F401 - fills generic_bind.HELD
from pyruntime.kernels.elementwise.generic_bind import HELD
from pyruntime.kernels.fast import register_choice

register_choice("aten::_conj_physical.out", HELD["aten::_conj_physical.out"],
                typed.bind_conj_physical_complex)
