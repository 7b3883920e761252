"""A loaded method: planned arenas, the value table, bound instructions, the loop.

Reads top to bottom as the C++ ``Method`` does: load (arenas, values,
delegates, kernels), bind inputs, execute the chain, return outputs.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from pyruntime.cython_ext.dtypes import from_numpy_dtype, scalar_type_name
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError, invalid_program
from pyruntime.cython_ext.tensor import Dynamism, ETensor
from pyruntime.cython_ext._loop import NOT_EXACT, Bound, Loop
from pyruntime.delegates import backend_registry
from pyruntime.kernels.blas_lib import lookup as blas_lookup
from pyruntime.kernels.registry import get_kernel, has_kernel, missing_operators_error
from pyruntime import mathmode, threads as threads_mod
from pyruntime.argcheck import check_kernel_args
from pyruntime.instructions import DelegateCall, Free, JumpFalse, KernelCall, Move, Op
from pyruntime.values import ListRef, ValueBuilder

MAX_INSTRUCTIONS = 10_000_000  # the C++ runtime's infinite-loop guard
TIERS = ("fast", "reference", "opencl")  # what load_method(tier=...) takes


def _as_array(x):
    """A numpy view of a user input: ndarray, ``__dlpack__`` or ``__array__`` objects."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError):
            pass
    return np.asarray(x)


