"""torch.export -> core ATen -> edge graph, with every tensor described by a spec.

``lower(model, args)`` returns an ``EdgeMethod``: the rewritten FX graph plus
what the emitter needs to know about its placeholders and outputs. The steps
are ExecuTorch's (``to_edge`` then the graph part of ``to_executorch``): the
core ATen decomposition table (plus ``linalg_vector_norm``), the edge passes,
write-back copies for mutated buffers, static views, spec propagation.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
from torch._decomp import get_decompositions
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from pyruntime.exporter import executorch_passes, passes
from pyruntime.exporter.errors import ExportError, node_error
from pyruntime.exporter.outvariants import memory_view
from pyruntime.exporter.specs import TensorSpec, spec_from_value, tensor_bytes


@dataclass
class EdgeMethod:
    name: str
    gm: torch.fx.GraphModule
    in_spec: object  # pytree TreeSpec of (args, kwargs)
    out_spec: object
    user_inputs: list  # placeholder nodes, in call order
    user_outputs: list  # nodes or Python constants, in return order
    mutable: dict = field(default_factory=dict)  # placeholder -> fqn of mutated buffers


def decomposition_table():
    table = torch.export.default_decompositions()
    table.update(get_decompositions([torch.ops.aten.linalg_vector_norm.default]))
    return table


def trace(model, args, kwargs=None, dynamic_shapes=None, strict=False) -> ExportedProgram:
    if isinstance(model, ExportedProgram):
        return model
    if not isinstance(args, tuple):
        args = (args,) if not isinstance(args, list) else tuple(args)
    with torch.no_grad():
        return torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                                   strict=strict)


def lower(model, args, kwargs=None, dynamic_shapes=None, name="forward",
          strict=False, fold_constants=False) -> EdgeMethod:
    ep = trace(model, args, kwargs, dynamic_shapes, strict)
    ep = ep.run_decompositions(decomposition_table())
    ep = _remove_auto_functionalized(ep)
    gm = ep.graph_module
    _check_supported(gm)
    passes.run_edge_passes(gm)
    method = _bind_signature(ep, name)
    executorch_passes.run_executorch_passes(gm, fold=fold_constants)
    for sub in passes.graph_modules(gm):
        propagate_specs(sub)
    return method


def _remove_auto_functionalized(ep: ExportedProgram) -> ExportedProgram:
    """Mutating custom ops (e.g. a KV-cache update) mutate their inputs again, as in
    ExecuTorch's ``to_executorch``."""
    hops = (torch.ops.higher_order.auto_functionalized,
            torch.ops.higher_order.auto_functionalized_v2)
    if not any(n.target in hops for n in ep.graph.nodes if n.op == "call_function"):
        return ep
    from torch.export._remove_auto_functionalized_pass import (
        unsafe_remove_auto_functionalized_pass)
    return unsafe_remove_auto_functionalized_pass(ep)


def _check_supported(root):
    for gm in passes.graph_modules(root):
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target in (
                    torch.ops.higher_order.while_loop, torch.ops.higher_order.map_impl,
                    torch.ops.higher_order.scan):
                raise node_error(node, "this control-flow operator is not supported by the "
                                       "exporter (only torch.cond is)")
            if node.op in ("call_module", "call_method"):
                raise node_error(node, f"unexpected {node.op} node after torch.export")


def _bind_signature(ep: ExportedProgram, name: str) -> EdgeMethod:
    gm = ep.graph_module
    sig = ep.graph_signature
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    by_name = {n.name: n for n in placeholders}
    user_inputs = []
    for spec, node in zip(sig.input_specs, placeholders):
        kind = spec.kind
        if kind == InputKind.USER_INPUT:
            user_inputs.append(node)
            node.meta["io"] = "input"
        elif kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            tensor = ep.state_dict.get(spec.target)
            if tensor is None:
                tensor = ep.constants.get(spec.target)
            if not isinstance(tensor, torch.Tensor):
                raise node_error(node, f"constant {spec.target!r} is not a tensor")
            node.meta["const"] = tensor.detach()
            node.meta["fqn"] = spec.target
            node.meta["io"] = "parameter" if kind == InputKind.PARAMETER else "buffer"
        else:
            raise node_error(node, f"graph input of kind {kind.name} is not supported")

    mutated: dict[int, torch.fx.Node] = {}
    mutable: dict = {}
    for i, spec in enumerate(sig.output_specs):
        if spec.kind == OutputKind.USER_OUTPUT:
            continue
        if spec.kind == OutputKind.BUFFER_MUTATION:
            target = _buffer_node(sig, by_name, spec.target)
            target.meta["init"] = target.meta.pop("const", None)
            target.meta["io"] = "mutable"
            mutable[target] = spec.target
            mutated[i] = target
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            mutated[i] = by_name[spec.target]
        else:
            raise ExportError(f"graph output of kind {spec.kind.name} ({spec.arg}) is not "
                              "supported")
    user_outputs = executorch_passes.insert_write_back(gm, mutated)
    gm.graph.eliminate_dead_code()
    return EdgeMethod(name, gm, ep.call_spec.in_spec, ep.call_spec.out_spec, user_inputs,
                      user_outputs, mutable)


def _buffer_node(sig, by_name, fqn):
    for input_name, buffer in sig.inputs_to_buffers.items():
        if buffer == fqn:
            return by_name[input_name]
    raise ExportError(f"mutated buffer {fqn!r} has no placeholder")


def propagate_specs(gm: torch.fx.GraphModule) -> None:
    """Give every node a ``meta['spec']`` (TensorSpec, tuple of them, or scalar)."""
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        val = node.meta.get("val")
        if node.op == "get_attr":
            attr = getattr(gm, node.target)
            if isinstance(attr, torch.Tensor):
                node.meta["spec"] = TensorSpec(attr.shape, attr.dtype, const=True,
                                               data=attr.detach())
            continue
        if node.op == "placeholder" and "const" in node.meta:
            t = node.meta["const"]
            node.meta["spec"] = TensorSpec(t.shape, t.dtype, const=True, data=t,
                                           fqn=node.meta["fqn"],
                                           requires_grad=node.meta["io"] == "parameter")
            continue
        if node.op == "call_function" and node.target is operator.getitem:
            parent = node.args[0].meta.get("spec")
            if isinstance(parent, tuple):
                node.meta["spec"] = parent[node.args[1]]
                continue
        if node.op == "call_function" and node.target == torch.ops.aten.copy_.default:
            node.meta["spec"] = node.args[0].meta["spec"]
            continue
        if val is None:
            raise node_error(node, "node has no example value (meta['val'])")
        spec = spec_from_value(val, node)
        init = node.meta.get("init")
        if node.op == "placeholder" and init is not None and bool(torch.any(init != 0)):
            spec.init_data = tensor_bytes(init)  # non-zero initial state of a mutable buffer
        if node.op == "call_function" and node.target is memory_view:
            base = node.args[0].meta["spec"]
            if spec.dynamism != base.dynamism or spec.nbytes != base.nbytes:
                node.target = torch.ops.aten.view_copy.default  # cannot alias; copy instead
            else:
                spec.base = base
                spec.const = base.const
        node.meta["spec"] = spec
