"""The fast tier is the default; kernels compile ahead of use (`pyruntime warmup`) into the
on-disk cache, and a load that compiles says so on stderr.

Kept cheap for CI (whose kernel cache starts empty): the warmup round trip compiles one
small kernel into a private cache; nothing here compiles every kernel.
"""
from __future__ import annotations

import inspect
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyruntime
from tests.child import run_json
from tests.programs.small_programs import small_program

REPO = Path(__file__).resolve().parents[1]
SMALL_KERNEL = ("pyruntime.kernels.complex.typed", "conj_kernel")  # a short compile


# ---- the default tier ------------------------------------------------------------------
def test_every_load_entry_point_defaults_to_the_fast_tier():
    from pyruntime.bench import bench
    from pyruntime.cli import run_program
    from pyruntime.devtools.bundled import BundledProgram
    from pyruntime.devtools.diff import diff
    from pyruntime.method import Method
    from pyruntime.pool import MethodPool
    from pyruntime.profiles import DeviceProfile

    for fn in (pyruntime.Program.load_method, pyruntime.load, pyruntime.Module, Method,
               MethodPool, DeviceProfile.load_method, bench, run_program, diff,
               BundledProgram.verify):
        assert inspect.signature(fn).parameters["tier"].default == "fast", fn


@pytest.mark.parametrize("argv", [["run", "x.pte"], ["bench", "x.pte"], ["trace", "x.pte"],
                                  ["verify", "x.bpte"],
                                  ["diff", "x.pte", "--inputs", "i", "--etdump", "e",
                                   "--debug-buffer", "b"]])
def test_cli_commands_default_to_the_fast_tier(argv, monkeypatch):
    import argparse

    from pyruntime import cli

    seen = {}

    def parse(self, args=None, namespace=None):
        ns = real(self, args, namespace)
        seen["ns"] = ns
        raise SystemExit(0)

    real = argparse.ArgumentParser.parse_args
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse)
    with pytest.raises(SystemExit):
        cli.main(argv)
    assert seen["ns"].tier == "fast"


def test_load_method_without_a_tier_runs_compiled_kernels():
    pte, _ = small_program("linear_relu")
    prog = pyruntime.Runtime.get().load_program(pte)
    m = prog.load_method("forward")
    assert m.tier == "fast" and m._fast is not None and m._fast.compiled > 0
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    ref = prog.load_method("forward", tier="reference").execute([x])[0]
    np.testing.assert_allclose(m.execute([x])[0], ref, rtol=1e-6, atol=1e-6)
    assert pyruntime.load(pte).method("forward").tier == "fast"


# ---- warmup ----------------------------------------------------------------------------
def test_program_kernels_are_found_without_compiling():
    from numba.core import event

    from pyruntime.kernels.fast import jit
    from pyruntime.warmup import all_kernels, program_kernels

    pte, _ = small_program("linear_relu")
    before = dict(jit._COMPILED)
    with event.install_recorder("numba:run_pass") as rec:
        refs = program_kernels(pte)
    assert rec.buffer == []  # not one compiler pass
    assert ("pyruntime.kernels.elementwise.typed", "unary_kernel") in refs  # the relu
    assert all(isinstance(r, tuple) and len(r) == 2 for r in refs)
    assert dict(jit._COMPILED) == before  # no stub left behind
    everything = all_kernels()
    assert set(refs) <= set(everything) and SMALL_KERNEL in everything
    assert len(everything) == len(set(everything))


_CHILD = """
import json, sys
from numba.core import event
from pyruntime.kernels.fast import nb
import importlib
mod, name = sys.argv[1], sys.argv[2]
with event.install_recorder("numba:run_pass") as rec:
    c = nb.lazy(getattr(importlib.import_module(mod), name))
print(json.dumps({"hits": c._cache_hits, "passes": len(rec.buffer), "kind": type(c).__name__}))
"""


