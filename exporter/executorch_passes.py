"""The graph passes of ExecuTorch's ``to_executorch``, in its order.

Contiguous inputs for the portable kernels that need them; optional constant
folding (not done by ExecuTorch; off by default); write-back ``copy_`` for
mutated buffers; static ``view_copy`` -> ``memory_view`` (no instruction, the
view shares its base's memory).
"""
from __future__ import annotations

import torch

from pyruntime.exporter.outvariants import TO_DIM_ORDER_COPY, memory_view
from pyruntime.exporter.passes import _constant_node, _flat_inputs, _ops, graph_modules

aten = torch.ops.aten


_CONTIGUOUS_ONLY = (aten._adaptive_avg_pool2d.default, aten.avg_pool2d.default,
                    aten.expand_copy.default, aten.mean.dim, aten.sum.dim_IntList)


def legalize_dim_order(gm):
    """Portable kernels of these ops need a contiguous input: insert a copy if it is not."""
    for node in _ops(gm):
        if node.target not in _CONTIGUOUS_ONLY or not isinstance(node.args[0], torch.fx.Node):
            continue
        src = node.args[0]
        val = src.meta["val"]
        if [int(d) for d in val.dim_order()] == list(range(val.dim())):
            continue
        with gm.graph.inserting_before(node):
            c = gm.graph.call_function(TO_DIM_ORDER_COPY, (src,),
                                       {"dim_order": list(range(val.dim()))})
        c.meta["val"] = val.contiguous()
        c.meta["stack_trace"] = node.meta.get("stack_trace")
        node.args = (c,) + tuple(node.args[1:])


# ----------------------------------------------------------------- constant folding


def _constant_value(v):
    if isinstance(v, torch.fx.Node):
        if v.op == "placeholder" and "const" in v.meta:
            return v.meta["const"]
        if v.op == "get_attr":
            t = v.meta.get("val")
            return t if isinstance(t, torch.Tensor) else None
        return None
    return v


def fold_constants(gm) -> int:
    """Evaluate ops whose tensor inputs are all constants (e.g. the transposed weight
    of a Linear) at export time, when the result is no bigger than its inputs.
    Quantize/dequantize ops are kept, so quantized weights stay quantized."""
    folded = 0
    for node in _ops(gm):
        op = node.target
        if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten" \
                or op._schema.is_mutable or not isinstance(node.meta.get("val"), torch.Tensor):
            continue
        inputs = _flat_inputs(node)
        if not inputs:
            continue
        consts = [_constant_value(i) for i in inputs]
        if any(c is None for c in consts):
            continue
        args = torch.fx.node.map_aggregate(node.args, _constant_value)
        kwargs = torch.fx.node.map_aggregate(node.kwargs, _constant_value)
        with torch.no_grad():
            value = op(*args, **kwargs)
        if not isinstance(value, torch.Tensor) or \
                value.nbytes > sum(c.nbytes for c in consts if isinstance(c, torch.Tensor)):
            continue
        c = _constant_node(gm, node, value.contiguous())
        node.replace_all_uses_with(c)
        gm.graph.erase_node(node)
        folded += 1
    gm.graph.eliminate_dead_code()
    return folded


# ----------------------------------------------------------------- mutation write-back


def insert_write_back(gm, mutated: dict[int, torch.fx.Node]) -> list[torch.fx.Node]:
    """``copy_(target, value)`` before the output for each mutated output position.

    ``mutated`` maps positions in the output tuple to the placeholder they update.
    Returns the user outputs (the output node keeps only those after the copies).
    """
    out = gm.graph.output_node()
    values = list(out.args[0])
    copies, user = [], []
    for i, v in enumerate(values):
        target = mutated.get(i)
        if target is None:
            user.append(v)
            continue
        if _inplace_lineage(v, target):
            continue
        with gm.graph.inserting_before(out):
            c = gm.graph.call_function(aten.copy_.default, (target, v))
        c.meta["val"] = target.meta["val"]
        copies.append(c)
    out.args = (tuple(copies + user),)
    return user


def _inplace_lineage(v, target) -> bool:
    while isinstance(v, torch.fx.Node) and v.op != "placeholder":
        if v.op == "call_function" and v.target == aten.copy_.default:
            v = v.args[0]
        else:
            return False
    return v is target


# ----------------------------------------------------------------- static views


def views_to_memory_views(gm):
    """``view_copy`` of a ``view_copy`` reads the first base; then every static
    ``view_copy`` not returned by the graph becomes a ``memory_view``."""
    for node in _ops(gm):
        if node.target == aten.view_copy.default:
            base = node.args[0]
            while isinstance(base, torch.fx.Node) and base.target == aten.view_copy.default:
                base = base.args[0]
            node.args = (base,) + tuple(node.args[1:])
    gm.graph.eliminate_dead_code()
    for node in _ops(gm):
        if node.target == aten.view_copy.default and all(u.op != "output" for u in node.users):
            node.target = memory_view


def run_executorch_passes(root: torch.fx.GraphModule, fold: bool = False) -> None:
    for gm in list(graph_modules(root)):
        if fold:
            fold_constants(gm)
        legalize_dim_order(gm)
        views_to_memory_views(gm)
        gm.graph.lint()
