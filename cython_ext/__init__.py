"""The native core's ABI: error codes, scalar types and the runtime tensor.

This is the lowest layer: it imports nothing from ``kernels``, ``delegates``,
``pyruntime`` or ``exporter``. The Python classes here define the descriptor
layout the compiled execute loop will mirror.
"""
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.dtypes import ScalarType, to_numpy_dtype, from_numpy_dtype, element_size
from pyruntime.cython_ext.tensor import ETensor, Dynamism

__all__ = [
    "ErrorCode", "ExecuTorchError", "ScalarType", "to_numpy_dtype",
    "from_numpy_dtype", "element_size", "ETensor", "Dynamism",
]
