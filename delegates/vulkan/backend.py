"""VulkanBackend: runs ExecuTorch's Vulkan delegate payloads on a Vulkan device.

``init`` parses the payload, allocates the device tensors, uploads the constants,
builds every op (an op we lack is a NotSupported error naming it), plans the
dispatches for the serialized shapes and records one command buffer. ``execute``
follows ExecuTorch's VulkanBackend: copy the inputs in (casting to the device's
types as each tensor's ``staging_datatype`` says), re-plan and re-record only if an
input shape or SymInt changed, submit, wait, copy the outputs out.
"""
from __future__ import annotations

import threading

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.bridge_checks import reading_payload
from pyruntime.delegates.interface import BackendInterface
from pyruntime.delegates.vulkan import device as devmod
from pyruntime.delegates.vulkan.blob import BACKEND, parse_blob
from pyruntime.delegates.vulkan.commands import CommandList
from pyruntime.delegates.vulkan.graph import Graph, SymInt, Tensor, guard
from pyruntime.delegates.vulkan.ops import OPS, load_all

# compile specs ExecuTorch's VulkanPartitioner writes: key -> (size in bytes or None, kind)
_SPECS = {"storage_type_override": (4, {0, 1, 2}), "memory_layout_override": (4, {0, 1, 2}),
          "require_dynamic_shapes": (1, None), "warmup_execute_after_compile": (1, None),
          "force_fp16": (1, None), "texture_limits_x": (None, None),
          "texture_limits_y": (None, None), "texture_limits_z": (None, None),
          "small_texture_limits": (1, None), "skip_tag_memory_metadata": (1, None),
          "downcast_64_bit": (1, None), "skip_memory_planning": (1, None),
          "alias_buffer_mutations": (1, None)}


def parse_compile_specs(specs) -> dict:
    """Checked compile-spec values (ints); a malformed value of a key we know is an error."""
    out = {}
    for key, value in specs or []:
        rule = _SPECS.get(key)
        if rule is None:
            continue  # unknown keys are ignored, as ExecuTorch does
        size, allowed = rule
        if (size is not None and len(value) != size) or not 1 <= len(value) <= 8:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: compile spec {key!r} has {len(value)} bytes, "
                                  f"expected {size or '1..8'}")
        v = int.from_bytes(value, "little")
        if allowed is not None and v not in allowed:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: compile spec {key}={v} is not one of "
                                  f"{sorted(allowed)}")
        out[key] = v
    return out


class VulkanHandle:
    def __init__(self, graph: Graph, cmds: CommandList, options: dict):
        self.graph, self.cmds, self.options = graph, cmds, options
        self.lock = threading.Lock()
        self.key = None  # input shapes / SymInt values the recording was made for
        self.closed = False

    def close(self):
        if not self.closed:
            self.closed = True
            self.cmds.close()
            self.graph.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


def build_graph(dev, vb, named_data, options) -> Graph:
    load_all()
    chain = vb.graph.chain or []
    missing = sorted({c.name or "" for c in chain if (c.name or "") not in OPS})
    if missing:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: the delegate uses operator(s) the Vulkan bridge does "
                              f"not implement: {', '.join(missing)}")
    with guard("graph"):
        g = Graph(dev, vb, named_data, options)
    try:
        for i, c in enumerate(chain):
            where = f"op {i} ({c.name})"
            args = list(c.args or [])
            if not args or any(not 0 <= a < len(g.values) for a in args):
                raise ExecuTorchError(ErrorCode.InvalidProgram,
                                      f"{BACKEND} payload: {where}: arguments {args} out of range "
                                      f"({len(g.values)} values)")
            with guard(where):
                g.plans.append((c.name, OPS[c.name](g, args, where)))
    except BaseException:
        g.close()
        raise
    return g


