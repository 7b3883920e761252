"""Thread-safe execution: a pool of loaded methods, and a Ray Data batch class.

A ``Method`` runs one execute at a time (a second concurrent call raises
"already executing": its planned memory holds one run). ``MethodPool`` keeps up
to ``size`` loaded copies of a method, each with its own planned memory, and
hands each call a free one::

    from concurrent.futures import ThreadPoolExecutor
    from pyruntime.pool import MethodPool

    pool = MethodPool("model.pte", size=4, tier="fast")
    with ThreadPoolExecutor(4) as ex:
        outputs = list(ex.map(pool.execute, input_sets))   # input_sets: lists of arrays

``BatchPredictor`` is the same for Ray Data: one loaded method per actor::

    import ray
    from pyruntime.pool import BatchPredictor

    ds = ray.data.from_numpy(images)                       # column "data", one image per row
    ds = ds.map_batches(BatchPredictor, fn_constructor_args=("model.pte",),
                        batch_size=32, concurrency=2)      # 2 actors, each loads once
    logits = ds.take_batch(8)["out0"]

Pool methods are independent copies: a method that keeps state between calls
(a KV cache) sees only the calls that landed on its copy.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.program import Program, TensorInfo
from pyruntime.runtime import Runtime


def as_program(source) -> Program:
    """A Program from a Program, a path, or the .pte bytes."""
    if isinstance(source, Program):
        return source
    return Runtime.get().load_program(source)


def coerce_inputs(meta, args, where: str = "") -> list:
    """Arrays read from .npz (scalars as 0-d arrays) -> the method's inputs: a 0-d array
    becomes a Python scalar where the method's input is not a tensor."""
    args = list(args)
    if len(args) != meta.num_inputs():
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{where}{': ' if where else ''}method {meta.name!r} expects "
                              f"{meta.num_inputs()} inputs, got {len(args)}")
    return [a.item() if isinstance(a, np.ndarray) and a.ndim == 0
            and not isinstance(meta.inputs[i], TensorInfo) else a for i, a in enumerate(args)]


def load_as(program: Program, name: str, tier: str, profile=None, threads=None, **kw):
    """``program.load_method`` on a device ``profile`` (or None); ``threads``: the given
    count, else the profile's, else 1 (one thread per worker or pool copy)."""
    if profile is None:
        return program.load_method(name, tier=tier, threads=threads or 1, **kw)
    if threads is not None or profile.threads is None:
        kw["threads"] = threads or 1
    return profile.load_method(program, name, tier, **kw)


