"""The binder of sum, mean and any: the typed kernel where it binds (sum and mean over
float32/float64, ``typed.py``; any over bool, ``elementwise/typed_select.py``), else the
generic one (``generic.py``)."""
from __future__ import annotations

from pyruntime.kernels.elementwise import typed_select
from pyruntime.kernels.fast import register_choice
from pyruntime.kernels.reduce import generic, typed

register_choice("aten::sum.IntList_out", typed.bind_sum, generic.bind_sum)
register_choice("aten::mean.out", typed.bind_mean, generic.bind_mean)
register_choice("aten::any.out", typed_select.bind_any, generic.bind_any)
register_choice("aten::any.all_out", typed_select.bind_any_all, generic.bind_any_all)
