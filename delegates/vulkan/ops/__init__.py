"""Op builders of the Vulkan bridge, keyed by the name the VkGraph's OperatorCall carries
(``aten.linear.default``, ``et_vk.conv_with_clamp.default``, ...).

A builder ``fn(g, args, where)`` runs once when the delegate loads: it checks its
arguments (types, ranks) and returns a plan function. The plan function sizes the
outputs from the current input shapes and returns the op's dispatches; it runs
again whenever input shapes change. Arguments follow the ATen schema in order
(defaults filled in by the serializer), the output last.
"""
from __future__ import annotations

from math import prod

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.vulkan.blob import BACKEND

OPS: dict = {}


def op(*names):
    def deco(fn):
        for n in names:
            if n in OPS:
                raise ValueError(f"Vulkan op {n} registered twice")
            OPS[n] = fn
        return fn
    return deco


def bad(where: str, msg: str, code=ErrorCode.InvalidProgram) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND}: {where}: {msg}")


def unsupported(where: str, msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.NotSupported, f"{BACKEND}: {where}: {msg}")


def nargs(args, n: int, where: str) -> None:
    if len(args) < n:
        raise bad(where, f"{len(args)} arguments, expected at least {n}")


# ---- shape helpers ------------------------------------------------------------------
def contiguous(shape) -> list[int]:
    st, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        st[d] = acc
        acc *= shape[d]
    return st


def broadcast_shape(*shapes, where="") -> tuple:
    nd = max(len(s) for s in shapes)
    out = []
    for d in range(nd):
        sizes = {s[d - nd + len(s)] for s in shapes if d - nd + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise bad(where, f"shapes {[list(s) for s in shapes]} do not broadcast",
                      ErrorCode.InvalidArgument)
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_strides(shape, out_shape) -> list[int]:
    """Element strides reading a contiguous ``shape`` tensor at ``out_shape`` coordinates."""
    st = contiguous(shape)
    pad = len(out_shape) - len(shape)
    return [0 if d < pad or shape[d - pad] == 1 else st[d - pad] for d in range(len(out_shape))]


def coalesce(sizes, *strides):
    """Drop size-1 dims and merge dims that are contiguous for every stride list."""
    keep = [d for d in range(len(sizes)) if sizes[d] != 1]
    sz = [sizes[d] for d in keep]
    sts = [[s[d] for d in keep] for s in strides]
    i = len(sz) - 1
    while i > 0:
        if all(s[i - 1] == s[i] * sz[i] for s in sts):
            sz[i - 1] *= sz[i]
            for s in sts:
                s[i - 1] = s[i]
            del sz[i]
            for s in sts:
                del s[i]
        i -= 1
    if not sz:
        return [1], [[0] for _ in strides]
    return sz, sts


def dims8(v, fill=0) -> list[int]:
    v = list(v)
    if len(v) > 8:
        raise ExecuTorchError(ErrorCode.NotSupported, f"{BACKEND}: more than 8 dims after "
                                                      f"coalescing ({len(v)})")
    return v + [fill] * (8 - len(v))


def norm_dim(d: int, nd: int, where: str) -> int:
    if not -max(nd, 1) <= d < max(nd, 1):
        raise bad(where, f"dim {d} out of range for rank {nd}", ErrorCode.InvalidArgument)
    return d % max(nd, 1)


def numel(shape) -> int:
    return prod(shape)


def ct_of(dtype) -> tuple[str, tuple]:
    """(compute type, extra defines) for elementwise math producing/consuming ``dtype``.
    float16 is computed on in float and rounded once, on the store (as torch's CPU half
    kernels do): fp16 arithmetic would round every step, with the device's rounding mode."""
    if dtype.kind == "f":
        return "float", ()
    return "int", (("INT_CT", 1),)


FAMILIES = ("elementwise", "shape", "linalg", "conv", "norm", "llm", "quant", "extra")


def load_all():
    """Import every op family (each registers its ops into OPS)."""
    import importlib

    for mod in FAMILIES:
        importlib.import_module(f"pyruntime.delegates.vulkan.ops.{mod}")
