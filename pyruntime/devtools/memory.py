"""The memory plan of a method: where each planned tensor lives and when it is live.

Lifetimes are read from the instruction stream: a tensor is live from the first
instruction that names it (directly, or in a tensor list) to the last one;
method inputs are live from the start and outputs to the end.

>>> from pyruntime.devtools.memory import memory_plan
>>> # blocks, arena_sizes = memory_plan(program, "forward")
>>> # [(b.value, b.arena, b.offset, b.nbytes, b.first, b.last) for b in blocks]
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from pyruntime.cython_ext.dtypes import element_size, scalar_type_name


@dataclass
class PlannedTensor:
    value: int  # value index in the plan
    arena: int  # memory_id (1-based, as in the .pte)
    offset: int
    nbytes: int
    first: int  # first instruction (flattened over chains) using it
    last: int
    describe: str


def _instruction_refs(plan) -> list[list[int]]:
    values = plan.values or []

    def expand(j):
        if 0 <= j < len(values):
            _, v = values[j].val
            if v is not None and v._kind in ("TensorList", "OptionalTensorList"):
                return [k for k in (v.items or []) if k >= 0]
        return [j]

    refs = []
    for chain in plan.chains or []:
        for ins in chain.instructions or []:
            _, a = ins.instr_args
            kind = getattr(a, "_kind", "")
            if kind in ("KernelCall", "DelegateCall"):
                idx = [k for j in (a.args or []) for k in [j, *expand(j)]]
            elif kind == "MoveCall":
                idx = [a.move_from, a.move_to]
            elif kind == "JumpFalseCall":
                idx = [a.cond_value_index]
            elif kind == "FreeCall":
                idx = [a.value_index]
            else:
                idx = []
            refs.append(idx)
    return refs


def memory_plan(program, method: str = "forward") -> tuple[list[PlannedTensor], list[int]]:
    """(planned tensors, arena sizes) of ``method``; arena ``i`` is ``sizes[i - 1]``."""
    plan = program._plan(method)
    refs = _instruction_refs(plan)
    n = len(refs)
    first, last = {}, {}
    for pc, idx in enumerate(refs):
        for j in idx:
            first.setdefault(j, pc)
            last[j] = pc
    for j in plan.inputs or []:
        first[j] = 0
        last.setdefault(j, 0)
    for j in plan.outputs or []:
        first.setdefault(j, max(n - 1, 0))
        last[j] = max(n - 1, 0)
    blocks = []
    for j, ev in enumerate(plan.values or []):
        _, t = ev.val
        if t is None or t._kind != "Tensor" or t.allocation_info is None or j not in first:
            continue
        ai = t.allocation_info
        sizes = list(t.sizes or [])
        blocks.append(PlannedTensor(
            j, ai.memory_id, ai.memory_offset_low | (ai.memory_offset_high << 32),
            prod(sizes) * element_size(t.scalar_type), first[j], last[j],
            f"{scalar_type_name(t.scalar_type)}{sizes}"))
    sizes = [int(s) for s in (plan.non_const_buffer_sizes or [])[1:]]
    return blocks, sizes
