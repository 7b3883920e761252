"""Bundled programs (``.bpte``, file id ``BP08``): a ``.pte`` plus test cases per method.

``load_bundled_program`` parses the container (every offset checked) and loads
the embedded program with its own memory plan; ``verify`` runs every test
case of every suite on one loaded method per suite, in order, and compares
the outputs with the expected ones (``|actual - expected| <= atol + rtol *
|expected|`` element-wise for floating tensors, NaN equal to NaN; integer and
bool tensors and scalars must be equal; shapes and dtypes must match).

>>> from pyruntime.devtools import load_bundled_program
>>> # bp = load_bundled_program("model.bpte")
>>> # results = bp.verify(rtol=1e-3, atol=1e-5)
>>> # all(r.passed for r in results), bp.program.method_names
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from math import prod

import numpy as np

from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import dim_order_strides
from pyruntime.devtools.schemas import BUNDLED_IDENTIFIER, BUNDLED_SCHEMA
from pyruntime.schema.flatbuf import Reader, read_table

RTOL, ATOL = 1e-3, 1e-5


@dataclass
class TestCase:
    inputs: list
    expected_outputs: list


@dataclass
class CaseResult:
    method: str
    index: int
    passed: bool
    max_abs_err: float
    message: str = ""

    def __str__(self):
        verdict = "PASS" if self.passed else "FAIL"
        return f"{verdict} {self.method}[{self.index}]: max abs err {self.max_abs_err:.3e}" + \
            (f" ({self.message})" if self.message else "")


class BundledProgram:
    """A parsed ``.bpte``: ``program`` (a pyruntime Program) and ``suites``
    (``{method name: [TestCase, ...]}``)."""

    def __init__(self, program, suites: dict, version: int, program_bytes):
        self.program, self.suites, self.version = program, suites, version
        self.program_bytes = program_bytes

    def verify(self, rtol: float = RTOL, atol: float = ATOL, tier: str = "fast",
               methods=None, tracer=None) -> list[CaseResult]:
        """Run the test cases (of ``methods``, default all); one result per case.

        With an ``EventTracer``, each execute is recorded with its test case index
        as the run's ``bundled_input_index``.
        """
        results = []
        for name, cases in self.suites.items():
            if methods is not None and name not in methods:
                continue
            if tracer is not None:
                m = tracer.load_method(self.program, name, tier=tier)
            else:
                m = self.program.load_method(name, tier=tier)
            for i, case in enumerate(cases):
                if tracer is not None:
                    tracer.bundled_input_index = i
                try:
                    outputs = m.execute(case.inputs)
                except ExecuTorchError as e:
                    results.append(CaseResult(name, i, False, float("nan"), str(e)))
                    continue
                results.append(_compare(name, i, outputs, case.expected_outputs, rtol, atol))
            if tracer is not None:
                tracer.bundled_input_index = -1
        return results


def _compare(name, i, outputs, expected, rtol, atol) -> CaseResult:
    if len(outputs) != len(expected):
        return CaseResult(name, i, False, float("nan"),
                          f"{len(outputs)} outputs, the test case expects {len(expected)}")
    worst = 0.0
    for j, (got, exp) in enumerate(zip(outputs, expected)):
        if isinstance(exp, np.ndarray):
            got = np.asarray(got)
            if got.shape != exp.shape or got.dtype != exp.dtype:
                return CaseResult(name, i, False, float("nan"),
                                  f"output {j}: got {got.dtype}{list(got.shape)}, expected "
                                  f"{exp.dtype}{list(exp.shape)}")
            if exp.size == 0:
                continue
            a, b = got.astype(np.float64), exp.astype(np.float64)
            same = (a == b) | (np.isnan(a) & np.isnan(b))
            err = np.where(same, 0.0, np.abs(a - b))
            err = np.where(np.isnan(err), np.inf, err)
            worst = max(worst, float(err.max()))
            exact = exp.dtype.kind in "biu"
            bad = ~same if exact else ~same & ~(err <= atol + rtol * np.abs(b))
            if bad.any():
                k = int(np.argmax(bad.reshape(-1)))
                idx = np.unravel_index(k, exp.shape)
                return CaseResult(name, i, False, worst,
                                  f"output {j}: {int(bad.sum())} of {exp.size} elements differ; "
                                  f"at {list(map(int, idx))} got {got[idx].item()!r}, expected "
                                  f"{exp[idx].item()!r} (rtol={rtol:g}, atol={atol:g})")
        elif isinstance(got, np.ndarray):  # a scalar expected where the method gives a tensor
            return CaseResult(name, i, False, float("nan"),
                              f"output {j}: got a {got.dtype}{list(got.shape)} tensor, expected "
                              f"{type(exp).__name__} {exp!r}")
        elif got != exp and not (isinstance(exp, float) and exp != exp and got != got):
            return CaseResult(name, i, False, worst, f"output {j}: got {got!r}, expected {exp!r}")
    return CaseResult(name, i, True, worst)


# ---- reading ---------------------------------------------------------------------------
def load_bundled_program(source, data_path=None) -> BundledProgram:
    """Parse a ``.bpte`` (path, bytes or file object) and load its embedded program."""
    from pyruntime.loader import load_bytes
    from pyruntime.program import Program

    name = str(source) if isinstance(source, (str, os.PathLike)) else \
        getattr(source, "name", "<bytes>")
    data = load_bytes(source)
    what = f"bundled program {name}"
    r = Reader(data, ErrorCode.InvalidProgram, what)
    if len(data) >= 8 and bytes(data[4:8]) != BUNDLED_IDENTIFIER:
        raise ExecuTorchError(ErrorCode.InvalidProgram,
                              f"malformed {what}: file identifier {bytes(data[4:8])!r} at byte "
                              f"4, expected {BUNDLED_IDENTIFIER!r} (is this a .bpte file?)")
    root = read_table(r.root(BUNDLED_IDENTIFIER), "BundledProgram", BUNDLED_SCHEMA)
    if root.program is None or len(root.program) == 0:
        raise ExecuTorchError(ErrorCode.InvalidProgram, f"malformed {what}: no program bytes")
    suites = {}
    for s, suite in enumerate(root.method_test_suites or []):
        w = f"{what} suite {s} ({suite.method_name!r})"
        if not suite.method_name:
            raise ExecuTorchError(ErrorCode.InvalidProgram, f"malformed {w}: no method name")
        suites[suite.method_name] = [
            TestCase([_value(v, f"{w} case {c} input {k}") for k, v in enumerate(tc.inputs or [])],
                     [_value(v, f"{w} case {c} expected output {k}")
                      for k, v in enumerate(tc.expected_outputs or [])])
            for c, tc in enumerate(suite.test_cases or [])]
    try:
        program = Program(root.program, data_path=data_path)
    except ExecuTorchError as e:
        raise e.with_context(f"the program embedded in {what}") from e
    missing = sorted(set(suites) - set(program.method_names))
    if missing:
        raise ExecuTorchError(ErrorCode.InvalidProgram,
                              f"{what}: test suites for {missing}, which the program lacks "
                              f"(methods: {program.method_names})")
    return BundledProgram(program, suites, root.version, root.program)


def _value(v, where: str):
    code, member = v.val
    if member is None:
        raise ExecuTorchError(ErrorCode.InvalidProgram, f"malformed {where}: empty value "
                                                        f"(type code {code})")
    kind = member._kind
    if kind == "Int":
        return int(member.int_val)
    if kind == "Bool":
        return bool(member.bool_val)
    if kind == "Double":
        return float(member.double_val)
    try:
        dtype = to_numpy_dtype(member.scalar_type)
    except (ValueError, KeyError):
        raise ExecuTorchError(ErrorCode.InvalidProgram, f"malformed {where}: unknown scalar type "
                                                        f"{member.scalar_type}") from None
    sizes = tuple(member.sizes or ())
    if any(s < 0 for s in sizes) or len(sizes) > 16:
        raise ExecuTorchError(ErrorCode.InvalidProgram, f"malformed {where}: sizes {list(sizes)} "
                                                        "(negative, or more than 16 dims)")
    order = tuple(member.dim_order or range(len(sizes)))
    if sorted(order) != list(range(len(sizes))):
        raise ExecuTorchError(ErrorCode.InvalidProgram, f"malformed {where}: dim_order "
                                                        f"{list(order)} for sizes {list(sizes)}")
    data = member.data if member.data is not None else np.zeros(0, np.uint8)
    need = prod(sizes) * dtype.itemsize
    if len(data) < need:
        raise ExecuTorchError(ErrorCode.InvalidProgram,
                              f"malformed {where}: tensor {dtype}{list(sizes)} needs {need} bytes, "
                              f"the test case holds {len(data)}")
    if need == 0:
        return np.zeros(sizes, dtype)
    strides = [s * dtype.itemsize for s in dim_order_strides(sizes, order)]
    raw = np.frombuffer(bytes(data[:need]), np.uint8)
    return np.array(np.ndarray(sizes, dtype, buffer=raw, strides=strides), copy=True)
