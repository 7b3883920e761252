"""Compiled kernels shipped with the package, for baseline x86-64 targets.

Numba compiles for the CPU it runs on, and keys its cache (and ours,
``kernels.fast.objcache``) on that CPU's name and features: a fresh install would
compile every kernel it binds, for minutes. So a release build compiles every kernel
(``background.all_kernels``) ahead, once per baseline target, and the package carries
the machine code; a process on a matching host links it like any cached object, from
its first execute.

* targets (``TARGETS``): ``x86-64-v3`` (AVX2, FMA, BMI, F16C, MOVBE: Haswell, Zen 1
  and later) and ``x86-64-v4`` (v3 + AVX-512 F/BW/CD/DQ/VL: Skylake-X, Ice Lake,
  Zen 4 and later). Each is compiled with Numba's target set to that CPU model and
  exactly its features (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``), so the code uses
  no instruction outside them;
* selection (``select``): the widest target whose every feature the host has, read from
  LLVM's host feature list (which also requires the OS to save the AVX / AVX-512
  registers). A target the host lacks a feature of is never linked;
* layout: ``kernels/fast/_shipped/<target>/`` is an object-cache root
  (``<module>-<source key>/<kernel>.<target tag>.o``, each file with its SHA-256, checked
  before linking) plus ``manifest.json`` (target, features, Numba and llvmlite versions,
  kernels). The source key covers every kernel source and Numba's version, so an edited
  source or another Numba never links a stale object: it compiles as before;
* precedence: the user's cache first (a host-tuned compile: ``pyruntime warmup``),
  then the shipped code, then Numba's cache, then a compile. ``PYRUNTIME_SHIPPED=0``
  turns the shipped code off (``warmup`` and the background compiler set it: they
  exist to make host-tuned code).

Build (a release step; ``.ci/run`` does it before the tests, the wheel then carries it)::

    python -m pyruntime.kernels.fast.shipped build [--targets x86-64-v3 x86-64-v4] [--jobs N]
    python -m pyruntime.kernels.fast.shipped info      # what is shipped, what this host takes

This file holds no jitted code: it is left out of the kernels' cache keys.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "_shipped"
_V3 = ("avx", "avx2", "bmi", "bmi2", "cmov", "cx16", "cx8", "f16c", "fma", "fxsr", "lzcnt",
       "mmx", "movbe", "popcnt", "sahf", "sse", "sse2", "sse3", "sse4.1", "sse4.2", "ssse3",
       "xsave")
_V4 = _V3 + ("avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")
TARGETS = {"x86-64-v4": _V4, "x86-64-v3": _V3}  # widest first
_state: dict = {}


def enabled() -> bool:
    return os.environ.get("PYRUNTIME_SHIPPED") != "0"


def features_string(target: str) -> str:
    """The LLVM feature string a target compiles with (every other feature off)."""
    return ",".join("+" + f for f in sorted(TARGETS[target]))


def magic(target: str) -> tuple:
    """The target's (triple, CPU name, features): what ``objcache`` keys its objects on."""
    import llvmlite.binding as llvm

    return (llvm.get_process_triple(), target, features_string(target))


def host_features() -> set:
    import llvmlite.binding as llvm

    try:
        return {k for k, v in llvm.get_host_cpu_features().items() if v}
    except RuntimeError:  # LLVM cannot read this host's features: none assumed
        return set()


def runnable(features: set | None = None) -> list:
    """The targets this host (``features``: LLVM's names) can run, widest first."""
    have = host_features() if features is None else features
    return [t for t, need in TARGETS.items() if set(need) <= have]


def select(features: set | None = None) -> str | None:
    """The widest shipped target this host (``features``: LLVM's names) can run, or None.
    Only targets with a manifest here count."""
    for target in runnable(features):
        if (ROOT / target / "manifest.json").is_file():
            return target
    return None


def _chosen():
    """(target, its magic) for this process, or None; decided once."""
    if "chosen" not in _state:
        t = select() if sys.platform.startswith("linux") else None
        _state["chosen"] = None if t is None else (t, magic(t))
    return _state["chosen"]


def load(py_fn):
    """The shipped kernel for the kernel body ``py_fn`` (an ``objcache.ObjectKernel``), or
    None: shipped code off, no target for this host, or no object for this source."""
    if not enabled():
        return None
    chosen = _chosen()
    if chosen is None:
        return None
    from pyruntime.kernels.fast import objcache

    target, mg = chosen
    return objcache.load_from(py_fn, ROOT / target, mg)


