"""One binder per op: ``register_choice`` (kernels/fast) pairs an op's typed and generic
binders, and every pair lives in its family's ``choose.py``."""
from __future__ import annotations

import pytest

import pyruntime.kernels.fast as fast
from pyruntime.kernels.fast import register_choice
from pyruntime.kernels.fast.context import IntSlot


@pytest.fixture
def op_name():
    name = "test::choice.out"
    yield name
    fast._BINDERS.pop(name, None)
    fast._DYNAMIC_INTS.discard(name)


def _binders(typed_result):
    calls = []

    def typed(ctx, *values):
        calls.append("typed")
        return typed_result

    def generic(ctx, *values):
        calls.append("generic")
        return "generic kernel"
    return typed, generic, calls


@pytest.mark.parametrize("typed_result, expect, called", [
    ("typed kernel", "typed kernel", ["typed"]),
    (None, "generic kernel", ["typed", "generic"]),
])
def test_the_generic_binder_takes_what_the_typed_one_declines(op_name, typed_result, expect,
                                                              called):
    typed, generic, calls = _binders(typed_result)
    register_choice(op_name, typed, generic)
    assert fast.get_binder(op_name)(None, 1, [2, 3]) == expect
    assert calls == called


def test_run_time_ints_never_reach_the_generic_binder(op_name):
    typed, generic, calls = _binders(None)
    register_choice(op_name, typed, generic, dynamic_ints=True)
    binder = fast.dynamic_binder(op_name)
    assert binder(None, [IntSlot(4, 0), 5]) is None and calls == ["typed"]
    assert binder(None, IntSlot(4, 0)) is None and calls == ["typed", "typed"]
    assert binder(None, 4) == "generic kernel"


def test_an_op_registers_one_binder(op_name):
    typed, generic, _ = _binders(None)
    register_choice(op_name, typed, generic)
    with pytest.raises(ValueError, match="registered twice"):
        register_choice(op_name, typed, generic)


def test_every_pair_is_registered_by_its_family_choose_module():
    fast.get_binder("")
    pairs = {op: b for op, b in fast._BINDERS.items() if hasattr(b, "typed")}
    assert len(pairs) >= 60
    for op, b in pairs.items():
        assert b.__module__.endswith(".choose"), (op, b.__module__)
        assert b.typed is not b.generic, op
    from pyruntime.kernels import family_modules
    choose = {m for m in family_modules("fast") if m.endswith(".choose")}
    assert choose == {b.__module__ for b in pairs.values()}  # none registers nothing


def test_every_held_elementwise_binder_is_behind_a_typed_one():
    """An op in generic_bind.PAIRED registers no binder of its own: its choose.py must pair
    it, or the op would lose its any-dtype kernel."""
    from pyruntime.kernels.elementwise.generic_bind import HELD, PAIRED

    fast.get_binder("")
    assert set(HELD) == PAIRED
    for op, generic in HELD.items():
        chosen = fast._BINDERS[op]
        assert generic in (chosen.typed, chosen.generic), op
