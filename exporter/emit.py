"""Emission: planned edge graphs -> Program tables (values, instructions, operators).

``ProgramEmitter`` holds what methods share (the constant table, de-duplicated
by SHA-256 of the bytes; initial states of mutable buffers; external weights).
``MethodEmitter`` walks one graph in node order, the way ExecuTorch's emitter
does (spec 2.5, 4.8, 4.10): placeholders first, then per node its out tensors,
its literal arguments in schema order and one instruction.
"""
from __future__ import annotations

import hashlib
import operator

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten, treespec_dumps

from pyruntime.exporter.errors import node_error
from pyruntime.exporter.outvariants import ET_VIEW, PRIM_OPS, kernel_for, memory_view, schema_arguments
from pyruntime.exporter.specs import SCALAR_TYPE, STATIC, TensorSpec, tensor_bytes

NULL, INT, BOOL, DOUBLE, TENSOR, STRING, INT_LIST, DOUBLE_LIST, BOOL_LIST, TENSOR_LIST, \
    OPT_TENSOR_LIST = range(1, 12)
KERNEL_CALL, DELEGATE_CALL, MOVE_CALL, JUMP_FALSE_CALL, FREE_CALL = range(1, 6)
EXTERNAL = 1

_LAYOUT = {torch.strided: 0, torch.sparse_coo: 1}
_MEMORY_FORMAT = {torch.contiguous_format: 0, torch.preserve_format: 1}


class ProgramEmitter:
    """Tables shared by every method of one program."""

    def __init__(self, external_constants: bool = False):
        self.constants: list[bytes] = [b""]
        self._const_index: dict[str, int] = {}
        self.mutable: list[bytes] = [b""]
        self.external_constants = external_constants
        self.external: dict[str, tuple[bytes, dict]] = {}  # fqn -> (bytes, layout)

    def constant(self, data: bytes) -> int:
        key = hashlib.sha256(data).hexdigest()
        if key not in self._const_index:
            self._const_index[key] = len(self.constants)
            self.constants.append(data)
        return self._const_index[key]

    def external_index(self, spec: TensorSpec) -> int:
        if spec.fqn not in self.external:
            layout = {"scalar_type": SCALAR_TYPE[spec.dtype], "sizes": list(spec.shape),
                      "dim_order": list(spec.dim_order)}
            self.external[spec.fqn] = (tensor_bytes(spec.data), layout)
        return list(self.external).index(spec.fqn)

    def mutable_state(self, data: bytes) -> int:
        self.mutable.append(data)
        return len(self.mutable) - 1


