"""The command line: inspect and run, as a user calls them."""
from __future__ import annotations

import subprocess
import sys

import numpy as np

from tests.programs.small_programs import small_program


def cli(*args):
    r = subprocess.run([sys.executable, "-m", "pyruntime", *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def test_inspect_lists_methods_io_ops_memory_segments():
    pte, _ = small_program("linear_relu")
    rc, out, err = cli("inspect", pte)
    assert rc == 0, err
    for needle in ("methods: forward", "0: FLOAT[2, 4] planned", "0: FLOAT[2, 3] planned",
                   "aten::addmm.out", "aten::relu.out", "planned memory:", "buffer 1:",
                   "segments: 1", "constant bytes:", "instructions: "):
        assert needle in out, needle


def test_run_with_inputs_writes_outputs(tmp_path):
    import pyruntime

    pte, _ = small_program("linear_relu")
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    np.savez(tmp_path / "in.npz", x)
    rc, out, err = cli("run", pte, "--tier", "reference", "--inputs", tmp_path / "in.npz",
                        "--out", tmp_path / "o.npz")
    assert rc == 0, err
    assert "execute:" in out and "output 0: float32[2, 3]" in out
    with np.load(tmp_path / "o.npz") as z:
        np.testing.assert_array_equal(z["output_0"], pyruntime.load(pte, tier="reference").forward(x)[0])


def test_run_random_inputs_and_bad_file(tmp_path):
    pte, _ = small_program("two_methods")
    rc, out, err = cli("run", pte, "--tier", "reference", "--method", "mul_sub", "--iters", "3")
    assert rc == 0, err
    assert "median of 3" in out and "output 1: float32[2]" in out
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"\0" * 64)
    rc, out, err = cli("inspect", bad)
    assert rc == 1 and "InvalidProgram" in err


def test_inspect_ops_says_which_tier_runs_each_operator():
    pte, _ = small_program("linear_relu")
    rc, out, err = cli("inspect", "--ops", pte)
    assert rc == 0, err
    assert "aten::relu.out: 1 compiled, 0 reference" in out
    assert "kernel calls compiled" in out
    data = pte.read_bytes().replace(b"aten::relu", b"aten::relx")
    bad = pte.parent / "relx_for_cli_test.pte"
    bad.write_bytes(data)
    rc, out, err = cli("inspect", "--ops", bad)
    assert rc == 0, err
    assert "aten::relx.out: MISSING (closest: aten::relu.out" in out
