"""The NativeBackend and MLX bridges: programs lowered by ExecuTorch 1.5.1's own
``NativePartitioner`` and ``MLXPartitioner`` run in pyruntime, on both tiers.

``executorch.runtime`` refuses these programs (neither backend is in its wheel), so the
oracle is torch eager on the same inputs: every output within 1e-4 x max(1, max |ref|)
(the issue's bound; measured: at most 5e-7 on these programs). Also: weights from a
``.ptd``, buffer state across executes, dynamic shapes, the ops the portable library
lacks (sdpa, matmul), and malformed payloads, unknown ops and missing weights as
ExecuTorchErrors at load.
"""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from pyruntime.delegates import backend_registry
from pyruntime.delegates.mlx import mlx_backend
from pyruntime.delegates.native import native_backend

pytest.importorskip("executorch.backends.native", reason="fixtures need executorch's exporter")

from tests.delegates.graph_fixtures import BACKENDS, MODELS, NAMES, get_fixture  # noqa: E402

CASES = [(b, n) for b in BACKENDS for n in NAMES[b]]

TOL = 1e-4


def _load(fx, tier="fast", data=True):
    prog = pyruntime.Runtime.get().load_program(
        fx.pte_path, data_path=[str(fx.ptd_path)] if fx.ptd_path and data else None)
    return prog, prog.load_method("forward", tier=tier)


@pytest.mark.parametrize("backend", BACKENDS)
def test_registered_under_the_id_executorch_writes(backend):
    prog, _ = _load(get_fixture("mlp", backend))
    bid = BACKENDS[backend]
    assert prog.metadata("forward").backends == [bid]
    assert backend_registry.get(bid) is {"native": native_backend, "mlx": mlx_backend}[backend]
    assert backend_registry.get(bid).is_available()


@pytest.mark.parametrize("tier", ["reference", "fast"])
@pytest.mark.parametrize("backend,name", CASES)
def test_matches_torch_eager(backend, name, tier):
    fx = get_fixture(name, backend)
    _, m = _load(fx, tier)
    for i, (call, want) in enumerate(zip(fx.calls, fx.expected)):
        got = m.execute(call)
        assert len(got) == len(want)
        for j, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (i, j, g.shape, w.shape)
            err = float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
            bound = TOL * max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
            assert err <= bound, f"{name} call {i} output {j}: max error {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MODELS)
def test_the_three_models_lower_whole_into_delegates(backend, name):
    prog, _ = _load(get_fixture(name, backend))
    meta = prog.metadata("forward")
    assert meta.backends and set(meta.backends) == {BACKENDS[backend]}
    # what stays outside the delegates is at most a layout copy ExecuTorch inserts
    assert set(meta.operators) <= {"dim_order_ops::_clone_dim_order.out"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_buffer_state_carries_over_and_a_new_load_starts_from_the_saved_value(backend):
    fx = get_fixture("state", backend)
    _, m = _load(fx)
    first = [m.execute(c)[0] for c in fx.calls]
    for got, want in zip(first, fx.expected):
        np.testing.assert_allclose(got, want[0], rtol=0, atol=TOL)
    assert not np.allclose(first[0], first[1])  # the accumulated buffer changed the result
    _, fresh = _load(fx)
    np.testing.assert_allclose(fresh.execute(fx.calls[0])[0], fx.expected[0][0], atol=TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_executes_are_bit_identical(backend):
    fx = get_fixture("vit_tiny", backend)
    _, m = _load(fx)
    first = m.execute(fx.calls[0])[0].copy()
    for _ in range(5):
        assert np.array_equal(m.execute(fx.calls[0])[0], first)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_bits_at_any_thread_count_and_beside_another_thread(backend):
    """Intra-op threads (the portable ops around the delegates) and two Python threads each
    running its own method: every run equals the first, bit for bit."""
    import threading

    fx = get_fixture("zoo", backend)  # delegates with portable ops between them
    _, base = _load(fx, "fast")
    want = [o.copy() for o in base.execute(fx.calls[0])]
    for threads in (1, 2, 3):
        prog = pyruntime.Runtime.get().load_program(fx.pte_path)
        m = prog.load_method("forward", tier="fast", threads=threads)
        for _ in range(20):
            assert all(np.array_equal(g, w) for g, w in zip(m.execute(fx.calls[0]), want))
    bad = []

    def loop():
        m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward", threads=2)
        for _ in range(30):
            if not all(np.array_equal(g, w) for g, w in zip(m.execute(fx.calls[0]), want)):
                bad.append(1)

    ts = [threading.Thread(target=loop) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad
