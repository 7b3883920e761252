"""The binder of full_like and scalar_tensor: the typed fill (``elementwise/typed_select.py``)
where it binds, else the generic one (every dtype, ``generic.py``)."""
from __future__ import annotations

from pyruntime.kernels.creation import generic
from pyruntime.kernels.elementwise import typed_select
from pyruntime.kernels.fast import register_choice

register_choice("aten::full_like.out", typed_select.bind_full_like, generic.bind_full_like_any)
register_choice("aten::scalar_tensor.out", typed_select.bind_scalar_tensor,
                generic.bind_scalar_tensor_any)
