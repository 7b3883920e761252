"""The binder of each normalization: the typed kernel (contiguous float32/float64,
``typed.py``) where it binds, else the generic one (``generic.py``)."""
from __future__ import annotations

from pyruntime.kernels.fast import register_choice
from pyruntime.kernels.norm import generic, typed

register_choice("aten::_native_batch_norm_legit_no_training.out",
                typed.bind_batch_norm_no_training, generic.bind_batch_norm_no_training_any)
register_choice("aten::native_layer_norm.out", typed.bind_layer_norm,
                generic.bind_layer_norm_any)
register_choice("aten::native_group_norm.out", typed.bind_group_norm,
                generic.bind_group_norm_any)
