"""EventTracer: record a Method's executes as ExecuTorch's ETDumpGen does.

Attach a tracer to a loaded method; every ``execute`` then runs the method's own
loop as an observer of it (``Method._run(observer)``: a clock around each
instruction, each run on its own, unfused) and writes one
``"Execute"`` block: per kernel instruction a debug event per output tensor,
``native_call_<op>`` and ``OPERATOR_CALL`` profile events; per delegate call
a debug event per argument (inputs, then outputs, as the C++ runtime logs
them), the delegate's own inner events where its bridge can see them, and
``DELEGATE_CALL``; ``JF_CALL`` / ``MOVE_CALL`` / ``FREE_CALL`` for control
instructions; ``Method::execute``; finally the program outputs. Prim ops
(``executorch_prim::*``, ``aten::sym_size.int``, ...) get ``OPERATOR_CALL``
only, as their C++ registrations log nothing.

Tensor bytes go to the debug buffer at 64-byte aligned offsets. A buffer with a
fixed ``debug_buffer_size`` that fills up raises ``ExecuTorchError``
(``OutOfResources``); the events recorded so far stay valid. Without a tracer
the method runs its plain loop: tracing off costs nothing.

>>> import pyruntime
>>> from pyruntime.devtools import EventTracer
>>> tracer = EventTracer()        # EventTracer(intermediates=False): profiling only
>>> # m = tracer.load_method(pyruntime.Runtime.get().load_program("model.pte"))
>>> # m.execute([x]); tracer.save("run.etdp", "run.bin")
"""
from __future__ import annotations

import time

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.devtools.etdump import DebugEvent, DebugValue, ETDump, ProfileEvent, RunData, \
    TensorRef
from pyruntime.instructions import Op
from pyruntime.values import ListRef

_CONTROL = {Op.MOVE: "MOVE_CALL", Op.JUMP_FALSE: "JF_CALL", Op.FREE: "FREE_CALL"}
# Registered by the C++ runtime's prim-op library without the codegen wrapper: no
# native_call event and no logged output.
PRIM_OPS = frozenset({"aten::sym_size.int", "aten::sym_numel", "aten::_local_scalar_dense"})
_LIBRARY_NAMESPACES = frozenset({"llama", "preprocess"})  # registered with EXECUTORCH_LIBRARY
now = time.perf_counter_ns


def is_prim_op(name: str) -> bool:
    return name in PRIM_OPS or name.startswith("executorch_prim::")


def profile_name(op: str) -> str:
    """The name ExecuTorch's kernel wrapper gives the event: ``native_call_<op>`` for
    generated registrations, the full name for ``EXECUTORCH_LIBRARY`` kernels (LLM ops)."""
    ns, _, name = op.rpartition("::")
    return op if ns in _LIBRARY_NAMESPACES else "native_call_" + name


