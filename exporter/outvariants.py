"""Functional operators -> the out-variant kernels the runtime registers (spec 4.8, 7.1).

``kernel_for(target)`` says which runtime kernel a graph node calls and how its
arguments are laid out:

* ``out``: an out variant (``aten::add.out``); the schema's out arguments get
  the node's result tensors, then the results are appended again (one tensor,
  or a TensorList of several);
* ``sym``: a scalar op (``aten::sym_size.int``, ``executorch_prim::add.Scalar``);
  a fresh Int/Double/Bool is appended for the kernel to overwrite;
* ``inplace``: ``aten::copy_`` and friends; the mutated input is appended.

Operators the runtime knows but torch does not (``dim_order_ops``,
``executorch_prim``) are ``ExternalOp`` objects built from their schema text, so
the exporter never needs executorch's own registrations.
"""
from __future__ import annotations

import builtins
import math
import operator
from dataclasses import dataclass

import torch

# Arguments an out variant drops: the out tensor already carries them.
TENSOR_OPTIONS = ("dtype", "layout", "device", "pin_memory", "memory_format")


class ExternalOp:
    """An operator known to the runtime by name and schema, not registered with torch."""

    def __init__(self, schema: str, out: "ExternalOp | None" = None, overload=None):
        self._schema = torch._C.parse_schema(schema)
        self.name = self._schema.name  # "ns::op"
        self.overload = self._schema.overload_name if overload is None else overload
        self.out = out
        self.__name__ = f"{self.name}.{self.overload or 'default'}"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a runtime operator; it cannot run in torch")

    def __repr__(self):
        return self.__name__


def _dim_order_pair(name: str, extra: str) -> ExternalOp:
    out = ExternalOp(f"dim_order_ops::{name}.out({extra}*, bool non_blocking=False, "
                     "int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)")
    return ExternalOp(f"dim_order_ops::{name}({extra}*, bool non_blocking=False, "
                      "int[]? dim_order=None) -> Tensor", out=out)


TO_DIM_ORDER_COPY = _dim_order_pair("_to_dim_order_copy", "Tensor self, ")
CLONE_DIM_ORDER = _dim_order_pair("_clone_dim_order", "Tensor self, ")
EMPTY_DIM_ORDER = ExternalOp(
    "dim_order_ops::_empty_dim_order(int[] size, *, int[]? dim_order=None) -> Tensor",
    out=ExternalOp("dim_order_ops::_empty_dim_order.out(int[] size, *, int[]? dim_order=None, "
                   "Tensor(a!) out) -> Tensor(a!)"))
# the emitter writes this one with overload "default" (spec 7.1)
ET_VIEW = ExternalOp("executorch_prim::et_view(Tensor self, int[] size) -> Tensor",
                     overload="default")


def memory_view(base, size):
    """Graph marker: a static reshape sharing ``base``'s memory (no instruction)."""
    raise RuntimeError("memory_view is a graph marker")


def _prim(name: str, n: int, ret: str = "Scalar") -> ExternalOp:
    params = ", ".join(f"Scalar {c}" for c in "abc"[:n])
    return ExternalOp(f"executorch_prim::{name}.Scalar({params}) -> {ret}")


PRIM_OPS = {
    operator.add: _prim("add", 2), operator.sub: _prim("sub", 2), operator.mul: _prim("mul", 2),
    operator.floordiv: _prim("floordiv", 2), operator.truediv: _prim("truediv", 2, "float"),
    operator.mod: _prim("mod", 2), operator.eq: _prim("eq", 2, "bool"),
    operator.gt: _prim("gt", 2, "bool"), operator.lt: _prim("lt", 2, "bool"),
    operator.ge: _prim("ge", 2, "bool"), operator.le: _prim("le", 2, "bool"),
    operator.neg: _prim("neg", 1), builtins.round: _prim("round", 1, "int"),
    math.ceil: _prim("ceil", 1, "int"), math.trunc: _prim("trunc", 1, "int"),
    torch.sym_float: _prim("sym_float", 1, "float"), torch.sym_int: _prim("sym_int", 1, "int"),
    torch.sym_max: _prim("sym_max", 2), torch.sym_min: _prim("sym_min", 2),
    torch.sym_not: _prim("sym_not", 1, "bool"), torch.sym_ite: _prim("sym_ite", 3),
}
SYM_ATEN = {torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default,
            torch.ops.aten.sym_stride.int, torch.ops.aten._local_scalar_dense.default}