# ---- build ---------------------------------------------------------------------------

_CHILD = """
import json, sys
from pyruntime.kernels.fast import objcache
from pyruntime.kernels.fast.background import all_kernels, compile_kernels
refs = all_kernels()
rep = compile_kernels(refs, int(sys.argv[1]))
print("RESULT", json.dumps({"kernels": refs, "failed": [[list(r) if isinstance(r, tuple) else r,
      m] for r, m in rep.failed], "magic": list(objcache._magic())}))
"""


def build(targets=tuple(TARGETS), jobs: int | None = None, out: Path = ROOT,
          stream=None) -> dict:
    """Compile every kernel for each target (in child processes whose Numba targets that
    CPU model) and write ``out/<target>/``. Returns {target: manifest}."""
    import llvmlite
    from importlib.metadata import version

    stream = stream or sys.stderr
    done = {}
    for target in targets:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"pyruntime-ship-{target}-") as cache:
            env = dict(os.environ, NUMBA_CPU_NAME=target,
                       NUMBA_CPU_FEATURES=features_string(target), PYRUNTIME_CACHE=cache,
                       PYRUNTIME_SHIPPED="0", PYRUNTIME_COMPILE="sync",
                       PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            p = subprocess.run([sys.executable, "-c", _CHILD, str(jobs or os.cpu_count() or 1)],
                               env=env, capture_output=True, text=True)
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if p.returncode != 0 or not line:
                raise RuntimeError(f"building the {target} kernels failed:\n{p.stderr[-3000:]}")
            res = json.loads(line[0][7:])
            if res["failed"]:
                raise RuntimeError(f"{target}: kernels failed to compile: {res['failed']}")
            if tuple(res["magic"]) != magic(target):
                raise RuntimeError(f"{target}: the child compiled for {res['magic']}, "
                                   f"not {magic(target)}")
            dest = out / target
            shutil.rmtree(dest, ignore_errors=True)
            files = {}
            numba_root = Path(cache) / "numba"
            for f in sorted(numba_root.rglob("*.o")):
                rel = f.relative_to(numba_root)
                (dest / rel.parent).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dest / rel)
                files[rel.as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
        manifest = {"target": target, "features": sorted(TARGETS[target]),
                    "numba": version("numba"), "llvmlite": llvmlite.__version__,
                    "kernels": [f"{m}:{n}" for m, n in res["kernels"]], "files": files,
                    "seconds": round(time.perf_counter() - t0, 1)}
        (dest / "manifest.json").write_text(json.dumps(manifest, indent=1))
        size = sum((dest / r).stat().st_size for r in files)
        stream.write(f"{target}: {len(res['kernels'])} kernels, {len(files)} objects, "
                     f"{size / 2**20:.1f} MiB, {manifest['seconds']} s\n")
        done[target] = manifest
    _state.pop("chosen", None)
    return done


def info(stream=None) -> None:
    stream = stream or sys.stdout
    have = host_features()
    for target, need in TARGETS.items():
        m = ROOT / target / "manifest.json"
        missing = sorted(set(need) - have)
        host = "this host can run it" if not missing else f"host lacks {', '.join(missing)}"
        if not m.is_file():
            stream.write(f"{target}: not built ({host})\n")
            continue
        man = json.loads(m.read_text())
        size = sum(p.stat().st_size for p in (ROOT / target).rglob("*.o"))
        stream.write(f"{target}: {len(man['kernels'])} kernels, {size / 2**20:.1f} MiB, "
                     f"Numba {man['numba']} ({host})\n")
    stream.write(f"this process takes: {select() or 'none (compiles as needed)'}"
                 f"{'' if enabled() else ' (PYRUNTIME_SHIPPED=0: off)'}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyruntime.kernels.fast.shipped",
                                 description="compiled kernels shipped with the package")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile every kernel for each target into _shipped/")
    b.add_argument("--targets", nargs="+", default=list(TARGETS),
                   choices=list(TARGETS) + ["host"],
                   help="default: all; host: the widest this machine runs (what CI builds)")
    b.add_argument("--jobs", "-j", type=int, default=None)
    sub.add_parser("info", help="what is shipped and what this host takes")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        targets = [t for t in args.targets if t != "host"]
        if "host" in args.targets:
            host = runnable()
            if not host:
                print("this host runs none of the shipped targets: nothing to build",
                      file=sys.stderr)
                return 1
            targets.append(host[0])
        build(list(dict.fromkeys(targets)), args.jobs)
    else:
        info()
    return 0


if __name__ == "__main__":
    sys.exit(main())
