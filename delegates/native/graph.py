"""An ``NPTG`` payload read into a plan the bridge runs: values by name, calls in order.

``read_program`` checks the identifier and reads the flatbuffer with our bounds-checked
reader; ``build_graph`` resolves every node once, at load: its target to a kernel
(``ops.resolve``), each argument to a reference (a value name, an int produced in the
graph) or a literal, and each output to its tensor metadata. Anything the bridge cannot
run (an unknown op, a value used before it is made, an unbounded dynamic tensor) is an
``ExecuTorchError`` naming the node, its op and the argument.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.flatbuf import Node, Reader, read_table
from pyruntime.delegates.native import schema as S
from pyruntime.delegates.native.ops import resolve
from pyruntime.delegates.native.records import Ref, TensorSpec

BACKEND = "NativeBackend"
MAX_DEPTH = 16  # nested cond subgraphs


def payload_error(msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidProgram, f"{BACKEND}: malformed payload: {msg}")


@dataclass(frozen=True, slots=True)
class Call:
    """One ``call_function`` node, resolved: ``op`` runs it with ``args`` (literals and
    ``Ref``s, in the op's order) into ``outs`` (value names, in return order)."""
    node: str
    target: str
    op: object  # ops.Op
    args: tuple
    outs: tuple
    mutated: tuple  # (name of a mutated input, name of the output that carries it)


@dataclass(slots=True)
class Graph:
    inputs: list
    outputs: list
    calls: list
    tensors: dict  # name -> TensorSpec
    placeholders: list = field(default_factory=list)


@dataclass(slots=True)
class Constant:
    name: str
    data_key: str
    spec: TensorSpec
    mutated: bool


@dataclass(slots=True)
class NativeMethod:
    name: str
    graph: Graph
    constants: list
    user_outputs: list  # names, in graph output order, the DelegateCall receives
    buffer_updates: dict  # output value name -> the buffer's placeholder name
    input_updates: dict  # output value name -> the user input it writes back
    mutable_buffers: list  # placeholder names of zero-initialised state


def read_program(blob) -> Node:
    r = Reader(blob, ErrorCode.InvalidProgram, f"{BACKEND} payload")
    if len(blob) >= 8 and bytes(blob[4:8]) != S.IDENTIFIER:
        raise payload_error(f"file identifier {bytes(blob[4:8])!r}, expected {S.IDENTIFIER!r}")
    try:
        return read_table(r.root(S.IDENTIFIER), "Program", S.SCHEMA)
    except RecursionError:
        raise payload_error("subgraphs nested too deep") from None


def tensor_spec(name: str, meta, where: str) -> TensorSpec:
    if meta is None:
        raise payload_error(f"{where}: tensor {name!r} has no metadata")
    try:
        to_numpy_dtype(meta.dtype)
    except (ExecuTorchError, KeyError, ValueError):
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: {where}: tensor {name!r} has scalar type "
                              f"{meta.dtype}, which the bridge cannot hold") from None
    if meta.quant is not None and meta.quant.scheme[0]:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: {where}: tensor {name!r} is quantized "
                              f"({meta.quant.scheme[1]._kind}); the bridge runs float and "
                              "integer graphs only")
    sizes, dynamic = [], False
    for i, d in enumerate(meta.sizes or []):
        if d.max < 0:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: {where}: tensor {name!r} dimension {i} is "
                                  "unbounded; the bridge needs an upper bound to hold it")
        if d.min < 0 or d.min > d.max:
            raise payload_error(f"{where}: tensor {name!r} dimension {i} range "
                                f"[{d.min}, {d.max}]")
        dynamic |= d.min != d.max
        sizes.append(d.max)
    order = tuple(meta.dim_order or range(len(sizes)))
    if sorted(order) != list(range(len(sizes))):
        raise payload_error(f"{where}: tensor {name!r} dim_order {list(order)} is not a "
                            f"permutation of its {len(sizes)} dimensions")
    return TensorSpec(name, int(meta.dtype), tuple(sizes), order, dynamic)


def _argument(a, where: str, depth: int):
    """A NamedArgument's value: a literal, a Ref, a list of either, or a Graph."""
    if a.arg is None:
        raise payload_error(f"{where}: argument without a value")
    code, v = a.arg.value
    kind = S.ARG_TYPES.get(code)
    if kind is None or (v is None and kind != "NoneArg"):
        raise payload_error(f"{where}: argument of union type {code} without a value")
    if kind == "TensorArg":
        return Ref(_required(v.name, where))
    if kind == "NoneArg":
        return None
    if kind in ("IntArg", "FloatArg", "BoolArg"):
        return Ref(v.ref) if v.ref else v.value
    if kind == "StringArg":
        return v.value
    if kind == "ScalarTypeArg":
        return int(v.value)
    if kind == "IntListArg":
        vals = v.values or []
        refs = v.refs or []
        if refs and len(refs) != len(vals):
            raise payload_error(f"{where}: {len(vals)} ints but {len(refs)} refs")
        return [Ref(refs[i]) if refs and refs[i] else x for i, x in enumerate(vals)]
    if kind in ("FloatListArg", "BoolListArg"):
        return list(v.values or [])
    if kind == "TensorListArg":
        return [Ref(_required(n, where)) for n in v.names or []]
    if kind == "OptionalTensorListArg":
        names, has = v.names or [], v.has_value or []
        if len(names) != len(has):
            raise payload_error(f"{where}: {len(names)} names but {len(has)} has_value flags")
        return [Ref(_required(n, where)) if h else None for n, h in zip(names, has)]
    if kind == "GraphArg":
        if depth >= MAX_DEPTH:
            raise payload_error(f"{where}: subgraphs nested deeper than {MAX_DEPTH}")
        return build_graph(v.graph, f"{where}.{v.name}", depth + 1)
    raise payload_error(f"{where}: argument kind {kind}")


