"""Ops of language models: embedding / index_select / index.Tensor (``gather.comp``),
rotary embeddings (``rope.comp``), SymInts read from tensors."""
from __future__ import annotations

from pyruntime.cython_ext.errors import ErrorCode
from pyruntime.delegates.vulkan.commands import pack
from pyruntime.delegates.vulkan.graph import SymInt, Tensor, ValueList
from pyruntime.delegates.vulkan.ops import bad, nargs, norm_dim, numel, op, unsupported


def gather(g, x, idx, out, dim_fn, where):
    if idx.dtype.kind not in "iu":
        raise bad(where, f"indices of type {idx.dtype.name}")

    def plan():
        d = dim_fn()
        shape = list(x.shape[:d]) + list(idx.shape) + list(x.shape[d + 1:])
        out.resize(shape, where)
        n = out.numel
        if not n:
            return []
        if not x.shape[d]:
            raise bad(where, "indexing an empty dimension", )
        p = pack(n, idx.numel, numel(x.shape[d + 1:]), x.shape[d])
        return [g.dispatch("gather", (), [("X", x), ("IDX", idx)], [("Y", out)], p,
                           g.groups(n), where)]
    return plan


@op("aten.embedding.default")
def _embedding(g, args, where):
    nargs(args, 3, where)
    w, idx, out = g.t(args[0], where), g.t(args[1], where), g.t(args[-1], where)
    return gather(g, w, idx, out, lambda: 0, where)


@op("aten.index_select.default")
def _index_select(g, args, where):
    nargs(args, 4, where)
    x, idx, out = g.t(args[0], where), g.t(args[2], where), g.t(args[-1], where)
    return gather(g, x, idx, out, lambda: norm_dim(g.ival(args[1], where), len(x.shape), where),
                  where)


@op("aten.index.Tensor")
def _index(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    lst = g.val(args[1])
    if not isinstance(lst, ValueList):
        raise bad(where, "indices are not a value list")
    idx = [(d, g.values[v]) for d, v in enumerate(lst) if g.values[v] is not None]
    if len(idx) != 1 or not isinstance(idx[0][1], Tensor):
        raise unsupported(where, "index.Tensor with more than one index tensor")
    d, t = idx[0]
    return gather(g, x, t, out, lambda: d, where)


@op("et_vk.apply_rotary_emb.default")
def _rope(g, args, where):
    nargs(args, 5, where)
    xq, xk, cos, sin = (g.t(args[i], where) for i in range(4))
    res = g.val(args[-1])
    if not isinstance(res, ValueList) or len(res) != 2:
        raise bad(where, "expected two outputs")
    oq, ok = g.t(res[0], where), g.t(res[1], where)

    def one(x, out):
        if len(x.shape) != 4 or x.shape[-1] % 2:
            raise bad(where, f"input {list(x.shape)}, expected [B, S, H, 2 * D2]")
        B, S, H, D = x.shape
        per_head = len(cos.shape) == 3
        want = (S, H, D // 2) if per_head else (S, D // 2)
        if tuple(cos.shape) != want or tuple(sin.shape) != want:
            raise bad(where, f"frequencies {list(cos.shape)} for input {list(x.shape)}")
        out.resize(x.shape, where)
        pairs = x.numel // 2
        p = pack(pairs, S, H, D // 2, int(per_head))
        return g.dispatch("rope", (), [("X", x), ("COS", cos), ("SIN", sin)], [("Y", out)], p,
                          g.groups(pairs), where)
    return lambda: [one(xq, oq), one(xk, ok)]


@op("sym_size.int", "aten.sym_size.int")
def _sym_size(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.values[args[-1]]
    if not isinstance(out, SymInt):
        raise bad(where, "output is not a SymInt")

    def plan():
        out.value = x.shape[norm_dim(g.ival(args[1], where), len(x.shape), where)]
        return []
    return plan


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _symint_binary(name, fn):
    def build(g, args, where):
        nargs(args, 3, where)
        out = g.values[args[-1]]
        if not isinstance(out, SymInt):
            raise bad(where, "output is not a SymInt")

        def plan():
            a, b = g.ival(args[0], where), g.ival(args[1], where)
            if name == "floordiv" and b == 0:
                raise bad(where, f"SymInt {name}({a}, {b}): division by zero",
                          ErrorCode.InvalidArgument)
            v = fn(a, b)
            if not _INT64[0] <= v <= _INT64[1]:
                raise bad(where, f"SymInt {name}({a}, {b}) = {v} overflows int64",
                          ErrorCode.InvalidArgument)
            out.value = v
            return []
        return plan
    return build


# Python operators on SymInts (node.target.__name__): exact integers, floor division as in
# Python; a result outside int64 or a division by zero is an error, never a wrapped value
_SYMINT_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
               "floordiv": lambda a, b: a // b, "lt": lambda a, b: int(a < b),
               "gt": lambda a, b: int(a > b), "ge": lambda a, b: int(a >= b),
               "le": lambda a, b: int(a <= b), "eq": lambda a, b: int(a == b)}
for _name, _fn in _SYMINT_OPS.items():
    op(_name)(_symint_binary(_name, _fn))


@op("_assert_scalar.default", "sym_constrain_range_for_size.default")
def _noop(g, args, where):
    return lambda: []
