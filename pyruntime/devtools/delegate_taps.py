"""Events from inside delegates, for the event tracer (``TAPS[backend id]``).

A tap is ``tap(method, delegate_index, args, where, values)`` returning
``(timings, node_values)``: ``[(operator name, nanoseconds), ...]`` logged as
delegate profile events (``delegate_debug_id_str``, as the C++ runtime's
XNNPACK profiler names them, ``"<operator> #<k>"``), and, when ``values``,
``[(delegate debug id, tensor), ...]`` logged as debug events of the call.

XNNPACK: the timings come from a second runtime of the same graph created with
``XNN_FLAG_BASIC_PROFILING`` and run on the same inputs. The library keeps
intermediate values to itself, so for the values a third runtime is built with
every intermediate value (fp32/fp16, per-tensor and per-channel int8/int32)
marked as an extra external output; each node's output is reported under the
node's ``debug_handle`` (the id ExecuTorch's delegate map uses; nodes the
partitioner inserted, handle 65535, under ``"node<i>:<type>"``). That runtime
cannot fuse across the tapped values, so it shows each node's own result. The
real outputs are never written by these runs.

>>> from pyruntime.devtools.delegate_taps import TAPS
>>> "XnnpackBackend" in TAPS
True
"""
from __future__ import annotations

import ctypes
import weakref

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import Dynamism, ETensor

_NO_HANDLE = 65535
XNN_FLAG_BASIC_PROFILING = 0x8
# XNNPACK datatype -> the ScalarType of an ETensor the bridge accepts for it
_XNN_SCALAR = {1: 6, 2: 5, 14: 15, 3: 1, 4: 0, 5: 3, 6: 1, 7: 3, 12: 3}


class _XnnTap:
    """A debug runtime of one XNNPACK delegate: profiled, or with tapped values."""

    def __init__(self, method, index: int, tap_values: bool):
        from pyruntime.delegates.xnnpack.backend import XnnpackHandle
        from pyruntime.delegates.xnnpack.blob import parse_blob
        from pyruntime.delegates.xnnpack.graph import EXTERNAL_OUTPUT, INVALID, _Builder
        from pyruntime.delegates.xnnpack.nodes import io_fields
        from pyruntime.delegates.xnnpack.schema import XNODE_TYPES

        backend, handle, _ = method._delegates[index]
        bd = method.plan.delegates[index]
        prog = method.program
        xb = parse_blob(prog._pte.delegate_blob(bd.processed, f"delegate {index}"))
        g = xb.graph
        producer = {}  # value id -> delegate debug id of the node writing it
        for i, node in enumerate(g.xnodes or []):
            code, n = node.xnode_union
            kind = XNODE_TYPES.get(code, (f"type{code}",))[0]
            did = node.debug_handle if node.debug_handle != _NO_HANDLE else f"node{i}:{kind}"
            for f in io_fields(kind)[1]:
                producer[getattr(n, f, None)] = did
        taps = []  # (external id, debug id, ETensor)
        next_ext = g.num_externs
        for v in g.xvalues or []:
            code, member = v.xvalue_union
            tv, qp = (member, None) if code == 1 else (member.tensor_value, member.quant_params)
            if not tap_values or tv is None or tv.external_id != INVALID or \
                    tv.constant_buffer_idx or \
                    tv.id_out not in producer or tv.datatype not in _XNN_SCALAR or \
                    getattr(tv, "dq_datatype", 0) or (qp is not None and qp[0] not in (1, 2)):
                continue
            tv.external_id, tv.flags = next_ext, EXTERNAL_OUTPUT
            t = ETensor.empty(_XNN_SCALAR[tv.datatype], tuple(tv.dims or ()),
                              dynamism=Dynamism.DYNAMIC_BOUND)
            taps.append((next_ext, producer[tv.id_out], t))
            next_ext += 1
        g.num_externs = next_ext
        lib = backend.library
        sub = _Builder(lib, xb, prog._named_data_map(prog._external)).build()
        flags = 0 if tap_values else XNN_FLAG_BASIC_PROFILING
        self.handle = XnnpackHandle(lib, _create_runtime(lib, sub, flags), ctypes.c_void_p(),
                                    sub, 1)
        self.lib = lib
        self.backend, self.taps = backend, taps
        self.outputs = {e.ext_id for e in self.handle.outputs} - {t[0] for t in taps}

    def run(self, args):
        full = list(args) + [None] * max(0, self.handle.n_args - len(args))
        for j in self.outputs:  # the real outputs stay as the real runtime wrote them
            t = full[j]
            full[j] = ETensor.empty(t.scalar_type, t.sizes, t.dim_order, Dynamism.DYNAMIC_BOUND)
        for ext, _, t in self.taps:
            full[ext] = t
        self.backend.execute(self.handle, full)
        return [(did, t) for _, did, t in self.taps]

    def timings(self) -> list:
        """(``"<operator> #<k>"``, ns) per operator of the last run (profiled runtime)."""
        fn = getattr(self.lib.cdll, "xnn_get_runtime_profiling_info", None)
        if fn is None:
            return []
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_size_t)]
        fn.restype = ctypes.c_int
        rt, need = self.handle.runtime, ctypes.c_size_t()
        n = ctypes.c_size_t()
        if fn(rt, 0, ctypes.sizeof(n), ctypes.byref(n), ctypes.byref(need)) != 0:
            return []
        fn(rt, 1, 0, None, ctypes.byref(need))
        names = ctypes.create_string_buffer(max(need.value, 1))
        times = (ctypes.c_uint64 * max(n.value, 1))()
        if fn(rt, 1, need.value, names, ctypes.byref(need)) != 0 or \
                fn(rt, 2, ctypes.sizeof(times), times, ctypes.byref(need)) != 0:
            return []
        counts, out = {}, []
        for name, us in zip(names.raw.decode(errors="replace").split("\0"), times[:n.value]):
            counts[name] = counts.get(name, 0) + 1
            out.append((f"{name} #{counts[name]}", int(us) * 1000))
        return out


def _create_runtime(lib, sub, flags):
    api = lib.api
    rt = ctypes.c_void_p()
    try:
        if api.xnn_create_runtime_v3 is not None:
            st = api.xnn_create_runtime_v3(sub.handle, None, None, flags, ctypes.byref(rt))
        else:
            st = api.xnn_create_runtime_v2(sub.handle, None, flags, ctypes.byref(rt))
    finally:
        api.xnn_delete_subgraph(sub.handle)
    if st != 0:
        raise ExecuTorchError(ErrorCode.Internal,
                              f"XnnpackBackend: the debug runtime could not be created "
                              f"(xnn_status {st})")
    return rt


_XNN_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def xnnpack_tap(method, index, args, where, values: bool):
    per_method = _XNN_CACHE.setdefault(method, {})
    timings, node_values = [], []
    for tap_values in (False, True) if values else (False,):
        tap = per_method.get((index, tap_values))
        try:
            if tap is None:
                tap = per_method[(index, tap_values)] = _XnnTap(method, index, tap_values)
            if tap_values:
                node_values = tap.run(args)
            else:
                tap.run(args)
                timings = tap.timings()
        except ExecuTorchError as e:
            raise e.with_context(f"{where}: the XNNPACK debug runtime") from e
    return timings, node_values


TAPS = {"XnnpackBackend": xnnpack_tap}
