"""Programs that once crashed or escaped with the wrong exception: each must now
raise ExecuTorchError naming what is wrong, on both tiers, in a child process
(a regression to a segfault fails the test instead of killing pytest).

``regressions/fast_tier_fuzz``: mutated ExecuTorch exports found by fuzzing the
compiled tier (issue 19): two handed a compiled kernel a tensor with no storage
(segfault), five let a binder see argument kinds its op's schema rules out.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# file -> what the error must say (both tiers)
CASES = {
    "fast_tier_fuzz/mlp_dyn_72.pte": "instruction 1 (aten::addmm.out): tensor FLOAT[64, 64] has no data",
    "fast_tier_fuzz/mlp_dyn_685.pte": "instruction 1 (aten::addmm.out): tensor FLOAT[64, 64] has no data",
    "fast_tier_fuzz/mlp_dyn_46.pte": "(aten::addmm.out): argument 'self' (value 1) must be a tensor, got None",
    "fast_tier_fuzz/mlp_dyn_452.pte": "(aten::native_layer_norm.out): argument 'input' (value 15) must be a tensor, got str",
    "fast_tier_fuzz/mlp_dyn_1316.pte": "(aten::permute_copy.out): argument 'dims' (value 1) must be an int list, got a tensor",
    "fast_tier_fuzz/mlp_dyn_1331.pte": "(aten::_log_softmax.out): expected 4 arguments and a result slot (5 values), got 0",
    "fast_tier_fuzz/cnn_448.pte": "(aten::convolution.out): argument 'bias' (value 22) must be a tensor or None, got int",
}

_CHILD = r"""
import json, sys
import numpy as np
from pyruntime import ExecuTorchError, Program, TensorInfo
try:
    prog = Program(open(sys.argv[1], "rb").read())
    for name in prog.method_names:
        m = prog.load_method(name, tier=sys.argv[2])
        args = [np.ones(i.sizes, i.dtype) if isinstance(i, TensorInfo) else i.value
                for i in prog.metadata(name).inputs]
        m.execute(args)
    print(json.dumps({"outcome": "ran"}))
except ExecuTorchError as e:
    print(json.dumps({"outcome": "ExecuTorchError", "code": e.code.name, "message": str(e)}))
except Exception as e:
    print(json.dumps({"outcome": type(e).__name__, "message": str(e)}))
"""


@pytest.mark.parametrize("tier", ["reference", "fast"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_regression_raises_executorch_error(name, tier):
    r = subprocess.run([sys.executable, "-c", _CHILD, str(HERE / "regressions" / name), tier],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, f"child died with status {r.returncode}: {r.stderr[-2000:]}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["outcome"] == "ExecuTorchError", got
    assert CASES[name] in got["message"], got["message"]
