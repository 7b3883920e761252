"""The fast tier of a Method: descriptor table, compiled kernels, the Cython loop.

At load, every chain is flattened into one ``Loop``. An instruction whose op
has a compiled kernel (``kernels.fast``) that accepts its dtypes and whose
scalar arguments are fixed at load becomes a C function call run with the GIL
released; a JumpFalse on a Bool tensor is decided in the loop; everything else
(reference kernels, moves, delegates without a native entry) is called back
into Python with the GIL held for that instruction only, with its tensors
synchronized between ETensor objects and descriptor rows.

Scalar values (Int, Double, Bool) also have a C mirror: a two-word record
``[tag, payload]`` per value slot. Prim ops (``sym_size``, ``executorch_prim::*``,
``et_view``) run compiled on these records, so shape arithmetic between
kernels stays in C; a Python instruction reading or writing a scalar that
changes at run time syncs its record around the call.
"""
from __future__ import annotations

import ctypes
import time

import numpy as np

from pyruntime.cython_ext.desc import DescTable
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError, invalid_program
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.fast import background, dynamic_binder, get_binder
from pyruntime.kernels.prim import typed as prim
from pyruntime.kernels.fast.context import BindContext, IntSlot
from pyruntime.kernels.fast.jit import KernelNotReady, compile_now, is_ready
from pyruntime import copy_elision, fusion
from pyruntime.instructions import CALLS, Op
from pyruntime.progress import CompileNotice, background_notice
from pyruntime.values import ListRef

BOOL = 11
_KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
T_DOUBLE, T_INT, T_BOOL = prim.T_DOUBLE, prim.T_INT, prim.T_BOOL


def _encode(v):
    """A Python scalar as its record ``(tag, payload)``; tag 0 for anything else."""
    if isinstance(v, bool):
        return T_BOOL, int(v)
    if isinstance(v, int):
        return T_INT, v
    if isinstance(v, float):
        return T_DOUBLE, int(np.array(v, np.float64).view(np.int64))
    return 0, 0


def _decode(tag, payload):
    if tag == T_INT:
        return int(payload)
    if tag == T_BOOL:
        return bool(payload)
    return float(np.array(payload, np.int64).view(np.float64))


