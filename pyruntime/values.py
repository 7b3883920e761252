"""Building a method's value table from its plan (spec sections 2.4, 4.4).

Every value becomes a Python object the kernels understand: ``ETensor``,
``int``/``float``/``bool``/``str``/``None``, literal lists, or a ``ListRef``
for boxed lists, which are re-read from the value table whenever a kernel is
called so that symbolic sizes and moved tensors flow through.
"""
from __future__ import annotations

from math import prod

import numpy as np

from pyruntime.cython_ext.dtypes import VALID_SCALAR_TYPES, element_size, scalar_type_name
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError, invalid_program
from pyruntime.cython_ext.tensor import Dynamism, ETensor

MAX_RANK = 16  # kTensorDimensionLimit


class ListRef:
    """A boxed list: value indices resolved against the value table at call time."""

    __slots__ = ("items", "optional")

    def __init__(self, items, optional=False):
        self.items = tuple(items)
        self.optional = optional

    def resolve(self, values):
        if self.optional:
            return [None if j == -1 else values[j] for j in self.items]
        return [values[j] for j in self.items]


def tensor_nbytes(t) -> int:
    return prod(t.sizes or []) * element_size(t.scalar_type)


def check_tensor_meta(t, where: str) -> None:
    """Validation the runtime does on a serialized Tensor before using it (spec 4.4.1)."""
    if t.scalar_type not in VALID_SCALAR_TYPES:
        raise invalid_program(f"{where}: invalid scalar type {t.scalar_type}")
    if t.storage_offset != 0:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{where}: storage_offset {t.storage_offset} (only 0 is supported)")
    if t.shape_dynamism == Dynamism.DYNAMIC_UNBOUND:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{where}: DYNAMIC_UNBOUND tensors are not supported (as in the "
                              "portable runtime)")
    if t.shape_dynamism not in (0, 1):
        raise invalid_program(f"{where}: invalid shape_dynamism {t.shape_dynamism}")
    if t.sizes is None or t.dim_order is None:
        raise invalid_program(f"{where}: tensor without sizes or dim_order")
    if len(t.sizes) != len(t.dim_order) or len(t.sizes) > MAX_RANK:
        raise invalid_program(f"{where}: sizes {t.sizes} and dim_order {t.dim_order} disagree "
                              f"or exceed rank {MAX_RANK}")
    if any(s < 0 for s in t.sizes):
        raise invalid_program(f"{where}: negative size in {t.sizes}")
    if sorted(t.dim_order) != list(range(len(t.sizes))):
        raise invalid_program(f"{where}: dim_order {t.dim_order} is not a permutation")


