"""Fuzz the loader, both tiers and the XNNPACK bridge with mutated real programs.

Every case must load and run, or raise ExecuTorchError: never a crash, a hang,
or another exception type. Cases run in child processes (``tests.fuzz``), so a
crash fails its chunk with the case number that caused it. The sources are
programs made by ExecuTorch's exporter: a plain MLP, a torch.cond program
(jumps, moves), a dynamic-shape MLP (prim ops), a KV-cache decoder and an int8
CNN. ``semantic`` edits their parsed plans instead (values that fit each op's
schema but not each other: another value as an argument, a hostile Int, a
tensor's dtype or sizes), ``inputs`` passes hostile inputs to ``execute``; the
``xnnpack`` target mutates only the delegate payload of XNNPACK programs;
``etdump`` and ``bundled`` mutate ETDump files and bundled programs.
``python -m tests.fuzz --cases N`` runs longer campaigns.
"""
from __future__ import annotations

import pytest

from tests import parts

from tests.fuzz import campaign
from tests.fuzz.targets import TARGETS, load_sources, run_case

# target -> (cases, chunks): about 3 minutes on the 2-core CI machine
SUITE = {"reference": (10_000, 10), "fast": (4_000, 4), "inputs": (2_000, 2), "xnnpack": (600, 2),
         "coreml": (300, 1),
         "qnn": (60, 1),  # each new QNN binary is run in a forked child first: ~0.1 s a case
         "qnn_isolated": (30, 1),  # QNN in a worker process (a new one after each crash)
         "vulkan": (200, 1),
         "ethosu": (400, 1),
         "native": (2_000, 1),
         "mlx": (2_000, 1),
         "semantic": (600, 2), "etdump": (2_000, 1), "bundled": (1_000, 1)}
CHUNKS = [(t, i) for t, (_, n) in SUITE.items() for i in range(n)]


# the part (tests/parts.py) each target's sources need
_PART = {"qnn": "qnn", "coreml": "coreml", "ethosu": "arm", "vulkan": "vulkan"}


def _missing(name: str) -> str | None:
    """Why ``name``'s sources cannot be made here (a vendor library that is not installed)."""
    if name.startswith("qnn"):
        from pyruntime.delegates.qnn import library
        from tests.delegates.qnn_fixtures import unavailable_reason

        if library.get_library() is None:
            return f"QnnBackend: {library.unavailable_reason()}"
        return unavailable_reason()
    if name == "coreml":
        from pyruntime.delegates.coreml import coreml_backend

        ok = coreml_backend.is_available()
        return None if ok else f"CoreMLBackend: {coreml_backend.unavailable_reason()}"
    if name == "ethosu":
        from pyruntime.delegates.ethosu import ethosu_backend
        from tests.delegates.ethosu_fixtures import unavailable_reason

        if not ethosu_backend.is_available():
            return f"EthosUBackend: {ethosu_backend.unavailable_reason()}"
        return unavailable_reason()
    if name == "vulkan":
        from pyruntime.delegates.vulkan.device import availability

        ok, why = availability()
        return None if ok else f"VulkanBackend: {why}"
    return None


@pytest.fixture(scope="module")
def sources():
    # built (exported, cached) here, once, before any worker process reads them
    return {name: load_sources(TARGETS[name]) for name in SUITE if _missing(name) is None}


def test_unmutated_sources_run(sources):
    for name, srcs in sources.items():
        for s in srcs:
            assert run_case(TARGETS[name], s.data, s.inputs) == "ran", name


@pytest.mark.parametrize("target,chunk", CHUNKS, ids=[f"{t}-{i}" for t, i in CHUNKS])
def test_fuzz_chunk(sources, target, chunk):
    if target not in sources:
        parts.need(_PART.get(target.split("_")[0], target), _missing(target))
    cases, chunks = SUITE[target]
    per = cases // chunks
    report = campaign(target, start=chunk * per, count=per)
    assert report.total == per
    assert not report.findings, "\n".join(f"case {c}: {k}: {d}" for c, k, d in report.findings)
    # Mutations hit both fatal and harmless places: some cases must be rejected and
    # some must still run, or the harness is not exercising the runtime.
    assert report.counts["rejected"] > 0 and report.counts["ran"] > 0, report.counts


def test_harness_reports_crashes_hangs_and_other_exceptions_with_their_case():
    report = campaign("selftest", start=0, count=14, case_timeout=3)
    kinds = {c: k for c, k, _ in report.findings}
    assert kinds == {3: "crash", 5: "other", 6: "hang", 10: "crash", 12: "other", 13: "hang"}
    assert report.counts["rejected"] == 8 and report.total == 14
