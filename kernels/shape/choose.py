"""The binder of each view, copy, cat and split op: the typed kernel (one body per element
size, ``typed.py``) where it binds, else the generic one (``generic.py``: dtype changes,
memory formats and argument forms the typed one leaves).

``slice_copy`` takes run-time Ints (``dynamic_ints``), which only its typed binder reads.
"""
from __future__ import annotations

from pyruntime.kernels.fast import register_choice
from pyruntime.kernels.shape import generic, typed

register_choice("aten::clone.out", typed.bind_clone, generic.bind_clone_any)
register_choice("dim_order_ops::_clone_dim_order.out", typed.bind_clone_dim_order,
                generic.bind_to_dim_order_copy_any)
register_choice("dim_order_ops::_to_dim_order_copy.out", typed.bind_to_dim_order_copy,
                generic.bind_to_dim_order_copy_any)
register_choice("aten::copy_", typed.bind_copy_, generic.bind_copy_any)
register_choice("aten::view_copy.out", typed.bind_view_copy, generic.bind_view_any)
register_choice("aten::permute_copy.out", typed.bind_permute, generic.bind_permute_any)
register_choice("aten::transpose_copy.int_out", typed.bind_transpose, generic.bind_transpose_any)
register_choice("aten::t_copy.out", typed.bind_t, generic.bind_t_any)
register_choice("aten::expand_copy.out", typed.bind_expand, generic.bind_expand_any)
register_choice("aten::unsqueeze_copy.out", typed.bind_unsqueeze, generic.bind_unsqueeze_any)
register_choice("aten::squeeze_copy.dims_out", typed.bind_squeeze_dims,
                generic.bind_squeeze_dims_any)
register_choice("aten::squeeze_copy.dim_out", typed.bind_squeeze_dim, generic.bind_squeeze_dim_any)
register_choice("aten::slice_copy.Tensor_out", typed.bind_slice, generic.bind_slice_any,
                dynamic_ints=True)
register_choice("aten::select_copy.int_out", typed.bind_select, generic.bind_select_any)
register_choice("aten::cat.out", typed.bind_cat, generic.bind_cat_any)
register_choice("aten::split_with_sizes_copy.out", typed.bind_split_with_sizes,
                generic.bind_split_with_sizes_any)
