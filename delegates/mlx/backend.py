"""MLXBackend: ExecuTorch's MLX delegate (Apple's MLX on a Mac) run on a host, in numpy.

Payload: a 24-byte header (4 zero bytes, ``MLX0``, the data segment's offset and size as
u64) then an ``MLXGraph`` FlatBuffer (schema.py, our tables of the wheel's
``schema.fbs``). The graph is slot based: tensor ids (``Tid``) number the constants,
then the inputs, outputs, mutable buffers and temporaries; value ids (``Vid``) hold
ints (symbolic sizes). ``input_map``/``output_map`` bind the DelegateCall's arguments
to slots, ``named_slots`` give each constant (and saved buffer) its key in the
program's named data. ``init`` checks every node (its type is one ops.py runs, every
slot it names is in range) and binds the constants; ``execute`` runs the init chain
once and the main chain per call, MLX's semantics in numpy (ops.py). Buffers the graph
mutates keep their values across executes.
"""
from __future__ import annotations

import struct
import threading

import numpy as np

from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.flatbuf import Reader, read_table
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.bridge_checks import reading_payload
from pyruntime.delegates.interface import BackendInterface, payload_bytes
from pyruntime.delegates.mlx.ops import OPS
from pyruntime.delegates.mlx.schema import REQUIRED, SCHEMA, SLOTS
from pyruntime.delegates.named_data import named_bytes

BACKEND = "MLXBackend"
MAGIC = b"MLX0"
HEADER = 24
TENSOR_SLOT = 0


def payload_error(msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidProgram, f"{BACKEND}: malformed payload: {msg}")


def read_graph(blob: np.ndarray):
    if len(blob) < HEADER:
        raise payload_error(f"{len(blob)} bytes is shorter than the {HEADER}-byte header")
    if bytes(blob[4:8]) != MAGIC:
        raise payload_error(f"magic {bytes(blob[4:8])!r}, expected {MAGIC!r}")
    seg_off, seg_size = struct.unpack_from("<QQ", bytes(blob[8:24]))
    if not HEADER < seg_off <= len(blob) or seg_off + seg_size > len(blob):
        raise payload_error(f"data segment [{seg_off}, +{seg_size}) does not fit the "
                            f"{len(blob)}-byte payload after its header")
    r = Reader(blob[HEADER:seg_off], ErrorCode.InvalidProgram, f"{BACKEND} payload")
    return read_table(r.root(), "MLXGraph", SCHEMA), blob[seg_off:seg_off + seg_size]


def _has(named_data, key: str) -> bool:
    try:
        return named_data is not None and named_data.get(key) is not None
    except (ExecuTorchError, LookupError):
        return False


def _written(slots, i, kind):
    a = slots[i]
    if a is None:
        raise ExecuTorchError(ErrorCode.InvalidState,
                              f"{kind} slot {i} is read before it is written")
    return a


class _Ctx:
    """The slots of one execute: tensors by Tid, values by Vid."""

    __slots__ = ("tensors", "values")

    def __init__(self, tensors, values):
        self.tensors, self.values = tensors, values

    def t(self, tid):
        return _written(self.tensors, tid, "tensor")

    def v(self, vid):
        return _written(self.values, vid, "value")

    def iv(self, x):
        return int(self.v(x.vid)) if x.is_vid else int(x.literal)

    def set(self, tid, a):
        self.tensors[tid] = np.asarray(a)

    def setv(self, vid, v):
        self.values[vid] = v


class MLXHandle:
    def __init__(self, graph, chains, n_tensors, n_values, constants, state):
        self.graph, self.chains = graph, chains
        self.n_tensors, self.n_values = n_tensors, n_values
        self.constants = constants  # tid -> array (read-only)
        self.state = state  # tid -> array: mutable buffers, carried across executes
        self.init_done = False
        self.inputs = list(graph.input_map or [])
        self.outputs = list(graph.output_map or [])
        self.lock = threading.Lock()
        self.closed = False