class MethodEmitter:
    def __init__(self, program: ProgramEmitter, method, sizes: list[int]):
        self.program = program
        self.method = method
        self.sizes = sizes
        self.values: list[dict] = []
        self.operators: list[dict] = []
        self._op_index: dict[tuple[str, str], int] = {}
        self.instructions: list[dict] = []
        self.env: dict = {}  # fx node -> value index / tuple of them / literal
        self._spec_value: dict[int, int] = {}

    # ---- values -------------------------------------------------------------
    def _value(self, code: int, table: dict | None = None) -> int:
        self.values.append({"val": (code, table or {})})
        return len(self.values) - 1

    def _tensor_table(self, spec: TensorSpec) -> dict:
        t = {"scalar_type": SCALAR_TYPE[spec.dtype], "sizes": list(spec.shape),
             "dim_order": list(spec.dim_order), "requires_grad": spec.requires_grad,
             "shape_dynamism": spec.dynamism}
        store = spec.storage
        if store.const:
            if store.external:
                t["extra_tensor_info"] = {"fully_qualified_name": store.fqn, "location": EXTERNAL}
                t["data_buffer_idx"] = self.program.external_index(store)
            else:
                t["data_buffer_idx"] = self.program.constant(tensor_bytes(store.data))
        elif store.mem_id is not None:
            off = store.mem_offset
            t["allocation_info"] = {"memory_id": store.mem_id,
                                    "memory_offset_low": off & 0xFFFFFFFF,
                                    "memory_offset_high": off >> 32}
            if store.init_data is not None and spec is store:
                t["data_buffer_idx"] = self.program.mutable_state(store.init_data)
        return t

    def tensor(self, spec: TensorSpec) -> int:
        """The value of ``spec``; one value per spec object."""
        key = id(spec)
        if key not in self._spec_value:
            self._spec_value[key] = self._value(TENSOR, self._tensor_table(spec))
        return self._spec_value[key]

    def spec_values(self, spec):
        if isinstance(spec, tuple):
            return tuple(self.spec_values(s) for s in spec)
        if isinstance(spec, TensorSpec):
            return self.tensor(spec)
        return self.literal(spec)

    def literal(self, v, typ=None) -> int:
        if v is None:
            if isinstance(typ, torch.TensorType):  # non-optional Tensor given None
                return self._value(TENSOR, {"scalar_type": 0, "sizes": [0], "dim_order": [0]})
            return self._value(NULL)
        if isinstance(v, torch.fx.Node):
            idx = self.env[v]
            if isinstance(idx, tuple):
                raise node_error(v, "a multi-output value is used as a single argument")
            return idx
        if isinstance(v, (list, tuple)):
            return self._list(v, typ)
        if isinstance(v, bool):
            return self._value(BOOL, {"bool_val": v})
        if isinstance(v, int):
            return self._value(INT, {"int_val": v})
        if isinstance(v, float):
            return self._value(DOUBLE, {"double_val": v})
        if isinstance(v, str):
            return self._value(STRING, {"string_val": v})
        if isinstance(v, torch.dtype):
            return self._value(INT, {"int_val": SCALAR_TYPE[v]})
        if isinstance(v, torch.layout):
            return self._value(INT, {"int_val": _LAYOUT[v]})
        if isinstance(v, torch.memory_format):
            return self._value(INT, {"int_val": _MEMORY_FORMAT[v]})
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise ValueError(f"unbound symbolic value {v}")
        raise ValueError(f"unsupported constant of type {type(v).__name__}: {v!r}")

    def _list(self, items, typ) -> int:
        elem = typ.getElementType() if isinstance(typ, torch.ListType) else None
        if isinstance(typ, torch.OptionalType):
            inner = typ.getElementType()
            elem = inner.getElementType() if isinstance(inner, torch.ListType) else None
        if elem is None:
            elem = _guess_elem_type(items)
        if isinstance(elem, torch.OptionalType) and \
                isinstance(elem.getElementType(), torch.TensorType):
            return self._value(OPT_TENSOR_LIST, {
                "items": [-1 if x is None else self.literal(x) for x in items]})
        if isinstance(elem, torch.TensorType):
            return self._value(TENSOR_LIST, {"items": [self.literal(x) for x in items]})
        if isinstance(elem, torch.FloatType):
            return self._value(DOUBLE_LIST, {"items": [float(x) for x in items]})
        if isinstance(elem, torch.BoolType):
            return self._value(BOOL_LIST, {"items": [bool(x) for x in items]})
        return self._value(INT_LIST, {"items": [self.literal(x) for x in items]})

    # ---- instructions ---------------------------------------------------------
    def _op(self, name: str, overload: str) -> int:
        key = (name, overload)
        if key not in self._op_index:
            self._op_index[key] = len(self.operators)
            self.operators.append({"name": name, "overload": overload})
        return self._op_index[key]

    def _kernel_call(self, name, overload, args):
        self.instructions.append({"instr_args": (KERNEL_CALL, {
            "op_index": self._op(name, overload), "args": list(args)})})

    def _move(self, src: int, dst: int):
        self.instructions.append({"instr_args": (MOVE_CALL, {"move_from": src, "move_to": dst})})

    def _jump_false(self, cond: int) -> dict:
        table = {"cond_value_index": cond, "destination_instruction": -1}
        self.instructions.append({"instr_args": (JUMP_FALSE_CALL, table)})
        return table

    # ---- graph walk ---------------------------------------------------------
    def emit_method(self) -> dict:
        m = self.method
        self.emit_graph(m.gm, None)
        inputs = [self.env[n] for n in m.user_inputs]
        outputs = []
        for o in m.user_outputs:
            outputs.append(self.env[o] if isinstance(o, torch.fx.Node) else self.literal(o))
        return {
            "name": m.name,
            "container_meta_type": {"encoded_inp_str": _dump_spec(m.in_spec),
                                    "encoded_out_str": _dump_spec(m.out_spec)},
            "values": self.values, "inputs": inputs, "outputs": outputs,
            "chains": [{"inputs": [], "outputs": [], "instructions": self.instructions}],
            "operators": self.operators, "delegates": [],
            "non_const_buffer_sizes": list(self.sizes),
        }

    def emit_graph(self, gm, bindings: list | None):
        """Emit ``gm``'s nodes; ``bindings`` gives a cond branch's placeholder values.

        Returns the value indices of the graph's outputs.
        """
        placeholder_i = 0
        for node in gm.graph.nodes:
            try:
                if node.op == "placeholder":
                    if bindings is None and not node.users and node.meta.get("io") in (
                            "parameter", "buffer"):
                        placeholder_i += 1  # an unused weight (e.g. folded away)
                        continue
                    if bindings is not None:
                        self.env[node] = bindings[placeholder_i]
                    else:
                        spec = node.meta.get("spec")
                        self.env[node] = self.spec_values(spec) if spec is not None \
                            else self.literal(node.meta.get("val"))
                    placeholder_i += 1
                elif node.op == "get_attr":
                    spec = node.meta.get("spec")
                    if isinstance(spec, TensorSpec):
                        self.env[node] = self.tensor(spec)
                elif node.op == "call_function":
                    self.env[node] = self._call(gm, node)
                elif node.op == "output":
                    return [self.env[n] if isinstance(n, torch.fx.Node) else self.literal(n)
                            for n in node.args[0]]
            except ValueError as e:
                raise node_error(node, str(e)) from e
        return []

    def _call(self, gm, node):
        target = node.target
        if target is operator.getitem:
            return self.env[node.args[0]][node.args[1]]
        if target is memory_view:
            spec = node.meta["spec"]
            planned = spec.storage.mem_id is not None or spec.storage.const
            if spec.dynamism == STATIC and planned:
                return self.tensor(spec)  # same memory as the base: no instruction
            args = [self.literal(node.args[0]), self.literal(node.args[1],
                                                             torch.ListType.ofInts())]
            out = self.tensor(spec)
            self._kernel_call(ET_VIEW.name, ET_VIEW.overload, args + [out])
            return out
        if target is torch.ops.higher_order.cond:
            return self._cond(gm, node)
        kernel = kernel_for(target)
        if kernel is None:
            raise node_error(node, "this operator has no out variant that the ExecuTorch "
                                   "runtime can run")
        if kernel.kind == "sym":
            return self._sym(node, kernel)
        if kernel.kind == "inplace":
            args = [self.literal(v, a.type)
                    for a, v in schema_arguments(kernel.schema, node.args, node.kwargs)]
            mutated = self.literal(node.args[0])
            self._kernel_call(kernel.name, kernel.overload, args + [mutated])
            return mutated
        outs = self.spec_values(node.meta["spec"])
        out_list = list(outs) if isinstance(outs, tuple) else [outs]
        names = [a.name for a in target._schema.arguments]
        args, k, list_out = [], 0, False
        for a, v in schema_arguments(kernel.schema, node.args, node.kwargs, names):
            if not a.is_out:
                args.append(self.literal(v, a.type))
            elif isinstance(a.type, torch.ListType):  # Tensor(a!)[] out: all results
                args.append(self._value(TENSOR_LIST, {"items": out_list[k:]}))
                k, list_out = len(out_list), True
            elif k < len(out_list):
                args.append(out_list[k])
                k += 1
            else:
                raise node_error(node, f"{kernel.full_name} has more out arguments than the "
                                       "node has results")
        if len(out_list) == 1 and not list_out:
            ret = out_list[0]
        else:
            ret = self._value(TENSOR_LIST, {"items": out_list})
        self._kernel_call(kernel.name, kernel.overload, args + [ret])
        return outs

    def _sym(self, node, kernel):
        if node.target in PRIM_OPS:
            args = [self.literal(v) for v in node.args]
        else:
            args = [self.literal(v, a.type)
                    for a, v in schema_arguments(kernel.schema, node.args, node.kwargs)]
        val = node.meta.get("val")
        if isinstance(val, (torch.SymBool, bool)):
            ret = self._value(BOOL, {"bool_val": False})
        elif isinstance(val, (torch.SymFloat, float)):
            ret = self._value(DOUBLE, {"double_val": 0.0})
        else:
            ret = self._value(INT, {"int_val": 0})
        self._kernel_call(kernel.name, kernel.overload, args + [ret])
        return ret

    def _cond(self, gm, node):
        pred, true_node, false_node, operands = node.args
        results = self.spec_values(node.meta["spec"])
        result_list = list(results) if isinstance(results, tuple) else [results]
        bindings = [self.literal(o) for o in operands]
        pred_value = self.literal(pred)

        skip_true = self._jump_false(pred_value)
        outs = self.emit_graph(getattr(gm, true_node.target), bindings)
        self._bind_results(outs, result_list)
        false_const = self._value(BOOL, {"bool_val": False})
        skip_false = self._jump_false(false_const)
        skip_true["destination_instruction"] = len(self.instructions)
        outs = self.emit_graph(getattr(gm, false_node.target), bindings)
        self._bind_results(outs, result_list)
        skip_false["destination_instruction"] = len(self.instructions)
        return results

    def _bind_results(self, outs, results):
        for src, dst in zip(outs, results):
            if src != dst:
                self._move(src, dst)


def _dump_spec(spec) -> str:
    """The pytree spec as JSON; containers pytree cannot name (e.g. the named tuple
    of ``torch.max``) are written as plain tuples."""
    try:
        return treespec_dumps(spec)
    except (NotImplementedError, TypeError):
        leaves = [0] * spec.num_leaves
        return treespec_dumps(tree_flatten(_as_tuples(tree_unflatten(leaves, spec)))[1])


def _as_tuples(x):
    if isinstance(x, tuple):
        return tuple(_as_tuples(v) for v in x)
    if isinstance(x, list):
        return [_as_tuples(v) for v in x]
    if isinstance(x, dict):
        return {k: _as_tuples(v) for k, v in x.items()}
    return x


def _guess_elem_type(items):
    for x in items:
        if isinstance(x, torch.fx.Node):
            v = x.meta.get("val")
            if isinstance(v, torch.Tensor):
                return torch.TensorType.get()
            return torch.IntType.get()
        if isinstance(x, bool):
            return torch.BoolType.get()
        if isinstance(x, float):
            return torch.FloatType.get()
    return torch.IntType.get()
