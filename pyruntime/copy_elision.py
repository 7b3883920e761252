"""Copies removed at load on the fast tier: an op whose out holds its input's bytes unchanged.

An exported decode step is full of ops that only rename a tensor: ``squeeze_copy``
and ``unsqueeze_copy`` around RoPE, ``view_copy``, an ``expand_copy`` or
``permute_copy`` that moves no element, a ``_clone_dim_order`` of a contiguous tensor
(the Llama KV step elides 36 of its 200 instructions). ExecuTorch's portable kernels copy
each one. ``elide`` finds those whose out can simply be the input's memory and makes
the out tensor a view of it: the instruction becomes a no-op and every reader of the
out reads the input's bytes, which are the bytes the copy would have written.

An instruction at ``pc`` with input ``I`` and out ``O`` is elided only when nothing can
tell the difference:

* the op's result, for these static sizes and arguments, is exactly ``O``'s sizes,
  with ``O`` and ``I`` contiguous, of one dtype and element count, so ``O``'s bytes
  equal ``I``'s (a malformed out keeps its copy, and the kernel's error);
* both are static planned tensors; ``O`` is written by this instruction only, is no
  method input or output, is not read by a delegate, and no move or ``et_view``
  touches either of them;
* from ``pc`` to the last instruction reading ``O``, nothing writes any byte of ``I``'s
  memory (the plan may reuse it once ``I`` is dead: checked against every tensor each
  instruction may write, by address; an instruction that writes a tensor whose
  address is not known at load stops the elision), and the method has no jumps.

Where the plan reuses ``I``'s memory before ``O``'s last read, the other way round can
work: ``I``'s one writer (an ATen out variant, which writes its out whole) writes ``O``'s
memory instead, when nothing names that memory from the writer to the copy, ``I`` is read
only in between, and nothing reads ``I``'s own memory under another value afterwards.

Chains work: an out elided onto ``I`` can be the input of a later elided copy; each
elision checks ``I``'s memory, which is then the first input's, up to its own last read.
The numbers are unchanged bit for bit (no arithmetic is involved); an event tracer sees
the instruction run as a no-op and its out hold the right values.
"""
from __future__ import annotations

from pyruntime.cython_ext.tensor import Dynamism, ETensor
from pyruntime.instructions import Op
from pyruntime.kernels.schemas import SCHEMAS
from pyruntime.values import ListRef

# ops whose out is a copy of ``self`` when the sizes say no element moves
_SAME = ("aten::clone.out", "aten::alias_copy.out", "aten::detach_copy.out",
         "aten::lift_fresh_copy.out", "dim_order_ops::_clone_dim_order.out",
         "dim_order_ops::_to_dim_order_copy.out", "aten::_to_copy.out")
_RESHAPE = ("aten::squeeze_copy.dims_out", "aten::squeeze_copy.dim_out",
            "aten::squeeze_copy.out", "aten::unsqueeze_copy.out", "aten::view_copy.out",
            "aten::expand_copy.out", "aten::permute_copy.out")
OPS = _SAME + _RESHAPE


def _ints(v, values):
    """A constant int list argument as a tuple, else None."""
    if isinstance(v, ListRef):
        v = v.resolve(values)
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool)
                                            for x in v):
        return tuple(v)
    return None


