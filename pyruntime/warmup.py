"""Compile fast-tier kernels ahead of use, into the on-disk kernel cache.

A fast-tier load compiles each kernel it binds the first time it is used on a
machine (seconds to minutes each), then loads it from the cache in
milliseconds. ``warmup`` does that compiling up front, in parallel worker
processes, with a progress bar on stderr::

    python -m pyruntime warmup model.pte other.pte   # the kernels these programs bind
    python -m pyruntime warmup --all --jobs 4         # every compiled kernel

Which kernels a program needs is found by loading its methods with compiling
switched off (each kernel's name is recorded instead); the workers then
compile them, largest first, and a last load of each program checks that
nothing is left to compile. The cache is keyed by Numba on the CPU's name and
features, so a cache made on one machine is never used on a CPU with other
SIMD extensions: warm up on the machine (or the image) that runs the programs.

>>> # from pyruntime.warmup import warmup
>>> # report = warmup(["model.pte"], jobs=2)   # report.compiled: kernels compiled now
"""
from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import re
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from pyruntime.progress import Bar

KernelRef = tuple  # (module name, function name): a module-level kernel body

_LAZY = re.compile(r"\blazy\((\w+)\)")
_STUB_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
_STUB = _STUB_TYPE(lambda p: 0x10)  # NotSupported, if a recorded load ever ran a kernel


@dataclass
class WarmupReport:
    kernels: list = field(default_factory=list)  # every KernelRef considered
    compiled: list = field(default_factory=list)  # (KernelRef, seconds) compiled now
    cached: list = field(default_factory=list)  # KernelRefs already in the cache
    failed: list = field(default_factory=list)  # (KernelRef or path, message)
    seconds: float = 0.0  # wall time of the whole warmup
    compile_cpu: float = 0.0  # CPU seconds the workers spent compiling


def all_kernels() -> list:
    """Every kernel body a binder hands to ``lazy`` in ``kernels/fast``."""
    from kernels.fast import fast_names, kernel_modules

    fast_names()  # imports every kernel module
    refs = {}
    for modname in sorted(kernel_modules()):
        mod = importlib.import_module(modname)
        for name in _LAZY.findall(Path(mod.__file__).read_text()):
            fn = getattr(mod, name, None)
            if callable(fn):
                refs[(fn.__module__, fn.__name__)] = None
    return list(refs)


@contextmanager
def _recording():
    """Loads under this bind every instruction without compiling: ``jit.lazy`` records
    the kernel and hands back a stub (a ctypes callback returning NotSupported). Kernels
    this process already holds are recorded too (the table of compiled ones is emptied
    for the duration, then put back as it was)."""
    from kernels.fast import jit

    seen = {}
    real, compiled_before, mode = jit.compile_kernel, dict(jit._COMPILED), jit._mode

    class Stub:
        address = ctypes.cast(_STUB, ctypes.c_void_p).value

    def record(py_fn):
        seen[(py_fn.__module__, py_fn.__name__)] = None
        return Stub()

    jit.compile_kernel = record
    jit.set_compile_mode("sync")  # every kernel goes through compile_kernel: recorded
    jit._COMPILED.clear()
    try:
        yield seen
    finally:
        jit.compile_kernel = real
        jit.set_compile_mode(mode)
        jit._COMPILED.clear()
        jit._COMPILED.update(compiled_before)


def program_kernels(path, methods=None) -> list:
    """The kernels a fast-tier load of ``path`` binds (all its methods by default)."""
    from pyruntime.runtime import Runtime

    prog = Runtime.get().load_program(path)
    with _recording() as seen:
        for name in methods or prog.method_names:
            prog.load_method(name, tier="fast")
    return list(seen)


def _size(ref) -> int:
    try:
        return os.path.getsize(importlib.util.find_spec(ref[0]).origin)
    except (AttributeError, ImportError, OSError, ValueError):
        return 0


def _compile(ref):
    """Worker: compile (or load from the cache) one kernel; (ref, compiled?, wall s, CPU s).
    One process at a time compiles a given kernel (a lock file per kernel in the cache):
    another that asks for it meanwhile waits, then loads what the first one saved."""
    from kernels.fast import jit

    jit.set_compile_mode("sync")
    fn = getattr(importlib.import_module(ref[0]), ref[1])
    t, c0 = time.perf_counter(), time.process_time()
    with _kernel_lock(ref):
        c = jit.lazy(fn)
    return ref, c._cache_hits == 0, time.perf_counter() - t, time.process_time() - c0


