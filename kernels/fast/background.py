"""Compiling kernels in other processes: the background compile the fast tier asks for,
and the parallel workers of ``pyruntime warmup``.

``compile_detached(refs)`` starts a process that outlives this one and compiles the kernel
bodies ``refs`` (``(module, function)`` pairs) into the on-disk cache; the fast plan
binds each once the cache holds it (``detached_gave_up`` says when that process ended
without it, so the plan compiles it itself). ``compile_kernels(refs, jobs)`` compiles in
``jobs`` worker processes, one kernel per worker at a time, a lock file per kernel so two
processes never compile the same one. ``all_kernels()`` lists every kernel body.

    python -m pyruntime.kernels.fast.background --jobs 2 pyruntime.kernels.conv.typed:conv_kernel ...

This file holds no jitted code: it is left out of the kernels' cache keys.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

KernelRef = tuple  # (module name, function name): a module-level kernel body

_LAZY = re.compile(r"\blazy\((\w+)\)")


@dataclass
class CompileReport:
    kernels: list = field(default_factory=list)  # every KernelRef considered
    compiled: list = field(default_factory=list)  # (KernelRef, seconds) compiled now
    cached: list = field(default_factory=list)  # KernelRefs already in the cache
    failed: list = field(default_factory=list)  # (KernelRef or path, message)
    seconds: float = 0.0  # wall time of the whole warmup
    compile_cpu: float = 0.0  # CPU seconds the workers spent compiling


def all_kernels() -> list:
    """Every kernel body a binder hands to ``lazy`` in ``kernels/fast``."""
    from pyruntime.kernels.fast import fast_names, kernel_modules

    fast_names()  # imports every kernel module
    refs = {}
    for modname in sorted(kernel_modules()):
        mod = importlib.import_module(modname)
        for name in _LAZY.findall(Path(mod.__file__).read_text()):
            fn = getattr(mod, name, None)
            if callable(fn):
                refs[(fn.__module__, fn.__name__)] = None
    return list(refs)


def _size(ref) -> int:
    try:
        return os.path.getsize(importlib.util.find_spec(ref[0]).origin)
    except (AttributeError, ImportError, OSError, ValueError):
        return 0


def _compile(ref):
    """Worker: compile (or load from the cache) one kernel; (ref, compiled?, wall s, CPU s).
    One process at a time compiles a given kernel (a lock file per kernel in the cache):
    another that asks for it meanwhile waits, then loads what the first one saved."""
    from pyruntime.kernels.fast import jit

    jit.set_compile_mode("sync")
    fn = getattr(importlib.import_module(ref[0]), ref[1])
    t, c0 = time.perf_counter(), time.process_time()
    with _kernel_lock(ref):
        c = jit.lazy(fn)
    return ref, c._cache_hits == 0, time.perf_counter() - t, time.process_time() - c0


@contextmanager
def _kernel_lock(ref):
    from pyruntime.kernels.fast._cache import cache_root

    try:
        import fcntl
    except ImportError:  # no flock (Windows): two processes may compile the same kernel
        yield
        return
    d = os.path.join(cache_root(), "locks")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{ref[0]}.{ref[1]}.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_requested: dict = {}  # KernelRef -> the background process compiling it


def compile_detached(refs) -> bool:
    """Compile ``refs`` into the cache in a background process that outlives this one
    (``python -m pyruntime.kernels.fast.background MODULE:NAME ...``); refs asked for before in this
    process are not asked again. True if a process was started."""
    import subprocess

    todo = [r for r in refs if r not in _requested]
    if not todo:
        return False
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    jobs = max(1, (os.cpu_count() or 2) // 2)  # leave the program half the cores
    try:
        proc = subprocess.Popen([sys.executable, "-m", "pyruntime.kernels.fast.background", "--jobs",
                                 str(jobs)] + [f"{m}:{n}" for m, n in todo], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:  # no process: the method compiles these itself (detached_gave_up)
        _requested.update(dict.fromkeys(todo))
        return False
    _requested.update(dict.fromkeys(todo, proc))
    return True


def detached_gave_up(ref) -> bool:
    """The background process asked to compile ``ref`` has exited, or could not start (if
    the kernel is still not in the cache, it failed: a full disk, a read-only cache, a
    killed process)."""
    if ref not in _requested:
        return False
    proc = _requested[ref]
    return proc is None or proc.poll() is not None


def _worker_init():
    """A compiling worker makes code for this host (or the target its environment names):
    it never takes the package's shipped kernels (``kernels.fast.shipped``) instead."""
    os.environ["PYRUNTIME_SHIPPED"] = "0"


def compile_kernels(refs, jobs=None, bar=None) -> CompileReport:
    """Compile ``refs`` into the cache in ``jobs`` worker processes (largest modules
    first, so the long compiles start early)."""
    # (imported here: every fast-tier load imports this module, few ever compile)
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from multiprocessing import get_context

    rep = CompileReport(kernels=list(refs))
    todo = sorted(refs, key=_size, reverse=True)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    if bar is not None:
        bar.total, bar.done = len(todo), 0
    if not todo:
        return rep
    running = {}
    # spawn: a fresh interpreter per worker, never a fork of a process holding LLVM state
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"),
                             initializer=_worker_init) as ex:
        pending = list(todo)
        while pending and len(running) < jobs:
            ref = pending.pop(0)
            running[ex.submit(_compile, ref)] = (ref, time.perf_counter())
        while running:
            done, _ = wait(running, timeout=0.5 if bar is not None and bar.tty else 60,
                           return_when=FIRST_COMPLETED)
            for fut in done:
                ref, _t = running.pop(fut)
                try:
                    _, fresh, secs, cpu = fut.result()
                except Exception as e:  # noqa: BLE001 - one kernel failing is reported
                    rep.failed.append((ref, f"{type(e).__name__}: {e}"))
                else:
                    if fresh:
                        rep.compiled.append((ref, secs))
                        rep.compile_cpu += cpu
                    else:
                        rep.cached.append(ref)
                if pending:
                    nxt = pending.pop(0)
                    running[ex.submit(_compile, nxt)] = (nxt, time.perf_counter())
            if bar is not None:
                names = ", ".join(r[1] for r, _ in running.values())
                bar.update(len(todo) - len(pending) - len(running),
                           note=(f"compiling {names}" if names else ""))
    return rep


def _main(argv) -> int:
    """The background compiler ``compile_detached`` starts: MODULE:NAME kernel refs."""
    jobs = 1
    if argv[:1] == ["--jobs"]:
        jobs, argv = int(argv[1]), argv[2:]
    refs = [tuple(a.split(":", 1)) for a in argv]
    rep = compile_kernels(refs, jobs)
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
