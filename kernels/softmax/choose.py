"""The binder of softmax and log-softmax: the typed kernel (float32/float64, any dim,
``typed.py``) where it binds, else the generic one (``generic.py``)."""
from __future__ import annotations

from pyruntime.kernels.fast import register_choice
from pyruntime.kernels.softmax import generic, typed

register_choice("aten::_softmax.out", typed.bind_softmax, generic.bind_softmax)
register_choice("aten::_log_softmax.out", typed.bind_log_softmax, generic.bind_log_softmax)