class VulkanBackend(BackendInterface):
    """The ``VulkanBackend`` bridge (see the module docstring).

    >>> from pyruntime.delegates import backend_registry
    >>> b = backend_registry.get("VulkanBackend")  # NotFound without a Vulkan device
    >>> # b.device().describe()
    """

    id = BACKEND
    install_hint = devmod.INSTALL_HINT

    def is_available(self) -> bool:
        return devmod.availability()[0]

    def unavailable_reason(self) -> str:
        ok, why = devmod.availability()
        return "" if ok else why

    def device(self):
        return devmod.get_device()

    def describe_payload(self, processed) -> list[str]:
        """The op names of a payload's chain, in order (``pyruntime inspect`` prints them)."""
        return [c.name or "" for c in parse_blob(processed).graph.chain or []]

    def init(self, processed, compile_specs, named_data, runtime_options=None):
        options = parse_compile_specs(compile_specs)
        with reading_payload(f"{BACKEND} payload"):
            vb = parse_blob(processed)
        dev = devmod.get_device()
        g = build_graph(dev, vb, named_data, options)
        cmds = CommandList(dev)
        h = VulkanHandle(g, cmds, options)
        try:
            h.key = self._key_now(h)
            cmds.record(g.plan())
        except BaseException:
            h.close()
            raise
        return h

    @staticmethod
    def _key_now(h):
        vals = h.graph.values
        return tuple(vals[i].shape if isinstance(vals[i], Tensor) else
                     vals[i].value if isinstance(vals[i], SymInt) else None for i in h.graph.inputs)

    def execute(self, h: VulkanHandle, args) -> None:
        if h.closed:
            raise ExecuTorchError(ErrorCode.DelegateInvalidHandle, f"{BACKEND}: handle destroyed")
        g = h.graph
        n_in, n_out = len(g.inputs), len(g.outputs)
        if len(args) != n_in + n_out:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: the graph declares {n_in} inputs and {n_out} "
                                  f"outputs, the delegate call supplied {len(args)} arguments")
        with h.lock:
            try:
                self._execute(h, g, args, n_in)
            except BaseException:
                h.key = None  # re-plan next time
                raise

    def _execute(self, h, g, args, n_in):
        vals = g.values
        for k, vid in enumerate(g.inputs):
            v, a = vals[vid], args[k]
            if isinstance(v, Tensor):
                if v.const_id >= 0:
                    continue  # a constant (mutable buffer) input keeps its uploaded data
                if not isinstance(a, ETensor):
                    raise _arg_error(k, "input", "a tensor", a)
                if len(a.sizes) != len(v.dims):
                    raise ExecuTorchError(ErrorCode.InvalidArgument,
                                          f"{BACKEND}: input {k} has rank {len(a.sizes)}, the "
                                          f"graph's value {vid} rank {len(v.dims)}")
                v.resize(a.sizes, f"input {k}")
                _upload(v, a)
            elif isinstance(v, SymInt):
                v.value = _int_arg(k, a)
        key = self._key_now(h)
        if key != h.key:
            h.cmds.record(g.plan())
            h.key = key
        if h.cmds.count:
            h.cmds.run()
        out0 = len(args) - len(g.outputs)
        for j, vid in enumerate(g.outputs):
            v, a = vals[vid], args[out0 + j]
            if isinstance(v, Tensor):
                if not isinstance(a, ETensor):
                    raise _arg_error(out0 + j, "output", "a tensor", a)
                _download(v, a)
            elif isinstance(v, SymInt):
                if isinstance(a, ETensor):
                    a.write(np.full(a.sizes, v.value))
                # a plain Int output cannot be rebound from here; its value is in the graph

    def destroy(self, h) -> None:
        if h is not None:
            h.close()


def _arg_error(k, what, want, a):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{BACKEND}: {what} argument {k} must be {want}, got "
                           f"{type(a).__name__}")


def _int_arg(k, a) -> int:
    if isinstance(a, ETensor):
        if a.numel != 1:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: SymInt input {k} is a tensor of {a.numel} elements")
        return int(np.asarray(a.numpy()).reshape(-1)[0])
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        return int(a)
    raise _arg_error(k, "SymInt input", "an int or a scalar tensor", a)


def _upload(v: Tensor, a: ETensor) -> None:
    n = v.numel
    if not n:
        return
    src = a.numpy()
    dst = v.buf.view(v.dtype, n).reshape(v.shape)
    if v.dtype.name == "bool" or (src.dtype == np.bool_):
        np.copyto(dst, src != 0 if v.dtype.kind != "b" else src, casting="unsafe")
    else:
        np.copyto(dst, src, casting="unsafe")


def _download(v: Tensor, a: ETensor) -> None:
    a.resize(v.shape)
    n = v.numel
    if not n:
        return
    src = v.buf.view(v.dtype, n).reshape(v.shape)
    dst = a.numpy()
    if dst.dtype.kind in "iu" and src.dtype.kind == "f":
        from pyruntime.cython_ext.dtypes import cast_array
        src = cast_array(src, dst.dtype)
    np.copyto(dst, src, casting="unsafe")