class MethodPool:
    """Up to ``size`` loaded copies of one method, safe to call from many threads.

    ``execute`` takes a free copy (loading a new one while fewer than ``size`` exist,
    waiting otherwise), runs it, and puts it back. A ``profile`` (name, file or
    DeviceProfile) loads each copy as on that device. ``threads`` is each copy's
    intra-op thread count (default: the profile's, else 1, as concurrency comes from
    the calling threads; the setting is process-wide, so keep one value per process).

    >>> # pool = MethodPool("model.pte", size=8)
    >>> # pool.execute([x])            # from any thread; outputs as Method.execute
    """

    def __init__(self, program, method: str = "forward", size: int | None = None,
                 tier: str = "fast", threads: int | None = None, profile=None,
                 **load_kwargs):
        from pyruntime.profiles import get_profile

        self.program = as_program(program)
        self.method_name = method
        self.size = size if size is not None else max(1, os.cpu_count() or 1)
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"MethodPool: size must be a positive int, got {size!r}")
        self.tier = tier
        self.profile = None if profile is None else get_profile(profile)
        self.threads = threads
        self._load_kwargs = load_kwargs
        self.meta = self.program.metadata(method)
        self._free: list = []  # loaded copies not in use
        self._count = 0  # copies loaded or being loaded
        self._cond = threading.Condition()
        self._load_lock = threading.Lock()  # kernel binding/compiling is done one at a time
        self._closed = False
        self._free.append(self._load())  # load one now: a bad program fails here, not later
        self._count = 1
        self.math = self._free[0].math  # the mode every copy runs (pyruntime.mathmode)

    @property
    def loaded(self) -> int:
        """How many copies are loaded or loading (grows on demand up to ``size``)."""
        return self._count

    def _load(self):
        with self._load_lock:
            return load_as(self.program, self.method_name, self.tier, self.profile,
                           self.threads, **self._load_kwargs)

    @contextmanager
    def acquire(self, timeout: float | None = None):
        """A free Method for the ``with`` block; it goes back to the pool after."""
        m = self._take(timeout)
        try:
            yield m
        finally:
            with self._cond:
                closed = self._closed
                if not closed:
                    self._free.append(m)
                    self._cond.notify()
            if closed:
                m.destroy()  # closed while this copy was running: released now

    def _take(self, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise ExecuTorchError(ErrorCode.InvalidState,
                                          f"method pool {self.method_name!r} is closed")
                if self._free:
                    return self._free.pop()
                if self._count < self.size:
                    self._count += 1  # reserve a copy; load it outside the lock
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise ExecuTorchError(ErrorCode.OutOfResources,
                                          f"method pool {self.method_name!r}: all {self.size} "
                                          f"methods busy for {timeout} s")
                self._cond.wait(left)
        try:
            return self._load()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def execute(self, inputs=(), timeout: float | None = None) -> list:
        """Run the method on ``inputs`` on a free copy; outputs as ``Method.execute``."""
        with self.acquire(timeout) as m:
            return m.execute(inputs)

    def __call__(self, *inputs):
        return self.execute(inputs)

    def close(self) -> None:
        """Release every copy's delegates (a copy still running, when it returns);
        later calls raise InvalidState."""
        with self._cond:
            self._closed = True
            methods, self._free = self._free, []
            self._cond.notify_all()
        for m in methods:
            m.destroy()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class BatchPredictor:
    """A callable class for Ray Data ``map_batches``: each instance (one per actor)
    loads the method once and runs every row of each batch through it.

    The batch is a dict of numpy columns (``batch_format="numpy"``, Ray's default
    for numpy data). Inputs come from ``input_columns`` (default for a one-input
    method: ``data``, the column ``ray.data.from_numpy`` makes, or the only column;
    else ``arg0``, ``arg1``, ...); a row one rank short of
    the method's input gets a leading batch dimension of 1, and the outputs lose it
    again. Outputs are the columns ``out0``, ``out1``, ...; the other columns (ids,
    labels) pass through.

    >>> # BatchPredictor("model.pte")({"data": images})["out0"]   # works without Ray too
    """

    def __init__(self, program, method: str = "forward", tier: str = "fast",
                 input_columns=None, profile=None, threads: int | None = None,
                 math: str | None = None):
        from pyruntime.profiles import get_profile

        prog = as_program(program)
        self.meta = prog.metadata(method)
        profile = None if profile is None else get_profile(profile)
        self.method = load_as(prog, method, tier, profile, threads, math=math)
        self.input_columns = list(input_columns) if input_columns is not None else None

    def _columns(self, batch) -> list:
        if self.input_columns is not None:
            cols = self.input_columns
        elif self.meta.num_inputs() == 1 and ("data" in batch or len(batch) == 1):
            cols = ["data"] if "data" in batch else list(batch)
        else:
            cols = [f"arg{i}" for i in range(self.meta.num_inputs())]
        missing = [c for c in cols if c not in batch]
        if missing or len(cols) != self.meta.num_inputs():
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"BatchPredictor: method {self.meta.name!r} takes "
                                  f"{self.meta.num_inputs()} inputs from columns {cols}; the "
                                  f"batch has {sorted(batch)} (set input_columns=)")
        return cols

    def __call__(self, batch: dict) -> dict:
        cols = self._columns(batch)
        rows = len(batch[cols[0]]) if cols else 0
        outs = []
        for r in range(rows):
            args, expanded = [], False
            for i, c in enumerate(cols):
                a = np.asarray(batch[c][r])
                info = self.meta.inputs[i]
                if isinstance(info, TensorInfo) and a.ndim == len(info.sizes) - 1:
                    a, expanded = a[None], True
                args.append(a)
            try:
                res = self.method.execute(coerce_inputs(self.meta, args))
            except ExecuTorchError as e:
                raise e.with_context(f"BatchPredictor row {r}") from e
            outs.append([o[0] if expanded and isinstance(o, np.ndarray) and o.ndim and
                         o.shape[0] == 1 else o for o in res])
        result = {k: v for k, v in batch.items() if k not in cols}
        for j in range(self.meta.num_outputs()):
            result[f"out{j}"] = np.stack([np.asarray(o[j]) for o in outs]) if outs else \
                np.zeros((0,))
        return result
