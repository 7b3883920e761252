"""kernels/schemas.py (the argument kinds the loader checks every KernelCall against)
is exactly what torch's operator schemas say for every registered operator.

Runs the generator in a fresh interpreter: it imports ExecuTorch's C++ kernel
libraries, which must not share a process with other tests' torch ops."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.registry import registered_names
from pyruntime.kernels.schemas import SCHEMAS
from pyruntime import ExecuTorchError
from pyruntime.argcheck import check_kernel_args
from pyruntime.values import ListRef

REPO = Path(__file__).resolve().parents[2]


def test_every_registered_operator_has_a_schema():
    assert sorted(SCHEMAS) == registered_names()


def test_schemas_match_torch():
    r = subprocess.run([sys.executable, "-m", "tests.kernels.gen_schemas", "--check"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]


def _t(*shape):
    return ETensor.from_array(np.zeros(shape, np.float32))


def test_well_formed_call_passes_and_each_malformation_is_named():
    # aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
    values = [_t(2), _t(2), 1, _t(2), [1.0], None, ListRef([0, 1]), "s"]
    check_kernel_args("aten::add.out", [0, 1, 2, 3, 3], values, "here")
    with pytest.raises(ExecuTorchError, match=r"here \(aten::add.out\): expected 4 arguments "
                                              r"and a result slot \(5 values\), got 4"):
        check_kernel_args("aten::add.out", [0, 1, 2, 3], values, "here")
    with pytest.raises(ExecuTorchError, match=r"argument 'other' \(value 5\) must be a tensor, "
                                              r"got None"):
        check_kernel_args("aten::add.out", [0, 5, 2, 3, 3], values, "here")
    with pytest.raises(ExecuTorchError, match=r"argument 'alpha' \(value 7\) must be a scalar, "
                                              r"got str 's'"):
        check_kernel_args("aten::add.out", [0, 1, 7, 3, 3], values, "here")
    with pytest.raises(ExecuTorchError, match=r"argument 'self' \(value 6\) must be a tensor, "
                                              r"got a list of 2 \(ETensor\)"):
        check_kernel_args("aten::add.out", [6, 1, 2, 3, 3], values, "here")
    # aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out): a list of tensors
    check_kernel_args("aten::cat.out", [6, 2, 3, 3], values, "here")
    with pytest.raises(ExecuTorchError, match=r"argument 'tensors' \(value 0\) must be a "
                                              r"tensor list"):
        check_kernel_args("aten::cat.out", [0, 2, 3, 3], values, "here")
    with pytest.raises(ExecuTorchError, match=r"argument 'dim' \(value 4\) must be an int, "
                                              r"got a list of 1 scalars"):
        check_kernel_args("aten::cat.out", [6, 4, 3, 3], values, "here")