@dataclass(frozen=True)
class Kernel:
    name: str  # "aten::add"
    overload: str  # "out", or "" for the default overload
    schema: torch.FunctionSchema  # the schema whose arguments are emitted
    kind: str  # "out" | "sym" | "inplace" | "other"

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


def _names(op) -> tuple[str, str]:
    s = op._schema
    return s.name, ("" if s.overload_name in ("", "default") else s.overload_name)


def _is_out(schema) -> bool:
    return any(a.is_out for a in schema.arguments)


def _is_inplace(schema) -> bool:
    return (not _is_out(schema) and schema.name.endswith("_")
            and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments))


_CACHE: dict = {}


def find_out_variant(op):
    """The out overload whose non-out arguments are ``op``'s, minus TensorOptions at most."""
    if op in _CACHE:
        return _CACHE[op]
    packet = op._overloadpacket
    want = [(a.name, str(a.type)) for a in op._schema.arguments]
    n_ret = len(op._schema.returns)
    found, found_dropped = None, None
    # the packet's own overload list is fixed when it is created; ask the registry
    names = {s.overload_name or "default"
             for s in torch._C._jit_get_schemas_for_operator(op._schema.name)}
    for name in sorted(names | set(packet.overloads())):
        try:
            cand = getattr(packet, name)
        except AttributeError:
            continue
        args = cand._schema.arguments
        outs = [a for a in args if a.is_out]
        if not outs or len(outs) != n_ret:
            continue
        rest = [(a.name, str(a.type)) for a in args if not a.is_out]
        dropped = _dropped(want, rest)
        if dropped is not None and (found is None or dropped < found_dropped):
            found, found_dropped = cand, dropped
    _CACHE[op] = found
    return found


def _dropped(want: list, rest: list) -> int | None:
    """How many TensorOptions ``want`` loses to become ``rest`` (None: not that way)."""
    i = 0
    for arg in want:
        if i < len(rest) and rest[i] == arg:
            i += 1
        elif arg[0] not in TENSOR_OPTIONS:
            return None
    return len(want) - len(rest) if i == len(rest) else None


def kernel_for(target) -> Kernel | None:
    """The runtime kernel for an FX call target, or None if there is none."""
    if isinstance(target, ExternalOp):
        if target.out is not None:
            return Kernel(target.out.name, target.out.overload, target.out._schema, "out")
        kind = "sym" if target.name.startswith("executorch_prim::") and target is not ET_VIEW \
            else "other"
        return Kernel(target.name, target.overload, target._schema, kind)
    if target in PRIM_OPS:
        return kernel_for(PRIM_OPS[target])
    if not isinstance(target, torch._ops.OpOverload):
        return None
    schema = target._schema
    if target in SYM_ATEN:
        return Kernel(*_names(target), schema, "sym")
    if _is_out(schema):
        return Kernel(*_names(target), schema, "out")
    if _is_inplace(schema):
        return Kernel(*_names(target), schema, "inplace")
    out = find_out_variant(target)
    if out is None:
        return None
    return Kernel(*_names(out), out._schema, "out")


def schema_arguments(schema, args, kwargs, names=None):
    """Yield ``(argument, value)`` in schema order: keyword, else positional, else default.

    ``names`` maps positional indices to argument names when ``args`` follow a
    different (functional) schema than ``schema`` (the out variant).
    """
    by_name = dict(kwargs)
    if names is not None:
        for i, v in enumerate(args):
            by_name.setdefault(names[i], v)
        args = ()
    for i, a in enumerate(schema.arguments):
        if a.name in by_name:
            yield a, by_name[a.name]
        elif not a.kwarg_only and i < len(args):
            yield a, args[i]
        else:
            yield a, (a.default_value if a.has_default_value() else None)