class DebugBuffer:
    """Tensor bytes at 64-byte aligned offsets; ``capacity`` None grows as needed."""

    ALIGN = 64

    def __init__(self, capacity: int | None = None):
        if capacity is not None and (isinstance(capacity, bool) or capacity < 0):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"debug_buffer_size must be >= 0 or None, got {capacity!r}")
        self.capacity = capacity
        self.data = bytearray()

    def write(self, raw: np.ndarray, where: str) -> int:
        n = raw.nbytes
        if n == 0:
            return -1  # the C++ runtime's offset for a tensor without bytes
        used = len(self.data)
        start = -(-used // self.ALIGN) * self.ALIGN
        if self.capacity is not None and start + n > self.capacity:
            raise ExecuTorchError(
                ErrorCode.OutOfResources,
                f"{where}: the debug buffer is full: this tensor needs {n} bytes at offset "
                f"{start}, the buffer holds {self.capacity} ({used} used). Give a larger "
                "debug_buffer_size (or None to let it grow)")
        self.data += bytes(start - used)
        self.data += memoryview(np.ascontiguousarray(raw).reshape(-1)).cast("B")
        return start


class EventTracer:
    """Records executes of the methods it is attached to (see the module docstring).

    ``intermediates``: log instruction outputs and program outputs into the debug
    buffer (ExecuTorch's ``kIntermediateOutputs``); False records profiling only.
    ``debug_buffer_size``: a fixed capacity in bytes, as on a device; None grows.
    ``delegate_events``: also record what a delegate's bridge sees inside (XNNPACK:
    per-operator timings, and with ``intermediates`` each node's output under its
    debug handle), at the cost of re-running the delegate on debug runtimes.
    """

    def __init__(self, intermediates: bool = True, debug_buffer_size: int | None = None,
                 delegate_events: bool = True):
        self.intermediates = intermediates
        self.buffer = DebugBuffer(debug_buffer_size)
        self.delegate_events = delegate_events
        self.runs: list[RunData] = []
        self.bundled_input_index = -1

    # ---- attaching ---------------------------------------------------------------
    def load_method(self, program, name: str = "forward", **kwargs):
        """``program.load_method(name, **kwargs)``, timed into a ``"Default"`` block, attached."""
        t0 = now()
        method = program.load_method(name, **kwargs)
        t1 = now()
        self.runs.append(RunData("Default", [ProfileEvent("Method::init", -1, 0, t0, t1),
                                             ProfileEvent("Program::load_method", -1, 0, t0, t1)]))
        return self.attach(method)

    def attach(self, method):
        method.event_tracer = self
        return method

    @staticmethod
    def detach(method):
        method.event_tracer = None
        return method

    # ---- results -----------------------------------------------------------------
    def etdump(self) -> ETDump:
        """What was recorded so far (the debug buffer is a copy)."""
        return ETDump(self.runs, bytes(self.buffer.data) if self.intermediates else None)

    def save(self, etdump_path, debug_buffer_path=None) -> None:
        """Write the ``.etdp`` (and the debug buffer, if a path is given)."""
        self.etdump().save(etdump_path, debug_buffer_path)

    # ---- the traced run (called by Method.execute with its lock held) -----------------
    def run(self, m) -> None:
        block = RunData("Execute", bundled_input_index=self.bundled_input_index)
        block.debug_buffer = self.buffer.data
        self.runs.append(block)
        folded = m._fast.folded if m._fast is not None else ()  # views of constants

        def observe(pc, ins, t0, t1):
            self._record(m, block, ins, t0, t1, pc in folded)

        t0 = now()
        m._run(observe)
        block.events.append(ProfileEvent("Method::execute", -1, 0, t0, now()))
        if self.intermediates:
            if m._fast is not None:
                m._fast.pull_outputs()
            for i in m.outputs:
                self._log(block, m, -1, 0, m.values[i], f"method {m.name!r} output", output=True)

    # ---- events ------------------------------------------------------------------
    def _record(self, m, block, ins, t0, t1, contiguous) -> None:
        c, pc, name = ins.chain, ins.src_pc, ins.name
        ev = block.events
        if ins.op is Op.KERNEL:
            if not is_prim_op(name):
                if self.intermediates and ins.args:
                    for v in kernel_outputs(m.values, ins.args):
                        self._log(block, m, c, pc, v, self._where(m, c, pc, name), contiguous)
                ev.append(ProfileEvent(profile_name(name), c, pc, t0, t1))
            ev.append(ProfileEvent("OPERATOR_CALL", c, pc, t0, t1))
        elif ins.op is Op.DELEGATE:
            self._delegate_inner(m, block, ins, t0)
            if self.intermediates:
                for j in ins.args:
                    self._log(block, m, c, pc, m.values[j], self._where(m, c, pc, name))
            ev.append(ProfileEvent("DELEGATE_CALL", c, pc, t0, t1))
        else:
            ev.append(ProfileEvent(_CONTROL[ins.op], c, pc, t0, t1))

    def _delegate_inner(self, m, block, ins, t0) -> None:
        """What a delegate's bridge sees inside (see ``delegate_taps``): per-operator
        timings laid end to end from the call's start, and node values."""
        if not self.delegate_events:
            return
        from pyruntime.devtools.delegate_taps import TAPS

        tap = TAPS.get(getattr(ins.backend, "id", ""))
        if tap is None:
            return
        c, pc = ins.chain, ins.src_pc
        index = next(i for i, d in enumerate(m._delegates) if d[1] is ins.handle)
        args = [m.values[j] for j in ins.args]
        args = [a.resolve(m.values) if isinstance(a, ListRef) else a for a in args]
        where = self._where(m, c, pc, ins.name)
        timings, values = tap(m, index, args, where, self.intermediates)
        for name, ns in timings:
            block.events.append(ProfileEvent(None, c, pc, t0, t0 + ns,
                                             delegate_debug_id_str=name,
                                             delegate_debug_metadata=b""))
            t0 += ns
        for debug_id, value in values:
            self._log(block, m, c, pc, value, f"{where} delegate node {debug_id}",
                      delegate_id=debug_id)

    @staticmethod
    def _where(m, c, pc, name) -> str:
        return f"method {m.name!r} instruction {pc}" + (f" (chain {c})" if c else "") + \
            f" ({name})"

    def _log(self, block, m, c, pc, v, where, contiguous=False, output=False,
             delegate_id=None) -> None:
        if isinstance(v, ListRef):
            v = v.resolve(m.values)
        if isinstance(v, (ETensor, np.ndarray)):
            val = DebugValue("Tensor", self._tensor(v, where, contiguous), output)
        elif isinstance(v, list) and v and all(isinstance(t, ETensor) for t in v):
            val = DebugValue("TensorList", [self._tensor(t, f"{where}[{i}]", contiguous)
                                            for i, t in enumerate(v)], output)
        elif isinstance(v, bool):
            val = DebugValue("Bool", v)
        elif isinstance(v, int):
            val = DebugValue("Int", v)
        elif isinstance(v, float):
            val = DebugValue("Double", v)
        else:
            return  # None, strings, scalar lists: the C++ runtime cannot log them either
        did_int = delegate_id if isinstance(delegate_id, int) else -1
        did_str = delegate_id if isinstance(delegate_id, str) else None
        block.events.append(DebugEvent(c, pc, val, did_int, did_str))

    def _tensor(self, t, where, contiguous) -> TensorRef:
        if isinstance(t, np.ndarray):
            from pyruntime.cython_ext.dtypes import from_numpy_dtype
            a = np.ascontiguousarray(t)
            st = int(from_numpy_dtype(a.dtype))
            strides = tuple(s // a.itemsize for s in a.strides) if a.ndim else ()
            return TensorRef(st, a.shape, strides, self.buffer.write(a, where))
        if t.storage is None:
            raise ExecuTorchError(ErrorCode.InvalidState, f"{where}: tensor {t.describe()} has "
                                                          "no data to log")
        if contiguous and not t.is_contiguous():
            a = np.ascontiguousarray(t.numpy())
            strides = tuple(s // a.itemsize for s in a.strides) if a.ndim else ()
            return TensorRef(t.scalar_type, t.sizes, strides, self.buffer.write(a, where))
        raw = t.storage[:t.nbytes]  # as the C++ runtime: the bytes in their dim order
        return TensorRef(t.scalar_type, t.sizes, t.strides(), self.buffer.write(raw, where))


def kernel_outputs(values, args) -> list:
    """The values a kernel instruction's C++ wrapper logs: its out argument(s)."""
    last = values[args[-1]]
    if len(args) >= 2 and args[-1] == args[-2]:
        return [last]  # one out (a tensor or a tensor list), repeated as the return value
    if isinstance(last, ListRef) and not last.optional and len(args) > len(last.items) and \
            tuple(args[-1 - len(last.items):-1]) == last.items:
        return [values[j] for j in last.items]  # several outs, then a list of them
    return [last]  # a functional op's result
