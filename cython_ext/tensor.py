"""The runtime tensor: a descriptor over bytes the Method owns or borrows.

An ``ETensor`` mirrors ExecuTorch's TensorImpl: scalar type, sizes, dim order,
shape dynamism and a capacity (the serialized, upper-bound numel). Its bytes
are a 1-D ``uint8`` numpy array that is a *view* into a planned arena, the
constant segment, a ``.ptd`` file or a caller's array; the tensor never owns
an allocation of its own, so aliasing follows the memory plan exactly.

Kernels use three calls: ``t.numpy()`` (a view with the current sizes and the
dim-order strides), ``t.resize(shape)`` (ExecuTorch's resize rules) and
``t.write(array)`` (resize, then copy with a cast to the tensor's dtype).

>>> import numpy as np
>>> t = ETensor.from_array(np.zeros((2, 3), np.float32), dynamism=Dynamism.DYNAMIC_BOUND)
>>> t.write(np.ones((1, 3)))
>>> t.shape, t.numpy().dtype
((1, 3), dtype('float32'))
"""
from __future__ import annotations

import enum
from math import prod

import numpy as np

from pyruntime.cython_ext.dtypes import (ScalarType, cast_array, from_numpy_dtype, scalar_type_name,
                               to_numpy_dtype)
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError


class Dynamism(enum.IntEnum):
    STATIC = 0
    DYNAMIC_BOUND = 1
    DYNAMIC_UNBOUND = 2


def dim_order_strides(sizes, dim_order) -> tuple:
    """Element strides for ``sizes`` laid out in ``dim_order`` (spec 4.4.1 step 5)."""
    n = len(sizes)
    strides = [0] * n
    if n == 0:
        return ()
    strides[dim_order[-1]] = 1
    for i in range(n - 2, -1, -1):
        inner = dim_order[i + 1]
        s = sizes[inner]
        strides[dim_order[i]] = strides[inner] * (s if s != 0 else 1)
    return tuple(strides)


class ETensor:
    __slots__ = (
        "scalar_type", "dtype", "sizes", "dim_order", "dynamism", "capacity",
        "_storage", "_ptr", "planned", "_view", "__weakref__",
    )

    def __init__(self, scalar_type: int, sizes, dim_order=None, dynamism=Dynamism.STATIC,
                 storage: np.ndarray | None = None, planned: bool = False):
        self.scalar_type = int(scalar_type)
        self.dtype = to_numpy_dtype(scalar_type)
        self.sizes = tuple(int(s) for s in sizes)
        self.dim_order = tuple(dim_order) if dim_order is not None else tuple(range(len(self.sizes)))
        self.dynamism = Dynamism(dynamism)
        self.capacity = prod(self.sizes)
        self._view = None
        self.storage = storage
        self.planned = planned

    # ---- construction helpers -------------------------------------------------
    @classmethod
    def from_array(cls, array, dynamism=Dynamism.STATIC) -> "ETensor":
        """A contiguous tensor whose bytes alias ``array`` (copied if not contiguous)."""
        a = np.asarray(array)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")  # (not ascontiguousarray: it turns rank 0 into rank 1)
        st = from_numpy_dtype(a.dtype)
        t = cls(st, a.shape, dynamism=dynamism)
        t.storage = a.reshape(-1).view(np.uint8) if a.size else np.zeros(0, np.uint8)
        return t

    @classmethod
    def empty(cls, scalar_type, sizes, dim_order=None, dynamism=Dynamism.STATIC) -> "ETensor":
        """A tensor with a fresh zeroed buffer of its capacity (tests and unplanned outputs)."""
        t = cls(scalar_type, sizes, dim_order, dynamism)
        t.storage = np.zeros(t.capacity * t.dtype.itemsize, np.uint8)
        return t

    # ---- shape ---------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self.sizes

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    @property
    def numel(self) -> int:
        return prod(self.sizes)

    @property
    def nbytes(self) -> int:
        return prod(self.sizes) * self.dtype.itemsize

    @property
    def capacity_bytes(self) -> int:
        return self.capacity * self.dtype.itemsize

    def strides(self) -> tuple:
        return dim_order_strides(self.sizes, self.dim_order)

    def is_contiguous(self) -> bool:
        return self.dim_order == tuple(range(len(self.sizes)))

    def resize(self, shape) -> None:
        """Resize in place following ExecuTorch's rules (spec 4.9)."""
        shape = tuple(int(s) for s in shape)
        if shape == self.sizes:
            return
        if len(shape) != len(self.sizes):
            raise ExecuTorchError(
                ErrorCode.NotSupported,
                f"cannot resize a rank-{len(self.sizes)} tensor to rank {len(shape)} "
                f"(sizes {list(self.sizes)} -> {list(shape)})")
        if any(s < 0 for s in shape):
            raise ExecuTorchError(ErrorCode.InvalidArgument, f"negative size in {list(shape)}")
        if self.dynamism == Dynamism.STATIC:
            raise ExecuTorchError(
                ErrorCode.NotSupported,
                f"static tensor of sizes {list(self.sizes)} cannot be resized to {list(shape)}")
        n = prod(shape)
        if n > self.capacity:
            raise ExecuTorchError(
                ErrorCode.NotSupported,
                f"resize to {list(shape)} needs {n} elements, over the capacity of "
                f"{self.capacity} elements")
        self.sizes = shape
        self._view = None

    # ---- data ----------------------------------------------------------------
    @property
    def storage(self) -> np.ndarray | None:
        return self._storage

    @storage.setter
    def storage(self, storage: np.ndarray | None) -> None:
        self._storage = storage
        # the address is cached: ndarray.ctypes.data costs microseconds per call
        self._ptr = 0 if storage is None else storage.ctypes.data
        self._view = None

    def set_storage(self, storage: np.ndarray | None) -> None:
        self.storage = storage

    def numpy(self) -> np.ndarray:
        """A numpy view of the current contents (writable unless the bytes are read-only)."""
        v = self._view
        if v is not None:
            return v
        if self.storage is None:
            raise ExecuTorchError(ErrorCode.InvalidState, f"tensor {self.describe()} has no data")
        item = self.dtype.itemsize
        need = self.nbytes
        if need > self.storage.nbytes:
            raise ExecuTorchError(
                ErrorCode.InvalidState,
                f"tensor {self.describe()} needs {need} bytes, its storage has {self.storage.nbytes}")
        if need == 0:
            v = np.zeros(self.sizes, self.dtype)
            v.flags.writeable = False
        else:
            v = np.ndarray(self.sizes, self.dtype, buffer=self.storage,
                           strides=tuple(s * item for s in self.strides()))
        self._view = v
        return v

    def write(self, value) -> None:
        """Resize to ``value``'s shape and copy it in, cast to this tensor's dtype."""
        a = np.asarray(value)
        self.resize(a.shape)
        if a.size:
            if self.dtype.kind in "iu" and a.dtype != self.dtype:
                a = cast_array(a, self.dtype)  # float -> int as the C++ runtime on x86
            np.copyto(self.numpy(), a, casting="unsafe")

    def data_ptr(self) -> int:
        return self._ptr

    def describe(self) -> str:
        return f"{scalar_type_name(self.scalar_type)}{list(self.sizes)}"

    def __repr__(self) -> str:
        return f"ETensor({self.describe()}, dim_order={list(self.dim_order)}, {self.dynamism.name})"
