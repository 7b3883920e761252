"""The vendor parts and extras the tests need, and what a missing one does.

Outside CI a test whose part is missing is skipped with the reason. Under CI
(``CI=true``, as ``.ci/run`` sets it) the same skip fails the run, naming the part and
the install step that should have provided it (``tests/conftest.py``), so an install
regression cannot drop a bridge's coverage while the run stays green. A skip that is
not about a missing part says so (``not_applicable``) and stays a skip everywhere::

    from tests import parts
    pytestmark = parts.skip_unless(LIB is not None, "xnnpack", library.unavailable_reason())
    ct = parts.importorskip("coremltools", "coreml")
    parts.need("arm", why)                  # at module level: skips the whole module
"""
from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Part:
    what: str
    install: str  # the step (in .ci/run, or the README's install) that provides it


PARTS = {
    "vulkan": Part("a Vulkan device (Mesa's lavapipe) and the glslc shader compiler",
                   "apt-get install mesa-vulkan-drivers libvulkan1 glslc"),
    "qnn": Part("Qualcomm's QNN libraries (the HTP simulator)",
                "pip install --no-deps onnxruntime-qnn==2.7.0"),
    "arm": Part("Arm's vela compiler and the TOSA reference model",
                "pip install --no-deps ethos-u-vela==5.2.0 tosa-tools==2026.8.0"),
    "xnnpack": Part("the XNNPACK library in the executorch wheel",
                    "pip install -e '.[test]' (executorch==1.5.1)"),
    "libxnnpack0": Part("Debian's 2022 XNNPACK library", "apt-get install libxnnpack0"),
    "coreml": Part("coremltools (the [coreml] extra)", "pip install -e '.[test]'"),
    "executorch": Part("executorch 1.5.1 and torch (the golden reference)",
                       "pip install -e '.[test]'"),
    "tokenizers": Part("the tokenizer libraries (the [llm] extra)", "pip install -e '.[test]'"),
    "ray": Part("Ray Data (the [ray] extra)", "pip install -e '.[test]'"),
    "transformers": Part("transformers (the Whisper fixture and its oracle, built in a child)",
                         "pip install -e '.[test]'"),
    "scipy": Part("scipy (pocketfft, the FFT ExecuTorch uses)", "pip install -e '.[test]'"),
    "blas": Part("the OpenBLAS numpy's wheel bundles", "pip install numpy (a manylinux wheel)"),
    "cc": Part("a C compiler (the QNN test shim)", "apt-get install gcc"),
    "shipped": Part("the kernels compiled ahead for this host's x86-64 level (release step)",
                    "python -m pyruntime.kernels.fast.shipped build --targets host"),
    "opencl": Part("pyopencl and an OpenCL device (PoCL's CPU driver here)",
                   "apt-get install pocl-opencl-icd ocl-icd-libopencl1; pip install -e "
                   "'.[test]' (pyopencl)"),
}

PREFIX = "missing part "
NOT_APPLICABLE = "not applicable here: "
_REASON = re.compile(re.escape(PREFIX) + r"(\w+): ")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def reason(part: str, why: str) -> str:
    """A skip reason naming ``part`` (a key of PARTS), what it is and why it is missing."""
    if part not in PARTS:
        raise KeyError(f"unknown part {part!r}; known: {', '.join(PARTS)}")
    return f"{PREFIX}{part}: {PARTS[part].what}: {why}"


def part_of(skip_reason: str) -> str | None:
    """The part a skip reason made by ``reason`` names, else None."""
    m = _REASON.search(skip_reason)
    return m.group(1) if m and m.group(1) in PARTS else None


def skip_unless(ok: bool, part: str, why: str | None):
    """A ``skipif`` mark: skip (fail under CI) unless ``ok``."""
    return pytest.mark.skipif(not ok, reason=reason(part, why or "unavailable"))


def need(part: str, why: str | None) -> None:
    """Skip the calling test, or at module level the module, when ``why`` is not None."""
    if why is not None:
        pytest.skip(reason(part, why), allow_module_level=True)


def importorskip(module: str, part: str):
    """``module`` imported, or a skip naming ``part``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.skip(reason(part, f"cannot import {module}: {e}"), allow_module_level=True)


def not_applicable(why: str) -> str:
    """The reason of a skip that is not about a missing part (it stays a skip in CI)."""
    return NOT_APPLICABLE + why
