"""Progress on stderr while fast-tier kernels compile.

Compiling a kernel takes seconds to minutes; loading it from the on-disk cache
takes milliseconds. A user who waits should see why: ``CompileNotice`` wraps a
fast-tier load and, once Numba has been compiling for more than a second, draws
one line on stderr (the instruction being bound, the function being compiled,
the time so far) and ends with a summary line. Loads served by the cache print
nothing. ``Bar`` is the progress bar of ``pyruntime warmup``. In background compile
mode (the default) nothing compiles during a load: ``background_notice`` says once per
process which kernels a background process is compiling.

Shown on a terminal; ``PYRUNTIME_PROGRESS=1`` shows it anywhere (one line per
update instead of a redrawn one), ``PYRUNTIME_PROGRESS=0`` never.
"""
from __future__ import annotations

import os
import sys
import threading
import time


def enabled(stream) -> bool:
    flag = os.environ.get("PYRUNTIME_PROGRESS", "").strip().lower()
    if flag in ("0", "no", "off", "false"):
        return False
    if flag in ("1", "yes", "on", "true"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


_noticed = False


def background_notice(n: int, method: str, stream=None) -> None:
    """One line, once per process: kernels compile in the background meanwhile. Shown
    unless ``PYRUNTIME_PROGRESS=0`` (on a terminal or not: it explains slow first runs)."""
    global _noticed
    stream = stream if stream is not None else sys.stderr
    flag = os.environ.get("PYRUNTIME_PROGRESS", "").strip().lower()
    if _noticed or flag in ("0", "no", "off", "false"):
        return
    _noticed = True
    try:
        stream.write(f"pyruntime: {n} compiled kernel(s) for method {method!r} are not in this "
                     "machine's cache yet; a background process compiles them (about a minute "
                     "each) and their instructions run on the reference kernels until then. "
                     "`python -m pyruntime warmup MODEL.pte` compiles ahead of use; "
                     "PYRUNTIME_COMPILE=sync compiles at load.\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _clock(s: float) -> str:
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Bar:
    """``[#####-----] 12/40 label 1m07s``: redrawn in place on a terminal, else one
    line per ``update`` that says something new."""

    def __init__(self, total: int, label: str, stream=None, force: bool | None = None):
        self.total, self.label = max(int(total), 0), label
        self.stream = stream if stream is not None else sys.stderr
        self.on = enabled(self.stream) if force is None else force
        self.tty = self.on and getattr(self.stream, "isatty", lambda: False)()
        self.t0 = time.perf_counter()
        self.done = 0
        self._width = 0

    def line(self, note: str = "") -> str:
        n = 24
        k = n * self.done // self.total if self.total else n
        return (f"{self.label} [{'#' * k}{'-' * (n - k)}] {self.done}/{self.total} "
                f"{_clock(time.perf_counter() - self.t0)}" + (f"  {note}" if note else ""))

    def update(self, done: int | None = None, note: str = "") -> None:
        if done is not None:
            self.done = done
        if not self.on:
            return
        text = self.line(note)
        if self.tty:
            text = text[:max(20, _columns() - 1)]
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self, summary: str = "") -> None:
        if not self.on:
            return
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
        if summary:
            self.stream.write(summary + "\n")
        self.stream.flush()


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 100


class CompileNotice:
    """Context manager around a fast-tier load: a notice only while Numba compiles
    (cache loads run no compiler passes), and only after ``delay`` seconds.

    >>> # with CompileNotice("method 'forward'", n_instructions) as note:
    >>> #     for pc in ...: note.step(pc); bind(pc)
    """

    def __init__(self, what: str, total: int, stream=None, delay: float = 1.0,
                 interval: float | None = None):
        self.what, self.delay, self.interval = what, delay, interval
        self.stream = stream if stream is not None else sys.stderr
        self.on = enabled(self.stream)
        self.bar = Bar(total, f"pyruntime: compiling kernels for {what}", self.stream,
                       force=self.on)
        self.compiling = None  # qualname of the function Numba compiles now
        self.first = None  # when Numba first ran a compiler pass in this load
        self.shown = False
        self._stop = threading.Event()
        self._thread = None
        self._listener = None
        self._cancel = None

    def step(self, done: int) -> None:
        self.bar.done = done

    def _started(self, event):  # a Numba compiler pass began (never on a cache load)
        data = event.data if isinstance(event.data, dict) else {}
        self.compiling = data.get("qualname")
        if self.first is None:
            self.first = time.perf_counter()

    def _tick(self):
        # redrawn twice a second on a terminal; elsewhere one line every 10 s
        interval = self.interval or (0.5 if self.bar.tty else 10.0)
        last = None
        while not self._stop.wait(min(0.25, interval)):
            now = time.perf_counter()
            if self.first is None or now - self.first < self.delay:
                continue
            if last is None or now - last >= interval:
                self.shown, last = True, now
                self.bar.update(note=self.compiling or "")

    def _listen(self):
        """Numba's compiler-pass events to ``_started`` (from when Numba is imported: a load
        whose kernels all come from the object cache never imports it)."""
        if self._stop.is_set():  # Numba arrived as the load ended
            return
        from numba.core import event

        notice = self

        class Listener(event.Listener):
            def on_start(self, ev):
                notice._started(ev)

            def on_end(self, ev):
                pass

        self._listener = Listener()
        event.register("numba:run_pass", self._listener)

    def __enter__(self):
        if self.on:
            from pyruntime.kernels.fast import deferred

            self._cancel = deferred.when_loaded(self._listen)
            self._thread = threading.Thread(target=self._tick, daemon=True,
                                             name="pyruntime-compile-notice")
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if not self.on:
            return False
        self._stop.set()
        self._thread.join()
        self._cancel()
        if self._listener is not None:
            from numba.core import event

            event.unregister("numba:run_pass", self._listener)
            self._listener = None
        if self.shown:
            spent = time.perf_counter() - self.bar.t0
            self.bar.close(f"pyruntime: compiled kernels for {self.what} in {_clock(spent)}; "
                           "they are cached on disk (`python -m pyruntime warmup` compiles "
                           "ahead of use)")
        return False