class FastPlan:
    def __init__(self, method):
        self.m = method
        values = method.values
        self.flat = method.flat  # the instruction records, by pc
        self.offsets = method.offsets
        self.folded = self._fold_constant_permutes(values)
        # copies whose out can be their input's memory: no-ops (``pyruntime.copy_elision``);
        # not under tier="opencl", whose device buffers follow the plan's own addresses
        self.elided = copy_elision.elide(self.flat, values, method.inputs, method.outputs) \
            if method.tier == "fast" else set()
        self.folded |= self.elided
        buffers = list(method.arenas) + [method.program._data]
        buffers += [v.storage for v in values if isinstance(v, ETensor) and v.storage is not None]
        self.table = DescTable(values, buffers)
        rows = {id(v): i for i, v in enumerate(values) if isinstance(v, ETensor)}
        dynamic = self._dynamic_slots(values, self.flat)
        self.dataless = self._dataless_slots(values, self.flat, method.inputs)
        self.recs = np.zeros((max(len(values), 1), 2), np.int64)
        for i, v in enumerate(values):
            self.recs[i] = _encode(v)
        # scalar slots written at run time: their records are synced around Python calls
        self.dyn_scalars = {j for j in dynamic if not isinstance(values[j], (ETensor, ListRef))}
        self.repointed = set()  # tensors whose data pointer compiled et_view changes
        self.loop = method.loop  # the one loop: this plan binds its compiled instructions
        self.ctx = BindContext(self.table, rows, [], method.threads, method.math)
        self.sync = []  # per pc: value indices whose tensors are synced around Python calls
        self.scalar_in = []  # per pc: run-time scalars a Python call reads
        self.scalar_out = []  # per pc: run-time scalars a Python call writes
        self.compiled = 0
        self.kernels = {}  # pc -> (fn, block): one call doing the whole (observed runs)
        self._whole_cache = None
        self.calls = {}  # pc -> what the loop runs (``Loop.set_kernel``'s arguments)
        self.explain = {}  # pc -> explain(status) of a compiled delegate call
        self.dynamic = dynamic
        self.fast_math = set()  # pcs bound to a fast-math kernel (method.math == "fast")
        # with math="fast", the calls that stay exact: they feed a quantize op
        self.exact = fusion.feeds_quantize(self.flat, values) if method.math == "fast" \
            else set()
        # pc -> kernel body not compiled yet (background compile mode, ``kernels.fast.jit``):
        # the instruction runs on the reference kernel until ``poll`` binds it
        self.pending: dict = {}
        self._also_compile = []  # kernel bodies no instruction waits for (a run's)
        self._next_poll = 0.0
        # kernels not in the on-disk cache compile here: say so when it takes a while
        with CompileNotice(f"method {method.name!r}", len(self.flat)) as notice:
            for pc, ins in enumerate(self.flat):
                notice.step(pc)
                self._setup(pc, ins, values, dynamic)
        # load-time fusion (``pyruntime.fusion``): (conv pc, fused (fn, block), other pcs)
        self.fusions = []
        self.fused = False
        for pc, members, out in fusion.find_groups(self):
            try:
                self._set_math(pc)
                r = fusion.bind_group(self, pc, members, out)
            except (ExecuTorchError, TypeError, ValueError, AttributeError, IndexError):
                r = None  # an optimisation only: the group runs unfused, as each compiled
            if r is not None:
                self.fusions.append((pc, r, members))
        self.runs = {}  # first pc -> (its block, the run's pcs): ``fusion.find_runs``
        self._fuse_runs()
        self.set_fused(True)
        if self.pending or self._also_compile:
            self._request()

    def _set_math(self, pc):
        """The math mode binders see for instruction ``pc``: the method's, but exact for
        an instruction feeding a quantize op (``fusion.feeds_quantize``)."""
        self.ctx.math = "exact" if pc in self.exact else self.m.math

    def _fuse_runs(self):
        """(Re)make the runs of fixed-shape binary ops (``fusion.find_runs``) from the calls
        bound now (``poll`` binds more); a run kernel not compiled yet is asked for in the
        background and the ops run one by one until it arrives."""
        was = self.set_fused(False)
        self.fusions = [f for f in self.fusions if f[0] not in self.runs]
        self.runs = {}
        taken = {p for pc, _, members in self.fusions for p in [pc] + members}
        for pc, members in fusion.find_runs(self, taken):
            try:
                r = fusion.bind_run(self, pc, members)
            except KernelNotReady as e:
                if e.fn not in self._also_compile:
                    self._also_compile.append(e.fn)
                break
            self.fusions.append((pc, r, members))
            self.runs[pc] = (r[1], [pc] + members)
        self.set_fused(was)

    def set_fused(self, on: bool) -> bool:
        """Run the fused groups as one kernel each (True), or instruction by instruction
        as the program says (False: what an event tracer sees). Returns the old setting.
        ``kernels`` always holds the unfused kernels."""
        was = self.fused
        if on != was and self.fusions:
            for pc, r, members in self.fusions:
                self.loop.set_kernel(pc, *(r if on else self.calls[pc]))
                for p in members:
                    if on:
                        self.loop.set_nop(p)
                    else:
                        self.loop.set_kernel(p, *self.calls[p])
            self.fused = on
        return was

    def _setup(self, pc, ins, values, dynamic):
        self.sync.append(self._sync_indices(ins, values))
        self._scalar_sync(ins, values)
        if pc in self.folded:
            self.loop.set_nop(pc)
        elif ins.op in CALLS:
            self._compile(pc)
        elif ins.op is Op.JUMP_FALSE and ins.dest <= len(self.m.instructions[ins.chain]):
            j, dest = ins.cond, self.offsets[ins.chain] + ins.dest
            cond = values[j]
            if isinstance(cond, ETensor) and cond.scalar_type == BOOL and j not in dynamic \
                    and j not in self.dataless:
                self.loop.set_jump_false_tensor(pc, self.table.addr(j), dest)
            elif isinstance(cond, bool):
                self.loop.set_jump_false_tensor(pc, self._bool_desc(j), dest)

    def _compile(self, pc) -> bool:
        """Bind instruction ``pc`` to a compiled kernel if it has one; False leaves it on the
        reference kernel (for good, or until ``poll`` finds its kernel compiled)."""
        ins = self.flat[pc]
        values, dynamic = self.m.values, self.dynamic
        self._set_math(pc)
        picks = self.ctx.fast_picks
        try:
            if ins.op is Op.KERNEL:
                ok = not self._reads_dataless(ins, values) and \
                    self._bind(pc, ins, values, dynamic)
            else:
                ok = self._bind_delegate(pc, ins, values, dynamic)
        except KernelNotReady as e:
            self.pending[pc] = e.fn
            return False
        self.pending.pop(pc, None)
        if ok:
            self.compiled += 1
            if self.ctx.fast_picks != picks:
                self.fast_math.add(pc)
        return ok

    def _request(self):
        refs = list(dict.fromkeys((f.__module__, f.__name__)
                                  for f in list(self.pending.values()) + self._also_compile))
        if background.compile_detached(refs):
            background_notice(len(refs), self.m.name)

    def poll(self, wait: float = 0.0) -> int:
        """Bind the deferred instructions whose kernels the cache now holds (up to ``wait``
        seconds for all of them); the number still waiting."""
        deadline = time.monotonic() + wait
        while True:
            ready = {fn: is_ready(fn) for fn in set(self.pending.values())}  # once per kernel
            for fn in [f for f, r in ready.items() if not r]:
                if background.detached_gave_up((fn.__module__, fn.__name__)):
                    compile_now(fn)  # the background compile failed: here, errors and all
                    ready[fn] = True
            bound = [pc for pc, fn in list(self.pending.items()) if ready[fn]]
            for pc in bound:
                self._compile(pc)
            arrived = [fn for fn in self._also_compile if is_ready(fn)]
            for fn in [f for f in self._also_compile if f not in arrived]:
                if background.detached_gave_up((fn.__module__, fn.__name__)):
                    self._also_compile.remove(fn)  # an optimisation only: do without
            if bound or arrived:
                self._also_compile = [f for f in self._also_compile if f not in arrived]
                self._fuse_runs()  # newly bound ops may make runs, a run kernel may be here
            if not self.pending or time.monotonic() >= deadline:
                break
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        if self.pending or self._also_compile:
            self._request()  # a kernel another binder asked for once the first was ready
        self._next_poll = time.monotonic() + 1.0
        return len(self.pending)

    # ---- scalar records ----------------------------------------------------------------
    def rec_addr(self, j: int) -> int:
        return self.recs.ctypes.data + 16 * j

    def _const_rec(self, v) -> int:
        r = np.array(_encode(v), np.int64)
        self.ctx.scratch.append(r)
        return r.ctypes.data

    def _bool_desc(self, j: int) -> int:
        """A one-element Bool descriptor over record ``j``'s payload (little-endian: its
        first byte is 0/1), so the loop decides a scalar JumpFalse in C."""
        d = np.zeros(64, np.int64)
        d[0], d[1], d[3] = self.rec_addr(j) + 8, BOOL, 1
        self.ctx.scratch.append(d)
        return d.ctypes.data

    def _scalar_sync(self, ins, values):
        dyn = self.dyn_scalars
        reads, writes = [], []
        if ins.op in CALLS:
            for j in ins.args:
                v = values[j]
                items = v.items if isinstance(v, ListRef) else (j,)
                reads += [k for k in items if k in dyn]
            if ins.op is Op.KERNEL and ins.args and ins.args[-1] in dyn:
                writes.append(ins.args[-1])
        elif ins.op is Op.MOVE:
            reads += [ins.src] if ins.src in dyn else []
            writes += [ins.dst] if ins.dst in dyn else []
        elif ins.op is Op.JUMP_FALSE and ins.cond in dyn:
            reads.append(ins.cond)
        self.scalar_in.append(tuple(dict.fromkeys(reads)))
        self.scalar_out.append(tuple(writes))

    def _load_scalars(self, idx):
        values, recs = self.m.values, self.recs
        for j in idx:
            tag = recs[j, 0]
            if tag:
                values[j] = _decode(tag, recs[j, 1])

    def _store_scalars(self, idx):
        values, recs = self.m.values, self.recs
        for j in idx:
            recs[j] = _encode(values[j])

    def _int_slot(self, j):
        """A run-time Int value as an ``IntSlot`` over its record, or None."""
        v = self.m.values[j]
        if j in self.dyn_scalars and isinstance(v, int) and not isinstance(v, bool):
            return IntSlot(v, self.rec_addr(j) + 8)
        return None

    def _bind(self, pc, ins, values, dynamic) -> bool:
        """Compile one KernelCall, or say it stays on the Python path. A binder that
        fails on values the schema check let through is a load error naming the
        instruction, never an exception of another type."""
        try:
            return self._bind_prim(pc, ins, values, dynamic) or \
                self._bind_kernel(pc, ins, values, dynamic)
        except ExecuTorchError as e:
            raise e.with_context(self.m._where(ins)) from e
        except Exception as e:  # noqa: BLE001 - malformed values a binder did not expect
            raise invalid_program(f"{self.m._where(ins)}: cannot compile the "
                                  f"call: {type(e).__name__}: {e}") from e

    def _bind_delegate(self, pc, ins, values, dynamic) -> bool:
        """Compile a DelegateCall when its backend has a compiled entry (``bind_fast(handle,
        ctx, args) -> (fn, block, explain) | None``, or a split call in place of (fn, block):
        ``BindContext.bind_split``'s tuple); the tensors must be fixed slots."""
        args = ins.args
        bind = getattr(ins.backend, "bind_fast", None)
        if bind is None or ins.lists or any(j in dynamic or j in self.dataless for j in args):
            return False
        try:
            r = bind(ins.handle, self.ctx, [values[j] for j in args])
        except ExecuTorchError as e:
            raise e.with_context(self.m._where(ins)) from e
        if r is None:
            return False
        *call, self.explain[pc] = r
        self._set_call(pc, tuple(call))
        return True

    def _bind_prim(self, pc, ins, values, dynamic) -> bool:
        """Compile a prim op over the scalar records (see ``kernels.prim.typed``)."""
        args, nargs, name = ins.args, ins.nargs, ins.name
        r = None
        if name in prim.OPS:
            out = args[-1] if args else None
            if out is None or out not in self.dyn_scalars or len(args) != nargs + 1:
                return False
            op = prim.OPS[name]
            if op in prim.TENSOR_OPS:
                t = values[args[0]]
                if not isinstance(t, ETensor) or args[0] in dynamic:
                    return False
                refs = [self.ctx.desc(t)]
                if op == prim.P_SYM_SIZE:
                    dim = values[args[1]]
                    if args[1] in dynamic or not isinstance(dim, int):
                        return False
                    refs.append(dim)
            else:
                if any(isinstance(values[j], (ETensor, ListRef)) for j in args[:nargs]):
                    return False
                refs = [self.rec_addr(j) for j in args[:nargs]]
            r = prim.bind_scalar(self.ctx, name, self.rec_addr(out), refs)
        elif name == "executorch_prim::et_view.default" and len(args) == 3:
            src, size, out = (values[j] for j in args)
            if not (isinstance(src, ETensor) and isinstance(out, ETensor)) \
                    or args[0] in dynamic or args[2] in dynamic:
                return False
            if isinstance(size, ListRef):
                recs = [self.rec_addr(k) for k in size.items]
            elif isinstance(size, (list, tuple)):
                recs = [self._const_rec(v) for v in size]
            else:
                return False
            r = prim.bind_view(self.ctx, src, out, recs)
            if r is not None:
                self.repointed.add(args[2])
        elif name == "executorch_prim::et_copy_index.tensor" and len(args) == 3:
            dst, src = values[args[0]], values[args[1]]
            if not (isinstance(dst, ETensor) and isinstance(src, ETensor)) \
                    or args[0] in dynamic or args[1] in dynamic:
                return False
            r = prim.bind_copy_index(self.ctx, dst, src, self.rec_addr(args[2]))
        if r is None:
            return False
        self._set_call(pc, r)
        return True

    def _set_call(self, pc, r):
        """``r``: (fn, block), or a kernel split into parts (``BindContext.bind_split``)."""
        self.loop.set_kernel(pc, *r)
        self.calls[pc] = r
        self.kernels[pc] = r[:2]
        self._whole_cache = None

    def _fold_constant_permutes(self, values) -> set:
        """Turn ``permute_copy`` of a constant (a weight transposed on every run, as
        exporters emit for linear layers) into a strided view of the constant.

        The permute's result value becomes an ETensor over the constant's bytes
        whose dim order encodes the permutation, and the instruction becomes a
        no-op. Only done when the result has no other writer and is not a method
        output, so every reader sees exactly the values the copy would hold.
        """
        writers = {}
        for pc, ins in enumerate(self.flat):
            if ins.op in CALLS and ins.args:
                writers.setdefault(ins.args[-1], []).append(pc)
            elif ins.op is Op.MOVE:
                writers.setdefault(ins.dst, []).append(pc)
        outputs = set(self.m.outputs)
        folded = set()
        for pc, ins in enumerate(self.flat):
            args = ins.args if ins.op is Op.KERNEL else ()
            if ins.name != "aten::permute_copy.out" or len(args) < 3:
                continue
            src, dims, out = values[args[0]], values[args[1]], args[2]
            dst = values[out]
            if not (isinstance(src, ETensor) and isinstance(dst, ETensor)) or out in outputs:
                continue
            if src.storage is None or src.storage.flags.writeable or not src.is_contiguous():
                continue  # only read-only constants never change under the view
            if writers.get(out) != [pc] or args[0] in writers:
                continue
            dims = dims.resolve(values) if isinstance(dims, ListRef) else dims
            nd = src.ndim
            try:
                perm = [int(d) % nd for d in dims] if nd else []
            except (TypeError, ZeroDivisionError):
                continue
            if sorted(perm) != list(range(nd)) or dst.dtype != src.dtype:
                continue
            sizes = tuple(src.sizes[p] for p in perm)
            if sizes != dst.sizes:
                continue
            # out dim d reads source dim perm[d]; the source is contiguous, so out's
            # dims ordered by perm[d] ascending are its outermost-to-innermost order.
            order = sorted(range(nd), key=lambda d: perm[d])
            view = ETensor(src.scalar_type, sizes, order, storage=src.storage)
            view.planned = True
            values[out] = view
            folded.add(pc)
        return folded

    @staticmethod
    def _dynamic_slots(values, flat):
        """Value slots that instructions overwrite: prim-op results and move targets.

        A compiled kernel bakes scalar arguments into its block at load, so an
        instruction reading one of these slots stays on the Python path.
        """
        dyn = set()
        for ins in flat:
            if ins.op is Op.KERNEL and ins.args \
                    and not isinstance(values[ins.args[-1]], (ETensor, ListRef)):
                dyn.add(ins.args[-1])
            elif ins.op is Op.MOVE:
                dyn.add(ins.dst)
        return dyn

    @staticmethod
    def _dataless_slots(values, flat, inputs):
        """Tensor slots that may have no data when an instruction reads them.

        A tensor without storage at load (neither planned, constant, nor a method
        input or output, which get bytes before they run), the target of a
        FreeCall, and whatever a move or ``et_view`` derives from one. Compiled
        code would dereference a null pointer; instructions touching these slots
        stay on the Python path, whose kernels raise "has no data".
        """
        inputs = set(inputs)
        out = {j for j, v in enumerate(values)
               if isinstance(v, ETensor) and v.storage is None and j not in inputs}
        derived = []
        for ins in flat:
            if ins.op is Op.FREE:
                out.add(ins.value)
            elif ins.op is Op.MOVE:
                derived.append((ins.src, ins.dst))
            elif ins.name == "executorch_prim::et_view.default" and len(ins.args) == 3:
                derived.append((ins.args[0], ins.args[2]))
        changed = True
        while changed:
            changed = False
            for src, dst in derived:
                if src in out and dst not in out:
                    out.add(dst)
                    changed = True
        return out

    def _reads_dataless(self, ins, values) -> bool:
        if not self.dataless:
            return False
        return any(j in self.dataless for j in self._sync_indices(ins, values))

    def _sync_indices(self, ins, values):
        if ins.op in CALLS:
            idx = []
            for j in ins.args:
                v = values[j]
                if isinstance(v, ListRef):
                    idx += [k for k in v.items if k >= 0]
                else:
                    idx.append(j)
            return tuple(dict.fromkeys(idx))
        return ins.values()

    def _bind_kernel(self, pc, ins, values, dynamic) -> bool:
        name = ins.name
        binder = get_binder(name)
        if binder is None:
            return False
        used = ins.args[:ins.nargs]
        vals = []
        runtime_ints = False  # some Int argument is computed at run time
        for j in used:
            v = values[j]
            if isinstance(v, ListRef):
                if any(k in dynamic for k in v.items):
                    v = [self._int_slot(k) if k in dynamic else values[k] for k in v.items]
                    if any(x is None for x in v):
                        return False
                    runtime_ints = True
                else:
                    v = v.resolve(values)
            elif j in dynamic:
                v = self._int_slot(j)
                if v is None:
                    return False
                runtime_ints = True
            vals.append(v)
        if runtime_ints:
            binder = dynamic_binder(name)
            if binder is None:
                return False
        r = binder(self.ctx, *vals)
        if r is None:
            return False
        self._set_call(pc, r)
        return True

    # ---- run (the loop is the method's: ``Method._run``) --------------------------------
    def before_run(self) -> None:
        """Bind the kernels a background compile delivered since the last look (at most
        once a second)."""
        if (self.pending or self._also_compile) and time.monotonic() >= self._next_poll:
            self.poll()

    def callback(self, pc) -> int:
        """What the loop calls for an instruction it cannot run in C: the reference kernel
        (or a move, a jump, a delegate without a compiled entry), its tensors and run-time
        scalars synchronized with the descriptor table around it."""
        ins = self.flat[pc]
        values = self.m.values
        table = self.table
        for j in self.sync[pc]:
            v = values[j]
            if isinstance(v, ETensor):
                table.pull(j, v)
        if self.scalar_in[pc]:
            self._load_scalars(self.scalar_in[pc])
        nxt = self.m._exec(ins)
        if self.scalar_out[pc]:
            self._store_scalars(self.scalar_out[pc])
        if ins.op is Op.MOVE:
            table.copy_row(ins.src, ins.dst)
        else:
            for j in self.sync[pc]:
                v = values[j]
                if isinstance(v, ETensor):
                    table.push(j, v)
        return nxt if nxt < 0 else self.offsets[ins.chain] + nxt

    def step(self, pc) -> int:
        """Instruction ``pc`` alone, as the loop runs it (for an observed run): a compiled
        kernel whole (unsplit: the same numbers), its outputs synchronized after it so
        an observer sees them; a folded instruction does nothing; anything else as
        ``callback``."""
        call = self._whole.get(pc)
        if call is not None:
            status = call[0](call[1])
            if status != 0:
                self.explain_failure(pc, status)
            values = self.m.values
            for j in self.sync[pc]:
                if isinstance(values[j], ETensor):
                    self.table.pull(j, values[j])
            if self.scalar_out[pc]:
                self._load_scalars(self.scalar_out[pc])
            return -1
        if pc in self.folded:
            return -1
        return self.callback(pc)

    @property
    def _whole(self) -> dict:
        """pc -> (ctypes function, block) of each compiled instruction's whole call."""
        w = self._whole_cache
        if w is None:
            w = self._whole_cache = {pc: (_KERNEL_FN(fn), blk)
                                     for pc, (fn, blk) in self.kernels.items()}
        return w

    def explain_failure(self, pc, status):
        """A compiled kernel failed: rerun it on the reference kernel for a precise error."""
        if pc in self.runs and self.fused:  # the op of the run that failed
            block, pcs = self.runs[pc]
            failed = (ctypes.c_int64 * 2).from_address(block)[1]
            pc = pcs[failed] if 0 <= failed < len(pcs) else pc
        ins = self.flat[pc]
        try:
            code = ErrorCode(status)
        except ValueError:
            code = ErrorCode.Internal
        if pc in self.explain:  # a compiled delegate call says what failed itself
            raise ExecuTorchError(code, f"{self.m._where(ins)}: {self.explain[pc](status)}")
        self.callback(pc)
        raise ExecuTorchError(code, f"{self.m._where(ins)}: compiled kernel failed "
                                    f"with status {status}")

    # ---- synchronization for Python-side access --------------------------------------
    def pull_all(self):
        for i, v in enumerate(self.m.values):
            if isinstance(v, ETensor):
                self.table.pull(i, v)
        self._load_scalars(self.dyn_scalars)

    def push_all(self):
        for i, v in enumerate(self.m.values):
            if isinstance(v, ETensor):
                self.table.push(i, v, force=True)
        self._store_scalars(self.dyn_scalars)

    def pull_outputs(self):
        values = self.m.values
        for i in self.m.outputs:
            v = values[i]
            if isinstance(v, ETensor):
                # Compiled kernels change the sizes of dynamic tensors and (et_view)
                # the data pointer of views; moved handles change on the Python side.
                if v.dynamism or i in self.repointed:
                    self.table.pull(i, v)
            elif i in self.dyn_scalars:
                self._load_scalars((i,))
            elif isinstance(v, ListRef):
                for k in v.items:
                    if k >= 0 and isinstance(values[k], ETensor):
                        self.table.pull(k, values[k])
