"""The binder of each pooling op: the typed kernel (contiguous float32/float64 NCHW or
CHW, ``typed.py``) where it binds, else the generic one (every dtype and dim order,
``generic.py``)."""
from __future__ import annotations

from pyruntime.kernels.fast import register_choice
from pyruntime.kernels.pool import generic, typed

register_choice("aten::max_pool2d_with_indices.out", typed.bind_max_pool2d_with_indices,
                generic.bind_max_pool2d_with_indices_any)
register_choice("aten::avg_pool2d.out", typed.bind_avg_pool2d, generic.bind_avg_pool2d_any)
register_choice("aten::_adaptive_avg_pool2d.out", typed.bind_adaptive_avg_pool2d,
                generic.bind_adaptive_avg_pool2d_any)
