"""Load-time fusion on the fast tier: convolution + batch norm + clamp/relu as one kernel,
and runs of fixed-shape elementwise ops as one call.

A CNN exported for ExecuTorch's portable kernels runs each convolution as three
instructions: the convolution, ``_native_batch_norm_legit_no_training`` on its
output, then ``hardtanh`` (ReLU6) or ``relu`` on that, each a full pass over the
activation (MobileNetV2: 52 batch norms and 35 clamps, 14% of its time). Where
the pattern allows, the convolution's kernel runs the other two on each output
channel as soon as it is computed (``kernels.conv.typed.bind_fused``), writing the
last instruction's out directly; the other two become no-ops. The numbers are
the unfused ones, bit for bit: the same float operations per element in the same
order (a fold of the batch norm into the weights would not be).

A group is fused only when nothing can tell the difference:

* the instructions are adjacent in one chain and no jump lands between them;
* each intermediate (the convolution's out; the batch norm's three outs) is
  read by the next instruction of the group only, and is no method output;
* every tensor involved has data at load; where the final out overlaps a tensor
  the convolution reads (the plan may reuse the memory of its input, or of a weight
  computed at run time such as a dequantized one: each is dead by then, but the
  kernel reads it while writing, on every part of a split call), the kernel writes
  the convolution's own out and moves the result (a copy pass instead of two);
* the bias and the batch norm's tensors are constants (read at load), and each
  instruction of the group also compiled on its own.

Consecutive binary ops bound to ``kernels.elementwise.typed.fixed_binary_kernel``
(shapes fixed at load: a chain of small elementwise ops, as in a decode step) run as
one call that walks their argument blocks in order (``find_runs``): every op still
writes its own out, only the per-op dispatch goes. The same conditions on jumps apply.

An event tracer sees the unfused instructions (``FastPlan.set_fused(False)``
while it runs), so every intermediate is observable when tracing asks for it.

With ``math="fast"``, ``feeds_quantize`` finds the instructions that must stay exact:
those whose results reach a quantize op without passing a dequantize (the float
convolution of an int8 PT2E program, an 8da4w model's activations before their
per-token quantization). There a last-bit change flips whole quantisation steps, which
then spread through every later layer.
"""
from __future__ import annotations

from pyruntime.cython_ext.tensor import ETensor
from pyruntime.instructions import CALLS, Op
from pyruntime.kernels.schemas import SCHEMAS
from pyruntime.values import ListRef

CONV = "aten::convolution.out"
BN = "aten::_native_batch_norm_legit_no_training.out"
ACTS = ("aten::hardtanh.out", "aten::clamp.out", "aten::relu.out")


def _references(flat, values) -> dict:
    """value index -> how many instructions name it (any argument, list items too)."""
    refs: dict = {}
    for ins in flat:
        named = set(ins.values())
        if ins.op in CALLS:
            for j in ins.args:
                v = values[j]
                if isinstance(v, ListRef):
                    named.update(v.items)
        for j in named:
            refs[j] = refs.get(j, 0) + 1
    return refs


def _jump_targets(plan) -> set:
    """The pcs some JumpFalse can land on (a group or run never spans one)."""
    return {plan.offsets[ins.chain] + ins.dest for ins in plan.flat if ins.op is Op.JUMP_FALSE}


def _overlap(a: ETensor, b: ETensor) -> bool:
    pa, pb = a.data_ptr(), b.data_ptr()
    return pa < pb + b.capacity_bytes and pb < pa + a.capacity_bytes


def find_groups(plan) -> list:
    """[(conv pc, [pcs of the batch norm and/or activation], final out index)] of a
    ``FastPlan`` whose instructions are set up (see the module doc)."""
    flat, values = plan.flat, plan.m.values
    refs = _references(flat, values)
    outputs = set(plan.m.outputs) | set(plan.m.inputs)
    targets = _jump_targets(plan)

    def ins(pc):
        return flat[pc] if pc < len(flat) else None

    def private(j, count=2):
        return refs.get(j, 0) == count and j not in outputs

    def next_kernel(pc, chain):
        step = ins(pc)
        ok = step is not None and step.chain == chain and pc not in targets \
            and step.op is Op.KERNEL
        return step if ok else None

    groups = []
    pc = 0
    while pc < len(flat):
        conv = ins(pc)
        if conv.op is not Op.KERNEL or conv.name != CONV or conv.nargs != 10:
            pc += 1
            continue
        members, cur = [], conv.args[9]
        nxt = pc + 1
        step = next_kernel(nxt, conv.chain)
        if step and step.name == BN and step.nargs == 10 and step.args[0] == cur \
                and private(cur) and all(private(j, 1) for j in step.args[8:10]):
            members.append(nxt)
            cur = step.args[7]
            nxt += 1
            step = next_kernel(nxt, conv.chain)
        if step and step.name in ACTS and step.args[0] == cur and private(cur):
            members.append(nxt)
            cur = step.args[step.nargs - 1]
        if members and _fusable(plan, pc, members, cur):
            groups.append((pc, members, cur))
            pc = members[-1] + 1
        else:
            pc += 1
    return groups


