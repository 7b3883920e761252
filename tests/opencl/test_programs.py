"""tier='opencl' on the parity programs (ExecuTorch exports, executorch.runtime's outputs):
within the parity tolerance everywhere, bit for bit on the programs whose float work is
convolutions, matrix products, batch norm, sums and the int8 paths (the same list as
the CPU tiers), those programs wholly on the device; repeated and concurrent executes
give the same bits; trace() sees the device's values; bad device selection, a missing
extension and an allocation past the device's limit are clear errors."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from tests.opencl.helpers import device_or_skip, same_bits
from tests.programs.fixtures import FIXTURE_NAMES, get_fixture
from tests.programs.test_parity import BIT_IDENTICAL, assert_output_parity

# The CPU tiers' bit-identical programs but yolo and llama_kv, whose sigmoid / softmax
# call exp: the device's exp is not the C library's (docs/NUMERICS.md); they are in the
# parity test above, within its tolerance.
CL_BIT_IDENTICAL = tuple(n for n in BIT_IDENTICAL if n not in ("yolo", "llama_kv"))
# where each parity program's calls run: wholly on the device but these (op: reason)
HOST_OPS = {
    "whisper": {"aten::_fft_r2c.out": "no OpenCL kernel for this op"},
    "mlp_dynamic": {"aten::addmm.out": "dynamic shape", "aten::relu.out": "dynamic shape"},
    "cond": {"aten::mul.out": "a value a move or a view re-points"},
}


@pytest.fixture(autouse=True, scope="module")
def _device():
    device_or_skip()


def _method(name, threads=None):
    fx = get_fixture(name)
    program = pyruntime.Runtime.get().load_program(fx.pte_path, data_path=fx.ptd_path)
    return fx, program.load_method(fx.method, tier="opencl", threads=threads)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_parity_with_executorch_runtime(name):
    fx, m = _method(name)
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        got = m.execute(inputs)
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_output_parity(g, e, f"{name} [opencl] call {step} output {i}")


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n != "llama_sdpa_kv"])
def test_placement(name):
    """Every parity program but the dynamic-shape LLM (below) runs on the device except
    the ops HOST_OPS names, for the reason it gives."""
    _, m = _method(name)
    host = {p.name: p.reason for p in m._device.placement if p.where == "host"}
    assert host == HOST_OPS.get(name, {}), f"{name}: on the host: {host}"


def test_dynamic_llm_placement_names_each_reason():
    _, m = _method("llama_sdpa_kv")
    reasons = {p.reason for p in m._device.placement if p.where == "host"}
    assert reasons == {"dynamic shape", "no OpenCL kernel for this op",
                       "an argument computed at run time"}, reasons


@pytest.mark.parametrize("name", CL_BIT_IDENTICAL)
def test_bit_identical(name):
    fx, m = _method(name)
    for step, (inputs, expected) in enumerate(zip(fx.calls, fx.expected)):
        for i, (g, e) in enumerate(zip(m.execute(inputs), expected)):
            assert same_bits(np.asarray(g), e), f"{name} call {step} output {i} differs"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["quant_cnn", "mobilenet_v2", "mlp_dynamic", "llama_sdpa_kv"])
def test_repeats_and_two_methods_on_two_threads_give_the_same_bits(name, threads):
    """Two methods executing at once on two Python threads, each with ``threads``
    intra-op threads for the host's compiled kernels (llama_sdpa_kv and mlp_dynamic run
    most or all of their ops there): every execute gives the first one's bits."""
    fx, m = _method(name, threads)
    x = fx.calls[0]
    want = m.execute(x)[0]
    for _ in range(10):
        assert same_bits(m.execute(x)[0], want)
    _, m2 = _method(name, threads)
    bad = []

    def loop(method):
        for _ in range(8):
            if not same_bits(method.execute(x)[0], want):
                bad.append(1)
    ts = [threading.Thread(target=loop, args=(mm,)) for mm in (m, m2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def test_method_pool_on_the_device():
    fx = get_fixture("cnn_bn")
    program = pyruntime.Runtime.get().load_program(fx.pte_path)
    from concurrent.futures import ThreadPoolExecutor

    from pyruntime.pool import MethodPool

    with MethodPool(program, fx.method, size=2, tier="opencl") as pool, \
            ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(pool.execute, [fx.calls[0], fx.calls[1]] * 4))
    for k, o in enumerate(outs):
        assert same_bits(np.asarray(o[0]), fx.expected[k % 2][0])


def test_trace_reports_the_device_values():
    fx, m = _method("cnn_bn")
    ref = pyruntime.Runtime.get().load_program(fx.pte_path).load_method(fx.method,
                                                                        tier="reference")
    a, b = m.trace(fx.calls[0]), ref.trace(fx.calls[0])
    assert [r[:2] for r in a] == [r[:2] for r in b]
    for (pc, op, got), (_, _, want) in zip(a, b):
        for g, w in zip(got, want):
            if isinstance(w, np.ndarray):
                assert same_bits(g, w), f"instruction {pc} ({op})"


def test_bad_device_selection_is_a_clear_error(monkeypatch):
    from pyruntime.kernels.opencl.device import choose

    with pytest.raises(ExecuTorchError, match="OpenCL devices") as e:
        choose("99")
    assert e.value.code == ErrorCode.InvalidArgument
    with pytest.raises(ExecuTorchError, match="names no OpenCL device"):
        choose("no-such-device-anywhere")
    monkeypatch.setenv("PYRUNTIME_OPENCL_DEVICE", "no-such-device-anywhere")
    fx = get_fixture("mlp")
    with pytest.raises(ExecuTorchError, match="names no OpenCL device"):
        pyruntime.Runtime.get().load_program(fx.pte_path).load_method(fx.method, tier="opencl")


def test_missing_fp64_and_oversized_buffer_are_clear_errors():
    from pyruntime.kernels.opencl.device import Device, choose

    p, d = choose()
    dev = Device(p, d)
    dev.info.fp64 = False
    with pytest.raises(ExecuTorchError, match="cl_khr_fp64") as e:
        dev.kernel("__kernel void k(__global T* x) { x[0] = 0; }", "k", {"T": "double"})
    assert e.value.code == ErrorCode.NotSupported
    with pytest.raises(ExecuTorchError, match="exceed the largest buffer") as e:
        dev.buffer(dev.info.max_alloc + 1, where="test")
    assert e.value.code == ErrorCode.MemoryAllocationFailed


def test_inspect_ops_lists_placement_and_bytes(capsys):
    from pyruntime.cli import main

    fx = get_fixture("whisper")
    assert main(["inspect", str(fx.pte_path), "--ops", "--tier", "opencl"]) == 0
    out = capsys.readouterr().out
    assert "aten::convolution.out" in out and " device" in out
    assert "aten::_fft_r2c.out: 1 host (no OpenCL kernel for this op; reference kernel)" \
        in out
    fx = get_fixture("mlp_dynamic")
    assert main(["inspect", str(fx.pte_path), "--ops", "--tier", "opencl"]) == 0
    assert "aten::addmm.out: 3 host (dynamic shape; fast tier)" in capsys.readouterr().out
    assert "bytes to the device" in out and "calls on the device" in out


def test_batch_workers_on_the_device(tmp_path):
    from pyruntime.batch import run_batch

    fx = get_fixture("cnn_bn")
    rng = np.random.default_rng(5)
    sets = {f"set{k}_arg0": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
            for k in range(4)}
    np.savez(tmp_path / "in.npz", **sets)
    r = run_batch(str(fx.pte_path), str(tmp_path / "in.npz"), workers=2, tier="opencl")
    assert not r.errors and sorted(r.outputs) == [0, 1, 2, 3]
    ref = pyruntime.Runtime.get().load_program(fx.pte_path).load_method(fx.method,
                                                                        tier="reference")
    for k in range(4):
        assert same_bits(np.asarray(r.outputs[k][0]), ref.execute([sets[f"set{k}_arg0"]])[0])


def test_an_index_out_of_range_on_the_device_names_its_instruction():
    fx, m = _method("llama_kv")
    tokens = fx.calls[0][0]
    with pytest.raises(ExecuTorchError, match=r"instruction \d+ \(aten::index.Tensor_out\): "
                                              r"indices: an index is out of range") as e:
        m.execute([tokens, np.array([40], np.int64)])
    assert e.value.code == ErrorCode.InvalidArgument
    _, fresh = _method("llama_kv")  # the flag is cleared: the next execute is good
    assert same_bits(m.execute(fx.calls[0])[0], fresh.execute(fx.calls[0])[0])
