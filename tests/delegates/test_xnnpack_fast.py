"""XNNPACK delegate calls compiled into the fast loop (``delegates.xnnpack.fast``).

The compiled entry must compute exactly what the Python path of the bridge
computes (the same library, the same runtime), agree with executorch.runtime,
recover after the Python path or a failure touched the shared runtime, and turn
an xnn failure into an ExecuTorchError naming the instruction and the delegate.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import pyruntime
from pyruntime.instructions import Op
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import Dynamism, ETensor
from pyruntime.delegates.xnnpack import fast, library
from tests import parts
from tests.delegates.xnnpack_fixtures import get_fixture

LIB = library.get_library()
pytestmark = parts.skip_unless(LIB is not None and LIB.level == "dynamic", "xnnpack",
                               f"XnnpackBackend: {library.unavailable_reason()}")
K_KERNEL, K_PYTHON = 0, 1  # cython_ext._loop instruction kinds


def load(fx, compiled=True, monkeypatch=None, program=None):
    if monkeypatch is not None:
        monkeypatch.setenv("PYRUNTIME_XNNPACK_COMPILED", "1" if compiled else "0")
    program = program or pyruntime.Runtime.get().load_program(fx.pte_path)
    return program.load_method("forward", tier="fast")


def delegate_kinds(method) -> list:
    """Loop kind (0 compiled, 1 Python) of every DelegateCall of a fast-tier method."""
    plan = method._fast
    kinds = plan.loop.kinds()
    return [kinds[pc] for pc, ins in enumerate(plan.flat) if ins.op is Op.DELEGATE]


def states(method) -> list:
    """The state arrays of the compiled entries of a method's XNNPACK handles."""
    return [w for _, h in method._delegate_handles for w in h.kernels]


def assert_close(got, want, where, tol=None):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, where
    if tol is None:
        tol = 1e-4 * max(1.0, float(np.max(np.abs(want))))
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    assert err <= tol, f"{where}: max abs error {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("name", ["mlp", "mlp_dynamic", "partial", "cnn_bn", "qd8_qb4w"])
def test_compiled_calls_equal_the_python_path_and_executorch(name, monkeypatch):
    fx = get_fixture(name)
    slow = load(fx, False, monkeypatch)
    quick = load(fx, True, monkeypatch)
    assert delegate_kinds(slow) and set(delegate_kinds(slow)) == {K_PYTHON}
    assert set(delegate_kinds(quick)) == {K_KERNEL}
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        got, want = quick.execute(inputs), slow.execute(inputs)
        for i, (g, w, e) in enumerate(zip(got, want, expected)):
            np.testing.assert_array_equal(g, w, err_msg=f"{name} call {step} output {i}")
            assert_close(g, e, f"{name} call {step} output {i} vs executorch.runtime")


def test_dynamic_shapes_grow_and_shrink_in_compiled_code(monkeypatch):
    fx = get_fixture("mlp_dynamic")
    m = load(fx, True, monkeypatch)
    assert set(delegate_kinds(m)) == {K_KERNEL}
    order = [0, 1, 2, 3, 2, 0, 0, 3, 1]  # batches 1, 5, 16, 3 in a scrambled order
    for k in order:
        got = m.execute(fx.calls[k])[0]
        assert got.shape == fx.expected[k][0].shape
        assert_close(got, fx.expected[k][0], f"call {k}")


def test_python_path_and_compiled_entry_share_one_runtime(monkeypatch):
    """The bridge's Python execute re-plans the shared runtime (another batch, other
    pointers): the next compiled call notices and sets the runtime up again."""
    fx = get_fixture("mlp_dynamic")
    m = load(fx, True, monkeypatch)
    (backend, h), = m._delegate_handles
    for k in (1, 2):
        assert_close(m.execute(fx.calls[k])[0], fx.expected[k][0], f"compiled {k}")
        x = fx.calls[3 - k][0]
        t_in = ETensor.from_array(x.copy())
        t_out = ETensor.empty(6, (16, 8), dynamism=Dynamism.DYNAMIC_BOUND)
        backend.execute(h, [t_in, t_out])
        assert_close(t_out.numpy().copy(), fx.expected[3 - k][0], f"python {3 - k}")
        assert_close(m.execute(fx.calls[k])[0], fx.expected[k][0], f"compiled again {k}")


def test_input_without_slack_is_staged_in_compiled_code(monkeypatch):
    fx = get_fixture("mlp")
    m = load(fx, True, monkeypatch)
    w, = states(m)
    r = fast.HEADER + 2 * (w[fast.W_NIN] + w[fast.W_NOUT])
    w[r + fast.E_SAFE_LO] = w[r + fast.E_SAFE_HI] = 0  # no known slack: copy every call
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        assert_close(m.execute(inputs)[0], expected[0], f"staged call {step}")
    assert w[r + fast.E_PTR] == w[r + fast.E_STAGE]


_FAILING = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda rt: 3)  # invalid_state


def test_an_xnn_failure_is_an_error_naming_instruction_and_delegate(monkeypatch):
    fx = get_fixture("mlp")
    m = load(fx, True, monkeypatch)
    w, = states(m)
    real = int(w[fast.W_INVOKE])
    m.execute(fx.calls[0])
    w[fast.W_INVOKE] = ctypes.cast(_FAILING, ctypes.c_void_p).value
    with pytest.raises(ExecuTorchError) as e:
        m.execute(fx.calls[0])
    assert e.value.code == ErrorCode.Internal
    msg = str(e.value)
    assert "instruction" in msg and "delegate XnnpackBackend" in msg
    assert "xnn_invoke_runtime failed with xnn_status invalid_state" in msg
    w[fast.W_INVOKE] = real  # the next call sets everything up again and is right
    assert_close(m.execute(fx.calls[1])[0], fx.expected[1][0], "after the failure")


def test_a_destroyed_handle_is_an_error_not_a_crash(monkeypatch):
    fx = get_fixture("mlp")
    m = load(fx, True, monkeypatch)
    m.execute(fx.calls[0])
    (backend, h), = m._delegate_handles
    backend.destroy(h)
    with pytest.raises(ExecuTorchError) as e:
        m.execute(fx.calls[0])
    assert e.value.code == ErrorCode.DelegateInvalidHandle
    assert "delegate XnnpackBackend" in str(e.value)


def test_methods_of_one_program_run_compiled_delegates_from_many_threads(monkeypatch):
    """Each Method owns its delegate handles: methods of one program run their
    compiled XNNPACK calls at the same time, each with its own runtime."""
    fx = get_fixture("mlp_dynamic")
    monkeypatch.setenv("PYRUNTIME_XNNPACK_COMPILED", "1")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    methods = [prog.load_method("forward", tier="fast") for _ in range(4)]
    assert all(set(delegate_kinds(m)) == {K_KERNEL} for m in methods)
    errors = []
    start = threading.Barrier(len(methods))

    def work(k, m):
        start.wait()
        try:
            for i in range(40):
                c = (k + i) % len(fx.calls)
                got = m.execute(fx.calls[c])[0]
                assert_close(got, fx.expected[c][0], f"thread {k} step {i}")
        except Exception as ex:  # noqa: BLE001 - reported below
            errors.append(ex)
    threads = [threading.Thread(target=work, args=(k, m)) for k, m in enumerate(methods)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
