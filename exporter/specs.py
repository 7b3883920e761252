"""Tensor specs: what the planner and the emitter know about each tensor of the graph.

Every FX node that produces tensors gets ``node.meta["spec"]``: a ``TensorSpec``,
a tuple of them (multi-output ops, cond), or a Python scalar for SymInt/SymFloat
results. Symbolic sizes are replaced by their upper bound (spec 4.9), and such
tensors are DYNAMIC_BOUND.
"""
from __future__ import annotations

import torch
from torch.utils._sympy.value_ranges import bound_sympy

from pyruntime.exporter.errors import node_error

STATIC, DYNAMIC_BOUND = 0, 1

SCALAR_TYPE = {
    torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
    torch.float16: 5, torch.float32: 6, torch.float64: 7, torch.bool: 11, torch.qint8: 12,
    torch.quint8: 13, torch.qint32: 14, torch.bfloat16: 15, torch.quint4x2: 16,
    torch.quint2x4: 17, torch.bits16: 22, torch.float8_e5m2: 23, torch.float8_e4m3fn: 24,
    torch.float8_e5m2fnuz: 25, torch.float8_e4m3fnuz: 26, torch.uint16: 27, torch.uint32: 28,
    torch.uint64: 29,
}


class TensorSpec:
    """One tensor: shape (upper bounds), dtype, dim order, and planning results.

    A view (``base`` set) shares storage, lifetime and placement with its base.
    """

    __slots__ = ("shape", "dtype", "dim_order", "dynamism", "const", "data", "fqn",
                 "requires_grad", "base", "_lifetime", "_mem_id", "_mem_offset",
                 "external", "init_data")

    def __init__(self, shape, dtype, dim_order=None, dynamism=STATIC, const=False, data=None,
                 fqn=None, requires_grad=False, base=None):
        self.shape = [int(s) for s in shape]
        self.dtype = dtype
        self.dim_order = list(dim_order) if dim_order is not None else list(range(len(shape)))
        self.dynamism = dynamism
        self.const = const
        self.data = data  # constant bytes source (torch.Tensor) for constants
        self.fqn = fqn
        self.requires_grad = requires_grad
        self.base = base
        self._lifetime = [None, None]
        self._mem_id = None
        self._mem_offset = None
        self.external = False  # constant stored in a .ptd
        self.init_data = None  # initial bytes of a planned mutable buffer

    # planning fields live on the storage owner
    @property
    def storage(self) -> "TensorSpec":
        s = self
        while s.base is not None:
            s = s.base
        return s

    lifetime = property(lambda s: s.storage._lifetime,
                        lambda s, v: setattr(s.storage, "_lifetime", v))
    mem_id = property(lambda s: s.storage._mem_id, lambda s, v: setattr(s.storage, "_mem_id", v))
    mem_offset = property(lambda s: s.storage._mem_offset,
                          lambda s, v: setattr(s.storage, "_mem_offset", v))

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * self.dtype.itemsize

    def allocated(self, alignment: int = 16) -> int:
        return (self.nbytes + alignment - 1) // alignment * alignment

    def __repr__(self):
        return (f"TensorSpec({self.shape}, {self.dtype}, life={self.lifetime}, "
                f"mem=({self.mem_id}, {self.mem_offset}))")


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The bytes of ``t`` in contiguous order."""
    t = t.detach().contiguous()
    if t.numel() == 0:
        return b""
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def dim_order_of(t: torch.Tensor) -> list[int]:
    try:
        return [int(d) for d in t.dim_order()]
    except Exception:  # ambiguous strides (size-1 dims): contiguous
        return list(range(t.dim()))


def upper_bound(size, node) -> tuple[int, bool]:
    """(int upper bound, is_symbolic) of one size entry."""
    if isinstance(size, int):
        return size, False
    if isinstance(size, torch.SymInt):
        expr = size.node.expr
        if expr.is_number:
            return int(expr), False
        shape_env = size.node.shape_env
        ranges = {s: shape_env.var_to_range[s] for s in expr.free_symbols
                  if s in shape_env.var_to_range}
        upper = bound_sympy(expr, ranges).upper
        try:
            return int(upper), True
        except (TypeError, ValueError, OverflowError, AttributeError):
            raise node_error(node, f"size {expr} has no upper bound (a data-dependent "
                                   "shape); bound it with torch._check(... <= N) or give "
                                   "the dimension a max (torch.export.Dim(..., max=N))"
                             ) from None
    raise node_error(node, f"unexpected size entry {size!r}")


def spec_from_value(val, node, **kw):
    """A TensorSpec (or tuple / scalar) for an FX value (FakeTensor, SymInt, list)."""
    if isinstance(val, torch.Tensor):
        if val.layout != torch.strided:
            raise node_error(node, f"layout {val.layout} is not supported")
        if val.dtype not in SCALAR_TYPE:
            raise node_error(node, f"dtype {val.dtype} has no ExecuTorch scalar type")
        bounds = [upper_bound(s, node) for s in val.shape]
        dyn = DYNAMIC_BOUND if any(b for _, b in bounds) else STATIC
        return TensorSpec([b for b, _ in bounds], val.dtype, dim_order_of(val), dyn,
                          requires_grad=bool(val.requires_grad), **kw)
    if isinstance(val, (list, tuple)):
        return tuple(spec_from_value(v, node) for v in val)
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)) \
            or val is None:
        return val
    raise node_error(node, f"cannot describe value of type {type(val).__name__}")


def node_specs(node) -> list[TensorSpec]:
    """The TensorSpecs a node touches (a view node: those of its base)."""
    spec = node.meta.get("spec")
    if isinstance(spec, TensorSpec):
        return [spec]
    if isinstance(spec, tuple):
        return [s for s in spec if isinstance(s, TensorSpec)]
    return []
