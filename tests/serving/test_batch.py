"""`pyruntime batch --engine local`: every set through spawned worker processes gives
exactly the outputs of a sequential run in one process (same tier, one thread), and
executorch.runtime's outputs where the fixture has them; a bad set fails alone."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pyruntime.cython_ext.errors import ExecuTorchError
from pyruntime.batch import Progress, read_sets, run_batch
from pyruntime.cli import main
from tests.serving.common import (check_against_oracles, input_sets, program, read_outputs,
                                  sequential, write_sets)

REPO = Path(__file__).resolve().parents[2]


def test_cli_subprocess_two_workers_matches_sequential(tmp_path):
    """The contract end to end: `python -m pyruntime batch` in a fresh process."""
    sets = input_sets("mlp")
    write_sets(tmp_path / "in.npz", sets)
    r = subprocess.run([sys.executable, "-m", "pyruntime", "batch", str(program("mlp").pte_path),
                        "--inputs", str(tmp_path / "in.npz"), "--out", str(tmp_path / "out.npz"),
                        "--workers", "2", "--engine", "local", "--tier", "reference"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"batch: {len(sets)} sets, {len(sets)} ok, 0 failed" in r.stderr
    assert "sets/s" in r.stderr and f"{len(sets)}/{len(sets)} sets" in r.stderr  # bar + summary
    check_against_oracles("mlp", sets, read_outputs(tmp_path / "out.npz"), "reference")


@pytest.mark.parametrize("name", ["xnnpack_mlp", "mlp_dynamic"])
def test_local_two_workers_matches_sequential(name, tmp_path, capsys):
    sets = input_sets(name)
    write_sets(tmp_path / "in.npz", sets)
    rc = main(["batch", str(program(name).pte_path), "--inputs", str(tmp_path / "in.npz"),
               "--out", str(tmp_path / "out.npz"), "--workers", "2", "--tier", "fast"])
    err = capsys.readouterr().err
    assert rc == 0, err
    check_against_oracles(name, sets, read_outputs(tmp_path / "out.npz"), "fast")


def test_wrong_shape_set_fails_alone(tmp_path, capsys):
    sets = input_sets("mlp")
    bad = len(sets) // 2
    sets[bad] = [np.ones((5, 32), np.float32)]
    write_sets(tmp_path / "in.npz", sets)
    rc = main(["batch", str(program("mlp").pte_path), "--inputs", str(tmp_path / "in.npz"),
               "--out", str(tmp_path / "out.npz"), "--workers", "2", "--tier", "fast"])
    err = capsys.readouterr().err
    assert rc == 1
    assert (f"error: set {bad}: [InvalidArgument 0x12] method 'forward' input 0: expected "
            "shape [4, 32], got [5, 32]") in err
    assert f"{len(sets) - 1} ok, 1 failed" in err
    check_against_oracles("mlp", sets, read_outputs(tmp_path / "out.npz"), "fast", skip={bad})


def test_python_api_keeps_set_indices_and_reports_missing_args(tmp_path):
    sets = input_sets("mlp")[:3]
    np.savez(tmp_path / "in.npz", set10_arg0=sets[0][0], set3_arg0=sets[1][0],
             set7_arg1=sets[2][0])  # set 7 lacks arg 0
    r = run_batch(str(program("mlp").pte_path), tmp_path / "in.npz", workers=1, tier="fast")
    assert sorted(r.outputs) == [3, 10] and list(r.errors) == [7]
    assert "set 7: " in r.errors[7] and "missing set7_arg0" in r.errors[7]
    want = sequential(program("mlp").pte_path, [sets[1], sets[0]], "fast")
    np.testing.assert_array_equal(r.outputs[3][0], want[0][0])
    np.testing.assert_array_equal(r.outputs[10][0], want[1][0])


def test_scalar_inputs_come_back_as_python_scalars(tmp_path):
    """A 0-d array for an Int input is passed as an int (a 0-d array would be refused)."""
    from tests.programs.small_programs import small_program

    pte, _ = small_program("scalar_input")  # forward(x, k: int) = x * k, traced with k=3
    x = np.arange(2, dtype=np.float32)
    np.savez(tmp_path / "in.npz", set0_arg0=x, set0_arg1=np.array(3), set1_arg0=x + 1,
             set1_arg1=np.array(3), set2_arg0=x, set2_arg1=np.array(4))
    r = run_batch(str(pte), tmp_path / "in.npz", workers=1, tier="reference")
    np.testing.assert_array_equal(r.outputs[0][0], x * 3)
    np.testing.assert_array_equal(r.outputs[1][0], (x + 1) * 3)
    assert list(r.errors) == [2] and "expected the traced Int 3, got 4" in r.errors[2]


def test_unusable_program_fails_before_any_worker(tmp_path, capsys):
    write_sets(tmp_path / "in.npz", input_sets("mlp")[:1])
    rc = main(["batch", str(program("mlp").pte_path), "--inputs", str(tmp_path / "in.npz"),
               "--out", str(tmp_path / "out.npz"), "--method", "nope"])
    assert rc == 1 and "no method 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "out.npz").exists()


def test_read_sets():
    assert read_sets(["set1_arg1", "set1_arg0", "set0_arg0"]) == {
        0: ["set0_arg0"], 1: ["set1_arg0", "set1_arg1"]}
    assert read_sets(["set2_arg1"]) == {2: [None, "set2_arg1"]}  # fails that set alone
    with pytest.raises(ExecuTorchError, match="'arr_0' is not of the form"):
        read_sets(["set0_arg0", "arr_0"])


def test_progress_on_a_pipe_prints_a_line_per_tenth_and_at_start():
    s = io.StringIO()
    p = Progress(20, s)
    for i in range(1, 21):
        p.update(i, 1 if i > 10 else 0)
    lines = s.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1].startswith("batch [") and "20/20 sets, 1 failed" in \
        lines[-1]
