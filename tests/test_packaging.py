"""The wheel installs one top-level name, ``pyruntime`` (issue 31): built from this checkout,
it holds the kernels, delegates, the compiled loop and the exporter inside that package,
with the Vulkan shaders, and imports beside another distribution's ``kernels`` package."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pyruntime.kernels.fast import shipped
from tests import parts

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built from this checkout (once for the module)."""
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out), str(REPO)], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    whl, = out.glob("pyruntime-*.whl")
    return whl


def test_the_wheel_has_one_top_level_package(tmp_path, wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"pyruntime", wheel.name.split("-")[0] + "-" +
                                                 wheel.name.split("-")[1] + ".dist-info"}
    for inside in ("pyruntime/kernels/fast/__init__.py", "pyruntime/delegates/registry.py",
                   "pyruntime/exporter/__init__.py", "pyruntime/cython_ext/tensor.py",
                   "pyruntime/delegates/vulkan/shaders/common.glsl"):
        assert inside in names, inside
    assert any(n.startswith("pyruntime/cython_ext/_loop.") and n.endswith(".so") for n in names)

    # installed alone in a fresh directory with a foreign top-level "kernels" beside it
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    (site / "kernels").mkdir()
    (site / "kernels" / "__init__.py").write_text("FOREIGN = True\n")
    code = ("import kernels, pyruntime, pyruntime.kernels.registry as r; "
            "assert kernels.FOREIGN and r.has_kernel('aten::add.out'); "
            "print(pyruntime.__file__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert str(site) in r.stdout


_FIRST_RUN = """
import json, sys, time
import numpy as np
import pyruntime
from pyruntime.kernels.fast import background, shipped
z = np.load(sys.argv[2])
m = pyruntime.Runtime.get().load_program(sys.argv[1]).load_method("forward")
got = m.execute([z["x"]])[0]
print(json.dumps({"file": pyruntime.__file__, "target": shipped.select(),
                  "pending": m.pending_kernels, "numba": "numba.core" in sys.modules,
                  "requested": len(background._requested),
                  "same": bool(np.array_equal(got.view(np.uint8), z["want"].view(np.uint8)))}))
"""


@parts.skip_unless(shipped.select() is not None, "shipped",
                   "no shipped kernels for this host's x86-64 level were built")
def test_the_wheel_runs_a_fresh_install_on_its_shipped_kernels(tmp_path, wheel):
    """Installed from the wheel with an empty kernel cache, MobileNetV2's first execute binds
    every kernel from the machine code the wheel carries: nothing pending, no compile
    process, Numba never imported, executorch.runtime's bits."""
    import json

    import numpy as np

    from tests.programs.fixtures import get_fixture

    fx = get_fixture("mobilenet_v2")
    np.savez(tmp_path / "io.npz", x=fx.calls[0][0], want=fx.expected[0][0])
    target = shipped.select()
    names = zipfile.ZipFile(wheel).namelist()
    assert f"pyruntime/kernels/fast/_shipped/{target}/manifest.json" in names
    objects = [n for n in names if n.startswith("pyruntime/kernels/fast/_shipped/")
               and n.endswith(".o")]
    assert len(objects) >= len(shipped.TARGETS) and all(
        n.count("/") == 6 for n in objects)  # _shipped/<target>/<module-key>/<kernel>.o
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    r = subprocess.run([sys.executable, "-c", _FIRST_RUN, str(fx.pte_path), str(tmp_path / "io.npz")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin",
                            "PYRUNTIME_CACHE": str(tmp_path / "cache"),
                            "PYRUNTIME_COMPILE": "background", "PYRUNTIME_PROGRESS": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(site))
    assert {k: got[k] for k in ("target", "pending", "numba", "requested", "same")} == {
        "target": target, "pending": 0, "numba": False, "requested": 0, "same": True}
