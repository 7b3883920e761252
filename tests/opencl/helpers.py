"""The OpenCL device the tests use (skip, or fail under CI, where there is none) and a
harness that runs one binder on arrays: the op's OpenCL kernel against its reference
kernel on the same inputs."""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.dtypes import from_numpy_dtype
from pyruntime.cython_ext.tensor import ETensor
from tests import parts


def device_or_skip():
    try:
        from pyruntime.kernels.opencl.device import open_device

        return open_device()
    except Exception as e:  # noqa: BLE001 - any reason there is no device is the skip's
        parts.need("opencl", f"{type(e).__name__}: {e}")


def run_device(name: str, args: list, outs: list, values=None, read=()):
    """Run op ``name``'s OpenCL binder on ``args`` (numpy arrays become tensors, a list of
    arrays a tensor list; ``api.Late`` arguments read ``values``) with out tensors of
    ``outs`` [(shape, dtype)]. Returns (the outs as arrays, then the arguments ``read``
    names (in-place ops), the error flag's message or None); fails when the binder
    refuses the case."""
    from pyruntime.kernels.opencl import api, load_families

    dev = device_or_skip()
    load_families()
    target = api.Target(dev)
    q = dev.new_queue()

    def dt(a):
        t = ETensor.from_array(np.array(a, copy=True))
        buf = dev.buffer(max(t.nbytes, 1), np.ascontiguousarray(a))
        return api.DTensor(t, buf, 0)

    def conv(a):
        if isinstance(a, np.ndarray):
            return dt(a)
        if isinstance(a, list) and a and any(isinstance(x, np.ndarray) for x in a):
            return [dt(x) if isinstance(x, np.ndarray) else x for x in a]
        return a

    dargs = [conv(a) for a in args]
    douts = []
    for shape, dtype in outs:
        t = ETensor.empty(from_numpy_dtype(np.dtype(dtype)), shape)
        douts.append(api.DTensor(t, dev.buffer(max(t.nbytes, 1)), 0))
    tail = [douts] if name in LIST_OUT else douts
    launch = api.get_binder(name)(target, dargs + tail)
    assert launch is not None, f"{name}: the OpenCL binder refused this case"
    launch.enqueue(dev.cl, q, values)
    got = []
    for d in douts + [dargs[i] for i in read]:
        h = np.empty(d.t.sizes, d.dtype)
        if h.nbytes:
            dev.download(q, h.reshape(-1).view(np.uint8), d.buf, 0)
        got.append(h)
    code = target.read_flag(q)
    q.finish()
    return got, target.messages[code] if code else None


def run_reference(name: str, args: list, outs: list):
    """The reference kernel of ``name`` on the same arguments: its outs as arrays."""
    from pyruntime.kernels.registry import get_kernel

    def conv(a):
        if isinstance(a, np.ndarray):
            return ETensor.from_array(np.array(a, copy=True))
        if isinstance(a, list) and a and any(isinstance(x, np.ndarray) for x in a):
            return [conv(x) for x in a]
        return a

    routs = [ETensor.empty(from_numpy_dtype(np.dtype(dtype)), shape) for shape, dtype in outs]
    get_kernel(name).fn(*([conv(a) for a in args] + ([routs] if name in LIST_OUT else routs)))
    return [np.array(t.numpy(), copy=True) for t in routs]


def run_both(name: str, args: list, outs: list):
    """(device outs, reference outs) of op ``name`` on the same arguments (``run_device``);
    fails when the device flags an error."""
    got, flagged = run_device(name, args, outs)
    assert flagged is None, f"{name}: the device flagged: {flagged}"
    return got, run_reference(name, args, outs)


LIST_OUT = {"aten::split_with_sizes_copy.out", "aten::split_copy.Tensor_out"}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and \
        np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                       np.ascontiguousarray(b).view(np.uint8))