class ValueBuilder:
    """Turns ``plan.values`` into runtime values, placing tensors in planned memory."""

    def __init__(self, pte, plan, arenas, constants, external, method_name):
        self.pte, self.plan, self.arenas = pte, plan, arenas
        self.constants, self.external, self.name = constants, external, method_name
        self.external_cache: dict[str, np.ndarray] = {}

    def build(self) -> list:
        evs = self.plan.values or []
        values = [None] * len(evs)
        for i, ev in enumerate(evs):
            where = f"method {self.name!r} value {i}"
            code, v = ev.val
            if code == 1:
                values[i] = None
                continue
            if v is None:
                raise invalid_program(f"{where}: value of type {code} has no payload")
            kind = v._kind
            if kind == "Int":
                values[i] = int(v.int_val)
            elif kind == "Bool":
                values[i] = bool(v.bool_val)
            elif kind == "Double":
                values[i] = float(v.double_val)
            elif kind == "String":
                values[i] = v.string_val or ""
            elif kind == "IntList":
                items = v.items or []
                for j in items:
                    if not 0 <= j < len(evs) or evs[j].val[0] != 2:
                        raise invalid_program(f"{where}: IntList item {j} is not an Int value")
                values[i] = ListRef(items)
            elif kind in ("DoubleList", "BoolList"):
                values[i] = list(v.items or [])
            elif kind in ("TensorList", "OptionalTensorList"):
                opt = kind == "OptionalTensorList"
                items = v.items or []
                for j in items:
                    if opt and j == -1:
                        continue
                    if not 0 <= j < i or not isinstance(values[j], ETensor):
                        raise invalid_program(
                            f"{where}: {kind} item {j} is not an earlier Tensor value")
                values[i] = ListRef(items, optional=opt)
            elif kind == "Tensor":
                values[i] = self.tensor(v, where)
            else:  # pragma: no cover - the union table names every member
                raise invalid_program(f"{where}: unknown value kind {kind}")
        return values

    def tensor(self, t, where: str) -> ETensor:
        check_tensor_meta(t, where)
        nbytes = tensor_nbytes(t)
        et = ETensor(t.scalar_type, t.sizes, t.dim_order, t.shape_dynamism)
        info = t.extra_tensor_info
        external = info is not None and info.location == 1
        alloc = t.allocation_info
        if alloc is not None:
            et.set_storage(self._planned(alloc, nbytes, where))
            et.planned = True
            if external:
                np.copyto(et.storage, self._external(info, t, nbytes, where))
            elif t.data_buffer_idx > 0:
                np.copyto(et.storage, self.pte.mutable_entry(t.data_buffer_idx, nbytes, where))
        elif external:
            et.set_storage(self._external(info, t, nbytes, where))
            et.planned = True
        elif t.data_buffer_idx > 0:
            k = t.data_buffer_idx
            if k >= len(self.constants):
                raise invalid_program(f"{where}: constant index {k} out of range "
                                      f"({len(self.constants)} constants)")
            entry = self.constants[k]
            if nbytes > len(entry):
                raise invalid_program(f"{where}: constant {k} needs {nbytes} bytes, its entry "
                                      f"has {len(entry)}")
            et.set_storage(entry[:nbytes])
            et.planned = True
        return et

    def _planned(self, alloc, nbytes: int, where: str) -> np.ndarray:
        mid = alloc.memory_id
        offset = alloc.memory_offset_low | (alloc.memory_offset_high << 32)
        if not 1 <= mid <= len(self.arenas):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: memory_id {mid} but the plan has "
                                  f"{len(self.arenas)} planned buffer(s)")
        arena = self.arenas[mid - 1]
        if offset + nbytes > len(arena):
            raise ExecuTorchError(ErrorCode.MemoryAllocationFailed,
                                  f"{where}: [{offset}, +{nbytes}) exceeds planned buffer "
                                  f"{mid} of {len(arena)} bytes")
        return arena[offset:offset + nbytes]

    def _external(self, info, t, nbytes: int, where: str) -> np.ndarray:
        key = info.fully_qualified_name
        if key is None:
            raise invalid_program(f"{where}: external tensor without a fully_qualified_name")
        if self.external is None:
            raise ExecuTorchError(ErrorCode.InvalidState,
                                  f"{where}: tensor {key!r} lives in external data; pass "
                                  "data_path= (a .ptd file) when loading the program")
        if key not in self.external:
            raise ExecuTorchError(ErrorCode.NotFound,
                                  f"{where}: key {key!r} not found in {self.external.source}")
        layout = self.external.layout(key)
        if layout is not None:
            if (layout.scalar_type != t.scalar_type or list(layout.sizes or []) != list(t.sizes)
                    or list(layout.dim_order or []) != list(t.dim_order)):
                raise ExecuTorchError(
                    ErrorCode.InvalidExternalData,
                    f"{where}: {key!r} is {scalar_type_name(layout.scalar_type)}"
                    f"{list(layout.sizes or [])} dim_order {list(layout.dim_order or [])} in the "
                    f"data file, the program expects {scalar_type_name(t.scalar_type)}"
                    f"{list(t.sizes)} dim_order {list(t.dim_order)}")
        blob = self.external.get(key)
        if nbytes > len(blob):
            raise ExecuTorchError(ErrorCode.InvalidExternalData,
                                  f"{where}: {key!r} needs {nbytes} bytes, the data file has "
                                  f"{len(blob)}")
        return blob[:nbytes]
