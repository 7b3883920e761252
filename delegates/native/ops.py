"""What runs each ``NPTG`` node: the portable out-variant kernel of its functional ATen op,
found by the op's schema, or one of the few ops the partitioner claims that ExecuTorch's
portable library has no kernel for (``matmul``, ``scaled_dot_product_attention``,
``cond``), written here in numpy.

A node names a functional op (``torch.ops.aten.mean.dim``) with every schema argument
by name; the out variant (``aten::mean.out``) takes the same arguments and then its
outputs, so the match is by argument names: the out variant's arguments, less the
node's, must be exactly its trailing output tensors. An in-place node (``relu_``,
``self`` written) runs the out variant of its functional op (``relu``) into a fresh
tensor that then stands for the written input.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.native.records import Ref
from pyruntime.delegates.numpy_math import sdpa
from pyruntime.kernels.registry import get_kernel, has_kernel
from pyruntime.kernels.schemas import SCHEMAS

# factory and layout arguments of functional ops that out variants do not take (the
# output tensor's own dtype and layout stand for them)
_FACTORY = {"dtype", "layout", "device", "pin_memory", "non_blocking", "memory_format"}
# memory formats that keep the default dim order (anything else would change it)
_PLAIN_FORMATS = {"torch.contiguous_format", "torch.preserve_format"}


def _unsupported(where: str, msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.NotSupported, f"NativeBackend: {where}: {msg}")


@dataclass(frozen=True)
class KernelOp:
    """An out-variant (or scalar) kernel of the registry; ``params`` are the node argument
    names in the kernel's order, ``n_out`` its output tensors (0: returns a scalar)."""
    name: str
    kernel: object
    params: tuple
    n_out: int

    def order(self, names, args):
        pos = {n: i for i, n in enumerate(names)}
        return [_format_arg(args[pos[p]]) if p == "memory_format" else args[pos[p]]
                for p in self.params]

    def run(self, args, outs):
        k = self.kernel
        full = list(args) + list(outs)
        if k.arity is not None:
            full = full[:k.arity]
        return k.fn(*full)


@dataclass(frozen=True)
class LocalOp:
    """An op written here: ``fn(values...) -> array or list``; tensors arrive as numpy.
    A node may leave out the ``optional`` params (they arrive as None)."""
    name: str
    fn: object
    params: tuple
    optional: tuple = ()

    def order(self, names, args):
        pos = {n: i for i, n in enumerate(names)}
        return [args[pos[p]] if p in pos else None for p in self.params]


@dataclass(frozen=True)
class CondOp:
    """``torch.cond(pred, true_fn, false_fn, operands)``: the backend runs one subgraph."""
    name: str = "cond"

    def order(self, names, args):
        if len(args) != 4:
            raise _unsupported("cond", f"{len(args)} arguments, expected pred, true_fn, "
                                       "false_fn and operands")
        return list(args)


def _format_arg(v):
    return None if v is None or v in _PLAIN_FORMATS else v


def split_target(target: str, where: str) -> tuple[str, str, str]:
    """``"torch.ops.aten.add.Tensor"`` -> ``("aten", "add", "Tensor")``."""
    parts = target.split(".")
    if len(parts) != 5 or parts[:2] != ["torch", "ops"]:
        raise _unsupported(where, f"target {target!r} is not a torch.ops operator")
    return parts[2], parts[3], parts[4]


def resolve(target: str, names, args, outs, tensors, where: str):
    """The op that runs one node (see the module doc); NotSupported naming it otherwise."""
    if target == COND:
        return CondOp()
    if target in LOCAL:
        op = LOCAL[target]
        missing = [p for p in op.params if p not in names and p not in op.optional]
        if missing:
            raise _unsupported(where, f"{target}: arguments {missing} are missing")
        return op
    ns, name, overload = split_target(target, where)
    mutating = name.endswith("_") and not name.endswith("__")
    base = name[:-1] if mutating else name
    given = set(names)
    pos = {n: i for i, n in enumerate(names)}
    found = []
    for key, (sig, nret) in SCHEMAS.items():
        if not key.startswith(f"{ns}::{base}."):
            continue
        params = [p.split(":")[0] for p in sig.split()]
        extra = [p for p in params if p not in given]
        if extra != params[len(params) - len(extra):] or len(extra) not in (0, len(outs)):
            continue  # the node lacks an argument the kernel takes before its outputs
        if not extra and (len(outs) != 1 or key != _scalar_key(ns, base, overload)):
            continue  # no out tensors: only the exact scalar op (sym_size.int)
        dropped = given - set(params)
        if dropped - _FACTORY:
            continue
        kinds = dict(p.split(":") for p in sig.split())
        if not all(_fits(kinds[p], args[pos[p]], tensors) for p in params if p in pos):
            continue  # e.g. add.Scalar_out for a tensor ``other``
        own = 0 if key.split(".", 1)[1].startswith(overload) or overload == "default" else 1
        found.append((len(dropped), own, key, tuple(params[:len(params) - len(extra)]),
                      len(extra)))
    if not found:
        raise _unsupported(where, f"operator {target} has no kernel in pyruntime (its out "
                                  f"variant {ns}::{base}.out, or one taking the arguments "
                                  f"{list(names)}, is not registered)")
    found.sort()
    _, _, key, params, n_out = found[0]
    if not has_kernel(key):
        raise _unsupported(where, f"operator {target}: kernel {key} is not registered")
    if "memory_format" in params:
        fmt = args[pos["memory_format"]]
        if fmt is not None and fmt not in _PLAIN_FORMATS:
            raise _unsupported(where, f"{target}: memory_format {fmt!r}")
    return KernelOp(key, get_kernel(key), params, n_out)


def _fits(kind: str, value, tensors) -> bool:
    """Whether a node's argument value can be the kernel parameter of schema ``kind``."""
    def is_tensor(v):
        return isinstance(v, Ref) and v.name in tensors

    if kind.startswith("T"):
        if value is None:
            return kind.startswith("T?")
        if kind.startswith("T?[]") or kind.startswith("T[]"):
            return isinstance(value, list) and all(v is None or is_tensor(v) for v in value)
        return is_tensor(value)
    if is_tensor(value):
        return False  # a tensor where the kernel takes a scalar
    if isinstance(value, list):
        return kind.endswith("[]") or kind.endswith("[]?")
    return True


def _scalar_key(ns, name, overload):
    return f"{ns}::{name}" if overload == "default" else f"{ns}::{name}.{overload}"


# ---- ops without a portable kernel ----------------------------------------------------

def _matmul(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.matmul(a, b).astype(np.result_type(a, b), copy=False)


COND = "torch.ops.higher_order.cond"
LOCAL = {
    "torch.ops.aten.matmul.default": LocalOp("matmul", _matmul, ("self", "other")),
    "torch.ops.aten.scaled_dot_product_attention.default": LocalOp(
        "scaled_dot_product_attention", sdpa,
        ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"),
        optional=("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")),
}