class Method:
    """One ExecutionPlan, loaded: call ``execute(inputs)`` to run it.

    >>> # m = pyruntime.Runtime.get().load_program("model.pte").load_method("forward")
    >>> # outputs = m.execute([np.ones((1, 4), np.float32)])
    """

    # A pyruntime.devtools.EventTracer (set by its attach()); None runs the plain loop.
    event_tracer = None

    def __init__(self, program, plan, tier: str = "fast", data_map=None,
                 max_planned_bytes=None, max_instructions=MAX_INSTRUCTIONS, threads=None,
                 backends=None, math=None):
        self.program = program
        self.allowed_backends = None if backends is None else frozenset(
            (backends,) if isinstance(backends, str) else backends)
        self._threads_explicit = threads is not None
        self.threads = threads_mod.default_threads() if threads is None else threads_mod._check(threads)
        self.max_planned_bytes = max_planned_bytes
        self.max_instructions = max_instructions
        self.plan = plan
        self.name = plan.name or ""
        self.tier = tier
        # the arithmetic the fast tier's kernels use (pyruntime.mathmode): the other tiers
        # are exact whatever is asked
        try:
            mode = mathmode.default_math() if math is None else mathmode.check_math(math)
        except ValueError as e:
            raise ExecuTorchError(ErrorCode.InvalidArgument, f"method {self.name!r}: {e}") from e
        self.math = mode if tier == "fast" else "exact"
        self._lock = threading.Lock()
        pte = program._pte
        where = f"method {self.name!r}"
        self.arenas = self._allocate_arenas(where)
        external = data_map
        self.values = ValueBuilder(pte, plan, self.arenas, program._constants, external,
                                   self.name).build()
        self._delegate_handles = []
        self._delegates = self._init_delegates(pte, where, program._named_data_map(data_map))
        self.inputs = self._index_list(plan.inputs, "input", where)
        self.outputs = self._index_list(plan.outputs, "output", where)
        self._bind_unplanned_outputs()
        self.instructions = self._bind_instructions(where)  # per chain: the records
        self.flat = [ins for chain in self.instructions for ins in chain]  # what pc indexes
        self.offsets, pc = [], 0  # the pc of each chain's first instruction
        for chain in self.instructions:
            self.offsets.append(pc)
            pc += len(chain)
        # the one loop (both tiers): every instruction a Python step until the fast plan
        # binds compiled ones
        self.loop = Loop(len(self.flat))
        self._fast = None
        self._device = None  # tier="opencl": the plan on the device (pyruntime/clplan.py)
        self._bound = None  # ``_make_bound``: the all-in-C execute, or False
        if tier not in TIERS:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: tier must be 'fast', 'reference' or 'opencl', "
                                  f"got {tier!r}")
        if tier == "fast":
            from pyruntime.fastpath import FastPlan  # imports numba and the compiled loop

            self._fast = FastPlan(self)
        elif tier == "opencl":
            from pyruntime.clplan import OpenCLPlan  # imports pyopencl

            self._device = OpenCLPlan(self)
        self._inputs_set = [False] * len(self.inputs)
        self._input_refs = [None] * len(self.inputs)  # keeps aliased caller arrays alive
        self._input_stores = [None] * len(self.inputs)  # the storage made from each of them
        self._input_binders = self._make_input_binders()
        if self._fast is not None and not self._fast.pending:
            # settled at load rather than by the first execute, as the rest of the plan is
            # (MobileNetV2 at 96x96: first execute 2.4-2.6x a warm one -> 1.4-1.5x); with
            # kernels still pending their binds may yet change the plan: left to execute
            self._make_bound()
            blas_lookup()

    # ---- load ------------------------------------------------------------------
    def _allocate_arenas(self, where):
        sizes = self.plan.non_const_buffer_sizes or []
        total = sum(sizes[1:])
        if self.max_planned_bytes is not None and total > self.max_planned_bytes:
            raise ExecuTorchError(ErrorCode.MemoryAllocationFailed,
                                  f"{where}: the plan needs {total} bytes of planned memory, over "
                                  f"the limit of {self.max_planned_bytes}")
        arenas = []
        for i, size in enumerate(sizes[1:], start=1):
            if size < 0:
                raise invalid_program(f"{where}: planned buffer {i} has negative size {size}")
            try:
                # written here, not left to calloc's lazily mapped pages: the first execute
                # would otherwise pay a page fault per 4 KiB it touches (MobileNetV2@224:
                # first execute 14 -> 9 ms against 7 ms warm)
                a = np.empty(size, np.uint8)
                a.fill(0)
                arenas.append(a)
            except (MemoryError, ValueError) as e:
                raise ExecuTorchError(ErrorCode.MemoryAllocationFailed,
                                      f"{where}: cannot allocate planned buffer {i} of {size} "
                                      f"bytes: {e}") from e
        return arenas

    def _index_list(self, idx, what, where):
        idx = list(idx or [])
        for i in idx:
            if not 0 <= i < len(self.values):
                raise invalid_program(f"{where}: {what} value index {i} out of range")
        return idx

    def _bind_unplanned_outputs(self):
        # Unplanned tensor outputs get a zeroed buffer of their serialized size once per
        # loaded method, as ExecuTorch's Python bindings do (spec 4.6).
        for i in self.outputs:
            v = self.values[i]
            if isinstance(v, ETensor) and v.storage is None:
                v.set_storage(np.zeros(v.capacity_bytes, np.uint8))

    def _init_delegates(self, pte, where, named_data):
        out = []
        for d, bd in enumerate(self.plan.delegates or []):
            w = f"{where} delegate {d}"
            backend = backend_registry.get(bd.id or "", w, allowed=self.allowed_backends)
            blob = pte.delegate_blob(bd.processed, w)
            specs = [(cs.key or "", bytes(cs.value) if cs.value is not None else b"")
                     for cs in (bd.compile_specs or [])]
            try:
                # an explicit threads= for this method reaches the backend too;
                # otherwise the backend's own option (set_option) applies
                opts = {"threads": self.threads} if self._threads_explicit else {}
                handle = backend.init(blob, specs, named_data, runtime_options=opts)
            except ExecuTorchError as e:
                raise e.with_context(f"{w} ({bd.id})") from e
            self._delegate_handles.append((backend, handle))
            out.append((backend, handle, bd.id))
        return out

    def _bind_instructions(self, where):
        plan, values = self.plan, self.values
        nvals = len(values)
        chains = plan.chains or []
        if not chains:
            raise invalid_program(f"{where}: no chains")
        operators = plan.operators or []
        op_names = [(o.name or "") + (f".{o.overload}" if o.overload else "") for o in operators]
        missing = sorted({n for n in op_names if not has_kernel(n)})
        # Only operators actually called must exist (as in the C++ runtime).
        bound = []
        for c, chain in enumerate(chains):
            instrs = []
            used_missing = set()
            for pc, ins in enumerate(chain.instructions or []):
                w = f"{where} chain {c} instruction {pc}"
                code, a = ins.instr_args
                if a is None:
                    raise invalid_program(f"{w}: instruction without arguments (type {code})")
                kind = a._kind
                if kind in ("KernelCall", "DelegateCall"):
                    args = tuple(a.args or [])
                    for j in args:
                        if not 0 <= j < nvals:
                            raise invalid_program(f"{w}: argument value index {j} out of range "
                                                  f"({nvals} values)")
                    lists = tuple(k for k, j in enumerate(args) if isinstance(values[j], ListRef))
                if kind == "KernelCall":
                    if not 0 <= a.op_index < len(op_names):
                        raise invalid_program(f"{w}: op_index {a.op_index} out of range "
                                              f"({len(op_names)} operators)")
                    name = op_names[a.op_index]
                    if name in missing:
                        used_missing.add(name)
                        continue
                    k = get_kernel(name)
                    check_kernel_args(name, args, values, w)
                    n = len(args) if k.arity is None else min(k.arity, len(args))
                    instrs.append(KernelCall(k.fn, args, n, lists, name, c, pc))
                elif kind == "DelegateCall":
                    if not 0 <= a.delegate_index < len(self._delegates):
                        raise invalid_program(f"{w}: delegate_index {a.delegate_index} out of "
                                              f"range ({len(self._delegates)} delegates)")
                    backend, handle, bid = self._delegates[a.delegate_index]
                    instrs.append(DelegateCall(backend, handle, args, lists, f"delegate {bid}",
                                               c, pc))
                elif kind == "MoveCall":
                    for j in (a.move_from, a.move_to):
                        if not 0 <= j < nvals:
                            raise invalid_program(f"{w}: move index {j} out of range")
                    instrs.append(Move(a.move_from, a.move_to, c, pc))
                elif kind == "JumpFalseCall":
                    if not 0 <= a.cond_value_index < nvals:
                        raise invalid_program(f"{w}: condition index {a.cond_value_index} out "
                                              "of range")
                    if a.destination_instruction < 0:
                        raise invalid_program(f"{w}: negative jump destination")
                    instrs.append(JumpFalse(a.cond_value_index, a.destination_instruction, c,
                                            pc))
                elif kind == "FreeCall":
                    if not 0 <= a.value_index < nvals:
                        raise invalid_program(f"{w}: free index {a.value_index} out of range")
                    instrs.append(Free(a.value_index, c, pc))
            if used_missing:
                raise missing_operators_error(sorted(used_missing), f"{where} chain {c}")
            bound.append(instrs)
        return bound

    # ---- metadata --------------------------------------------------------------
    @property
    def method_meta(self):
        return self.program.metadata(self.name)

    @property
    def pending_kernels(self) -> int:
        """Fast tier, background compile mode: instructions still on the reference kernel
        because their compiled kernel is not in the cache yet (0 once all are bound)."""
        return len(self._fast.pending) if self._fast is not None else 0

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: as long as it takes) for the kernels a
        background process compiles for this method, binding each as it arrives; True when
        none is left. Executes bind them too, without waiting (at most once a second).

        >>> # m = program.load_method("forward")   # a fresh machine: runs at once, slower
        >>> # m.wait_compiled(600)                 # then at full speed
        """
        if self._fast is None or not self._fast.pending:
            return True
        self._acquire()
        try:
            return self._fast.poll(1e9 if timeout is None else timeout) == 0
        finally:
            self._lock.release()

    # ---- inputs ----------------------------------------------------------------
    def set_input(self, value, index: int) -> None:
        """Bind one input (copied into planned memory, aliased when unplanned)."""
        self._acquire()
        try:
            self._set_input(value, index)
        finally:
            self._lock.release()

    def _acquire(self) -> None:
        # One execute at a time per Method: a second thread gets an error at once, never
        # a share of the planned memory or of the inputs the running loop reads.
        if not self._lock.acquire(False):  # (positional: a keyword costs 0.1 us a call)
            raise ExecuTorchError(ErrorCode.InvalidState,
                                  f"method {self.name!r} is already executing (use one Method "
                                  "per thread, or a MethodPool)")

    def _set_input(self, value, index: int) -> None:
        if not 0 <= index < len(self.inputs):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"method {self.name!r}: input index {index} out of range "
                                  f"({len(self.inputs)} inputs)")
        where = f"method {self.name!r} input {index}"
        slot = self.values[self.inputs[index]]
        if isinstance(slot, ETensor):
            self._bind_tensor(slot, value, index, where)
        elif slot is None:
            pass
        elif isinstance(slot, bool):
            if not isinstance(value, (bool, np.bool_)) or bool(value) != slot:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{where}: expected the traced Bool {slot}, got {value!r}")
        elif isinstance(slot, int):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                    or int(value) != slot:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{where}: expected the traced Int {slot}, got {value!r}")
        elif isinstance(slot, float):
            if not isinstance(value, (int, float, np.floating, np.integer)) or not _close(
                    float(value), slot):
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{where}: expected the traced Double {slot}, got {value!r}")
        elif isinstance(slot, str):
            if value != slot:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{where}: expected the traced String {slot!r}, got {value!r}")
        else:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: list inputs are not supported")
        self._inputs_set[index] = True
        if self._fast is not None and isinstance(slot, ETensor):
            self._fast.table.push(self.inputs[index], slot, force=True)  # sizes/pointer may change

    def _bind_tensor(self, t: ETensor, value, index: int, where: str) -> None:
        if isinstance(value, ETensor):
            value = value.numpy()
        elif isinstance(value, (bool, int, float)):
            value = np.asarray(value, dtype=t.dtype)
            if value.ndim != t.ndim:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{where}: expected a {t.ndim}-d tensor {t.describe()}, "
                                      f"got a Python scalar")
        try:
            a = _as_array(value)
        except Exception as e:  # noqa: BLE001 - any conversion failure is the caller's input
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: cannot convert {type(value).__name__} to an array: "
                                  f"{e}") from e
        if a.dtype != t.dtype:
            try:
                got = scalar_type_name(from_numpy_dtype(a.dtype))
            except ValueError:
                got = str(a.dtype)
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: expected dtype {scalar_type_name(t.scalar_type)}, "
                                  f"got {got}")
        if a.ndim != t.ndim:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: expected rank {t.ndim} (sizes {list(t.sizes)}), got "
                                  f"rank {a.ndim} (shape {list(a.shape)})")
        if t.dynamism == Dynamism.STATIC:
            if a.shape != t.sizes:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{where}: expected shape {list(t.sizes)}, got "
                                      f"{list(a.shape)} (the input is static)")
        else:
            bound = self._bounds[index]
            for d, (got, mx) in enumerate(zip(a.shape, bound)):
                if got > mx:
                    raise ExecuTorchError(
                        ErrorCode.InvalidArgument,
                        f"{where}: dimension {d} is {got}, above its upper bound {mx} "
                        f"(bounds {list(bound)}, got shape {list(a.shape)})")
            t.resize(a.shape)
        if t.planned:
            if not t.storage.flags.writeable:
                raise invalid_program(f"{where}: the input tensor is bound to read-only constant "
                                      "data")
            if a.size:
                np.copyto(t.numpy(), a)
        elif a.flags.c_contiguous and t.is_contiguous():
            t.set_storage(a.reshape(-1).view(np.uint8) if a.size else np.zeros(0, np.uint8))
            self._input_refs[index] = a  # aliased: keep the caller's array alive
            self._input_stores[index] = t.storage
            return
        else:
            t.set_storage(np.empty(t.nbytes, np.uint8))
            if a.size:
                np.copyto(t.numpy(), a)
        self._input_refs[index] = self._input_stores[index] = None

    @property
    def _bounds(self):
        b = getattr(self, "_bounds_cache", None)
        if b is None:
            b = self._bounds_cache = [
                tuple(self.program._plan_input_sizes(self.plan, i)) for i in range(len(self.inputs))]
        return b

    # ---- execute ---------------------------------------------------------------
    def execute(self, inputs=(), out=None) -> list:
        """Bind ``inputs`` (a sequence), run the method, return its outputs as numpy arrays.

        Tensor outputs are copies (planned memory is reused by the next run);
        scalar outputs are Python values. With ``out``, a sequence of one numpy array per
        output (``None`` for a non-tensor output), each C-contiguous, writeable and of
        exactly that output's dtype and shape, the outputs are written into those arrays
        and the same array objects are returned: after warm-up such a call allocates
        nothing that outlives it (the loop a control stack wants). A wrong count, dtype
        or shape raises ``InvalidArgument`` naming the output before anything is written.
        (The reference tier allocates while it runs; the fast tier does not.)

        >>> # out = [np.empty(o.sizes, o.dtype) for o in m.method_meta.outputs]
        >>> # m.execute([x], out=out)[0] is out[0]    # -> True
        """
        bound = self._bound if self._bound is not None else self._make_bound()
        if bound and self.event_tracer is None and (out is None or type(out) is list):
            # everything fixed: the copies in, the loop and the copies out in C, without
            # the GIL (``Bound``); an argument that is not the exact case comes back
            # NOT_EXACT, untouched, for the general path below
            outs = out if out is not None else [np.empty(s, d) for s, d in self._out_alloc]
            if self._lock.acquire(False):
                try:
                    fast = self._fast
                    if fast.pending or fast._also_compile:
                        fast.before_run()
                    if threads_mod._applied != self.threads:
                        threads_mod.apply(self.threads)
                    status = bound.run(self.loop, fast.callback, self.max_instructions, inputs,
                                       outs)
                    if status != NOT_EXACT:
                        self._check_status(status)
                        self._inputs_set[:] = self._set_after_run
                        return outs
                finally:
                    self._lock.release()
        inputs = list(inputs)
        if len(inputs) != len(self.inputs):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"method {self.name!r}: expected {len(self.inputs)} inputs, "
                                  f"got {len(inputs)}")
        if out is not None:
            self._check_out(out)
        self._acquire()
        try:
            for bind, x in zip(self._input_binders, inputs):
                bind(x)
            if self.event_tracer is None:
                self._run()
            else:
                self.event_tracer.run(self)  # the same loop, timed and logged
            for i in self._consumed_inputs():
                self._inputs_set[i] = False  # its bytes now hold other tensors' values
            return self._collect_outputs() if out is None else self._write_outputs(out)
        finally:
            self._lock.release()

    def _make_bound(self):
        """The ``Bound`` of a fast-tier method whose inputs are all static planned tensors
        and whose outputs are all static tensors in fixed places, else False (once)."""
        self._bound = False
        fast = self._fast
        if fast is None:
            return False
        ins, outs = [], []
        for idx in self.inputs:
            t = self.values[idx]
            if not (isinstance(t, ETensor) and t.planned and t.dynamism == Dynamism.STATIC
                    and t.storage is not None and t.storage.flags.writeable and t.numel
                    and t.is_contiguous()):
                return False  # (a dim-ordered tensor's bytes are not the array's C order)
            ins.append((t.data_ptr(), t.nbytes, t.dtype, t.sizes))
        for idx in self.outputs:
            t = self.values[idx]
            if not (isinstance(t, ETensor) and t.dynamism == Dynamism.STATIC
                    and t.storage is not None and t.numel and t.is_contiguous()) \
                    or idx in fast.dynamic or idx in fast.repointed:
                return False  # moved, re-pointed or resized by the run: the general path
            outs.append((t.data_ptr(), t.nbytes, t.dtype, t.sizes))
        self._out_alloc = [(sizes, dtype) for _, _, dtype, sizes in outs]
        consumed = set(self._consumed_inputs())
        self._set_after_run = [i not in consumed for i in range(len(self.inputs))]
        self._bound = Bound(ins, outs)
        return self._bound

    # ---- caller-owned memory: bind once, run, read in place ----------------------
    def input_view(self, index: int) -> np.ndarray:
        """A writeable numpy view of input ``index``'s planned memory: write the input
        there (no copy at run time), then ``run()``. Static planned tensor inputs only
        (others raise ``InvalidArgument``: bind them with ``set_input``). The view stays
        valid as long as the method, and each call returns the same array (nothing is
        allocated): taking it marks the input written. Where the memory plan reuses an
        input's bytes for later tensors (as ExecuTorch's planner does once the input is
        last read), a run consumes the input, and ``run()`` raises ``InvalidState`` until
        it is written again: take the view for each step's write. Write after reading
        the outputs, which the plan may place in the same memory.

        >>> # for each step:  m.input_view(0)[...] = sensor; m.run(); y = m.output_view(0)
        """
        t, where = self._tensor_slot(self.inputs, index, "input")
        if not (t.planned and t.dynamism == Dynamism.STATIC and t.storage is not None
                and t.storage.flags.writeable):
            kind = "dynamic" if t.dynamism != Dynamism.STATIC else "unplanned" \
                if not t.planned else "read-only"
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: input_view needs a static planned input; this one "
                                  f"is {kind} ({t.describe()}): bind it with set_input")
        self._inputs_set[index] = True
        return t.numpy()

    def run(self) -> None:
        """Run the method on the inputs as they are bound (by ``set_input``, writes through
        ``input_view``, or the last ``execute``); read the results with
        ``output_view``. Nothing is allocated or copied per call on the fast tier."""
        self._acquire()
        try:
            if not all(self._inputs_set):
                unset = [i for i, ok in enumerate(self._inputs_set) if not ok]
                raise ExecuTorchError(ErrorCode.InvalidState,
                                      f"method {self.name!r}: input(s) {unset} not written "
                                      "since the last run (which consumed them: the plan "
                                      "reuses their memory) or never bound: write them with "
                                      "set_input or through input_view(i), taken again")
            if self.event_tracer is None:
                self._run()
            else:
                self.event_tracer.run(self)
            if self._fast is not None:
                self._fast.pull_outputs()
            for i in self._consumed_inputs():
                self._inputs_set[i] = False  # its bytes now hold other tensors' values
        finally:
            self._lock.release()

    def _consumed_inputs(self) -> tuple:
        """Inputs whose planned bytes other tensors of the plan also use (computed once)."""
        c = getattr(self, "_consumed_cache", None)
        if c is None:
            spans = [(v.data_ptr(), v.data_ptr() + v.capacity_bytes, j)
                     for j, v in enumerate(self.values)
                     if isinstance(v, ETensor) and v.planned and v.storage is not None
                     and v.capacity_bytes]
            c = []
            for i, idx in enumerate(self.inputs):
                t = self.values[idx]
                if not (isinstance(t, ETensor) and t.planned and t.storage is not None):
                    continue
                a, b = t.data_ptr(), t.data_ptr() + t.capacity_bytes
                if any(j != idx and lo < b and a < hi for lo, hi, j in spans):
                    c.append(i)
            c = self._consumed_cache = tuple(c)
        return c

    def output_view(self, index: int) -> np.ndarray:
        """A read-only numpy view of output ``index`` in the method's memory, valid until
        the next run (which overwrites it, and may resize a dynamic output: take a new
        view then), as TFLite's ``Interpreter.tensor()``; copy what must outlive it."""
        t, where = self._tensor_slot(self.outputs, index, "output")
        if t.storage is None:
            raise ExecuTorchError(ErrorCode.InvalidState, f"{where} has no memory yet "
                                                          "(run the method first)")
        v = t.numpy().view()
        v.flags.writeable = False
        return v

    def _tensor_slot(self, indices, index, what):
        if isinstance(index, bool) or not isinstance(index, int) \
                or not 0 <= index < len(indices):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"method {self.name!r}: {what} index {index!r} out of range "
                                  f"({len(indices)} {what}s)")
        where = f"method {self.name!r} {what} {index}"
        t = self.values[indices[index]]
        if not isinstance(t, ETensor):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where} is a {type(t).__name__}, not a tensor")
        return t, where

    def _out_specs(self):
        """Per output: (ETensor, static shape or None for a dynamic one), or None for a
        non-tensor output; computed once."""
        specs = getattr(self, "_out_spec_cache", None)
        if specs is None:
            specs = []
            for i in self.outputs:
                v = self.values[i]
                specs.append((v, v.sizes if v.dynamism == Dynamism.STATIC else None)
                             if isinstance(v, ETensor) else None)
            self._out_spec_cache = specs
        return specs

    def _out_error(self, j, expected, got) -> ExecuTorchError:
        return ExecuTorchError(ErrorCode.InvalidArgument,
                               f"method {self.name!r}: out[{j}]: expected {expected}, got {got}")

    def _check_out(self, out) -> None:
        """Everything about ``out`` that does not depend on the run: count, types, dtypes,
        layout, static shapes."""
        specs = self._out_specs()
        if len(out) != len(specs):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"method {self.name!r}: out has {len(out)} entries, the "
                                  f"method has {len(specs)} outputs")
        j = 0
        for spec, o in zip(specs, out):
            if spec is None:
                if o is not None:
                    raise self._out_error(j, "None (the output is not a tensor)",
                                          type(o).__name__)
            else:
                t, shape = spec
                if type(o) is not np.ndarray:
                    raise self._out_error(j, f"a numpy array {t.describe()}", type(o).__name__)
                if o.dtype != t.dtype:
                    raise self._out_error(j, f"dtype {t.dtype}", f"dtype {o.dtype}")
                flags = o.flags
                if not (flags.c_contiguous and flags.writeable):
                    raise self._out_error(j, "a C-contiguous writeable array",
                                          "a non-contiguous array" if not flags.c_contiguous
                                          else "a read-only array")
                if shape is not None and o.shape != shape:
                    raise self._out_error(j, f"shape {list(shape)}", f"shape {list(o.shape)}")
            j += 1

    def _write_outputs(self, out) -> list:
        if self._fast is not None:
            self._fast.pull_outputs()
        specs = self._out_specs()
        for j, spec in enumerate(specs):  # dynamic shapes, known now: all checked first
            if spec is not None and spec[1] is None and out[j].shape != spec[0].sizes:
                raise self._out_error(j, f"shape {list(spec[0].sizes)} (this run's)",
                                      f"shape {list(out[j].shape)}")
        result = []
        for j, spec in enumerate(specs):
            o = out[j]
            if spec is None:
                result.append(self._output_value(self.outputs[j]))
            else:
                o[...] = spec[0].numpy()  # (same dtype and shape: checked)
                result.append(o)
        return result

    def _make_input_binders(self):
        """Per input, a binder with a fast path for the common case: a C-contiguous
        ndarray of exactly the dtype and shape of a static planned tensor is copied
        straight into its planned bytes; everything else goes through ``set_input``,
        which validates and explains."""
        binders = []
        for i, idx in enumerate(self.inputs):
            t = self.values[idx]
            general = (lambda x, i=i: self._set_input(x, i))
            if (isinstance(t, ETensor) and t.planned and t.dynamism == Dynamism.STATIC
                    and t.storage is not None and t.storage.flags.writeable and t.numel):
                view, dtype, shape = t.numpy(), t.dtype, t.sizes
                flags = self._inputs_set

                def bind(x, i=i, view=view, dtype=dtype, shape=shape, general=general):
                    if type(x) is np.ndarray and x.dtype == dtype and x.shape == shape:
                        view[...] = x
                        flags[i] = True
                    else:
                        general(x)
                binders.append(bind)
            elif isinstance(t, ETensor) and not t.planned:
                binders.append(self._aliased_binder(i, idx, general))
            else:
                binders.append(general)
        return binders

    def _aliased_binder(self, i, idx, general):
        """An unplanned input aliases the caller's array: the same array passed again
        (a decode loop reusing its token buffer) is still bound, so nothing is redone."""
        refs, stores, values, flags = self._input_refs, self._input_stores, self.values, \
            self._inputs_set

        def bind(x):
            t = values[idx]
            if x is refs[i] and t.storage is stores[i] and x.shape == t.sizes:
                flags[i] = True
            else:
                general(x)
        return bind

    def __call__(self, *inputs):
        return self.execute(inputs)

    def trace(self, inputs=()) -> list[tuple[int, str, list]]:
        """Run once and return every kernel/delegate instruction's result.

        One ``(instruction index, op name, outputs)`` entry per executed call,
        where outputs are copies of the instruction's last argument (its out
        tensor, scalar or tensor list): the tool for finding the first op that
        diverges from another runtime. The fast tier runs its compiled kernels one
        instruction at a time (unfused), so these are the values it computes.
        """
        inputs = list(inputs)
        if len(inputs) != len(self.inputs):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"method {self.name!r}: expected {len(self.inputs)} inputs, "
                                  f"got {len(inputs)}")
        records = []
        values = self.values
        folded = self._fast.folded if self._fast is not None else ()  # ran as views: no call

        def record(pc, ins, t0, t1):
            if ins.op in (Op.KERNEL, Op.DELEGATE) and ins.args and pc not in folded:
                last = values[ins.args[-1]]
                items = last.resolve(values) if isinstance(last, ListRef) else \
                    last if isinstance(last, list) else [last]
                records.append((ins.src_pc, ins.name,
                                [np.array(v.numpy(), copy=True) if isinstance(v, ETensor)
                                 else v for v in items]))

        self._acquire()
        try:
            for i, x in enumerate(inputs):
                self._set_input(x, i)
            self._run(record)
        finally:
            self._lock.release()
        return records

    def _run(self, observer=None) -> None:
        """Run the plan: the one loop (``self.loop``), on either tier. ``observer(pc, ins,
        t0, t1)`` (``time.perf_counter_ns`` around the instruction) is called after every
        instruction when given; the fast tier then runs each instruction on its own
        (compiled kernels whole and unfused), so an observer sees every intermediate."""
        threads_mod.apply(self.threads)
        if self._device is not None:
            dev = self._device
            dev.before_run()
            step = dev.step if observer is None else _observed(dev.step, self.flat, observer)
            dev.observed = observer is not None
            try:
                self._check_status(self.loop.run(step, self.max_instructions, False))
            finally:
                dev.observed = False
            dev.pull_outputs()
            return
        fast = self._fast
        if fast is not None:
            fast.before_run()
        if observer is None:
            step = self._step if fast is None else fast.callback
            status = self.loop.run(step, self.max_instructions, False)
        else:
            step = self._step if fast is None else fast.step
            was = fast.set_fused(False) if fast is not None else None
            try:
                status = self.loop.run(_observed(step, self.flat, observer),
                                       self.max_instructions, True)
            finally:
                if fast is not None:
                    fast.set_fused(was)
        self._check_status(status)

    def _check_status(self, status: int) -> None:
        """The loop's status as an error: its instruction limit, or the compiled kernel
        that failed, named by re-running it on the reference kernel."""
        if status == 0:
            return
        if status == -2:
            raise invalid_program(f"method {self.name!r}: more than {self.max_instructions} "
                                  "instructions in one execute (infinite loop?)")
        self._fast.explain_failure(self.loop.failed_pc, status)

    def _step(self, pc: int) -> int:
        """Run instruction ``pc`` on the reference tier; the next pc, or -1 for pc + 1."""
        ins = self.flat[pc]
        nxt = self._exec(ins)
        return nxt if nxt < 0 else self.offsets[ins.chain] + nxt

    def _exec(self, ins) -> int:
        """Run one instruction with the reference kernels; -1 for the next one, or the
        destination of a jump taken (an index in the instruction's chain)."""
        values = self.values
        op = ins.op
        if op is Op.KERNEL or op is Op.DELEGATE:
            vals = [values[j] for j in ins.args]
            for k in ins.lists:
                vals[k] = vals[k].resolve(values)
            try:
                if op is Op.KERNEL:
                    r = ins.kernel(*vals[:ins.nargs])
                    if r is not None:
                        values[ins.args[-1]] = r
                else:
                    ins.backend.execute(ins.handle, vals)
            except ExecuTorchError as e:
                raise e.with_context(self._where(ins)) from e
            except Exception as e:  # noqa: BLE001 - a kernel failure on bad input
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{self._where(ins)}: {type(e).__name__}: {e}") from e
        elif op is Op.MOVE:
            values[ins.dst] = values[ins.src]
        elif op is Op.JUMP_FALSE:
            if not self._truth(values[ins.cond], ins):
                return self._jump_target(ins)
        else:
            v = values[ins.value]
            if not isinstance(v, ETensor):
                raise invalid_program(f"{self._where(ins)}: FreeCall on a non-tensor value")
            v.set_storage(None)
        return -1

    def _jump_target(self, ins) -> int:
        n = len(self.instructions[ins.chain])
        if ins.dest > n:
            raise invalid_program(f"{self._where(ins)}: destination {ins.dest} past the end of "
                                  f"the chain ({n} instructions)")
        # Instructions for missing operators are never dropped (load fails), so the
        # serialized destination is also our index.
        return ins.dest

    def _truth(self, v, ins) -> bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, ETensor):
            if v.scalar_type != 11:
                raise invalid_program(f"{self._where(ins)}: condition tensor is "
                                      f"{v.describe()}, expected Bool")
            return bool(np.all(v.numpy()))
        raise invalid_program(f"{self._where(ins)}: condition is {type(v).__name__}, expected "
                              "Bool")

    def _where(self, ins) -> str:
        """``method 'forward' instruction 12 (chain 1) (aten::add.out) [model.py:40]``."""
        w = f"method {self.name!r} instruction {ins.src_pc}"
        if ins.chain:
            w += f" (chain {ins.chain})"
        w += f" ({ins.name})"
        frame = self.program._frame(self.plan, ins.chain, ins.src_pc)
        if frame:
            w += f" [{frame}]"
        return w

    def _collect_outputs(self) -> list:
        if self._fast is not None:
            self._fast.pull_outputs()
        return [self._output_value(i) for i in self.outputs]

    def _output_value(self, i):
        """Value ``i`` as an output: a tensor copied, a tensor list resolved and copied."""
        v = self.values[i]
        if isinstance(v, ETensor):
            return v.numpy().copy()
        if isinstance(v, ListRef):
            return [np.array(t.numpy(), copy=True) if isinstance(t, ETensor) else t
                    for t in v.resolve(self.values)]
        return v

    def destroy(self) -> None:
        for backend, handle in self._delegate_handles:
            backend.destroy(handle)
        self._delegate_handles = []

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


def _observed(step, flat, observer):
    """``step`` with ``observer(pc, ins, t0, t1)`` called after each instruction."""
    now = time.perf_counter_ns

    def run(pc):
        t0 = now()
        nxt = step(pc)
        observer(pc, flat[pc], t0, now())
        return nxt
    return run


def _close(a: float, b: float) -> bool:
    if a != a and b != b:
        return True
    if a == b:
        return True
    return abs(a - b) <= 1e-4 + 1e-5 * abs(b)
