"""Compile fast-tier kernels ahead of use, into the on-disk kernel cache.

A fast-tier load compiles each kernel it binds the first time it is used on a
machine (seconds to minutes each), then loads it from the cache in
milliseconds. ``warmup`` does that compiling up front, in parallel worker
processes, with a progress bar on stderr::

    python -m pyruntime warmup model.pte other.pte   # the kernels these programs bind
    python -m pyruntime warmup --all --jobs 4         # every compiled kernel

Which kernels a program needs is found by loading its methods with compiling
switched off (``kernels.fast.jit.recording``: each kernel's name is recorded
instead); the workers (``kernels.fast.background.compile_kernels``) then compile
them, largest first, and a last load of each program checks that nothing is left
to compile. This module is only the command. The cache is keyed by Numba on the CPU's name and
features, so a cache made on one machine is never used on a CPU with other
SIMD extensions: warm up on the machine (or the image) that runs the programs.

>>> # from pyruntime.warmup import warmup
>>> # report = warmup(["model.pte"], jobs=2)   # report.compiled: kernels compiled now
"""
from __future__ import annotations

import os
import sys
import time

from pyruntime.kernels.fast.background import CompileReport, all_kernels, compile_kernels
from pyruntime.progress import Bar

WarmupReport = CompileReport  # (the name this module's callers know)
__all__ = ["warmup", "program_kernels", "all_kernels", "compile_kernels", "WarmupReport"]


def program_kernels(path, methods=None) -> list:
    """The kernels a fast-tier load of ``path`` binds (all its methods by default)."""
    from pyruntime.kernels.fast import jit
    from pyruntime.runtime import Runtime

    prog = Runtime.get().load_program(path)
    with jit.recording() as seen:
        for name in methods or prog.method_names:
            prog.load_method(name, tier="fast")
    return list(seen)


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
    from pyruntime.kernels.fast import jit
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
    from pyruntime.kernels.fast._cache import cache_root

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
