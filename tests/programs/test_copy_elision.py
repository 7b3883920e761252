"""Copies removed at load (``pyruntime.copy_elision``): an out that can be its input's memory.

On real programs the elided method must give the unelided one's outputs bit for bit (and so
ExecuTorch's: ``test_parity`` runs them too), over every call and repeated executes; ViT-tiny
reads an out through a view the memory plan made free (another value over the same bytes),
which a first version missed (max error 2.5). On hand-made plans, each rule that keeps a
copy: the input's memory reused before the out's last read, another writer of the out, a
custom op or a training batch norm naming the input, a method output, an op that moves
elements; and the other way round (the input's writer writes the out's memory) where the
input's memory is reused.
"""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from pyruntime import copy_elision
from pyruntime.cython_ext.dtypes import ScalarType
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.instructions import KernelCall
from pyruntime.values import ListRef
from tests.programs.fixtures import get_fixture

# fixture -> the fewest copies elided (measured: 36, 25, 8 of 200, 189, 167 instructions)
PROGRAMS = {"llama_kv": 30, "vit_tiny": 20, "audio_encoder": 5}


def _bits(arrays):
    return [np.ascontiguousarray(a).view(np.uint8) for a in arrays]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_elided_method_gives_the_same_bits(name, monkeypatch):
    fx = get_fixture(name)
    prog = pyruntime.Runtime.get().load_program(str(fx.pte_path))
    for threads in (1, 2):
        m = prog.load_method("forward", tier="fast", threads=threads)
        assert len(m._fast.elided) >= PROGRAMS[name]
        with monkeypatch.context() as mp:
            mp.setattr(copy_elision, "elide", lambda *a: set())
            plain = prog.load_method("forward", tier="fast", threads=threads)
        assert not plain._fast.elided
        for _ in range(3):
            for call in fx.calls:
                for got, want in zip(_bits(m.execute(call)), _bits(plain.execute(call))):
                    np.testing.assert_array_equal(got, want)


# ---- hand-made plans: one float32 arena, tensors at byte offsets ----------------------------

class Plan:
    """Values over one arena and the instructions naming them (``elide``'s inputs)."""

    def __init__(self):
        self.arena = np.zeros(4096, np.uint8)
        self.values, self.flat = [], []

    def tensor(self, offset, sizes):
        t = ETensor(ScalarType.FLOAT, sizes, planned=True)
        t.storage = self.arena[offset:offset + t.capacity_bytes]
        return self.value(t)

    def value(self, v):
        self.values.append(v)
        return len(self.values) - 1

    def op(self, name, *args, out):
        self.flat.append(KernelCall(None, tuple(args) + (out, out), len(args) + 1, (), name,
                                    0, len(self.flat)))

    def elide(self, outputs=()):
        return copy_elision.elide(self.flat, self.values, [], list(outputs))


def _unsqueeze(p, src_off=0, out_off=64):
    """pc 0: O = unsqueeze(I, 0) with I [16] at ``src_off``, O [1, 16] at ``out_off``."""
    i, o = p.tensor(src_off, (16,)), p.tensor(out_off, (1, 16))
    p.op("aten::unsqueeze_copy.out", i, p.value(0), out=o)
    return i, o


def test_an_unsqueeze_read_later_becomes_a_view_of_its_input():
    p = Plan()
    i, o = _unsqueeze(p)
    t = p.tensor(128, (1, 16))
    p.op("aten::add.out", o, o, p.value(1), out=t)
    assert p.elide() == {0}
    assert p.values[o].data_ptr() == p.values[i].data_ptr()


def test_input_memory_reused_before_the_last_read_keeps_the_copy():
    p = Plan()
    i, o = _unsqueeze(p)
    reuse = p.tensor(0, (16,))  # the plan hands I's bytes to another tensor
    p.op("aten::neg.out", p.tensor(256, (16,)), out=reuse)
    p.op("aten::neg.out", o, out=p.tensor(128, (1, 16)))
    assert p.elide() == set()
    assert p.values[o].data_ptr() == p.arena.ctypes.data + 64


def test_a_view_of_the_out_is_moved_with_it():
    p = Plan()
    i, o = _unsqueeze(p)
    view = p.tensor(64, (4, 4))  # the same bytes as O under another value (a free view)
    p.op("aten::neg.out", view, out=p.tensor(128, (4, 4)))
    assert p.elide() == {0}
    assert p.values[view].data_ptr() == p.values[i].data_ptr()


def test_a_view_read_after_the_input_memory_is_reused_keeps_the_copy():
    p = Plan()
    i, o = _unsqueeze(p)
    view = p.tensor(64, (4, 4))
    p.op("aten::neg.out", p.tensor(256, (16,)), out=p.tensor(0, (16,)))  # I's bytes reused
    p.op("aten::neg.out", view, out=p.tensor(128, (4, 4)))
    assert p.elide() == set()


