"""Load-time check of each KernelCall's arguments against its operator's schema.

The emitter writes every schema argument in order, then one value slot for the
result (a tensor, a tensor list for tuple returns, or a scalar for prim ops).
A program whose call has too few arguments, or a list where a tensor belongs,
is malformed: both tiers reject it when the method loads, naming the
instruction, the operator and the argument, before any binder or compiled
kernel sees the values.
"""
from __future__ import annotations

from pyruntime.cython_ext.errors import invalid_program
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.schemas import SCHEMAS
from pyruntime.values import ListRef

_parsed: dict = {}


def _schema(name: str):
    s = _parsed.get(name)
    if s is None:
        entry = SCHEMAS.get(name)
        if entry is None:
            return None
        args, nret = entry
        s = _parsed[name] = ([tuple(a.split(":")) for a in args.split()], nret)
    return s


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _list_items(v, values):
    """The items of a list value (boxed or literal), or None if ``v`` is no list."""
    if isinstance(v, ListRef):
        return v.resolve(values)
    if isinstance(v, list):
        return v
    return None


def _matches(kind: str, v, values) -> bool:
    if kind.endswith("?") and v is None:
        return True
    kind = kind.rstrip("?") if not kind.endswith("[]?") else kind[:-1]
    if kind == "T":
        return isinstance(v, ETensor)
    if kind == "i":
        return _is_int(v)
    if kind == "f":
        return _is_num(v)
    if kind == "b":
        return isinstance(v, bool)
    if kind == "s":
        return isinstance(v, (int, float))
    if kind == "str":
        return isinstance(v, str)
    items = _list_items(v, values)
    if items is None:
        return False
    if kind == "T[]":
        return isinstance(v, ListRef) and all(isinstance(x, ETensor) for x in items)
    if kind == "T?[]":
        return isinstance(v, ListRef) and all(x is None or isinstance(x, ETensor) for x in items)
    if kind == "i[]":
        return all(_is_int(x) for x in items)
    if kind == "f[]":
        return all(_is_num(x) for x in items)
    if kind == "b[]":
        return all(isinstance(x, bool) for x in items)
    return True  # a kind this table does not constrain


def _describe(v, values) -> str:
    if isinstance(v, ETensor):
        return f"a tensor {v.describe()}"
    if isinstance(v, ListRef):
        items = v.resolve(values)
        kinds = sorted({type(x).__name__ for x in items})
        return f"a list of {len(items)} ({', '.join(kinds) or 'empty'})"
    if isinstance(v, list):
        return f"a list of {len(v)} scalars"
    if v is None:
        return "None"
    return f"{type(v).__name__} {v!r}"


_KIND_NAMES = {"T": "a tensor", "i": "an int", "f": "a float", "b": "a bool", "s": "a scalar",
               "str": "a string", "T[]": "a tensor list", "T?[]": "a list of optional tensors",
               "i[]": "an int list", "f[]": "a float list", "b[]": "a bool list"}


def _kind_name(kind: str) -> str:
    opt = kind.endswith("?")
    base = _KIND_NAMES.get(kind[:-1] if opt else kind, kind)
    return f"{base} or None" if opt else base


def check_kernel_args(name: str, args, values, where: str) -> None:
    """Raise InvalidProgram unless ``args`` (value indices) fit ``name``'s schema.

    Operators without a table entry (registered after the table was made) are
    not checked here; their kernels validate at run time.
    """
    s = _schema(name)
    if s is None:
        return
    params, nret = s
    # the emitter appends the result slot; an op returning nothing (split_with_sizes_copy
    # .out) gets its out argument again, or nothing
    want = len(params) + (1 if nret else 0)
    if len(args) != want and not (nret == 0 and len(args) == want + 1):
        raise invalid_program(
            f"{where} ({name}): expected {len(params)} arguments"
            f"{' and a result slot' if nret else ''} ({want} values), got {len(args)}")
    for (pname, kind), j in zip(params, args):
        v = values[j]
        if not _matches(kind, v, values):
            raise invalid_program(
                f"{where} ({name}): argument {pname!r} (value {j}) must be "
                f"{_kind_name(kind)}, got {_describe(v, values)}")
    if nret:
        j = args[-1]
        v = values[j]
        if nret > 1 and not (isinstance(v, ListRef) and len(v.items) == nret
                             and all(isinstance(x, ETensor) for x in v.resolve(values))):
            raise invalid_program(f"{where} ({name}): the result slot (value {j}) must be a "
                                  f"list of {nret} tensors, got {_describe(v, values)}")