def _required(name, where: str) -> str:
    if not name:
        raise payload_error(f"{where}: a value reference without a name")
    return name


def _refs(value):
    if isinstance(value, Ref):
        yield value.name
    elif isinstance(value, list):
        for x in value:
            if isinstance(x, Ref):
                yield x.name


def build_graph(g, where: str, depth: int = 0, held: dict | None = None) -> Graph:
    """``held``: specs of the tensors the method binds (constants), for the ops' checks."""
    if g is None or g.nodes is None:
        raise payload_error(f"{where}: graph without nodes")
    tensors = {}
    for tv in g.tensor_values or []:
        name = _required(tv.name, where)
        tensors[name] = tensor_spec(name, tv.meta, where)
    known = set()
    calls, placeholders, outputs = [], [], None
    for i, n in enumerate(g.nodes):
        nwhere = f"{where} node {i} ({n.name!r})"
        if n.op_kind == S.OP_PLACEHOLDER:
            known.add(_required(n.name, nwhere))
            placeholders.append(n.name)
            continue
        if n.op_kind == S.OP_OUTPUT:
            continue
        if n.op_kind != S.OP_CALL:
            raise payload_error(f"{nwhere}: op kind {n.op_kind}")
        names = [a.name or "" for a in n.inputs or []]
        args = [_argument(a, f"{nwhere} argument {a.name or j!r}", depth)
                for j, a in enumerate(n.inputs or [])]
        for a, nm in zip(args, names):
            for ref in _refs(a):
                if ref not in known:
                    raise payload_error(f"{nwhere} ({n.target}): argument {nm!r} refers to "
                                        f"{ref!r}, which no earlier node makes")
        outs = []
        for o in n.outputs or []:
            if o.kind == S.OUT_TENSOR_LIST:
                outs.append(tuple(o.names or []))
            else:
                outs.append(_required(o.name, nwhere))
        op = resolve(n.target or "", names, args, outs, {**(held or {}), **tensors}, nwhere)
        if getattr(op, "n_out", 1):  # tensor results: held in scratch tensors of their specs
            for o in outs:
                for name in (o if isinstance(o, tuple) else (o,)):
                    if name not in tensors:
                        raise payload_error(f"{nwhere} ({n.target}): output {name!r} has no "
                                            "tensor metadata")
        mutated = tuple((a.name, o.name) for a, o in _mutations(n, args))
        calls.append(Call(n.name, n.target, op, tuple(op.order(names, args)), tuple(outs),
                          mutated))
        for o in outs:
            known.update(o if isinstance(o, tuple) else (o,))
    outputs = list(g.outputs or [])
    for name in list(g.inputs or []) + outputs:
        if name not in known:
            raise payload_error(f"{where}: graph input/output {name!r} is not a value of the "
                                "graph")
    return Graph(list(g.inputs or []), outputs, calls, tensors, placeholders)


def _mutations(n, args):
    """(argument Ref, output) pairs where an in-place op writes an input (``relu_``)."""
    outs = [o for o in n.outputs or [] if o.alias_of]
    for o in outs:
        for a, v in zip(n.inputs or [], args):
            if a.mutated and isinstance(v, Ref) and v.name == o.alias_of:
                yield v, o


def build_method(m, where: str) -> NativeMethod:
    if m.graph is None:
        raise payload_error(f"{where}: method without a graph")
    consts = []
    for c in m.constants or []:
        name = _required(c.name, where)
        if not c.data_key:
            raise payload_error(f"{where}: constant {name!r} without a data key")
        consts.append(Constant(name, c.data_key, tensor_spec(name, c.meta, where),
                               bool(c.mutated)))
    graph = build_graph(m.graph, where, held={c.name: c.spec for c in consts})
    bufs = [_required(b.name, where) for b in m.mutable_buffers or []]
    # a buffer mutation names its buffer by fqn: a mutated constant's data key or a
    # mutable buffer's fqn
    by_fqn = {c.data_key: c.name for c in consts} | {b.fqn: b.name for b in m.mutable_buffers or []
                                                       if b.fqn}
    specs = {s.name: s for s in m.output_specs or []}
    user, buffers, inputs = [], {}, {}
    for name in graph.outputs:
        s = specs.get(name)
        kind = S.OUTPUT_USER if s is None else s.kind
        if kind == S.OUTPUT_BUFFER_MUTATION:
            if s.target not in by_fqn:
                raise payload_error(f"{where}: output {name!r} updates buffer {s.target!r}, "
                                    "which the method does not hold")
            buffers[name] = by_fqn[s.target]
        elif kind == S.OUTPUT_USER_INPUT_MUTATION:
            if s.target not in graph.inputs:
                raise payload_error(f"{where}: output {name!r} writes back user input "
                                    f"{s.target!r}, which is not an input")
            inputs[name] = s.target
            user.append(name)
        else:
            user.append(name)
    const_names = {c.name for c in consts}
    for name in graph.placeholders:
        if name not in const_names and name not in graph.inputs and name not in bufs:
            raise payload_error(f"{where}: placeholder {name!r} is neither an input, a "
                                "constant nor a mutable buffer")
    for name in bufs:
        if name not in graph.tensors:
            raise payload_error(f"{where}: mutable buffer {name!r} has no tensor metadata")
    return NativeMethod(m.name or "", graph, consts, user, buffers, inputs, bufs)