def _reused_input(p, between=False):
    """pc 0 writes I at 0 (``neg``), [pc 1 reads a tensor living in O's memory,] then O =
    unsqueeze(I) at 64, then the plan reuses I's memory and reads O: no forward elision."""
    i, o = p.tensor(0, (16,)), p.tensor(64, (1, 16))
    p.op("aten::neg.out", p.tensor(256, (16,)), out=i)
    if between:
        p.op("aten::neg.out", p.tensor(64, (16,)), out=p.tensor(320, (16,)))
    p.op("aten::unsqueeze_copy.out", i, p.value(0), out=o)
    p.op("aten::neg.out", p.tensor(384, (16,)), out=p.tensor(0, (16,)))
    p.op("aten::neg.out", o, out=p.tensor(128, (1, 16)))
    return i, o


def test_the_input_writer_writes_the_out_memory_when_the_input_memory_is_reused():
    p = Plan()
    i, o = _reused_input(p)
    assert p.elide() == {1}
    assert p.values[i].data_ptr() == p.values[o].data_ptr() == p.arena.ctypes.data + 64


def test_the_out_memory_in_use_before_the_copy_keeps_the_copy():
    p = Plan()
    i, o = _reused_input(p, between=True)
    assert p.elide() == set()
    assert p.values[i].data_ptr() == p.arena.ctypes.data


@pytest.mark.parametrize("case", ["second_writer", "custom_op", "training_batch_norm",
                                  "output", "moves_elements", "wrong_out_sizes"])
def test_copies_that_stay(case):
    p = Plan()
    if case == "moves_elements":  # permute of two dims of size > 1
        i, o = p.tensor(0, (4, 4)), p.tensor(64, (4, 4))
        p.op("aten::permute_copy.out", i, p.value(ListRef([p.value(1), p.value(0)])), out=o)
    elif case == "wrong_out_sizes":  # the kernel must still run (and raise)
        i, o = p.tensor(0, (16,)), p.tensor(64, (16, 1))
        p.op("aten::unsqueeze_copy.out", i, p.value(0), out=o)
    else:
        i, o = _unsqueeze(p)
    later = p.tensor(128, (1, 16))
    if case == "second_writer":
        p.flat.append(KernelCall(None, (o, p.tensor(256, (1, 16)), p.value(False)), 3, (),
                                 "aten::copy_", 0, 1))
    elif case == "custom_op":  # llama::update_cache writes its cache argument in place
        p.flat.append(KernelCall(None, (p.tensor(256, (1, 16)), i, p.value(0), later), 3, (),
                                 "llama::update_cache.out", 0, 1))
    elif case == "training_batch_norm":  # an out variant that updates running_mean (I)
        outs = (p.tensor(1024, (1, 16)), p.tensor(1536, (16,)), p.tensor(1600, (16,)))
        args = (p.tensor(512, (1, 16)), p.tensor(576, (16,)), p.tensor(640, (16,)), i,
                p.tensor(704, (16,)), p.value(True), p.value(0.1), p.value(1e-5)) + outs
        p.flat.append(KernelCall(None, args + outs, len(args), (),
                                 "aten::_native_batch_norm_legit.out", 0, 1))
    p.op("aten::neg.out", o, out=later)
    assert p.elide(outputs=[o] if case == "output" else []) == set()


@pytest.mark.parametrize("name,src,args,want", [
    ("aten::squeeze_copy.dims_out", (1, 4, 1), ([0, 1],), (4, 1)),
    ("aten::squeeze_copy.dim_out", (1, 4), (-2,), (4,)),
    ("aten::unsqueeze_copy.out", (4, 5), (-1,), (4, 5, 1)),
    ("aten::view_copy.out", (4, 6), ([2, -1, 3],), (2, 4, 3)),
    ("aten::view_copy.out", (4, 6), ([-1, -1],), None),
    ("aten::expand_copy.out", (1, 4, 1), ([2, 1, 4, -1], False), (2, 1, 4, 1)),
    ("aten::expand_copy.out", (3, 4), ([3, 5], False), None),
    ("aten::permute_copy.out", (1, 4, 1, 5), ([2, 1, 0, 3],), (1, 4, 1, 5)),
    ("aten::permute_copy.out", (1, 4, 1, 5), ([3, 1, 0, 2],), None),
    ("dim_order_ops::_clone_dim_order.out", (2, 3), (False, [1, 0]), None),
    ("dim_order_ops::_clone_dim_order.out", (2, 3), (False, None), (2, 3)),
])
def test_result_sizes(name, src, args, want):
    values = []

    def put(v):
        if isinstance(v, list):
            v = ListRef([put(x) for x in v])
        values.append(v)
        return len(values) - 1

    t = ETensor(ScalarType.FLOAT, src)
    ids = [put(t)] + [put(a) for a in args]
    assert copy_elision._result_sizes(name, t, ids, values) == want


def test_inspect_ops_counts_the_elided_calls():
    from tests.test_cli import cli

    rc, out, err = cli("inspect", "--ops", get_fixture("llama_kv").pte_path)
    assert rc == 0, err
    assert "dim_order_ops::_clone_dim_order.out: 0 compiled, 0 reference, 4 elided" in out
    assert "200 of 200 kernel calls compiled (or folded, elided or fused away)" in out
