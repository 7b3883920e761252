"""Shared helpers for kernel tests: torch <-> numpy <-> ETensor, and calling a kernel.

>>> import numpy as np
>>> out = static_out((2,), np.float32)
>>> call("aten::add.out", np.ones(2, np.float32), np.ones(2, np.float32), 1, out)
>>> out.numpy().tolist()
[2.0, 2.0]
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from pyruntime.kernels import get_kernel


def to_np(t) -> np.ndarray:
    """A torch tensor as a numpy array (bfloat16 through ml_dtypes)."""
    import torch
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def to_torch(a: np.ndarray):
    import torch
    a = np.asarray(a)
    if a.dtype == np.dtype(ml_dtypes.bfloat16):
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def static_out(shape, dtype) -> ETensor:
    """A STATIC out tensor of exactly ``shape`` (a kernel writing another shape fails)."""
    return ETensor.empty(from_numpy_dtype(dtype), shape)


def bound_out(max_shape, dtype) -> ETensor:
    """A DYNAMIC_BOUND out tensor with capacity ``max_shape`` (kernel must resize it)."""
    return ETensor.empty(from_numpy_dtype(dtype), max_shape, dynamism=Dynamism.DYNAMIC_BOUND)


def as_value(x):
    """Convert numpy arrays (and lists of them) to ETensors; pass everything else through."""
    if isinstance(x, np.ndarray):
        return ETensor.from_array(x)
    if isinstance(x, (list, tuple)) and any(isinstance(e, np.ndarray) for e in x):
        return [ETensor.from_array(e) if isinstance(e, np.ndarray) else e for e in x]
    return x


def call(name: str, *args):
    """Call reference kernel ``name`` the way the runtime does; returns its return value."""
    k = get_kernel(name)
    vals = [as_value(a) for a in args]
    if k.arity is not None:
        vals = vals[:k.arity]
    return k.fn(*vals)


def assert_close(got: np.ndarray, want: np.ndarray, rtol=1e-5, atol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind in "fc" or got.dtype == np.dtype(ml_dtypes.bfloat16):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def bind_fast(name: str, *args, typed: bool = False):
    """Bind ``name``'s compiled kernel once, as a method load does.

    Returns ``run() -> status``, which may be called again after inputs are
    resized (sizes are read at run time), or ``None`` when the binder declines
    these arguments (the instruction would stay on the reference kernel).
    Tensor arguments (ETensors, also inside lists) are updated in place.
    """
    import ctypes

    from pyruntime.cython_ext.desc import DescTable
    from pyruntime.kernels.fast import get_binder
    from pyruntime.kernels.fast.context import BindContext

    binder = get_binder(name)
    if typed:  # only the typed binder of an op whose choose.py pairs it with a generic one
        binder = getattr(binder, "typed", binder)
    assert binder is not None, f"no compiled kernel for {name}"
    vals = [as_value(a) for a in args]
    flat = []
    for v in vals:
        flat += v if isinstance(v, list) else [v]
    tensors = [v for v in flat if isinstance(v, ETensor)]
    table = DescTable(tensors, [t.storage for t in tensors])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(tensors)}, [])
    bound = binder(ctx, *vals)
    if bound is None:
        return None
    fn, block = bound
    kernel = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fn)

    def run(_keep=(ctx, table)):  # ctx owns the argument blocks and scratch buffers
        for i, t in enumerate(tensors):
            table.push(i, t, force=True)
        status = kernel(block)
        for i, t in enumerate(tensors):
            table.pull(i, t)
        return status

    return run


def call_split(name: str, *args, threads: int, math: str = "exact"):
    """Bind ``name``'s compiled kernel with up to ``threads`` parts (and ``math``) and run
    it as the fast loop does (prep, the parts on the loop's thread pool, post): (status,
    number of parts; 1 when the binder did not split it)."""
    from pyruntime.cython_ext._loop import Loop
    from pyruntime.cython_ext.desc import DescTable
    from pyruntime.kernels.fast import get_binder
    from pyruntime.kernels.fast.context import BindContext

    vals = [as_value(a) for a in args]
    ts = [v for v in vals if isinstance(v, ETensor)]
    table = DescTable(ts, [t.storage for t in ts])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(ts)}, [], threads, math)
    r = get_binder(name)(ctx, *vals)
    loop = Loop(1)
    loop.set_kernel(0, *r)
    for i, t in enumerate(ts):
        table.push(i, t, force=True)
    status = loop.run(None, 10)
    for i, t in enumerate(ts):
        table.pull(i, t)
    return status, (r[4] if len(r) > 2 else 1)


def call_fast(name: str, *args, typed: bool = False):
    """Run ``name``'s compiled kernel once, the way the fast loop does: its status
    code, or ``None`` when the binder declines these arguments. ``typed=True``
    tries only the typed binder (what it declines, the generic one takes)."""
    run = bind_fast(name, *args, typed=typed)
    return None if run is None else run()


def check_compiled(name, args, out_shape, dtype, dim_order=None):
    """Compiled vs reference, bit for bit, into a static out and into a
    dynamic-bound out that must shrink; returns the reference result."""
    ref = static_out(out_shape, dtype)
    call(name, *args, ref)
    cap = tuple(s + 2 for s in out_shape)
    for out in (ETensor.empty(from_numpy_dtype(dtype), out_shape, dim_order),
                ETensor.empty(from_numpy_dtype(dtype), cap, dim_order, Dynamism.DYNAMIC_BOUND)):
        status = call_fast(name, *args, out)
        assert status == 0, f"{name}: compiled kernel returned {status}"
        assert out.shape == tuple(out_shape)
        assert_close(out.numpy(), ref.numpy(), rtol=0, atol=0)
    return ref.numpy()


def call_fast_prim(name: str, *args):
    """Run a compiled scalar prim op (kernels/prim/typed.py) over value records the way
    the fast loop does; returns its result, or raises RuntimeError with the status.
    Tensor operands (sym_size, sym_numel, _local_scalar_dense) may be numpy arrays."""
    import ctypes

    from pyruntime.cython_ext.desc import DescTable
    from pyruntime.kernels.prim import typed as prim
    from pyruntime.kernels.fast.context import BindContext
    from pyruntime.fastpath import _decode, _encode

    vals = [as_value(a) for a in args]
    tensors = [v for v in vals if isinstance(v, ETensor)]
    table = DescTable(tensors, [t.storage for t in tensors])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(tensors)}, [])
    recs = np.zeros((len(vals) + 1, 2), np.int64)
    base = recs.ctypes.data
    refs = []
    for i, v in enumerate(vals):
        if isinstance(v, ETensor):
            refs.append(ctx.desc(v))
        elif prim.OPS[name] == prim.P_SYM_SIZE:
            refs.append(int(v))  # the dim is a plain word
        else:
            recs[i + 1] = _encode(v)
            refs.append(base + 16 * (i + 1))
    fn, block = prim.bind_scalar(ctx, name, base, refs)
    status = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fn)(block)
    if status:
        raise RuntimeError(f"{name}: compiled prim op returned status {status}")
    return _decode(*recs[0])


def run_fast_prim_tensor_op(name: str, a: np.ndarray) -> np.ndarray:
    """The compiled ``et_view`` (``a`` viewed as ``[3, -1]``) or ``et_copy_index``
    (``a``'s rows copied one by one into a growing tensor), sizes and index read
    from value records as in the fast loop; returns the result."""
    import ctypes

    from pyruntime.cython_ext.desc import DescTable
    from pyruntime.kernels.prim import typed as prim
    from pyruntime.kernels.fast.context import BindContext
    from pyruntime.fastpath import _encode

    run = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
    src = ETensor.from_array(np.ascontiguousarray(a))
    if name == "executorch_prim::et_view.default":
        out = bound_out((a.size, a.size), a.dtype)
        recs = np.array([_encode(3), _encode(-1)], np.int64)
        refs = [recs.ctypes.data, recs.ctypes.data + 16]
    else:
        out = bound_out((a.shape[0] + 1,) + a.shape[1:], a.dtype)
        rows = [ETensor.from_array(np.ascontiguousarray(r)) for r in a]
    tensors = [out, src] if name == "executorch_prim::et_view.default" else [out] + rows
    table = DescTable(tensors, [t.storage for t in tensors])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(tensors)}, [])
    if name == "executorch_prim::et_view.default":
        fn, block = prim.bind_view(ctx, src, out, refs)
        assert run(fn)(block) == 0
    else:
        for i, r in enumerate(rows):
            rec = np.array(_encode(i), np.int64)
            fn, block = prim.bind_copy_index(ctx, out, r, rec.ctypes.data)
            assert run(fn)(block) == 0
    table.pull(0, out)
    return out.numpy().copy()
