"""The fast tier of a Method: descriptor table, compiled kernels, the Cython loop.

At load, every chain is flattened into one ``Loop``. An instruction whose op
has a compiled kernel (``kernels.fast``) that accepts its dtypes and whose
scalar arguments are fixed at load becomes a C function call run with the GIL
released; a JumpFalse on a Bool tensor is decided in the loop; everything else
(reference kernels, prim ops, moves, delegates without a native entry) is
called back into Python with the GIL held for that instruction only, with its
tensors synchronized between ETensor objects and descriptor rows.
"""
from __future__ import annotations

from cython_ext._loop import Loop
from cython_ext.desc import DescTable
from cython_ext.errors import ErrorCode, ExecuTorchError, invalid_program
from cython_ext.tensor import ETensor
from kernels.fast import get_binder
from kernels.fast.context import BindContext
from pyruntime.values import ListRef

KERNEL, DELEGATE, MOVE, JUMP_FALSE, FREE = range(5)
BOOL = 11


class FastPlan:
    def __init__(self, method):
        self.m = method
        values = method.values
        self.flat = []
        offsets = []
        for c, instrs in enumerate(method.instructions):
            offsets.append(len(self.flat))
            self.flat += [(c, len(instrs), ins) for ins in instrs]
        self.offsets = offsets
        self.folded = self._fold_constant_permutes(values)
        self.folded_ins = {id(self.flat[pc][2]) for pc in self.folded}
        buffers = list(method.arenas) + [method.program._data]
        buffers += [v.storage for v in values if isinstance(v, ETensor) and v.storage is not None]
        self.table = DescTable(values, buffers)
        rows = {id(v): i for i, v in enumerate(values) if isinstance(v, ETensor)}
        dynamic = self._dynamic_slots(values, self.flat)
        self.loop = Loop(len(self.flat))
        self.ctx = BindContext(self.table, rows, [])
        self.sync = []  # per pc: value indices whose tensors are synced around Python calls
        self.compiled = 0
        for pc, (c, n, ins) in enumerate(self.flat):
            kind, fn, args, nargs, lists, name, src_pc = ins
            self.sync.append(self._sync_indices(ins, values))
            if pc in self.folded:
                self.loop.set_nop(pc)
            elif kind == KERNEL and self._bind_kernel(pc, ins, values, dynamic):
                self.compiled += 1
            elif kind == JUMP_FALSE:
                cond = values[fn]
                if isinstance(cond, ETensor) and cond.scalar_type == BOOL and fn not in dynamic \
                        and args <= n:
                    self.loop.set_jump_false_tensor(pc, self.table.addr(fn), offsets[c] + args)

    def _fold_constant_permutes(self, values) -> set:
        """Turn ``permute_copy`` of a constant (a weight transposed on every run, as
        exporters emit for linear layers) into a strided view of the constant.

        The permute's result value becomes an ETensor over the constant's bytes
        whose dim order encodes the permutation, and the instruction becomes a
        no-op. Only done when the result has no other writer and is not a method
        output, so every reader sees exactly the values the copy would hold.
        """
        writers = {}
        for pc, (_, _, (kind, fn, args, nargs, lists, name, _)) in enumerate(self.flat):
            if kind in (KERNEL, DELEGATE) and args:
                writers.setdefault(args[-1], []).append(pc)
            elif kind == MOVE:
                writers.setdefault(args, []).append(pc)
        outputs = set(self.m.outputs)
        folded = set()
        for pc, (_, _, (kind, fn, args, nargs, lists, name, _)) in enumerate(self.flat):
            if name != "aten::permute_copy.out" or len(args) < 3:
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
        for _, _, (kind, fn, args, nargs, lists, name, pc) in flat:
            if kind == KERNEL and args and not isinstance(values[args[-1]], (ETensor, ListRef)):
                dyn.add(args[-1])
            elif kind == MOVE:
                dyn.add(args)
        return dyn

    def _sync_indices(self, ins, values):
        kind, fn, args, nargs, lists, name, src_pc = ins
        if kind in (KERNEL, DELEGATE):
            idx = []
            for j in args:
                v = values[j]
                if isinstance(v, ListRef):
                    idx += [k for k in v.items if k >= 0]
                else:
                    idx.append(j)
            return tuple(dict.fromkeys(idx))
        if kind == MOVE:
            return (fn, args)
        return (fn,)

    def _bind_kernel(self, pc, ins, values, dynamic) -> bool:
        kind, fn, args, nargs, lists, name, src_pc = ins
        binder = get_binder(name)
        if binder is None:
            return False
        used = args[:nargs]
        for j in used:
            v = values[j]
            if j in dynamic:
                return False
            if isinstance(v, ListRef) and any(k in dynamic for k in v.items):
                return False
        vals = [values[j].resolve(values) if isinstance(values[j], ListRef) else values[j]
                for j in used]
        r = binder(self.ctx, *vals)
        if r is None:
            return False
        self.loop.set_kernel(pc, *r)
        return True

    # ---- run ------------------------------------------------------------------------
    def run(self) -> None:
        status = self.loop.run(self._callback, self.m.max_instructions)
        if status == 0:
            return
        if status == -2:
            raise invalid_program(f"method {self.m.name!r}: more than {self.m.max_instructions} "
                                  "instructions in one execute (infinite loop?)")
        self._explain_failure(self.loop.failed_pc, status)

    def _callback(self, pc):
        c, n, ins = self.flat[pc]
        values = self.m.values
        table = self.table
        for j in self.sync[pc]:
            v = values[j]
            if isinstance(v, ETensor):
                table.pull(j, v)
        nxt = self.m._exec(ins, c, n)
        kind = ins[0]
        if kind == MOVE:
            table.copy_row(ins[1], ins[2])
        else:
            for j in self.sync[pc]:
                v = values[j]
                if isinstance(v, ETensor):
                    table.push(j, v)
        return nxt if nxt < 0 else self.offsets[c] + nxt

    def _explain_failure(self, pc, status):
        """A compiled kernel failed: rerun it on the reference kernel for a precise error."""
        c, n, ins = self.flat[pc]
        self._callback(pc)
        name, src_pc = ins[5], ins[6]
        try:
            code = ErrorCode(status)
        except ValueError:
            code = ErrorCode.Internal
        raise ExecuTorchError(code, f"{self.m._where(c, src_pc, name)}: compiled kernel failed "
                                    f"with status {status}")

    # ---- synchronization for Python-side access --------------------------------------
    def pull_all(self):
        for i, v in enumerate(self.m.values):
            if isinstance(v, ETensor):
                self.table.pull(i, v)

    def push_all(self):
        for i, v in enumerate(self.m.values):
            if isinstance(v, ETensor):
                self.table.push(i, v, force=True)

    def pull_outputs(self):
        values = self.m.values
        for i in self.m.outputs:
            v = values[i]
            if isinstance(v, ETensor):
                # Compiled kernels change only the sizes of dynamic tensors; data
                # pointers and moved handles are changed on the Python side.
                if v.dynamism:
                    self.table.pull(i, v)
            elif isinstance(v, ListRef):
                for k in v.items:
                    if k >= 0 and isinstance(values[k], ETensor):
                        self.table.pull(k, values[k])
