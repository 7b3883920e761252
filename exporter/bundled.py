"""Write a bundled program (``.bpte``, ``BP08``): a ``.pte`` plus test cases per method.

No torch needed: inputs and expected outputs are numpy arrays (anything
``np.asarray`` accepts) or Python ``int`` / ``float`` / ``bool``. The program
bytes are stored 32-byte aligned and tensor data 16-byte aligned, as the
schema's ``force_align`` asks, so ExecuTorch's own loaders accept the file.

>>> import numpy as np
>>> from pyruntime.exporter.bundled import serialize_bundled_program
>>> # pte = open("model.pte", "rb").read()
>>> # x = np.ones((1, 4), np.float32)
>>> # bpte = serialize_bundled_program(pte, {"forward": [([x], [expected])]})
>>> # open("model.bpte", "wb").write(bpte)     # pyruntime verify model.bpte
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.dtypes import from_numpy_dtype
from pyruntime.devtools import fbwriter
from pyruntime.devtools.schemas import BUNDLED_ALIGN, BUNDLED_IDENTIFIER, BUNDLED_SCHEMA, \
    BUNDLED_VERSION

_CODES = {"Tensor": 1, "Int": 2, "Bool": 3, "Double": 4}


def _value(v) -> dict:
    if isinstance(v, (bool, np.bool_)):
        return {"val": (_CODES["Bool"], {"bool_val": bool(v)})}
    if isinstance(v, (int, np.integer)):
        return {"val": (_CODES["Int"], {"int_val": int(v)})}
    if isinstance(v, (float, np.floating)):
        return {"val": (_CODES["Double"], {"double_val": float(v)})}
    a = np.ascontiguousarray(np.asarray(v))
    return {"val": (_CODES["Tensor"], {
        "scalar_type": int(from_numpy_dtype(a.dtype)), "sizes": list(a.shape),
        "data": a.tobytes(), "dim_order": list(range(a.ndim))})}


def serialize_bundled_program(pte: bytes, suites: dict) -> bytes:
    """``suites``: ``{method name: [(inputs, expected_outputs), ...]}`` -> ``.bpte`` bytes."""
    obj = {"version": BUNDLED_VERSION, "program": bytes(pte), "method_test_suites": [
        {"method_name": name, "test_cases": [
            {"inputs": [_value(x) for x in inputs],
             "expected_outputs": [_value(y) for y in expected]}
            for inputs, expected in cases]}
        for name, cases in suites.items()]}
    return fbwriter.build(BUNDLED_SCHEMA, "BundledProgram", obj, BUNDLED_IDENTIFIER,
                          align=BUNDLED_ALIGN)


def save_bundled_program(path, pte: bytes, suites: dict) -> None:
    """Write ``serialize_bundled_program(pte, suites)`` to ``path``."""
    with open(path, "wb") as f:
        f.write(serialize_bundled_program(pte, suites))