def _result_sizes(name, src, args, values):
    """The sizes ``name`` gives ``src`` with these arguments when its out is a plain copy of
    ``src``'s elements in order, else None (the op moves elements, or it is not known)."""
    sizes, nd = src.sizes, len(src.sizes)
    arg = [values[j] for j in args]
    if name in _SAME:
        if name == "dim_order_ops::_clone_dim_order.out" or \
                name == "dim_order_ops::_to_dim_order_copy.out":
            order = arg[2]
            if order is not None and _ints(order, values) != tuple(range(nd)):
                return None
        return sizes
    if name == "aten::unsqueeze_copy.out":
        d = arg[1]
        if not isinstance(d, int) or not -nd - 1 <= d <= nd:
            return None
        d %= nd + 1
        return sizes[:d] + (1,) + sizes[d:]
    if name.startswith("aten::squeeze_copy"):
        if name == "aten::squeeze_copy.out":
            dims = tuple(range(nd))
        elif name == "aten::squeeze_copy.dim_out":
            dims = (arg[1],) if isinstance(arg[1], int) else None
        else:
            dims = _ints(arg[1], values)
        if dims is None or nd == 0 or any(not -nd <= d < nd for d in dims):
            return None
        drop = {d % nd for d in dims}
        return tuple(s for i, s in enumerate(sizes) if not (i in drop and s == 1))
    if name == "aten::view_copy.out":
        want = _ints(arg[1], values)
        if want is None or sum(1 for s in want if s == -1) > 1 or any(s < -1 for s in want):
            return None
        known = 1
        for s in want:
            known *= s if s != -1 else 1
        if -1 in want:
            if known == 0 or src.numel % known:
                return None
            want = tuple(src.numel // known if s == -1 else s for s in want)
        return want
    if name == "aten::expand_copy.out":
        want = _ints(arg[1], values)
        if want is None or len(want) < nd:
            return None
        lead = len(want) - nd
        out = []
        for i, s in enumerate(want):
            if i < lead:
                if s < 0:
                    return None
                out.append(s)
                continue
            have = sizes[i - lead]
            if s == -1 or s == have:
                out.append(have)
            elif have == 1 and s >= 0:
                out.append(s)
            else:
                return None
        return tuple(out)
    if name == "aten::permute_copy.out":
        perm = _ints(arg[1], values)
        if perm is None or len(perm) != nd:
            return None
        try:
            perm = [p % nd for p in perm] if nd else []
        except ZeroDivisionError:
            return None
        if sorted(perm) != list(range(nd)):
            return None
        moved = [p for p in perm if sizes[p] != 1]  # elements move unless these stay in order
        if moved != sorted(moved):
            return None
        return tuple(sizes[p] for p in perm)
    return None


# out variants that also update an input in place (training batch norm's running stats)
_MUTATING = ("aten::_native_batch_norm_legit.out",)


def _out_variant(ins) -> bool:
    """An ATen (or dim_order) out variant: it writes its outs whole and nothing else."""
    name = ins.name or ""
    return ins.op is Op.KERNEL and name in SCHEMAS and name.endswith("out") \
        and name.split("::")[0] in ("aten", "dim_order_ops") and name not in _MUTATING


def _written(ins, values) -> list:
    """Value indices the instruction may write: an ATen (or dim_order) out variant writes
    its outs; anything else (in-place ops, custom ops such as ``llama::update_cache``,
    delegates) is taken to write every tensor it names."""
    if ins.op is Op.MOVE:
        return [ins.dst]
    if ins.op not in (Op.KERNEL, Op.DELEGATE):
        return []
    if _out_variant(ins):
        nret = SCHEMAS[ins.name][1]
        return list(ins.args[ins.nargs - nret:ins.nargs]) + list(ins.args[ins.nargs:])
    return _flatten(ins.args, values)


def _flatten(indices, values) -> list:
    """Value indices with each list value's items in its place."""
    out = []
    for j in indices:
        v = values[j] if j >= 0 else None
        out.extend(v.items if isinstance(v, ListRef) else (j,))
    return out


def elide(flat, values, inputs, outputs) -> set:
    """Make the out of every removable copy (see the module doc) a view of its input's
    memory, in ``values``; returns the pcs that become no-ops. Call before anything
    reads the tensors' addresses (descriptor tables, binders)."""
    if any(ins.op is Op.JUMP_FALSE for ins in flat):
        return set()
    inputs, outputs = set(inputs), set(outputs)
    named = []  # per pc: the tensor values it names (list items too)
    wrote = []  # per pc: the tensor values it may write
    readers: dict = {}  # value index -> pcs naming it
    writers: dict = {}
    spans: dict = {}  # tensor value index -> (first byte, end) or None (not known at load)
    moved = set()  # values a move or et_view derives from or into (addresses change)
    delegated = set()  # values a delegate names
    for pc, ins in enumerate(flat):
        ks = [k for k in dict.fromkeys(_flatten(ins.values(), values))
              if k >= 0 and isinstance(values[k], ETensor)]
        w = {k for k in _written(ins, values) if k >= 0 and isinstance(values[k], ETensor)}
        named.append(ks)
        wrote.append(w)
        for k in ks:
            readers.setdefault(k, []).append(pc)
            if k not in spans:
                t = values[k]
                spans[k] = None if t.storage is None else \
                    (t.data_ptr(), t.data_ptr() + t.capacity_bytes)
            if ins.op is Op.DELEGATE:
                delegated.add(k)
        for k in w:
            writers.setdefault(k, []).append(pc)
        if ins.op is Op.MOVE:
            moved.update((ins.src, ins.dst))
        elif ins.name == "executorch_prim::et_view.default":
            moved.update(ins.args)

    def fixed(j):
        t = values[j]
        return (isinstance(t, ETensor) and t.planned and t.storage is not None
                and t.dynamism == Dynamism.STATIC and t.is_contiguous() and j not in moved)

    def overlaps(k, lo, hi):
        sp = spans[k]
        return sp is None or (sp[0] < hi and lo < sp[1])

    def untouched(start, stop, lo, hi):
        """No instruction in pcs [start, stop] may write a byte of [lo, hi)."""
        return not any(overlaps(k, lo, hi) for q in range(start, stop + 1) for k in wrote[q])

    def read_elsewhere(start, own, lo, hi):
        """(values other than ``own`` that read bytes of [lo, hi) from pc ``start`` on,
        the pc that overwrites them or the last pc): the memory plan gives a view the
        exporter made free, such as a ``view_copy``, the bytes of the tensor it views
        under its own value."""
        found = set()
        for q in range(start, len(flat)):
            w = wrote[q]
            found.update(k for k in named[q] if k != own and k not in w and overlaps(k, lo, hi))
            if any(k != own and overlaps(k, lo, hi) for k in w):
                return found, q
        return found, len(flat) - 1

    def aliases_of(pc, out_j):
        """The other values reading the out's bytes after ``pc`` (``read_elsewhere``), with
        the last pc reading any of them; None when one cannot follow the out."""
        lo, hi = spans[out_j]
        found, end = read_elsewhere(pc + 1, out_j, lo, hi)
        for k in found:
            sp = spans[k]
            if sp is None or not (lo <= sp[0] and sp[1] <= hi) or not fixed(k) \
                    or k in writers or k in delegated or k in outputs:
                return None
        last = max(readers[out_j])
        for k in found:
            if max(readers[k]) > end:
                return None
            last = max(last, max(readers[k]))
        return found, last

    def into_out(pc, src_j, out_j):
        """The other way round: the input's one writer writes the out's memory, where
        that memory is named by nothing from the writer to the copy, the input is read
        only in between, and nothing reads the input's own memory under another value
        afterwards (before it is overwritten). True if done."""
        ws = writers.get(src_j, [])
        if len(ws) != 1 or not ws[0] < pc or ws[0] in elided:
            return False
        p = ws[0]
        if not _out_variant(flat[p]) or src_j in inputs or src_j in outputs \
                or src_j in delegated or any(not p <= r <= pc for r in readers[src_j]):
            return False
        olo, ohi = spans[out_j]
        if any(k != src_j and overlaps(k, olo, ohi) for q in range(p, pc) for k in named[q]):
            return False
        if read_elsewhere(p + 1, src_j, *spans[src_j])[0]:
            return False
        values[src_j].storage = values[out_j].storage
        spans[src_j] = spans[out_j]
        return True

    elided = set()
    for pc, ins in enumerate(flat):
        if ins.op is not Op.KERNEL or ins.name not in OPS or len(ins.args) < 2:
            continue
        src_j, out_j = ins.args[0], ins.args[-1]
        if not (fixed(src_j) and fixed(out_j)) or src_j == out_j:
            continue
        if out_j in inputs or out_j in outputs or out_j in delegated \
                or writers.get(out_j) != [pc] or any(j != out_j for j in
                                                      ins.args[ins.nargs:]):
            continue
        src, out = values[src_j], values[out_j]
        if not out.storage.flags.writeable:
            continue
        if src.dtype != out.dtype or src.numel != out.numel or src.numel == 0 \
                or _result_sizes(ins.name, src, ins.args, values) != out.sizes:
            continue
        follow = aliases_of(pc, out_j)
        lo, hi = spans[src_j]
        if follow is None or not untouched(pc + 1, follow[1], lo, hi):
            if into_out(pc, src_j, out_j):
                elided.add(pc)
            continue
        o_lo = spans[out_j][0]
        for k in follow[0]:  # a view of the out: the same place in the input's memory
            t = values[k]
            off = spans[k][0] - o_lo
            t.storage = src.storage[off:off + t.capacity_bytes]
            spans[k] = (lo + off, lo + off + t.capacity_bytes)
        out.storage = src.storage
        spans[out_j] = spans[src_j]
        elided.add(pc)
    return elided
