"""Bundled programs (.bpte): made by ExecuTorch's BundledProgram and by exporter.bundled,
verified by ``pyruntime verify``; malformed files raise our error."""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.cython_ext.errors import ExecuTorchError
from pyruntime.exporter.bundled import serialize_bundled_program
from pyruntime import cli
from pyruntime.devtools import EventTracer, load_bundled_program
from tests.programs.fixtures import get_fixture


def _executorch_bpte(fx, expected=None) -> bytes:
    import torch
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    expected = expected or fx.expected
    cases = [MethodTestCase(inputs=[torch.from_numpy(a) for a in c],
                            expected_outputs=[torch.from_numpy(e) for e in outs])
             for c, outs in zip(fx.calls, expected)]
    bp = BundledProgram(None, [MethodTestSuite(fx.method, cases)], pte_file_path=str(fx.pte_path))
    return serialize_from_bundled_program_to_flatbuffer(bp)


@pytest.fixture(scope="module")
def cnn():
    return get_fixture("cnn_bn")


def test_verify_executorch_bundled_program(cnn, tmp_path, capsys):
    path = tmp_path / "cnn.bpte"
    path.write_bytes(_executorch_bpte(cnn))
    bp = load_bundled_program(path)
    assert bp.version == 2 and list(bp.suites) == ["forward"] and len(bp.suites["forward"]) == 2
    np.testing.assert_array_equal(bp.suites["forward"][1].inputs[0], cnn.calls[1][0])
    assert cli.main(["verify", str(path), "--tier", "reference"]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS forward[") == 2 and "2 of 2 test cases passed" in out


def test_wrong_expected_output_fails(cnn, tmp_path, capsys):
    wrong = [[o.copy() for o in outs] for outs in cnn.expected]
    wrong[1][0][0, 3] += 0.25
    path = tmp_path / "bad.bpte"
    path.write_bytes(_executorch_bpte(cnn, wrong))
    assert cli.main(["verify", str(path), "--tier", "reference"]) == 1
    out = capsys.readouterr().out
    assert "PASS forward[0]" in out and "FAIL forward[1]" in out
    assert "1 of 2 elements" not in out and "at [0, 3]" in out
    results = load_bundled_program(path).verify(tier="reference")
    assert [r.passed for r in results] == [True, False]
    assert results[1].max_abs_err == pytest.approx(0.25, rel=1e-4)


def test_scalar_expected_for_a_tensor_output_fails_cleanly(cnn):
    # fuzz case bundled 26571: the bundle expects a scalar where forward returns a tensor
    data = serialize_bundled_program(cnn.pte_path.read_bytes(),
                                     {"forward": [(cnn.calls[0], [1.5])]})
    (result,) = load_bundled_program(data).verify(tier="reference")
    assert not result.passed and "tensor, expected float 1.5" in result.message


def test_our_writer_matches_executorch_byte_for_byte(cnn):
    ours = serialize_bundled_program(cnn.pte_path.read_bytes(),
                                     {"forward": list(zip(cnn.calls, cnn.expected))})
    assert ours == _executorch_bpte(cnn)


def test_executorch_runs_our_bundled_program():
    from executorch.extension.pybindings import portable_lib

    fx = get_fixture("mlp")
    data = serialize_bundled_program(fx.pte_path.read_bytes(),
                                     {"forward": list(zip(fx.calls, fx.expected))})
    bundle = portable_lib._load_bundled_program_from_buffer(data)
    for i in range(len(fx.calls)):  # raises if the outputs do not match
        bundle.verify_result_with_bundled_expected_output("forward", i, 1e-3, 1e-5)


def test_integer_inputs_several_cases_and_tracing():
    fx = get_fixture("llama_kv")  # int64 tokens and positions; state carried between cases
    data = serialize_bundled_program(fx.pte_path.read_bytes(),
                                     {"forward": list(zip(fx.calls[:3], fx.expected[:3]))})
    bp = load_bundled_program(data)
    tracer = EventTracer(intermediates=False)
    results = bp.verify(tracer=tracer, tier="reference")
    assert all(r.passed for r in results), [str(r) for r in results]
    assert [r.bundled_input_index for r in tracer.etdump().executions] == [0, 1, 2]


def test_malformed_bundled_programs_raise_our_error(cnn, tmp_path):
    good = serialize_bundled_program(cnn.pte_path.read_bytes(),
                                     {"forward": list(zip(cnn.calls, cnn.expected))})
    with pytest.raises(ExecuTorchError, match="expected b'BP08'"):
        load_bundled_program(good[:4] + b"ET12" + good[8:])
    with pytest.raises(ExecuTorchError, match="embedded"):
        load_bundled_program(serialize_bundled_program(b"not a program at all", {}))
    with pytest.raises(ExecuTorchError, match="lacks"):
        load_bundled_program(serialize_bundled_program(cnn.pte_path.read_bytes(),
                                                       {"decode": [([1], [2])]}))
    for n in list(range(0, 200, 7)) + [len(good) // 2]:
        with pytest.raises(ExecuTorchError):
            load_bundled_program(good[:n]).verify(tier="reference")
    rng = np.random.default_rng(1)
    head = 2048  # the flatbuffer tables sit around the program bytes; corrupt the start
    for _ in range(150):
        bad = bytearray(good)
        for pos in rng.integers(0, head, size=2):
            bad[pos] = int(rng.integers(0, 256))
        try:
            load_bundled_program(bytes(bad))
        except ExecuTorchError:
            pass
    path = tmp_path / "x.bpte"
    path.write_bytes(b"\x00" * 3)
    assert cli.main(["verify", str(path), "--tier", "reference"]) == 2