def _fusable(plan, pc, members, out) -> bool:
    values = plan.m.values
    pcs = [pc] + members
    if any(p not in plan.kernels for p in pcs):
        return False  # each must compile alone (the tracer runs them so)
    tensors = [values[j] for p in pcs for j in plan.flat[p].args[:plan.flat[p].nargs]
               if isinstance(values[j], ETensor)]
    return all(t.storage is not None for t in tensors)


def _quant_kind(name: str) -> str:
    """"q" for a quantize op, "dq" for a dequantize op, "" otherwise."""
    op = name.split("::")[-1]
    return "q" if op.startswith("quantize_") else "dq" if op.startswith("dequantize_") else ""


def feeds_quantize(flat, values) -> set:
    """The pcs of the kernel calls whose results reach a quantize op's input without
    passing a dequantize op (through any chain of kernel calls and moves)."""
    writer = {}  # value index -> the pc writing it (an out-variant op's outs, a move's dst)
    for pc, ins in enumerate(flat):
        if ins.op is Op.MOVE:
            writer[ins.dst] = pc
        elif ins.op is Op.KERNEL and ins.args:
            n = SCHEMAS.get(ins.name, ("", 1))[1] or 1
            for j in ins.args[-n:]:
                writer[j] = pc

    def inputs(ins):
        if ins.op is Op.MOVE:
            return [ins.src]
        n = SCHEMAS.get(ins.name, ("", 1))[1] or 1
        out = []
        for j in ins.args[:-n]:
            v = values[j]
            out += [k for k in v.items if k >= 0] if isinstance(v, ListRef) else [j]
        return out

    exact = set()
    todo = [j for ins in flat if ins.op is Op.KERNEL and _quant_kind(ins.name) == "q"
            for j in inputs(ins)[:1]]
    while todo:
        pc = writer.get(todo.pop())
        if pc is None or pc in exact or _quant_kind(flat[pc].name) == "dq":
            continue
        exact.add(pc)
        todo += inputs(flat[pc])
    return exact


def bind_group(plan, pc, members, out):
    """(fn, block) of the fused kernel for a group, or None."""
    from pyruntime.kernels.conv.typed import bind_fused
    from pyruntime.kernels.elementwise.typed import bounds_ok

    values = plan.m.values
    conv = [values[j] for j in plan.flat[pc].args[:9]]
    for k in (3, 4, 5, 7):  # int lists
        if isinstance(conv[k], ListRef):
            conv[k] = conv[k].resolve(values)
    bn = act = None
    for p in members:
        args, name = plan.flat[p].args, plan.flat[p].name
        if name == BN:
            w, b, mean, var, _momentum, eps = (values[j] for j in args[1:7])
            bn = (w, b, mean, var, eps)
        elif name == "aten::relu.out":
            act = ("relu",)
        else:
            act = ("clamp", values[args[1]], values[args[2]])
            if not bounds_ok(act[1], act[2]):
                return None
    conv_out, final = values[plan.flat[pc].args[9]], values[out]
    # the planner may give the final out the memory of any tensor the convolution reads
    # (each is dead once it is done): a weight computed at run time (a dequantized one)
    # as well as the input. Written directly, one part's results would overwrite what
    # another part (or a later chunk) still reads.
    reads = [t for t in conv[:3] if isinstance(t, ETensor)]
    return bind_fused(plan.ctx, conv, bn, act, final,
                      conv_out if any(_overlap(final, t) for t in reads) else None)


MIN_RUN = 2  # ops in a run worth one call


def find_runs(plan, taken=frozenset()) -> list:
    """[(first pc, [the other pcs])]: maximal runs of consecutive instructions of one chain
    bound to ``fixed_binary_kernel`` (one call each, no parts), no jump landing inside,
    none in ``taken`` (another group's)."""
    from pyruntime.kernels.fast import jit
    from pyruntime.kernels.elementwise.typed import fixed_binary_kernel

    fixed = jit._COMPILED.get(fixed_binary_kernel)
    if fixed is None:
        return []
    addr = fixed.address
    flat = plan.flat
    targets = _jump_targets(plan)

    def member(pc):
        r = plan.calls.get(pc)
        return r is not None and len(r) == 2 and r[0] == addr and pc not in taken

    runs, pc = [], 0
    while pc < len(flat):
        if not member(pc):
            pc += 1
            continue
        end = pc + 1
        while end < len(flat) and member(end) and end not in targets \
                and flat[end].chain == flat[pc].chain:
            end += 1
        if end - pc >= MIN_RUN:
            runs.append((pc, list(range(pc + 1, end))))
        pc = end
    return runs


def bind_run(plan, pc, members):
    """(fn, block) of one call running the run's blocks in order; raises KernelNotReady
    when the run kernel is not compiled yet (background compile mode)."""
    from pyruntime.kernels.elementwise.typed import bind_fixed_run

    return bind_fixed_run(plan.ctx, [plan.calls[p][1] for p in [pc] + members])
