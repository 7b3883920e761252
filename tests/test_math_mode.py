"""The ``math=`` setting as users reach it: the API, ``$PYRUNTIME_MATH``, ``--math`` on the
command line, and what ``inspect`` / ``bench`` / ``serve`` say about it. What fast math
computes is tested in tests/kernels/test_fastmath.py and tests/programs/test_parity.py."""
from __future__ import annotations

import numpy as np
import pytest

import pyruntime
from pyruntime import ExecuTorchError
from pyruntime.pool import MethodPool
from tests.child import run_json
from tests.programs.fixtures import get_fixture
from tests.test_cli import cli


def test_default_is_exact_and_the_argument_sets_it():
    fx = get_fixture("cnn_bn")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    assert pyruntime.Runtime.get().math == "exact"
    exact, fast = prog.load_method("forward"), prog.load_method("forward", math="fast")
    assert (exact.math, fast.math) == ("exact", "fast")
    a, b = exact.execute(fx.calls[0])[0], fast.execute(fx.calls[0])[0]
    np.testing.assert_array_equal(a, fx.expected[0][0])  # exact: executorch.runtime's bits
    assert not np.array_equal(a, b) and np.abs(a - b).max() <= 1e-4 * max(1, np.abs(a).max())
    # the reference (and OpenCL) tiers are the exact definition whatever is asked
    assert prog.load_method("forward", tier="reference", math="fast").math == "exact"
    assert pyruntime.load(fx.pte_path, math="fast").method("forward").math == "fast"


def test_a_bad_mode_is_a_clear_error():
    fx = get_fixture("mlp")
    prog = pyruntime.Runtime.get().load_program(fx.pte_path)
    with pytest.raises(ExecuTorchError, match="method 'forward': math must be 'exact' or "
                                              "'fast', got 'fastest'") as e:
        prog.load_method("forward", math="fastest")
    assert e.value.code == pyruntime.ErrorCode.InvalidArgument
    with pytest.raises(ValueError, match="math must be"):
        pyruntime.Runtime.get().math = "quick"


def test_runtime_default_and_environment_variable():
    fx = get_fixture("mlp")
    rt = pyruntime.Runtime.get()
    rt.math = "fast"
    try:
        assert rt.load_program(fx.pte_path).load_method("forward").math == "fast"
    finally:
        rt.math = "exact"
    code = ("import sys, json, pyruntime; p = pyruntime.Runtime.get().load_program(sys.argv[1]);"
            "print(json.dumps(p.load_method('forward').math))")
    assert run_json(code, fx.pte_path, env={"PYRUNTIME_MATH": "fast"}) == "fast"
    bad = ("import sys, json, pyruntime\np = pyruntime.Runtime.get().load_program(sys.argv[1])\n"
           "try:\n    p.load_method('forward')\nexcept pyruntime.ExecuTorchError as e:\n"
           "    print(json.dumps(str(e)))")
    assert "$PYRUNTIME_MATH must be 'exact' or 'fast', got 'turbo'" in run_json(
        bad, fx.pte_path, env={"PYRUNTIME_MATH": "turbo"})


def test_pool_and_server_report_the_mode():
    from pyruntime.serve import PteServer

    fx = get_fixture("mlp")
    pool = MethodPool(fx.pte_path, size=2, math="fast")
    assert pool.math == "fast"
    got = pool.execute(fx.calls[0])[0]
    pool.close()
    assert np.abs(got - fx.expected[0][0]).max() <= 1e-4 * max(1, np.abs(got).max())
    srv = PteServer(("127.0.0.1", 0), fx.pte_path, workers=1, math="fast")
    try:
        assert srv.metadata["math"] == "fast"
    finally:
        srv.server_close()
        srv.pool.close()


def test_cli_math_flag_reaches_every_command(tmp_path):
    fx = get_fixture("cnn_bn")
    rc, out, err = cli("inspect", "--ops", "--math", "fast", fx.pte_path)
    assert rc == 0, err
    assert "operators by tier (math: fast)" in out
    assert "aten::convolution.out: 2 compiled, 0 reference (2 with fast math)" in out
    rc, out, err = cli("inspect", "--ops", fx.pte_path)
    assert rc == 0 and "(math: exact)" in out and "with fast math" not in out
    rc, out, err = cli("bench", "--math", "fast", "--no-compare", "--rounds", "3", fx.pte_path)
    assert rc == 0, err
    assert "math=fast" in out
    np.savez(tmp_path / "in.npz", *fx.calls[0])
    rc, out, err = cli("run", "--math", "fast", fx.pte_path, "--inputs", tmp_path / "in.npz",
                        "--out", tmp_path / "o.npz")
    assert rc == 0, err
    with np.load(tmp_path / "o.npz") as z:
        d = np.abs(z["output_0"] - fx.expected[0][0]).max()
    assert 0 < d <= 1e-4 * max(1, np.abs(fx.expected[0][0]).max())
    rc, out, err = cli("run", "--math", "fastest", fx.pte_path)
    assert rc == 2 and "invalid choice: 'fastest'" in err
