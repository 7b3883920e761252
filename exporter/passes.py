"""Graph rewrites from core ATen to the edge operator set ExecuTorch's runtime expects.

Each pass edits an FX graph in place, in the order ExecuTorch's ``to_edge`` /
``to_executorch`` apply the same rewrites, so the resulting graph (and hence
the memory plan) matches the one ExecuTorch would build:

asserts removed; views -> ``*_copy`` ops; Python scalars passed as tensors ->
constant tensors; SymInts passed as tensors -> ``scalar_tensor``; no-op slices /
casts removed; mixed-dtype arithmetic gets explicit casts; ``_to_copy`` /
``clone`` / ``empty`` -> ``dim_order_ops``. The passes of ``to_executorch``
(write-back copies, static views) are in ``executorch_passes.py``.
"""
from __future__ import annotations

import operator

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as PROMO
from torch._prims_common import elementwise_dtypes

from pyruntime.exporter.errors import node_error
from pyruntime.exporter.outvariants import (CLONE_DIM_ORDER, EMPTY_DIM_ORDER, TO_DIM_ORDER_COPY,
                                  ExternalOp)

aten = torch.ops.aten


def graph_modules(gm: torch.fx.GraphModule):
    """``gm`` and, recursively, the submodules its control-flow nodes call."""
    yield gm
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            sub = getattr(gm, node.target, None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from graph_modules(sub)


def _ops(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and isinstance(n.target, (torch._ops.OpOverload, ExternalOp))]


def _rewrite_args(node, fn):
    """Apply ``fn(argument, value) -> value`` to every schema argument of ``node``."""
    schema = node.target._schema
    new_args, new_kwargs = list(node.args), dict(node.kwargs)
    for i, a in enumerate(schema.arguments):
        if a.name in node.kwargs:
            new_kwargs[a.name] = fn(a, node.kwargs[a.name])
        elif not a.kwarg_only and i < len(node.args):
            new_args[i] = fn(a, node.args[i])
    node.args, node.kwargs = tuple(new_args), new_kwargs


# ----------------------------------------------------------------- views


def views_to_copies(gm):
    changed = set()
    for node in _ops(gm):
        op = node.target
        if isinstance(op, torch._ops.OpOverload) and op._schema.name.startswith("aten::") \
                and op.is_view:
            name = op._schema.name.split("::")[1]
            packet = getattr(aten, f"{name}_copy", None)
            overload = op._overloadname
            if packet is None or not hasattr(packet, overload):
                raise node_error(node, f"view op {op} has no *_copy variant")
            node.target = getattr(packet, overload)
            changed.add(node)
    refresh_layouts(gm, changed)


def _is_static(v) -> bool:
    if isinstance(v, torch.Tensor):
        return all(isinstance(s, int) for s in v.shape)
    if isinstance(v, (list, tuple)):
        return all(_is_static(x) for x in v)
    return not isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _contiguous_like(v):
    return torch.empty(v.shape, dtype=v.dtype, device=v.device)


def refresh_layouts(gm, changed: set):
    """``*_copy`` results are contiguous where the views were not: recompute the
    example values of ``changed`` nodes and of everything downstream (as
    ExecuTorch's re-tracing does). Static shapes are re-run on fake tensors;
    symbolic ones (where re-running could specialize a dynamic size) just become
    contiguous."""
    vals = [n.meta.get("val") for n in gm.graph.nodes]
    fake_mode = torch._guards.detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    if fake_mode is None or not changed:
        return
    fakes: dict = {}

    def val(v):
        if not isinstance(v, torch.fx.Node):
            return v
        x = v.meta.get("val")
        if isinstance(x, torch.Tensor) and not isinstance(x, torch._subclasses.FakeTensor):
            if id(x) not in fakes:
                fakes[id(x)] = fake_mode.from_tensor(x)
            return fakes[id(x)]
        return x

    with fake_mode:
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            inputs = _flat_inputs(node)
            if node not in changed and not any(i in changed for i in inputs):
                continue
            old = node.meta.get("val")
            if node.target is operator.getitem:
                parent = node.args[0].meta.get("val")
                new = parent[node.args[1]] if isinstance(parent, (list, tuple)) else old
            elif isinstance(node.target, torch._ops.OpOverload) and _is_tensors(old):
                if _is_static(old) and all(_is_static(i.meta.get("val")) for i in inputs):
                    try:
                        new = node.target(*torch.fx.node.map_aggregate(node.args, val),
                                          **torch.fx.node.map_aggregate(node.kwargs, val))
                    except Exception:  # keep the traced value
                        new = old
                elif isinstance(old, torch.Tensor):
                    new = old if old.is_contiguous() else _contiguous_like(old)
                else:
                    new = old
            else:
                continue
            if new is not old:
                node.meta["val"] = new
                changed.add(node)


def _is_tensors(v) -> bool:
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, torch.Tensor) for x in v)
    return isinstance(v, torch.Tensor)


def _flat_inputs(node) -> list:
    out = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: out.append(n))
    return out


# ----------------------------------------------------------------- scalars


def _constant_node(gm, node, tensor: torch.Tensor):
    """A get_attr node for a new constant tensor, placed before ``node``."""
    i = 0
    while hasattr(gm, f"_lifted_tensor_constant{i}"):
        i += 1
    name = f"_lifted_tensor_constant{i}"
    gm.register_buffer(name, tensor)
    with gm.graph.inserting_before(node):
        c = gm.graph.get_attr(name)
    c.meta["val"] = tensor
    return c