def _child(env, ref):
    out = subprocess.run([sys.executable, "-c", _CHILD, *ref], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_after_warmup_a_fresh_process_compiles_nothing(tmp_path, monkeypatch):
    from pyruntime.warmup import compile_kernels

    monkeypatch.setenv("PYRUNTIME_CACHE", str(tmp_path))  # an empty, private cache
    monkeypatch.setenv("PYRUNTIME_SHIPPED", "0")  # and no kernels shipped with the package
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rep = compile_kernels([SMALL_KERNEL], jobs=1)
    assert rep.failed == [] and [r for r, _ in rep.compiled] == [SMALL_KERNEL]
    assert any(p.name.startswith("complex.typed-") for p in (tmp_path / "numba").iterdir())
    # the compile also kept the kernel's machine code (kernels.fast.objcache)
    assert list((tmp_path / "numba").glob("complex.typed-*/conj_kernel.*.o"))
    got = _child(env, SMALL_KERNEL)
    assert got == {"hits": 1, "passes": 0, "kind": "ObjectKernel"}
    again = compile_kernels([SMALL_KERNEL], jobs=1)  # a second warmup: all cached
    assert again.compiled == [] and again.cached == [SMALL_KERNEL]


_BACKGROUND = """
import json, sys
import numpy as np
import pyruntime
prog = pyruntime.Runtime.get().load_program(sys.argv[1])
m = prog.load_method("forward")
x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
first = m.execute([x])[0]
pending = m.pending_kernels
ok = m.wait_compiled(float(sys.argv[2]))
after = m.execute([x])[0]
ref = prog.load_method("forward", tier="reference").execute([x])[0]
print(json.dumps({"pending": pending, "ok": ok, "left": m.pending_kernels,
                  "compiled": m._fast.compiled, "first": first.tolist(), "after": after.tolist(),
                  "ref": ref.tolist()}))
"""


def test_background_compile_runs_at_once_then_binds_the_compiled_kernels(tmp_path):
    """The default compile mode on a machine whose cache is empty: the load compiles
    nothing and the first run takes the reference kernels (at once); a background process
    compiles the kernels, ``wait_compiled`` (or a later execute) binds them; the next
    process finds them cached."""
    pte, _ = small_program("relu_neg")  # two kernels that compile fast
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYRUNTIME_CACHE": str(tmp_path),
           "PYRUNTIME_COMPILE": "background", "PYRUNTIME_SHIPPED": "0"}

    def child(wait):
        out = subprocess.run([sys.executable, "-c", _BACKGROUND, str(pte), str(wait)],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr

    got, err = child(1000)
    assert got["pending"] == 2 and got["ok"] and got["left"] == 0 and got["compiled"] == 2
    assert got["first"] == got["ref"]  # the reference kernels ran the first execute
    np.testing.assert_allclose(got["after"], got["ref"], rtol=1e-6, atol=1e-6)
    assert "background process compiles them" in err
    again, err = child(0)
    assert again["pending"] == 0 and again["compiled"] == 2 and err == ""


_GAVE_UP = """
import json, subprocess, sys
import numpy as np
import pyruntime
import pyruntime.kernels.fast.background as W

def dead_compiler(refs):  # a background compile that exits without compiling anything
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    W._requested.update(dict.fromkeys(refs, p))
    return True

W.compile_detached = dead_compiler
m = pyruntime.Runtime.get().load_program(sys.argv[1]).load_method("forward")
pending = m.pending_kernels
ok = m.wait_compiled(5)  # compiles here: nobody else will
print(json.dumps({"pending": pending, "ok": ok, "left": m.pending_kernels,
                  "compiled": m._fast.compiled}))
"""


def test_a_failed_background_compile_compiles_in_the_process(tmp_path):
    """If the background process exits without the kernels (a full disk, a read-only
    cache, killed), the method does not wait forever: it compiles them itself."""
    pte, _ = small_program("relu_neg")  # two kernels that compile fast
    got = run_json(_GAVE_UP, pte, timeout=1200,
                   env={"PYRUNTIME_CACHE": str(tmp_path), "PYRUNTIME_COMPILE": "background",
                        "PYRUNTIME_PROGRESS": "0", "PYRUNTIME_SHIPPED": "0"})
    assert got == {"pending": 2, "ok": True, "left": 0, "compiled": 2}


def test_warmup_command_needs_programs_or_all(capsys):
    from pyruntime import cli

    assert cli.main(["warmup"]) == 2
    assert "--all" in capsys.readouterr().err


# ---- progress on stderr ----------------------------------------------------------------
def test_progress_bar_lines():
    from pyruntime.progress import Bar

    out = io.StringIO()
    bar = Bar(4, "pyruntime warmup", out, force=True)
    bar.update(1, note="compiling conv_kernel")
    bar.update(4)
    bar.close("done")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("pyruntime warmup [######------------------] 1/4")
    assert lines[0].endswith("compiling conv_kernel")
    assert "] 4/4" in lines[1] and lines[-1] == "done"
    silent = io.StringIO()  # not a terminal, not asked: nothing
    Bar(4, "x", silent).update(2)
    assert silent.getvalue() == ""


def test_compile_notice_speaks_only_while_numba_compiles(monkeypatch):
    from numba.core import event

    from pyruntime.progress import CompileNotice

    monkeypatch.setenv("PYRUNTIME_PROGRESS", "1")
    quiet = io.StringIO()
    with CompileNotice("method 'forward'", 10, quiet, delay=0.0, interval=0.01) as n:
        n.step(5)  # a load served by the cache runs no compiler pass: no notice
    assert quiet.getvalue() == ""

    out = io.StringIO()
    with CompileNotice("method 'forward'", 10, out, delay=0.0, interval=0.01) as n:
        n.step(3)
        event.start_event("numba:run_pass", data={"qualname": "conv_kernel"})
        event.end_event("numba:run_pass", data={"qualname": "conv_kernel"})
        while not n.shown:
            n._stop.wait(0.01)
    text = out.getvalue()
    assert "pyruntime: compiling kernels for method 'forward'" in text
    assert "3/10" in text and "conv_kernel" in text
    assert "compiled kernels for method 'forward'" in text and "warmup" in text

    monkeypatch.setenv("PYRUNTIME_PROGRESS", "0")
    off = io.StringIO()
    with CompileNotice("m", 1, off, delay=0.0) as n:
        event.start_event("numba:run_pass", data={"qualname": "k"})
        event.end_event("numba:run_pass", data={"qualname": "k"})
    assert off.getvalue() == ""
