"""Load-time conv + batch norm + activation fusion on the fast tier (``pyruntime.fusion``).

The fused kernel must give the unfused instructions' numbers bit for bit (and so
ExecuTorch's), including NaN, infinities and crossed clamp bounds; fuse only where
nothing can tell; and an event tracer must see every instruction's own output.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pyruntime
from pyruntime.kernels.conv import typed as C
from pyruntime.devtools import EventTracer
from tests.programs.fixtures import get_fixture
from tests.programs.small_programs import small_program

# conv_fusion (small_programs._conv_fusion), instruction by instruction:
#  0 conv 1 bn 2 hardtanh | 3 conv(depthwise, bias) 4 bn 5 hardtanh | 6 conv(bias) 7 relu
#  8 conv 9 bn 10 add | 11 conv (its out is returned) 12 bn 13 relu | 14 conv 15 clamp(1, -1)
EXPECTED_GROUPS = [(0, [1, 2]), (3, [4, 5]), (6, [7]), (8, [9]), (14, [15])]


def _bits(arrays):
    return [np.ascontiguousarray(a).view(np.uint8) for a in arrays]


def _inputs(seed):
    x = np.random.default_rng(seed).standard_normal((2, 3, 12, 12)).astype(np.float32) * 3
    x[0, 0, 3, 3], x[1, 2, 5, 5], x[0, 1, 0, 0], x[1, 1, 1, 1] = np.nan, np.inf, -np.inf, -0.0
    x[1, 0, 7:9, 7:9] = 3e38  # overflows to inf in the sums
    return x


@pytest.fixture(scope="module")
def fusion_program():
    pte, _ = small_program("conv_fusion")
    return pyruntime.Runtime.get().load_program(pte), pte


def test_groups_fused_where_nothing_can_tell(fusion_program):
    prog, _ = fusion_program
    fp = prog.load_method("forward", tier="fast")._fast
    assert [(pc, members) for pc, _, members in fp.fusions] == EXPECTED_GROUPS
    assert fp.fused
    # conv 6's final out reuses its input's memory: that group writes the conv's own out
    # and moves the result
    moves = {pc: (ctypes.c_int64 * 19).from_address(r[1])[C.B_MOVE] != 0
             for pc, r, _ in fp.fusions}
    assert moves[6] and not moves[0]


def test_a_final_out_over_a_run_time_weight_is_written_through_a_move():
    """int8 PT2E dequantizes each convolution's weight on every run into planned memory,
    which the plan may give to the group's final out (the weight is dead after the
    convolution). Written directly, the fused kernel would overwrite weight values that
    another part, or a later column chunk, still reads (issue 28's race): a group whose
    final out overlaps any tensor the convolution reads writes the conv's own out and
    moves the result."""
    from pyruntime.cython_ext.tensor import ETensor
    from pyruntime.fusion import _overlap

    prog = pyruntime.Runtime.get().load_program(get_fixture("quant_cnn_bn").pte_path)
    for threads in (1, 3):
        fp = prog.load_method("forward", threads=threads)._fast
        values, over_weight_only = fp.m.values, 0
        for pc, r, members in fp.fusions:
            args = fp.flat[pc].args
            final = values[fp.flat[members[-1]].args[-1]]
            reads = [values[j] for j in args[:3] if isinstance(values[j], ETensor)]
            move = (ctypes.c_int64 * 19).from_address(r[1])[C.B_MOVE] != 0
            assert move == any(_overlap(final, t) for t in reads), (threads, pc)
            over_weight_only += _overlap(final, reads[1]) and not _overlap(final, reads[0])
        assert over_weight_only, "no group whose final out overlaps only its weight"


def _compare_with_unfused_reference_and_executorch(prog, pte, x):
    from executorch.runtime import Runtime as ETRuntime
    import torch

    m = prog.load_method("forward", tier="fast")
    fused = [np.array(o) for o in m.execute([x])]
    m._fast.set_fused(False)
    unfused = [np.array(o) for o in m.execute([x])]
    ref = [np.array(o) for o in prog.load_method("forward", tier="reference").execute([x])]
    et = [o.numpy() for o in ETRuntime.get().load_program(str(pte)).load_method("forward")
          .execute([torch.from_numpy(x)])]
    assert any(np.isnan(o).any() for o in fused)  # the special values reached the outputs
    for name, other in (("unfused", unfused), ("reference tier", ref), ("executorch", et)):
        for i, (a, b) in enumerate(zip(_bits(fused), _bits(other))):
            assert np.array_equal(a, b), f"output {i}: fused differs from {name}"


@pytest.mark.parametrize("seed", [0, 1])
def test_fused_equals_unfused_reference_and_executorch(fusion_program, seed):
    prog, pte = fusion_program
    _compare_with_unfused_reference_and_executorch(prog, pte, _inputs(seed))


def test_intermediates_read_twice_end_a_group():
    """conv_fusion_shared: 0 conv 1 bn 2 relu 3 add(relu, bn) | 4 conv 5 bn 6 mul(bn, conv)
    | 7 conv 8 clamp 9 mul(clamp, clamp). A second reader of the batch norm's out stops
    the group before the relu, one of the conv's out leaves it unfused; two reads by one
    instruction are still one reader."""
    pte, _ = small_program("conv_fusion_shared")
    prog = pyruntime.Runtime.get().load_program(pte)
    fp = prog.load_method("forward", tier="fast")._fast
    assert [(pc, members) for pc, _, members in fp.fusions] == [(0, [1]), (7, [8])]
    x = np.random.default_rng(3).standard_normal((2, 3, 10, 10)).astype(np.float32)
    x[0, 1, 2, 2], x[1, 0, 4, 4] = np.nan, -np.inf
    _compare_with_unfused_reference_and_executorch(prog, pte, x)


def test_tracer_sees_every_instruction(fusion_program):
    """While traced, the method runs unfused: the batch norm's and the clamp's own outputs
    are in the dump, equal to the reference tier's; untraced runs are fused again."""
    prog, _ = fusion_program
    x = _inputs(2)
    dumps = {}
    for tier in ("fast", "reference"):
        tracer = EventTracer()
        m = tracer.load_method(prog, "forward", tier=tier)
        m.execute([x])
        dumps[tier] = tracer.etdump().executions[0].instruction_outputs()
        if tier == "fast":
            assert m._fast.fused  # back on after the traced run
    fast, ref = dumps["fast"], dumps["reference"]
    for pc in (1, 2, 4, 5, 7, 9, 15):  # instructions a fused group skips
        assert (0, pc) in fast, f"instruction {pc} not in the fast tier's dump"
        for a, b in zip(_bits(fast[(0, pc)]), _bits(ref[(0, pc)])):
            assert np.array_equal(a, b), f"instruction {pc}"


def test_mobilenet_v2_fused_bit_identical():
    fx = get_fixture("mobilenet_v2")
    m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method(fx.method, tier="fast")
    assert len(m._fast.fusions) >= 40  # of 52 convolutions
    for inputs, expected in zip(fx.calls, fx.expected):
        m._fast.set_fused(True)
        fused = [np.array(o) for o in m.execute(inputs)]
        m._fast.set_fused(False)
        unfused = [np.array(o) for o in m.execute(inputs)]
        for a, b, e in zip(_bits(fused), _bits(unfused), _bits(expected)):
            assert np.array_equal(a, b) and np.array_equal(a, e)


def test_runs_of_fixed_shape_binary_ops_are_one_call():
    """chain400 (200 x (mul, add) on one element): the 400 ops run as one call, every out
    written as before (bit for bit the unfused run and the reference tier's); a tracer sees
    all 400 instructions."""
    pte, _ = small_program("chain400")
    prog = pyruntime.Runtime.get().load_program(pte)
    m = prog.load_method("forward", tier="fast")
    fp = m._fast
    assert [(pc, len(members)) for pc, _, members in fp.fusions] == [(0, 399)]
    assert set(fp.runs) == {0} and fp.runs[0][1] == list(range(400))
    ref = prog.load_method("forward", tier="reference")
    for v in (0.3, -7.25, np.inf, np.nan, 3e38):
        x = np.array([v], np.float32)
        fused = m.execute([x])
        fp.set_fused(False)
        unfused = m.execute([x])
        fp.set_fused(True)
        want = ref.execute([x])
        for other in (unfused, want):
            assert all(np.array_equal(a, b) for a, b in zip(_bits(fused), _bits(other))), v
    tracer = EventTracer()
    tm = tracer.load_method(prog, "forward", tier="fast")
    tm.execute([np.array([0.5], np.float32)])
    dump = tracer.etdump().executions[0].instruction_outputs()
    assert all((0, pc) in dump for pc in range(400))
    assert tm._fast.fused


def test_a_failing_op_in_a_run_is_named():
    """A run stops at the op that fails and the error names that instruction, not the
    run's first (a block with an unknown dtype code stands in for a failing op)."""
    from pyruntime.kernels.elementwise.typed import F_DT

    pte, _ = small_program("chain400")
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="fast")
    fp = m._fast
    block = (ctypes.c_int64 * 8).from_address(fp.calls[7][1])
    block[F_DT] = 99  # not a dtype the kernel has: NOT_SUPPORTED
    with pytest.raises(pyruntime.ExecuTorchError, match="instruction 7 "):
        m.execute([np.array([1.0], np.float32)])


