"""NativeBackend: ExecuTorch's generic fx-graph delegate (``NPTG``), run on pyruntime's kernels.

ExecuTorch 1.5.1's ``NativePartitioner`` claims core ATen ops and serialises each
partition as an fx graph: nodes with ATen targets and named arguments, tensor metadata
in a side table, weights in the program's named data (or a ``.ptd`` file, its default
``external_constants_tag="native_weights"``). ``executorch.runtime`` has no runtime for
it on this host; this bridge is one: ``init`` reads and resolves the graph (graph.py,
ops.py: every node to a portable kernel of the registry, the same kernels the
reference tier runs) and binds the constants without copying them; ``execute`` runs
the nodes in order on tensors allocated once at ``init``, writes the user outputs
into the DelegateCall's output tensors and keeps buffer mutations as state across
executes (as ExecuTorch's delegates keep a mutable buffer they own).
"""
from __future__ import annotations

import threading

import numpy as np

from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import Dynamism, ETensor
from pyruntime.delegates.bridge_checks import reading_payload
from pyruntime.delegates.interface import BackendInterface, payload_bytes
from pyruntime.delegates.named_data import named_bytes
from pyruntime.delegates.native.graph import (BACKEND, Graph, NativeMethod, build_method, payload_error,
                                    read_program)
from pyruntime.delegates.native.ops import CondOp, KernelOp, LocalOp
from pyruntime.delegates.native.records import Ref, TensorSpec


MAX_BYTES = 8 << 30  # scratch a delegate may allocate at load unless told otherwise


def _graphs(g: Graph):
    """``g`` and every cond branch below it."""
    yield g
    for c in g.calls:
        if isinstance(c.op, CondOp):
            for a in c.args[1:3]:
                if isinstance(a, Graph):
                    yield from _graphs(a)


def _tensor(spec: TensorSpec) -> ETensor:
    dyn = Dynamism.DYNAMIC_BOUND if spec.dynamic else Dynamism.STATIC
    return ETensor.empty(spec.scalar_type, spec.sizes, spec.dim_order, dyn)


class NativeHandle:
    """One delegate: its method, the constants and state it holds, and per-graph scratch
    tensors for every value a node makes (reused by each execute, under ``lock``)."""

    def __init__(self, method: NativeMethod, bound: dict, state: dict):
        self.method = method
        self.bound = bound  # constant and buffer placeholder -> ETensor
        self.state = state  # mutable buffer placeholder -> ETensor (written back per run)
        self.scratch: dict[int, dict] = {}
        self.lock = threading.Lock()
        self.n_in = len(method.graph.inputs)
        self.n_out = len(method.user_outputs)
        self.closed = False

    def allocate(self, limit: int) -> None:
        """Scratch for every graph (the method's and its cond branches'), at load: a
        payload whose tensors would need more than ``limit`` bytes is refused here."""
        graphs, total = list(_graphs(self.method.graph)), 0
        for g in graphs:
            for spec in g.tensors.values():
                total += int(np.prod(spec.sizes, dtype=np.float64)) * \
                    to_numpy_dtype(spec.scalar_type).itemsize
        if total > limit:
            raise ExecuTorchError(ErrorCode.MemoryAllocationFailed,
                                  f"{BACKEND}: the graph's tensors need {total} bytes, over the "
                                  f"limit of {limit} (runtime option 'max_bytes')")
        for g in graphs:
            self.scratch[id(g)] = {name: _tensor(spec) for name, spec in g.tensors.items()}

    def tensors_for(self, graph: Graph) -> dict:
        return self.scratch[id(graph)]


class NativeBackend(BackendInterface):
    id = BACKEND

    def is_available(self) -> bool:
        return True  # pure Python on the kernel registry: nothing to install

    def init(self, processed, compile_specs, named_data, runtime_options=None):
        blob = payload_bytes(processed)
        with reading_payload(f"{BACKEND}: malformed payload"):
            prog = read_program(blob)
            if not prog.methods:
                raise payload_error("the program has no methods")
            if len(prog.methods) != 1:
                raise ExecuTorchError(
                    ErrorCode.NotSupported,
                    f"{BACKEND}: the payload holds {len(prog.methods)} methods; a delegate "
                    "runs one (multi-method programs are ExecuTorch's to_native format)")
            method = build_method(prog.methods[0], f"method {prog.methods[0].name!r}")
        bound, state = {}, {}
        for c in method.constants:
            data = named_bytes(named_data, c.data_key, BACKEND, f"constant {c.name!r}")
            t = ETensor(c.spec.scalar_type, c.spec.sizes, c.spec.dim_order)
            if len(data) != t.nbytes:
                raise payload_error(f"constant {c.name!r} ({t.describe()}) needs {t.nbytes} "
                                    f"bytes, named data {c.data_key!r} has {len(data)}")
            aligned = data.ctypes.data % t.dtype.itemsize == 0
            t.storage = data.copy() if c.mutated or not aligned else data
            bound[c.name] = t
            if c.mutated:
                state[c.name] = t
        for name in method.mutable_buffers:
            t = _tensor(method.graph.tensors[name])
            bound[name] = state[name] = t
        h = NativeHandle(method, bound, state)
        h.allocate(int((runtime_options or {}).get("max_bytes", MAX_BYTES)))
        return h

    def describe_payload(self, processed) -> list[str]:
        """The op of every node (``pyruntime inspect``), cond branches included."""
        blob = payload_bytes(processed)
        with reading_payload(f"{BACKEND}: malformed payload"):
            method = build_method(read_program(blob).methods[0], "payload")
        return [c.target.removeprefix("torch.ops.") for g in _graphs(method.graph)
                for c in g.calls]

    def execute(self, h: NativeHandle, args) -> None:
        if h.closed:
            raise ExecuTorchError(ErrorCode.DelegateInvalidHandle, f"{BACKEND}: handle destroyed")
        m = h.method
        if len(args) != h.n_in + h.n_out:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: {len(args)} arguments, the graph has {h.n_in} "
                                  f"inputs and {h.n_out} outputs")
        g = m.graph
        for i, name in enumerate(g.inputs):
            _check_input(i, name, args[i], g.tensors.get(name))
        with h.lock:
            env = dict(h.bound)
            env.update(zip(g.inputs, args[:h.n_in]))
            run_graph(h, g, env, "")
            for j, name in enumerate(m.user_outputs):
                _write(args[h.n_in + j], env[name], f"output {j} ({name!r})")
            for out, target in m.input_updates.items():
                _write(args[g.inputs.index(target)], env[out], f"input {target!r}")
            for out, buf in m.buffer_updates.items():
                if env[out] is not h.state[buf]:
                    _write(h.state[buf], env[out], f"buffer {buf!r}")

    def destroy(self, h: NativeHandle) -> None:
        h.closed = True
        h.bound.clear()
        h.state.clear()
        h.scratch.clear()


def _check_input(i: int, name: str, t, spec: TensorSpec | None) -> None:
    if spec is None:
        return  # a non-tensor input (an int)
    if not isinstance(t, ETensor):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{BACKEND}: input {i} ({name!r}) is {type(t).__name__}, the "
                              "graph takes a tensor")
    if t.scalar_type != spec.scalar_type or len(t.sizes) != len(spec.sizes) or any(
            s > m or (not spec.dynamic and s != m) for s, m in zip(t.sizes, spec.sizes)):
        want = ETensor(spec.scalar_type, spec.sizes).describe()
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{BACKEND}: input {i} ({name!r}) is {t.describe()}, the graph "
                              f"takes {want}{' at most' if spec.dynamic else ''}")


def _write(dst, src, where: str) -> None:
    if not isinstance(dst, ETensor):
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: {where} is not a tensor ({type(dst).__name__})")
    dst.write(src.numpy() if isinstance(src, ETensor) else src)


def _value(v, env):
    if isinstance(v, Ref):
        return env[v.name]
    if isinstance(v, list):
        return [_value(x, env) for x in v]
    return v


def _array(v):
    if isinstance(v, ETensor):
        return v.numpy()
    if isinstance(v, list):
        return [_array(x) for x in v]
    return v


def run_graph(h: NativeHandle, g: Graph, env: dict, where: str) -> list:
    """Run ``g``'s calls with its inputs bound in ``env``; its outputs' values."""
    tensors = h.tensors_for(g)
    for c in g.calls:
        args = [_value(a, env) for a in c.args]
        op = c.op
        try:
            if isinstance(op, KernelOp):
                outs = [[tensors[n] for n in o] if isinstance(o, tuple) else tensors[o]
                        for o in c.outs[:op.n_out]]
                r = op.run(args, outs)
                if op.n_out == 0:
                    env[c.outs[0]] = r
                for o, t in zip(c.outs, outs):
                    if isinstance(o, tuple):  # a Tensor[] return: each element by name
                        env.update(zip(o, t))
                    env[o] = t
            elif isinstance(op, LocalOp):
                r = np.asarray(op.fn(*[_array(a) for a in args]))
                t = tensors[c.outs[0]]
                t.write(r)
                env[c.outs[0]] = t
            elif isinstance(op, CondOp):
                pred, true_g, false_g, operands = args
                p = pred.numpy() if isinstance(pred, ETensor) else pred
                branch = true_g if bool(np.asarray(p).reshape(-1)[0]) else false_g
                sub = dict(h.bound)
                sub.update(zip(branch.inputs, operands))
                res = run_graph(h, branch, sub, f"{where}{c.node}.")
                for name, v in zip(c.outs, res):
                    t = tensors.get(name)
                    if t is not None and isinstance(v, ETensor):
                        t.write(v.numpy())
                        v = t
                    env[name] = v
            else:  # pragma: no cover - resolve() makes only these
                raise AssertionError(op)
        except ExecuTorchError as e:
            raise e.with_context(f"{BACKEND}: node {where}{c.node!r} ({c.target})") from e
        except (ValueError, TypeError, IndexError, ArithmeticError) as e:
            raise ExecuTorchError(ErrorCode.Internal,
                                  f"{BACKEND}: node {where}{c.node!r} ({c.target}): "
                                  f"{type(e).__name__}: {e}") from e
        for src, out in c.mutated:
            env[src] = env[out]  # later readers of the written input see the new value
    return [env[name] for name in g.outputs]
