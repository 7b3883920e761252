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


def run_both(name: str, args: list, outs: list):
    """Run op ``name`` with ``args`` (numpy arrays become tensors; a list of arrays a
    tensor list) and out tensors of ``outs`` [(shape, dtype)] on the device and on the
    reference kernel. Returns (device outs, reference outs) as arrays; fails when the
    binder refuses the case."""
    from pyruntime.kernels.opencl import api, load_families
    from pyruntime.kernels.registry import get_kernel

    dev = device_or_skip()
    load_families()
    q = dev.new_queue()

    def dt(a):
        t = ETensor.from_array(np.array(a, copy=True))
        buf = dev.buffer(max(t.nbytes, 1), np.ascontiguousarray(a))
        return api.DTensor(t, buf, 0)

    def conv(a):
        if isinstance(a, np.ndarray):
            return dt(a)
        if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
            return [dt(x) for x in a]
        return a

    dargs = [conv(a) for a in args]
    douts = []
    for shape, dtype in outs:
        t = ETensor.empty(from_numpy_dtype(np.dtype(dtype)), shape)
        douts.append(api.DTensor(t, dev.buffer(max(t.nbytes, 1)), 0))
    tail = [douts] if name in LIST_OUT else douts
    launch = api.get_binder(name)(dev, dargs + tail)
    assert launch is not None, f"{name}: the OpenCL binder refused this case"
    launch.enqueue(dev.cl, q)
    got = []
    for d in douts:
        h = np.empty(d.t.sizes, d.dtype)
        if h.nbytes:
            dev.download(q, h.reshape(-1).view(np.uint8), d.buf, 0)
        got.append(h)
    q.finish()
    rargs = [ETensor.from_array(np.array(a, copy=True)) if isinstance(a, np.ndarray)
             else [ETensor.from_array(np.array(x, copy=True)) for x in a]
             if isinstance(a, list) and a and isinstance(a[0], np.ndarray) else a
             for a in args]
    routs = [ETensor.empty(from_numpy_dtype(np.dtype(dtype)), shape) for shape, dtype in outs]
    k = get_kernel(name)
    k.fn(*(rargs + ([routs] if name in LIST_OUT else routs)))
    return got, [np.array(t.numpy(), copy=True) for t in routs]


LIST_OUT = {"aten::split_with_sizes_copy.out", "aten::split_copy.Tensor_out"}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and \
        np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                       np.ascontiguousarray(b).view(np.uint8))