def test_runs_form_once_their_kernels_arrive(tmp_path):
    """A fresh cache, background compile mode: chain400 first runs on the reference kernels;
    once the background compile has bound its ops, the run kernel is asked for in turn and
    the ops become one call in the same process, bit for bit as before."""
    from tests.child import run_json

    child = r"""
import json, sys, time
import numpy as np, pyruntime
m = pyruntime.Runtime.get().load_program(sys.argv[1]).load_method("forward")
first = {"runs": len(m._fast.runs), "pending": m.pending_kernels}
assert m.wait_compiled(600)
x = np.array([0.3], np.float32)
t0 = time.time()
while m._fast._also_compile and time.time() - t0 < 600:
    time.sleep(1.1)
    m.execute([x])  # an execute polls for arrived kernels at most once a second
ref = pyruntime.Runtime.get().load_program(sys.argv[1]).load_method("forward", tier="reference")
print(json.dumps({"first": first, "runs": {str(k): len(v[1]) for k, v in m._fast.runs.items()},
                  "equal": m.execute([x])[0].tobytes() == ref.execute([x])[0].tobytes()}))
"""
    pte, _ = small_program("chain400")
    got = run_json(child, pte, timeout=1500,
                   env={"PYRUNTIME_CACHE": str(tmp_path), "PYRUNTIME_COMPILE": "background",
                        "PYRUNTIME_PROGRESS": "0", "PYRUNTIME_SHIPPED": "0"})
    assert got == {"first": {"runs": 0, "pending": 400}, "runs": {"0": 400}, "equal": True}
