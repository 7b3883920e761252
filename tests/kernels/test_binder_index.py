"""The binder index (kernels/fast/binder_index.py): a new process imports only the kernel
modules an op needs, and gets exactly the binders a full import gives."""
from __future__ import annotations

import json
from pathlib import Path

from tests.child import run_json

REPO = Path(__file__).resolve().parents[2]

_CHILD = """
import json, sys
import pyruntime.kernels.fast as fast
from pyruntime.kernels.fast import binder_index

def entry(op):
    b = fast._BINDERS.get(op)
    return [f"{b.__module__}.{b.__qualname__}"] + [
        f"{x.__module__}.{x.__qualname__}" for x in (getattr(b, "typed", None),
                                                       getattr(b, "generic", None)) if x]

index = binder_index.read()
out = {"had_index": index is not None, "partial": {}}
if index is not None:
    for op in sorted(index):  # one op at a time, as loads ask for them
        fast.get_binder(op)
        out["partial"][op] = entry(op)
    fast.get_binder("no::such_op.out")  # an op without a binder imports nothing more
    out["loaded_after_missing_op"] = fast._loaded
fast.get_binder("")  # everything
out["full"] = {op: entry(op) for op in fast.fast_names()}
print(json.dumps(out))
"""


def _child(cache):
    return run_json(_CHILD, env={"PYRUNTIME_CACHE": str(cache)})


def test_an_op_gets_the_binders_of_a_full_import_from_its_modules_alone(tmp_path):
    first = _child(tmp_path)  # no record yet: a full import writes it
    assert not first["had_index"]
    (record,) = (tmp_path / "numba").glob("binders-*.json")
    second = _child(tmp_path)
    assert second["had_index"]
    assert second["partial"] == second["full"] == first["full"]
    assert len(second["full"]) > 200
    assert not second["loaded_after_missing_op"]
    # a record that cannot be read is rebuilt by the next full import
    record.write_text("{not json")
    third = _child(tmp_path)
    assert not third["had_index"] and third["full"] == first["full"]
    assert json.loads(record.read_text())


def test_a_process_binding_one_family_imports_few_kernel_modules(tmp_path):
    _child(tmp_path)
    code = ("import json, sys\nimport pyruntime.kernels.fast as fast\n"
            "fast.get_binder('aten::convolution.out')\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pyruntime.kernels.'))))")
    mods = run_json(code, env={"PYRUNTIME_CACHE": str(tmp_path)})
    assert "pyruntime.kernels.conv.typed" in mods and "pyruntime.kernels.conv.generic" in mods
    assert "pyruntime.kernels.quantized.typed" not in mods and "pyruntime.kernels.llm.typed" not in mods
