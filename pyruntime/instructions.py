"""A method's plan as data: one small record per instruction, of five kinds.

``Method`` builds them once at load from the program's chains (checking every index);
everything that reads a plan (the fast plan, load-time fusion, the event tracer,
``trace()``, ``inspect``, ``diff``) reads these records, and one loop
(``cython_ext._loop.Loop``) runs them on either tier. ``pc`` is an instruction's index
in the method's flat list (the chains one after another); ``src_pc`` its index in its
own chain, as the program and ETDump number it; a ``JumpFalse`` destination is a
``src_pc`` of the same chain.

>>> # for ins in method.flat:
>>> #     if ins.op is Op.KERNEL: print(ins.chain, ins.src_pc, ins.name, ins.args)
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar


class Op(IntEnum):
    KERNEL = 0
    DELEGATE = 1
    MOVE = 2
    JUMP_FALSE = 3
    FREE = 4


@dataclass(slots=True, eq=False)
class KernelCall:
    """``kernel(*values[args[:nargs]])`` writes ``values[args[-1]]`` (the out)."""
    kernel: Any  # the reference kernel: a Python callable
    args: tuple  # value indices, the out last
    nargs: int  # how many of them the kernel takes
    lists: tuple  # positions in ``args`` whose value is a list of values (ListRef)
    name: str  # the operator, ``aten::add.out``
    chain: int
    src_pc: int
    op: ClassVar[Op] = Op.KERNEL

    def values(self) -> tuple:
        return self.args


@dataclass(slots=True, eq=False)
class DelegateCall:
    """``backend.execute(handle, values[args])``."""
    backend: Any
    handle: Any
    args: tuple
    lists: tuple
    name: str  # ``delegate XnnpackBackend``
    chain: int
    src_pc: int
    op: ClassVar[Op] = Op.DELEGATE

    @property
    def nargs(self) -> int:
        return len(self.args)

    def values(self) -> tuple:
        return self.args


@dataclass(slots=True, eq=False)
class Move:
    """``values[dst] = values[src]``."""
    src: int
    dst: int
    chain: int
    src_pc: int
    op: ClassVar[Op] = Op.MOVE
    name: ClassVar[str] = "move"

    def values(self) -> tuple:
        return (self.src, self.dst)


@dataclass(slots=True, eq=False)
class JumpFalse:
    """Go to ``dest`` (an index in this chain) unless ``values[cond]`` is true (a Bool,
    or a Bool tensor all true)."""
    cond: int
    dest: int
    chain: int
    src_pc: int
    op: ClassVar[Op] = Op.JUMP_FALSE
    name: ClassVar[str] = "jump_false"

    def values(self) -> tuple:
        return (self.cond,)


@dataclass(slots=True, eq=False)
class Free:
    """Release ``values[value]``'s storage."""
    value: int
    chain: int
    src_pc: int
    op: ClassVar[Op] = Op.FREE
    name: ClassVar[str] = "free"

    def values(self) -> tuple:
        return (self.value,)


Instruction = KernelCall | DelegateCall | Move | JumpFalse | Free
CALLS = (Op.KERNEL, Op.DELEGATE)
