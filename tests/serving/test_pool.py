"""MethodPool: 8 threads calling one pool at once get correct outputs and no "already
executing" refusals (one Method refuses a second concurrent execute), and the pool really
ran them concurrently (it loads a new copy only when every copy is busy). BatchPredictor:
the Ray Data callable, called as Ray calls it."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.pool import BatchPredictor, MethodPool
from tests.serving.common import assert_output_parity, program, sequential


def _hammer(pool, inputs, want, threads=8, calls=25):
    errors, wrong = [], []
    start = threading.Barrier(threads)

    def worker(t):
        start.wait()
        for c in range(calls):
            k = (t + c) % len(inputs)
            try:
                got = pool.execute(inputs[k])
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(repr(e))
                continue
            if not all(np.array_equal(g, w) for g, w in zip(got, want[k])):
                wrong.append((t, c, k))

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors, wrong


@pytest.mark.parametrize("name, tier", [("mlp_dynamic", "fast"), ("xnnpack_mlp", "fast"),
                                        ("mlp", "reference")])
def test_eight_threads_on_a_pool_are_correct_and_concurrent(name, tier):
    fx = program(name)
    rng = np.random.default_rng(1)
    shapes = [c[0].shape for c in fx.calls]
    # distinct inputs (and, for the dynamic program, distinct batch sizes) per call, so
    # outputs crossing between copies or runs would show
    inputs = [[rng.standard_normal(shapes[k % len(shapes)]).astype(np.float32)]
              for k in range(8)]
    want = sequential(fx.pte_path, inputs, tier)
    pool = MethodPool(fx.pte_path, size=8, tier=tier)
    assert pool.loaded == 1
    # the first copy is held busy for the whole run, so the threads need copies of their own
    # however the scheduler interleaves them (tiny programs can finish one by one otherwise)
    with pool.acquire():
        errors, wrong = _hammer(pool, inputs, want)
    assert errors == [] and wrong == []
    assert 1 < pool.loaded <= 8  # more copies were loaded while the first was busy
    for k, ref in enumerate(fx.expected):  # and the pool agrees with executorch.runtime
        assert_output_parity(pool.execute(fx.calls[k])[0], ref[0], f"{name} call {k}")
    pool.close()


def test_a_small_pool_makes_threads_wait_not_fail():
    fx = program("mlp")
    want = sequential(fx.pte_path, fx.calls, "fast")
    with MethodPool(fx.pte_path, size=2, tier="fast") as pool:
        errors, wrong = _hammer(pool, fx.calls, want, threads=8, calls=10)
        assert errors == [] and wrong == [] and pool.loaded <= 2


def test_timeout_and_close():
    pool = MethodPool(program("mlp").pte_path, size=1, tier="reference")
    x = program("mlp").calls[0]
    with pool.acquire():
        with pytest.raises(ExecuTorchError, match="all 1 methods busy") as e:
            pool.execute(x, timeout=0.05)
        assert e.value.code == ErrorCode.OutOfResources
    pool.execute(x)
    pool.close()
    with pytest.raises(ExecuTorchError, match="closed"):
        pool.execute(x)


def test_batch_predictor_rows_and_passthrough_columns():
    fx = program("mlp_dynamic")  # input [b, 16]: a row of shape [16] gets a batch dim of 1
    rows = np.random.default_rng(2).standard_normal((6, 16)).astype(np.float32)
    want = sequential(fx.pte_path, [[r[None]] for r in rows], "fast")
    out = BatchPredictor(fx.pte_path)({"data": rows, "label": np.arange(6)})
    assert sorted(out) == ["label", "out0"]
    np.testing.assert_array_equal(out["label"], np.arange(6))
    np.testing.assert_array_equal(out["out0"], np.stack([w[0][0] for w in want]))
    full = np.stack([c[0] for c in program("mlp").calls])  # rows of the input's full rank
    got = BatchPredictor(program("mlp").pte_path, input_columns=["x"])({"x": full})["out0"]
    np.testing.assert_array_equal(got, np.stack(
        [w[0] for w in sequential(program("mlp").pte_path, program("mlp").calls, "fast")]))
    with pytest.raises(ExecuTorchError, match="BatchPredictor row 0: .*dimension 1 is 17"):
        BatchPredictor(fx.pte_path)({"data": np.zeros((2, 17), np.float32)})
