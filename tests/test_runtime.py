"""Runtime semantics on small programs made by ExecuTorch's exporter, checked
against executorch.runtime: loading from every source, inputs, state, methods,
external data, dynamic shapes and the errors a user sees."""
from __future__ import annotations

import io

import numpy as np
import pytest

import pyruntime
from pyruntime import ErrorCode, ExecuTorchError
from tests.programs.small_programs import small_program


def reference(pte, calls, method="forward", data_path=None):
    import torch
    from executorch.runtime import Runtime

    prog = Runtime.get().load_program(str(pte), data_path=str(data_path) if data_path else None)
    m = prog.load_method(method)
    outs = []
    for call in calls:
        args = [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in call]
        outs.append([o.clone().numpy() if hasattr(o, "numpy") else o for o in m.execute(args)])
    return outs


def run(method, calls):
    return [method.execute(c) for c in calls]


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for a, b in zip(g, w):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
            assert np.asarray(a).dtype == np.asarray(b).dtype


X = np.arange(8, dtype=np.float32).reshape(2, 4) / 7 - 0.5


@pytest.mark.parametrize("source", ["path", "str", "bytes", "filelike"])
def test_load_from_every_source(source):
    pte, _ = small_program("linear_relu")
    src = {"path": pte, "str": str(pte), "bytes": pte.read_bytes(),
           "filelike": io.BytesIO(pte.read_bytes())}[source]
    m = pyruntime.Runtime.get().load_program(src).load_method("forward", tier="reference")
    assert_same([m.execute([X])], reference(pte, [[X]]))


def test_one_line_api_and_torch_inputs():
    import torch

    pte, _ = small_program("linear_relu")
    got = pyruntime.load(pte, tier="reference").forward(torch.from_numpy(X))
    assert_same([got], reference(pte, [[X]]))


def test_outputs_are_copies_not_views_of_planned_memory():
    pte, _ = small_program("linear_relu")
    m = pyruntime.load(pte, tier="reference").method("forward")
    first = m.execute([X])[0]
    keep = first.copy()
    m.execute([X * 3])
    np.testing.assert_array_equal(first, keep)


def test_metadata():
    pte, _ = small_program("linear_relu")
    prog = pyruntime.Runtime.get().load_program(pte)
    meta = prog.metadata("forward")
    assert prog.method_names == ["forward"]
    assert meta.num_inputs() == 1 and meta.num_outputs() == 1
    info = meta.input_tensor_meta(0)
    assert info.sizes == (2, 4) and info.dtype == np.float32 and info.is_memory_planned
    assert meta.num_memory_planned_buffers() == 1 and meta.memory_planned_buffer_size(0) > 0
    assert meta.operator_counts["aten::addmm.out"] == 1
    assert meta.instruction_count == sum(meta.instruction_kinds.values())


def test_mutable_buffer_state_persists_like_reference():
    pte, _ = small_program("mutable_buffer")
    calls = [[np.full(3, k, np.float32)] for k in (1, 2, 3)]
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="reference")
    got = run(m, calls)
    assert_same(got, reference(pte, calls))
    np.testing.assert_array_equal(got[-1][0], [6, 6, 6])
    # a second loaded method starts from the initial state again
    m2 = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="reference")
    np.testing.assert_array_equal(m2.execute(calls[0])[0], [1, 1, 1])


def test_mutable_data_segment_initial_state():
    pte, _ = small_program("initialized_state")
    prog = pyruntime.Runtime.get().load_program(pte)
    assert prog._pte.program.mutable_data_segments  # the initial state is serialized
    calls = [[np.ones(3, np.float32)]] * 3
    got = run(prog.load_method("forward", tier="reference"), calls)
    assert_same(got, reference(pte, calls))
    np.testing.assert_array_equal(got[0][0], [11, 12, 13])


def test_trace_returns_every_instruction_output():
    pte, _ = small_program("linear_relu")
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="reference")
    records = m.trace([X])
    names = [name for _, name, _ in records]
    assert names[-1] == "aten::relu.out" and "aten::addmm.out" in names
    np.testing.assert_array_equal(records[-1][2][0], m.execute([X])[0])


def test_two_methods():
    pte, _ = small_program("two_methods")
    prog = pyruntime.Runtime.get().load_program(pte)
    assert sorted(prog.method_names) == ["add_one", "mul_sub"]
    a = np.array([1, 2, 3], np.float32)
    b, c = np.array([2, 3], np.float32), np.array([5, 7], np.float32)
    assert_same([prog.load_method("add_one", tier="reference").execute([a])], reference(pte, [[a]], "add_one"))
    assert_same([prog.load_method("mul_sub", tier="reference").execute([b, c])],
                reference(pte, [[b, c]], "mul_sub"))


def test_external_data_ptd():
    pte, ptd = small_program("external_linear")
    prog = pyruntime.Runtime.get().load_program(pte, data_path=ptd)
    got = prog.load_method("forward", tier="reference").execute([X])
    assert_same([got], reference(pte, [[X]], data_path=ptd))
    with pytest.raises(ExecuTorchError) as e:
        pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="reference")
    assert "data_path" in str(e.value)


def test_dynamic_shapes_within_bound():
    pte, _ = small_program("dynamic")
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="reference")
    calls = [[np.ones((b, 3), np.float32) * b] for b in (1, 8, 3)]
    assert_same(run(m, calls), reference(pte, calls))


def test_dynamic_input_over_bound_names_dimension():
    pte, _ = small_program("dynamic")
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="reference")
    with pytest.raises(ExecuTorchError) as e:
        m.execute([np.ones((9, 3), np.float32)])
    assert e.value.code == ErrorCode.InvalidArgument
    assert "dimension 0 is 9" in str(e.value) and "upper bound 8" in str(e.value)


@pytest.mark.parametrize("bad,needle", [
    ([], "expected 1 inputs, got 0"),
    ([np.ones((2, 4), np.float64)], "expected dtype FLOAT, got DOUBLE"),
    ([np.ones((8,), np.float32)], "expected rank 2"),
    ([np.ones((3, 4), np.float32)], "expected shape [2, 4], got [3, 4]"),
])
def test_input_validation_messages(bad, needle):
    pte, _ = small_program("linear_relu")
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="reference")
    with pytest.raises(ExecuTorchError) as e:
        m.execute(bad)
    assert e.value.code == ErrorCode.InvalidArgument
    assert needle in str(e.value)


def test_scalar_input_must_equal_traced_value():
    pte, _ = small_program("scalar_input")
    m = pyruntime.Runtime.get().load_program(pte).load_method("forward", tier="reference")
    x = np.ones(2, np.float32)
    assert_same([m.execute([x, 3])], reference(pte, [[x, 3]]))
    with pytest.raises(ExecuTorchError, match="traced Int 3, got 4"):
        m.execute([x, 4])


def test_missing_operator_names_op_and_closest():
    pte, _ = small_program("linear_relu")
    data = pte.read_bytes()
    assert data.count(b"aten::relu") == 1
    data = data.replace(b"aten::relu", b"aten::relx")
    prog = pyruntime.Runtime.get().load_program(data)
    with pytest.raises(ExecuTorchError) as e:
        prog.load_method("forward", tier="reference")
    assert e.value.code == ErrorCode.OperatorMissing
    assert "aten::relx.out" in str(e.value) and "aten::relu.out" in str(e.value)


def test_unknown_method_and_bad_files():
    pte, _ = small_program("linear_relu")
    prog = pyruntime.Runtime.get().load_program(pte)
    with pytest.raises(ExecuTorchError, match="no method 'nope'"):
        prog.load_method("nope", tier="reference")
    with pytest.raises(ExecuTorchError) as e:
        pyruntime.Runtime.get().load_program(b"not a program at all")
    assert e.value.code == ErrorCode.InvalidProgram
    data = bytearray(pte.read_bytes())
    data[4:8] = b"ET99"
    with pytest.raises(ExecuTorchError, match="not supported"):
        pyruntime.Runtime.get().load_program(bytes(data))
    with pytest.raises(ExecuTorchError, match="truncated"):
        pyruntime.Runtime.get().load_program(pte.read_bytes()[:-20])


def test_planned_memory_budget():
    pte, _ = small_program("linear_relu")
    prog = pyruntime.Runtime.get().load_program(pte)
    need = prog.metadata("forward").memory_planned_buffer_size(0)
    prog.load_method("forward", tier="reference", max_planned_bytes=need)
    with pytest.raises(ExecuTorchError) as e:
        prog.load_method("forward", tier="reference", max_planned_bytes=need - 1)
    assert e.value.code == ErrorCode.MemoryAllocationFailed


def test_delegate_without_bridge_is_a_clear_error(monkeypatch):
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from pyruntime.delegates import backend_registry

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.linear(x, torch.ones(3, 4))

    ep = torch.export.export(M(), (torch.ones(2, 4),))
    buf = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    prog = pyruntime.Runtime.get().load_program(buf)
    assert prog.metadata("forward").backends == ["XnnpackBackend"]
    # a registry in which XnnpackBackend has no bridge (as for VulkanBackend, QnnBackend, ...)
    backend_registry.registered()  # bridges are registered on first use
    monkeypatch.delitem(backend_registry._backends, "XnnpackBackend")
    with pytest.raises(ExecuTorchError) as e:
        prog.load_method("forward", tier="reference")
    assert e.value.code == ErrorCode.NotFound and "XnnpackBackend" in str(e.value)
    assert "has no bridge" in str(e.value)


def test_threads_setting_per_method_and_runtime_default():
    from pyruntime.kernels.blas_lib import blas_threads

    pte, _ = small_program("linear_relu")
    rt = pyruntime.Runtime.get()
    prog = rt.load_program(pte)
    old = rt.threads
    try:
        rt.threads = 1
        m1 = prog.load_method("forward", tier="reference")
        m2 = prog.load_method("forward", tier="reference", threads=2)
        assert (m1.threads, m2.threads) == (1, 2)
        m2.execute([X])
        assert blas_threads() in (0, 2)  # 0: no OpenBLAS in this numpy build
        m1.execute([X])
        assert blas_threads() in (0, 1)
        with pytest.raises(ValueError):
            prog.load_method("forward", tier="reference", threads=0)
    finally:
        rt.threads = old

