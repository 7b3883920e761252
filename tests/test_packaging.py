"""The wheel installs one top-level name, ``pyruntime`` (issue 31): built from this checkout,
it holds the kernels, delegates, the compiled loop and the exporter inside that package,
with the Vulkan shaders, and imports beside another distribution's ``kernels`` package."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_has_one_top_level_package(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(tmp_path), str(REPO)], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    wheel, = tmp_path.glob("pyruntime-*.whl")
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
