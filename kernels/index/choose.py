"""The binder of each gather and scatter: the typed kernel where it binds (embedding,
index_select and index on dim 0 over any element size, ``typed.py``; index_put on float32/
float64 with one index per dim, ``elementwise/typed_select.py``), else the generic one
(``generic.py``)."""
from __future__ import annotations

from pyruntime.kernels.elementwise import typed_select
from pyruntime.kernels.fast import register_choice
from pyruntime.kernels.index import generic, typed

register_choice("aten::embedding.out", typed.bind_embedding, generic.bind_embedding)
register_choice("aten::index_select.out", typed.bind_index_select, generic.bind_index_select)
register_choice("aten::index.Tensor_out", typed.bind_index, generic.bind_index)
register_choice("aten::index_put.out", typed_select.bind_index_put, generic.bind_index_put)
