"""The binder of ``convolution.out``: the typed kernel (non-transposed 1-D/2-D, contiguous
float32/float64, ``typed.py``) where it binds, else the generic one (``generic.py``)."""
from __future__ import annotations

from pyruntime.kernels.conv import generic, typed
from pyruntime.kernels.fast import register_choice

register_choice("aten::convolution.out", typed.bind_convolution, generic.bind_convolution_any)
