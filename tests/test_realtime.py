"""The control-loop contract (issue 29) on programs exported by ExecuTorch, portable and
XNNPACK-delegated, against executorch.runtime's outputs: ``execute(inputs, out=...)``
writes into the caller's arrays and returns them, errors before writing anything;
``input_view`` / ``run`` / ``output_view`` work in the method's own memory; after warm-up
neither call allocates (tracemalloc) or triggers a garbage collection; a pure-Python
thread keeps most of its speed beside a thread looping ``execute``; ``latency --json``;
and the realtime runner."""
from __future__ import annotations

import array
import gc
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.realtime import RealtimeRunner
from tests.delegates import xnnpack_fixtures as X
from tests.programs.fixtures import get_fixture


def _load(fx, tier="fast", threads=1):
    return pyruntime.Runtime.get().load_program(fx.pte_path).load_method(
        "forward", tier=tier, threads=threads)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


PROGRAMS = {"mlp": lambda: get_fixture("mlp"),
            "quant_cnn_bn": lambda: get_fixture("quant_cnn_bn"),
            "xnnpack_mlp": lambda: X.get_fixture("mlp")}


@pytest.mark.parametrize("tier", ["fast", "reference"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_execute_writes_into_the_callers_arrays(name, tier):
    fx = PROGRAMS[name]()
    m = _load(fx, tier)
    out = [np.full(e.shape, 7, e.dtype) for e in fx.expected[0]]
    for inputs, expected in zip(fx.calls, fx.expected):
        got = m.execute(inputs, out=out)
        assert len(got) == len(out) and all(g is o for g, o in zip(got, out))
        for o, e in zip(out, expected):  # executorch.runtime's numbers, bit for bit
            assert np.array_equal(_bits(o), _bits(e))
        again = m.execute(inputs)  # the plain call still copies, equal
        assert all(np.array_equal(a, o) and not np.shares_memory(a, o)
                   for a, o in zip(again, out))


def test_out_errors_name_the_output_and_write_nothing():
    fx = get_fixture("mlp")
    m = _load(fx)
    e = fx.expected[0][0]
    good = np.zeros_like(e)
    cases = [
        ([], "out has 0 entries, the method has 1 outputs"),
        ([good, good], "out has 2 entries"),
        ([e.astype(np.float64)], "out[0]: expected dtype float32, got dtype float64"),
        ([np.zeros((e.shape[0] + 1,) + e.shape[1:], e.dtype)], "out[0]: expected shape"),
        ([np.zeros(e.shape[::-1], e.dtype).T], "out[0]: expected a C-contiguous writeable array"),
        ([e.tolist()], "out[0]: expected a numpy array"),
        ([None], "out[0]: expected a numpy array"),
    ]
    ro = np.zeros_like(e)
    ro.flags.writeable = False
    cases.append(([ro], "got a read-only array"))
    for out, msg in cases:
        sentinels = [o.copy() if isinstance(o, np.ndarray) else None for o in out]
        with pytest.raises(ExecuTorchError) as err:
            m.execute(fx.calls[0], out=out)
        assert err.value.code == ErrorCode.InvalidArgument and msg in str(err.value), str(err.value)
        for o, s in zip(out, sentinels):
            if isinstance(o, np.ndarray):
                assert np.array_equal(o, s)  # nothing written
    np.testing.assert_array_equal(m.execute(fx.calls[0], out=[good])[0], e)


def test_a_dynamic_output_is_checked_after_the_run_before_any_write():
    fx = get_fixture("mlp_dynamic")  # batch dimension 1..16
    m = _load(fx)
    for inputs, expected in zip(fx.calls, fx.expected):
        out = [np.empty_like(expected[0])]
        assert m.execute(inputs, out=out)[0] is out[0]
        np.testing.assert_array_equal(out[0], expected[0])
    wrong = np.full((fx.expected[0][0].shape[0] + 1, fx.expected[0][0].shape[1]), 3,
                    np.float32)
    with pytest.raises(ExecuTorchError, match=r"out\[0\]: expected shape .* \(this run's\)"):
        m.execute(fx.calls[0], out=[wrong])
    assert (wrong == 3).all()


@pytest.mark.parametrize("name", ["mlp", "quant_cnn_bn", "xnnpack_mlp"])
def test_views_bind_inputs_and_read_outputs_in_place(name):
    fx = PROGRAMS[name]()
    m = _load(fx)
    x = m.input_view(0)
    assert x.flags.writeable and any(np.shares_memory(x, a) for a in m.arenas)
    out = None
    for inputs, expected in zip(fx.calls, fx.expected):
        assert m.input_view(0) is x  # the same array each time: nothing allocated
        m.input_view(0)[...] = inputs[0]
        m.run()
        if out is None:
            out = m.output_view(0)
            assert not out.flags.writeable
            with pytest.raises(ValueError):
                out[...] = 0
        # the same view shows each run's result: the method's own memory, no copy
        assert np.array_equal(_bits(out), _bits(expected[0]))


def test_view_and_run_errors():
    dyn = _load(get_fixture("mlp_dynamic"))
    with pytest.raises(ExecuTorchError, match="input_view needs a static planned input; this "
                                              "one is dynamic") as e:
        dyn.input_view(0)
    assert e.value.code == ErrorCode.InvalidArgument
    m = _load(get_fixture("mlp"))
    with pytest.raises(ExecuTorchError, match=r"input\(s\) \[0\] not written") as e:
        m.run()
    assert e.value.code == ErrorCode.InvalidState
    fx = get_fixture("mlp")
    m.input_view(0)[...] = fx.calls[0][0]
    m.run()
    # the plan gives the input's bytes to later tensors: a second run would read those
    assert m._consumed_inputs() == (0,)
    with pytest.raises(ExecuTorchError, match=r"input\(s\) \[0\] not written since the last "
                                              "run") as e:
        m.run()
    m.input_view(0)[...] = fx.calls[0][0]
    m.run()
    np.testing.assert_array_equal(m.output_view(0), fx.expected[0][0])
    for bad in (1, -1, "0", True):
        with pytest.raises(ExecuTorchError, match="index .* out of range"):
            m.input_view(bad)
        with pytest.raises(ExecuTorchError, match="index .* out of range"):
            m.output_view(bad)


def _no_allocation(call, n=10_000):
    """(net bytes, peak bytes over the start, garbage collections) of ``n`` calls."""
    collections = []

    def on_gc(phase, info):
        if phase == "start":
            collections.append(info)

    for _ in range(200):
        call()
    gc.collect()
    tracemalloc.start()
    gc.callbacks.append(on_gc)
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in range(n):
            call()
        now, peak = tracemalloc.get_traced_memory()
    finally:
        gc.callbacks.remove(on_gc)
        tracemalloc.stop()
    return now - base, peak - base, len(collections)


@pytest.mark.parametrize("name", ["mlp", "quant_cnn_bn", "xnnpack_mlp"])
def test_after_warm_up_nothing_is_allocated_and_nothing_collected(name):
    fx = PROGRAMS[name]()
    m = _load(fx)
    out = [np.empty_like(e) for e in fx.expected[0]]
    inputs = fx.calls[0]
    net, peak, gcs = _no_allocation(lambda: m.execute(inputs, out=out))
    assert net < 64 * 1024 and peak < 64 * 1024 and gcs == 0, (net, peak, gcs)
    x = inputs[0]

    def step():
        m.input_view(0)[...] = x
        m.run()

    net, peak, gcs = _no_allocation(step)
    assert net < 64 * 1024 and peak < 64 * 1024 and gcs == 0, (net, peak, gcs)
    assert np.array_equal(_bits(m.output_view(0)), _bits(fx.expected[0][0]))


def _python_rate(seconds, beside=None):
    """Iterations per second of a pure-Python loop, alone or while ``beside`` loops on
    another thread."""
    stop, counts = threading.Event(), []

    def spin():
        n = 0
        while not stop.is_set():
            n += 1
        counts.append(n)

    other_stop = threading.Event()

    def loop():
        while not other_stop.is_set():
            beside()

    t = threading.Thread(target=spin)
    o = threading.Thread(target=loop) if beside else None
    if o:
        o.start()
        time.sleep(0.05)
    t0 = time.perf_counter()
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    dt = time.perf_counter() - t0
    if o:
        other_stop.set()
        o.join()
    return counts[0] / dt


def _gil_free_like(fn, seconds=0.2):
    """C work that releases the GIL throughout (sha256 of a buffer, which hashlib hashes
    without the GIL from 2 KiB up), sized so one call lasts about as long as one ``fn()``:
    a Python loop around it takes the GIL as often as a loop around ``fn`` does, so what the
    other thread loses beside it is what a GIL-free call of that length costs, and nothing
    else is compared."""
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    per_call = (time.perf_counter() - t0) / n
    size = 1 << 12
    while True:
        block = b"x" * size
        k, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.02:
            hashlib.sha256(block).digest()
            k += 1
        if (time.perf_counter() - t0) / k >= per_call or size >= 1 << 24:
            return lambda: hashlib.sha256(block).digest()
        size *= 2


@pytest.mark.parametrize("name", ["mlp", "xnnpack_mlp", "quant_cnn_bn"])
def test_a_python_thread_keeps_its_speed_beside_execute(name):
    """The fast tier holds the GIL only to bind and copy: a pure-Python thread keeps at least
    80% of the rate it has beside a loop of GIL-free C calls of the same length while another
    thread loops execute at threads=1. (Measured against that, not against running alone: on
    two SMT siblings or a loaded machine a second busy thread slows the first with no GIL in
    play, and a loop of short calls takes the GIL back after each one whatever the call
    does. Best of five rounds, each with fresh baselines on both sides.)"""
    fx = PROGRAMS[name]()
    m = _load(fx, threads=1)
    out = [np.empty_like(e) for e in fx.expected[0]]
    inputs = fx.calls[0]

    def run():
        m.execute(inputs, out=out)

    gil_free = _gil_free_like(run)
    ratios = []
    for _ in range(5):
        base = _python_rate(0.4, gil_free)
        both = _python_rate(0.4, run)
        ratios.append(both / max(base, _python_rate(0.4, gil_free)))
        if ratios[-1] >= 0.8:
            break
    assert max(ratios) >= 0.8, ratios


def test_latency_json_keys_and_sanity():
    fx = get_fixture("mlp")
    env = {**os.environ, "PYTHONPATH": str(fx.pte_path.parents[2])}
    p = subprocess.run([sys.executable, "-m", "pyruntime", "latency", str(fx.pte_path),
                        "--rate", "400", "--seconds", "1", "--vs-executorch", "--json"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    obj = json.loads(p.stdout.strip().splitlines()[-1])
    keys = ["runs", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "jitter_us", "missed"]
    for got in (obj, obj["executorch"]):
        assert [k for k in keys if k not in got] == []
        assert 100 <= got["runs"] <= 400 * 1.5  # about 400 Hz for 1 s (half each, sliced)
        assert 0 < got["p50_us"] <= got["p90_us"] <= got["p99_us"] <= got["p999_us"] \
            <= got["max_us"]
        assert got["jitter_us"] >= 0 and isinstance(got["missed"], int)
    p = subprocess.run([sys.executable, "-m", "pyruntime", "latency", str(fx.pte_path),
                        "--seconds", "0.3", "--json"], capture_output=True, text=True,
                       timeout=300, env=env)
    obj = json.loads(p.stdout.strip().splitlines()[-1])
    assert obj["runs"] > 100 and obj["jitter_us"] is None and obj["missed"] is None
    assert "executorch" not in obj


def test_latency_bench_writes_its_benchmarks_section(tmp_path):
    """examples/bench_latency.py (the BENCHMARKS.md "Latency" table): one row per program and
    load, both runtimes measured, and --update replaces its section in place."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    try:
        import bench_latency
    finally:
        sys.path.pop(0)
    doc = tmp_path / "B.md"
    doc.write_text("# B\n\n" + bench_latency.BEGIN + "\nold\n" + bench_latency.END + "\n\ntail\n")
    args = ["--seconds", "0.5", "--loads", "0", "--only", "mlp,xnnpack:mlp", "--update", str(doc)]
    assert bench_latency.main(args) == 0
    text = doc.read_text()
    assert "old" not in text and text.startswith("# B") and text.endswith("tail\n")
    rows = [r for r in text.splitlines() if r.startswith("| mlp |") or r.startswith("| xnnpack:mlp |")]
    assert len(rows) == 2
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert cells[2] == "idle" and all(c.endswith((" us", " ms")) for c in cells[3:9])
        assert float(cells[9]) > 0


def test_realtime_runner_gives_executorchs_outputs_from_any_buffer():
    fx = get_fixture("quant_cnn_bn")
    with RealtimeRunner(fx.pte_path) as rt:
        assert rt.latest() is None
        for inputs, expected in zip(fx.calls, fx.expected):
            x = inputs[0]
            for given in (x, array.array("f", x.reshape(-1)), memoryview(x.reshape(-1))):
                r = rt.wait(rt.submit([given]), timeout=60)
                assert not r.outputs[0].flags.writeable and r.latency_s > 0
                assert np.array_equal(_bits(r.outputs[0]), _bits(expected[0]))
                assert rt.latest() is r or rt.latest().seq >= r.seq
        with pytest.raises(ExecuTorchError, match="expected 3072 float32 values"):
            rt.submit([np.zeros(5, np.float32)])


def test_realtime_runner_keeps_the_newest_and_the_returned_outputs_intact():
    fx = get_fixture("mlp")
    xs = [np.full(fx.calls[0][0].shape, k, np.float32) for k in range(50)]
    ref = _load(fx)
    want = [ref.execute([x])[0] for x in xs]
    with RealtimeRunner(fx.pte_path) as rt:
        held = []
        for x in xs:  # as fast as the caller can: some submits replace unstarted ones
            rt.submit([x])
            r = rt.latest()
            if r is not None:
                held.append((r, r.outputs[0].copy()))
                assert np.array_equal(r.outputs[0], want[r.seq - 1])
        last = rt.wait(len(xs), timeout=60)
        assert last.seq == len(xs) and np.array_equal(last.outputs[0], want[-1])
        assert rt.runs + rt.replaced == len(xs)
        # the result returned last is still intact after the worker published more
        r = rt.latest()
        snapshot = r.outputs[0].copy()
        rt.submit([xs[0]])
        rt.wait(len(xs) + 1, timeout=60)
        assert np.array_equal(r.outputs[0], snapshot)


def test_realtime_runner_stateful_mode_pins_and_refuses_clearly():
    fx = get_fixture("mlp")
    with RealtimeRunner(fx.pte_path, stateful=True, cpu=0) as rt:
        assert os.sched_getaffinity(rt._thread.native_id) == {0}
        r = rt.wait(rt.submit(fx.calls[0]), timeout=60)
        np.testing.assert_array_equal(r.outputs[0], fx.expected[0][0])
    with pytest.raises(ExecuTorchError, match="cannot pin the worker to CPU 4096"):
        RealtimeRunner(fx.pte_path, cpu=4096).start()
    try:
        with RealtimeRunner(fx.pte_path, priority=10) as rt:
            r = rt.wait(rt.submit(fx.calls[0]), timeout=60)  # allowed here (root, rtprio)
            np.testing.assert_array_equal(r.outputs[0], fx.expected[0][0])
    except ExecuTorchError as e:
        assert "CAP_SYS_NICE" in str(e) and e.code == ErrorCode.NotSupported
    with pytest.raises(ExecuTorchError, match="input 0 is not a static tensor"):
        RealtimeRunner(get_fixture("mlp_dynamic").pte_path)


def test_exact_arguments_run_all_in_c_and_the_others_take_the_general_path():
    """A fast-tier method with fixed inputs and outputs copies, runs and copies out in C
    (``cython_ext._loop.Bound``); inputs that are not the exact case (non-contiguous,
    another dtype, a list) go through the general binders, which convert or explain."""
    from pyruntime.cython_ext._loop import Bound

    fx = get_fixture("mlp")
    m = _load(fx)
    x, want = fx.calls[0][0], fx.expected[0][0]
    assert not m._fast.pending and isinstance(m._bound, Bound)  # settled at load
    assert isinstance(m._make_bound(), Bound)
    np.testing.assert_array_equal(m.execute([x])[0], want)
    strided = np.asfortranarray(x)  # same values, not C-contiguous: converted
    np.testing.assert_array_equal(m.execute([strided])[0], want)
    with pytest.raises(ExecuTorchError, match="input 0: expected dtype FLOAT, got DOUBLE"):
        m.execute([x.tolist()])  # (a list becomes float64: no silent cast)
    with pytest.raises(ExecuTorchError, match="input 0: expected dtype FLOAT, got DOUBLE"):
        m.execute([x.astype(np.float64)])
    out = [np.zeros_like(want)]
    assert m.execute((x,), out=out) is out and np.array_equal(out[0], want)
    dynamic = _load(get_fixture("mlp_dynamic"))
    assert dynamic._bound is False and not dynamic._make_bound()  # the general path


def test_a_dim_ordered_input_takes_the_general_path_and_keeps_its_layout():
    """A channels-last input's planned bytes are in NHWC order while the caller's array is
    NCHW: the raw copy of ``Bound`` would scramble it, so such a method runs the general
    path, which copies along the dim order (executorch.runtime's numbers on both calls)."""
    pytest.importorskip("executorch")
    from executorch.runtime import Runtime

    from tests.programs.single_ops import make_inputs, single_op_program

    path = single_op_program("conv2d_cl")
    inputs = make_inputs("conv2d_cl")
    want = Runtime.get().load_program(path).load_method("forward").execute(inputs)[0].numpy()
    m = pyruntime.Runtime.get().load_program(path).load_method("forward", tier="fast")
    assert m.method_meta.inputs[0].dim_order == (0, 2, 3, 1)
    assert not m._make_bound()
    arrays = [np.ascontiguousarray(t.numpy()) for t in inputs]
    np.testing.assert_allclose(m.execute(arrays)[0], want, rtol=1e-5, atol=1e-5)
    out = [np.empty(want.shape, want.dtype)]  # C order: the caller's layout, not the plan's
    np.testing.assert_allclose(m.execute(arrays, out=out)[0], want, rtol=1e-5, atol=1e-5)