def _check_node(node, n_tensors: int, n_values: int, where: str) -> None:
    kind = node._kind
    for f in REQUIRED.get(kind, ()):
        if getattr(node, f) is None:
            raise payload_error(f"{where} ({kind}): required field {f!r} is absent")
    for f, t in SLOTS.get(kind, {}).items():
        v = getattr(node, f)
        limit, what = (n_tensors, "tensor") if "Tid" in t else (n_values, "value")
        for i in (v if isinstance(v, list) else [] if v is None else [v]):
            if not 0 <= i < limit:
                raise payload_error(f"{where} ({kind}): {f} = {what} slot {i}, the graph has "
                                    f"{limit}")
    for f, _, k in SCHEMA[kind]:  # nested IntOrVid / FloatOrVid / IntOrVidOrTid tables
        if isinstance(k, tuple) and k[0] in ("table", "vec_table"):
            v = getattr(node, f)
            for sub in (v if isinstance(v, list) else [] if v is None else [v]):
                _check_node(sub, n_tensors, n_values, f"{where}.{f}")


class MLXBackend(BackendInterface):
    id = BACKEND

    def is_available(self) -> bool:
        return True  # numpy only

    def init(self, processed, compile_specs, named_data, runtime_options=None):
        blob = payload_bytes(processed)
        with reading_payload(f"{BACKEND}: malformed payload"):
            g, _segment = read_graph(blob)
            return self._bind(g, named_data)

    def _bind(self, g, named_data) -> MLXHandle:
        counts = [g.num_constant_tensors, g.num_input_tensors, g.num_output_tensors,
                  g.num_mutable_buffer_tensors, g.num_temp_tensors]
        n_tensors, n_values = sum(counts), g.num_values
        if n_tensors > 1 << 24 or n_values > 1 << 24:
            raise payload_error(f"{n_tensors} tensor and {n_values} value slots")
        chains = []
        for ci, ch in enumerate(g.instruction_chains or []):
            nodes = []
            for ii, ins in enumerate(ch.instructions or []):
                code, node = ins.op
                where = f"chain {ci} instruction {ii}"
                if node is None:
                    raise payload_error(f"{where}: no op node (union type {code})")
                if node._kind not in OPS:
                    raise ExecuTorchError(ErrorCode.NotSupported,
                                          f"{BACKEND}: {where}: op {node._kind} is not "
                                          "supported by pyruntime's MLX bridge")
                _check_node(node, n_tensors, n_values, where)
                nodes.append((where, node))
            chains.append(nodes)
        for which, idx in (("main", g.main_chain_idx), ("init", g.init_chain_idx)):
            if not (-1 if which == "init" else 0) <= idx < len(chains):
                raise payload_error(f"{which}_chain_idx {idx}, the graph has {len(chains)} chains")
        metas = g.tensor_meta or []
        first_mut = sum(counts[:3])

        def meta(tid, what):
            m = metas[tid] if tid < len(metas) else None
            if m is None:
                raise payload_error(f"{what} tensor {tid} has no tensor_meta")
            shape = []
            for d in m.shape or []:
                if d.value < 0:
                    raise ExecuTorchError(ErrorCode.NotSupported,
                                          f"{BACKEND}: {what} tensor {tid} has a dynamic shape")
                shape.append(d.value)
            return to_numpy_dtype(m.scalar_type), tuple(shape)

        constants, state = {}, {}
        for ns in g.named_slots or []:
            s = ns.slot
            if s is None or s.slot_type != TENSOR_SLOT or not 0 <= s.idx < n_tensors:
                raise payload_error(f"named slot {ns.name!r} is not a tensor slot in range")
            if s.idx < counts[0] or first_mut <= s.idx < first_mut + counts[3]:
                what = "constant" if s.idx < counts[0] else "mutable buffer"
                dtype, shape = meta(s.idx, what)
                if what == "mutable buffer" and not _has(named_data, ns.name):
                    continue  # no saved value: zeros below (the exporter keeps none for a KV
                    # cache or a zero-initialised buffer)
                data = named_bytes(named_data, ns.name, BACKEND, f"{what} {ns.name!r}")
                need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                if len(data) != need:
                    raise payload_error(f"{what} {ns.name!r} {list(shape)} {dtype} needs {need} "
                                        f"bytes, named data has {len(data)}")
                a = np.frombuffer(data, dtype, int(np.prod(shape, dtype=np.int64))).reshape(shape)
                if what == "constant":
                    constants[s.idx] = a  # read-only, over the named data
                else:
                    state[s.idx] = a.copy()  # a buffer the graph writes
        missing = [t for t in range(counts[0]) if t not in constants]
        if missing:
            raise payload_error(f"constant tensors {missing[:8]} have no named slot")
        for t in range(first_mut, first_mut + counts[3]):
            if t not in state:
                dtype, shape = meta(t, "mutable buffer")
                state[t] = np.zeros(shape, dtype)
        for which, slots, lo, hi in (("input", g.input_map, counts[0], counts[0] + counts[1]),
                                     ("output", g.output_map, 0, n_tensors)):
            for i, s in enumerate(slots or []):
                limit = n_tensors if s.slot_type == TENSOR_SLOT else n_values
                if not 0 <= s.idx < limit:
                    raise payload_error(f"{which} {i} maps to slot {s.idx}, out of range")
        return MLXHandle(g, chains, n_tensors, n_values, constants, state)

    def describe_payload(self, processed) -> list[str]:
        g, _ = read_graph(payload_bytes(processed))
        return [ins.op[1]._kind.removesuffix("Node") for ch in g.instruction_chains or []
                for ins in ch.instructions or [] if ins.op[1] is not None]

    def execute(self, h: MLXHandle, args) -> None:
        if h.closed:
            raise ExecuTorchError(ErrorCode.DelegateInvalidHandle, f"{BACKEND}: handle destroyed")
        if len(args) != len(h.inputs) + len(h.outputs):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: {len(args)} arguments, the graph has "
                                  f"{len(h.inputs)} inputs and {len(h.outputs)} outputs")
        with h.lock:
            tensors = [None] * h.n_tensors
            values = [None] * h.n_values
            for tid, a in h.constants.items():
                tensors[tid] = a
            for tid, a in h.state.items():
                tensors[tid] = a
            for i, s in enumerate(h.inputs):
                a = args[i]
                if s.slot_type == TENSOR_SLOT:
                    if not isinstance(a, ETensor):
                        raise ExecuTorchError(ErrorCode.InvalidArgument,
                                              f"{BACKEND}: input {i} is {type(a).__name__}, the "
                                              "graph takes a tensor")
                    tensors[s.idx] = a.numpy()
                else:
                    values[s.idx] = a.numpy().reshape(-1)[0].item() if isinstance(a, ETensor) \
                        else a
            ctx = _Ctx(tensors, values)
            if not h.init_done and h.graph.init_chain_idx >= 0:
                self._run(h.chains[h.graph.init_chain_idx], ctx)
                h.init_done = True
            self._run(h.chains[h.graph.main_chain_idx], ctx)
            for tid in h.state:
                if tensors[tid] is not h.state[tid]:
                    h.state[tid] = np.array(tensors[tid], copy=True)
            for j, s in enumerate(h.outputs):
                out = args[len(h.inputs) + j]
                v = ctx.t(s.idx) if s.slot_type == TENSOR_SLOT else ctx.v(s.idx)
                if not isinstance(out, ETensor):
                    raise ExecuTorchError(ErrorCode.NotSupported,
                                          f"{BACKEND}: output {j} is not a tensor")
                out.write(v)

    @staticmethod
    def _run(chain, ctx) -> None:
        for where, node in chain:
            try:
                OPS[node._kind](node, ctx)
            except ExecuTorchError as e:
                raise e.with_context(f"{BACKEND}: {where} ({node._kind})") from e
            except (ValueError, TypeError, IndexError, ArithmeticError, MemoryError) as e:
                raise ExecuTorchError(ErrorCode.Internal,
                                      f"{BACKEND}: {where} ({node._kind}): {type(e).__name__}: "
                                      f"{e}") from e

    def destroy(self, h: MLXHandle) -> None:
        h.closed = True
        h.constants.clear()
        h.state.clear()