def scalars_to_tensors(gm):
    """A Python number passed where the schema wants a Tensor becomes a constant tensor."""
    for node in _ops(gm):
        def coerce(a, v, node=node):
            if isinstance(a.type, torch.TensorType) and isinstance(v, (bool, int, float)):
                return _constant_node(gm, node, torch.tensor(v))
            return v
        _rewrite_args(node, coerce)


def syms_to_tensors(gm):
    """A SymInt/SymFloat/SymBool passed where a Tensor is expected goes through scalar_tensor."""
    kinds = {torch.SymInt: torch.int32, torch.SymFloat: torch.float32, torch.SymBool: torch.bool}
    for node in _ops(gm):
        def coerce(a, v, node=node):
            if isinstance(a.type, torch.TensorType) and isinstance(v, torch.fx.Node) \
                    and type(v.meta.get("val")) in kinds:
                dtype = kinds[type(v.meta["val"])]
                with gm.graph.inserting_before(node):
                    t = gm.graph.call_function(aten.scalar_tensor.default, (v,),
                                               {"dtype": dtype})
                t.meta["val"] = torch.empty((), dtype=dtype)
                t.meta["stack_trace"] = node.meta.get("stack_trace")
                return t
            return v
        _rewrite_args(node, coerce)


# ----------------------------------------------------------------- no-ops and casts


def _same_static_shape(a, b) -> bool:
    return all(isinstance(s, int) for s in list(a.shape) + list(b.shape)) and a.shape == b.shape


def remove_noops(gm):
    for node in _ops(gm):
        src = node.args[0] if node.args else None
        if not isinstance(src, torch.fx.Node):
            continue
        a, b = src.meta.get("val"), node.meta.get("val")
        drop = a is b and node.target in (aten.slice_copy.Tensor,)
        if node.target == aten.slice_copy.Tensor and _same_static_shape(a, b):
            drop = True
        if node.target == aten._to_copy.default and a.dtype == b.dtype \
                and a.device == b.device and a.shape == b.shape and a.stride() == b.stride():
            drop = True
        if drop:
            node.replace_all_uses_with(src)
            gm.graph.erase_node(node)


_PROMOTION = {
    aten.add.Tensor: PROMO.DEFAULT, aten.mul.Tensor: PROMO.DEFAULT, aten.sub.Tensor: PROMO.DEFAULT,
    aten.div.Tensor: PROMO.INT_TO_FLOAT, aten.div.Tensor_mode: PROMO.DEFAULT,
    aten.minimum.default: PROMO.DEFAULT,
}


def _val(v):
    return v.meta.get("val") if isinstance(v, torch.fx.Node) else v


def mixed_types_to_casts(gm):
    """Binary arithmetic on mixed dtypes gets explicit casts to the promoted dtype."""
    for node in _ops(gm):
        kind = _PROMOTION.get(node.target)
        if kind is None or len(node.args) <= 1:
            continue
        if node.target == aten.div.Tensor_mode and node.kwargs.get("rounding_mode") is None:
            kind = PROMO.INT_TO_FLOAT
        vals = [_val(a) for a in node.args]
        vals = [torch.tensor(v) if isinstance(v, (torch.SymInt, torch.SymFloat)) else v
                for v in vals]
        dtype = elementwise_dtypes(*vals, type_promotion_kind=kind)[1]

        def coerce(a, v, node=node, dtype=dtype):
            if not isinstance(a.type, torch.TensorType) or not isinstance(v, torch.fx.Node):
                return v
            val = v.meta.get("val")
            if not isinstance(val, torch.Tensor) or val.dtype == dtype:
                return v
            with gm.graph.inserting_before(node):
                c = gm.graph.call_function(aten._to_copy.default, (v,), {"dtype": dtype})
            c.meta["val"] = val.to(dtype)
            c.meta["stack_trace"] = node.meta.get("stack_trace")
            return c
        _rewrite_args(node, coerce)


# ----------------------------------------------------------------- dim order ops


def memory_format_to_dim_order(gm):
    table = {aten._to_copy.default: TO_DIM_ORDER_COPY, aten.clone.default: CLONE_DIM_ORDER,
             aten.empty.memory_format: EMPTY_DIM_ORDER}
    for node in _ops(gm):
        new = table.get(node.target)
        if new is None:
            continue
        kwargs = dict(node.kwargs)
        fmt = kwargs.pop("memory_format", torch.preserve_format)
        val = node.meta["val"]
        if fmt in (None, torch.preserve_format):
            src = _val(node.args[0])
            ref = src if isinstance(src, torch.Tensor) else val
            dim_order = [int(d) for d in ref.dim_order()]
        elif fmt == torch.contiguous_format:
            dim_order = list(range(val.dim()))
        elif fmt == torch.channels_last:
            dim_order = [0, 2, 3, 1]
        else:
            raise node_error(node, f"memory format {fmt} is not supported")
        kwargs["dim_order"] = dim_order
        node.target, node.kwargs = new, kwargs


_ASSERTS = (aten._assert_tensor_metadata.default, aten._assert_scalar.default,
            aten._assert_async.default, aten._assert_async.msg,
            aten.sym_constrain_range_for_size.default, aten.sym_constrain_range.default,
            aten._functional_assert_async.msg)


def remove_asserts(gm):
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _ASSERTS and not node.users:
            gm.graph.erase_node(node)


def dead_code(gm):
    gm.graph.eliminate_dead_code()


EDGE_PASSES = [remove_asserts, views_to_copies, scalars_to_tensors, syms_to_tensors, remove_noops,
               mixed_types_to_casts, memory_format_to_dim_order, dead_code]


def run_edge_passes(root: torch.fx.GraphModule) -> None:
    for gm in list(graph_modules(root)):
        for p in EDGE_PASSES:
            p(gm)
        gm.graph.lint()