@contextmanager
def _kernel_lock(ref):
    from kernels.fast._cache import cache_root

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
    (``python -m pyruntime.warmup MODULE:NAME ...``); refs asked for before in this
    process are not asked again. True if a process was started."""
    import subprocess

    todo = [r for r in refs if r not in _requested]
    if not todo:
        return False
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    jobs = max(1, (os.cpu_count() or 2) // 2)  # leave the program half the cores
    try:
        proc = subprocess.Popen([sys.executable, "-m", "pyruntime.warmup", "--jobs", str(jobs)]
                                + [f"{m}:{n}" for m, n in todo], env=env,
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


def compile_kernels(refs, jobs=None, bar=None) -> WarmupReport:
    """Compile ``refs`` into the cache in ``jobs`` worker processes (largest modules
    first, so the long compiles start early)."""
    rep = WarmupReport(kernels=list(refs))
    todo = sorted(refs, key=_size, reverse=True)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    if bar is not None:
        bar.total, bar.done = len(todo), 0
    if not todo:
        return rep
    running = {}
    # spawn: a fresh interpreter per worker, never a fork of a process holding LLVM state
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as ex:
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


def warmup(paths=(), all_kernels_: bool = False, jobs=None, stream=None,
           progress: bool | None = None) -> WarmupReport:
    """Compile what ``paths`` (programs) bind, or every kernel with ``all_kernels_``."""
    t0 = time.perf_counter()
    stream = stream if stream is not None else sys.stderr
    refs, failed = {}, []
    if all_kernels_:
        refs.update(dict.fromkeys(all_kernels()))
    for p in paths:
        try:
            refs.update(dict.fromkeys(program_kernels(p)))
        except Exception as e:  # noqa: BLE001 - a program that cannot load: say so, go on
            failed.append((str(p), f"{type(e).__name__}: {e}"))
    bar = Bar(len(refs), "pyruntime warmup", stream, force=progress)
    rep = compile_kernels(list(refs), jobs, bar)
    rep.failed = failed + rep.failed
    # the last word: a real load of each program compiles whatever the recording missed
    from kernels.fast import jit
    from pyruntime.runtime import Runtime

    mode = jit._mode
    jit.set_compile_mode("sync")
    try:
        for p in paths:
            if any(str(p) == f for f, _ in failed):
                continue
            try:
                prog = Runtime.get().load_program(p)
                for name in prog.method_names:
                    prog.load_method(name, tier="fast")
            except Exception as e:  # noqa: BLE001
                rep.failed.append((str(p), f"{type(e).__name__}: {e}"))
    finally:
        jit.set_compile_mode(mode)
    rep.seconds = time.perf_counter() - t0
    bar.close()
    return rep


def add_parser(sub) -> None:
    pw = sub.add_parser("warmup", help="compile fast-tier kernels ahead of use (on-disk cache)")
    pw.add_argument("files", nargs="*", help=".pte programs whose kernels to compile")
    pw.add_argument("--all", action="store_true", help="every compiled kernel (minutes)")
    pw.add_argument("--jobs", "-j", type=int, default=None,
                    help="worker processes (default: CPU count)")


def cli(args) -> int:
    from kernels.fast._cache import cache_root

    if not args.files and not args.all:
        print("warmup: name .pte files, or --all for every kernel", file=sys.stderr)
        return 2
    rep = warmup(args.files, args.all, args.jobs, progress=True)
    slow = sorted(rep.compiled, key=lambda c: -c[1])
    print(f"{len(rep.kernels)} kernel(s): {len(rep.compiled)} compiled, {len(rep.cached)} "
          f"already cached, {len(rep.failed)} failed; {rep.seconds:.1f} s "
          f"(compiling: {rep.compile_cpu:.1f} s CPU in {args.jobs or os.cpu_count()} "
          f"worker(s)); cache {cache_root()}")
    for (mod, name), secs in slow[:8]:
        print(f"  {secs:7.1f} s  {mod}.{name}")
    for what, msg in rep.failed:
        print(f"  FAILED {what if isinstance(what, str) else '.'.join(what)}: {msg}",
              file=sys.stderr)
    return 1 if rep.failed else 0


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
