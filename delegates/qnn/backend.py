"""QnnBackend: runs ExecuTorch's Qualcomm QNN delegates (context binaries) on a QNN HTP
library through ctypes, following ExecuTorch's ``QnnExecuTorchBackend``.

``init`` splits the payload, reads the compile spec, gets the shared context for
the binary (``context.acquire``), retrieves the graph named after the method and
builds the tensor structs of its inputs and outputs once. Inputs are bound in
the order of the number after ``input_`` in their names, ``mutbuf_`` tensors
are delegate-owned state (the input and output of one mutable buffer share a
buffer), and outputs named ``output_...`` take the remaining arguments in the
binary's order. ``execute`` points the structs at the argument tensors' bytes
(no copies; data types and sizes checked) and calls ``QnnGraph_execute``, which
runs with the GIL released (a ctypes call), whether the method runs on the
reference or the fast tier.
"""
from __future__ import annotations

import ctypes

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.availability import LibraryBackend
from pyruntime.delegates.bridge_checks import reading_payload
from pyruntime.delegates.interface import payload_bytes
from pyruntime.delegates.qnn import context, ctypes_api as api, isolated, library, verify
from pyruntime.delegates.qnn.payload import BACKEND, parse_compile_specs, parse_payload

_TENSOR = ctypes.sizeof(api.Tensor)
# byte offsets inside Qnn_Tensor_t (V1 and V2 share the prefix)
_DATA = api.Tensor.u.offset + api.TensorV1.mem.offset + api.ClientBuffer.data.offset
_SIZE = api.Tensor.u.offset + api.TensorV1.mem.offset + api.ClientBuffer.size.offset
assert _DATA % 8 == 0 and _TENSOR % 8 == 0 and _SIZE % 4 == 0


class _Slot:
    """One graph input or output of a handle: where its struct is, which argument feeds it."""

    __slots__ = ("kind", "index", "info", "arg", "allowed", "dims", "dims_arr", "tensor",
                 "storage", "buffer", "mutbuf")

    def __init__(self, kind, index, info: context.TensorInfo, arg):
        self.kind, self.index, self.info, self.arg = kind, index, info, arg
        self.allowed = frozenset(api.DATATYPES[info.data_type][2])
        self.dims = info.dims
        self.dims_arr = None  # the struct's dims array (rewritten for dynamic shapes)
        self.tensor = None  # the argument last checked
        self.storage = None  # its storage when checked
        self.buffer = None  # delegate-owned bytes (mutable buffers, unbound outputs)
        self.mutbuf = None

    def where(self) -> str:
        arg = f" (argument {self.arg})" if self.arg is not None else ""
        return f"{self.kind} {self.index}{arg} {self.info.describe()}"


def _fill(t: api.Tensor, info: context.TensorInfo, slot: _Slot, keep: list) -> None:
    """Write ``info`` into the fresh struct ``t`` (our own copies of names, dims, encodings)."""
    t.version = info.version
    v = t.v1 if info.version == 1 else t.v2
    v.id, v.type, v.data_format, v.data_type = info.id, info.type, info.data_format, info.data_type
    name = ctypes.create_string_buffer(info.name.encode("utf-8"))
    keep.append(name)
    v.name = ctypes.addressof(name)
    rank = len(info.dims)
    dims = (ctypes.c_uint32 * max(rank, 1))(*info.dims)
    keep.append(dims)
    slot.dims_arr = dims
    v.rank = rank
    v.dims = ctypes.cast(dims, ctypes.POINTER(ctypes.c_uint32)) if rank else None
    q = v.quant
    q.definition, q.encoding = api.DEFINITION_DEFINED, api.ENC_UNDEFINED
    qi = info.quant
    if qi is None:
        q.definition = 0x7FFFFFFF
    elif qi.encoding == api.ENC_SCALE_OFFSET:
        q.encoding = qi.encoding
        q.scale_offset.scale, q.scale_offset.offset = float(qi.scale[0]), int(qi.offset[0])
    elif qi.encoding == api.ENC_BW_SCALE_OFFSET:
        q.encoding = qi.encoding
        q.bw_scale_offset.bitwidth = qi.bitwidth
        q.bw_scale_offset.scale, q.bw_scale_offset.offset = float(qi.scale[0]), int(qi.offset[0])
    elif qi.encoding == api.ENC_AXIS_SCALE_OFFSET:
        pairs = (api.ScaleOffset * max(len(qi.scale), 1))(
            *[(float(s), int(o)) for s, o in zip(qi.scale, qi.offset)])
        keep.append(pairs)
        q.encoding = qi.encoding
        q.axis_scale_offset.axis, q.axis_scale_offset.num = qi.axis, len(qi.scale)
        q.axis_scale_offset.scale_offset = ctypes.cast(pairs, ctypes.POINTER(api.ScaleOffset))
    elif qi.encoding == api.ENC_BW_AXIS_SCALE_OFFSET:
        scales = np.ascontiguousarray(qi.scale, np.float32)
        offsets = np.ascontiguousarray(qi.offset, np.int32)
        keep += [scales, offsets]
        b = q.bw_axis_scale_offset
        b.bitwidth, b.axis, b.num = qi.bitwidth, qi.axis, len(scales)
        b.scales = scales.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        b.offsets = offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    else:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: {slot.where()}: quantization encoding "
                              f"{qi.encoding} on a graph input or output")
    v.mem_type = api.TENSORMEMTYPE_RAW
    v.client_buf.data = None
    v.client_buf.size = info.nbytes
    if info.version == 2:
        if info.dynamic is not None:
            flags = (ctypes.c_uint8 * rank)(*info.dynamic)
            keep.append(flags)
            t.v2.is_dynamic_dims = ctypes.cast(flags, ctypes.POINTER(ctypes.c_uint8))
        t.v2.sparse.type, t.v2.sparse.num_specified, t.v2.sparse.num_sparse_dims = info.sparse


class QnnHandle:
    """One initialized delegate: a graph of a shared context and its bound tensor structs.

    ``graph_name`` is None while the graph is still to be chosen (a binary of several
    graphs loaded without the method's name): the first ``execute`` picks the one
    graph whose inputs and outputs fit its arguments."""

    def __init__(self, lib, ctx: context.SharedContext, options, graph_name: str | None):
        self.lib, self.ctx, self.options = lib, ctx, options
        self.closed = False
        self.graph_name = None
        self.candidates = list(ctx.info.graphs) if graph_name is None else [graph_name]
        if graph_name is not None:
            self.bind_graph(graph_name)

    def bind_graph(self, graph_name: str) -> None:
        ctx, options = self.ctx, self.options
        ginfo = ctx.info.graphs[graph_name]
        self.keep: list = []
        self.inputs = self._order_inputs(ginfo.inputs, options.is_from_context_binary)
        n_in = sum(1 for s in self.inputs if s.arg is not None)
        self.outputs = self._order_outputs(ginfo.outputs, options.is_from_context_binary, n_in)
        self.n_args = n_in + sum(1 for s in self.outputs if s.arg is not None)
        self.in_structs = (api.Tensor * max(len(self.inputs), 1))()
        self.out_structs = (api.Tensor * max(len(self.outputs), 1))()
        for arr, slots in ((self.in_structs, self.inputs), (self.out_structs, self.outputs)):
            for i, s in enumerate(slots):
                _fill(arr[i], s.info, s, self.keep)
        # the data pointers and sizes of the structs, as arrays (cheap to write per call)
        self.in_ptr = np.frombuffer(self.in_structs, np.uint64)
        self.out_ptr = np.frombuffer(self.out_structs, np.uint64)
        self.in_size = np.frombuffer(self.in_structs, np.uint32)
        self.out_size = np.frombuffer(self.out_structs, np.uint32)
        outs_by_mutbuf = {}
        for i, s in enumerate(self.inputs):
            if s.mutbuf is not None:
                s.buffer = ctx.mutable_buffer(graph_name, s.mutbuf, s.info.nbytes)
                self.in_ptr[(i * _TENSOR + _DATA) // 8] = s.buffer.ctypes.data
                outs_by_mutbuf[s.mutbuf] = s.buffer
        for i, s in enumerate(self.outputs):
            if s.arg is None:  # state shared with the mutable-buffer input, or a scratch output
                buf = outs_by_mutbuf.get(s.mutbuf) if s.mutbuf is not None else None
                if buf is None or buf.nbytes < s.info.nbytes:
                    buf = np.zeros(max(s.info.nbytes, 1), np.uint8)
                s.buffer = buf
                self.out_ptr[(i * _TENSOR + _DATA) // 8] = buf.ctypes.data
        self.n_in, self.n_out = len(self.inputs), len(self.outputs)
        self.graph = ctx.graph(graph_name)
        self.graph_name = graph_name

    def fits(self, graph_name: str, args) -> bool:
        """Whether graph ``graph_name``'s bound inputs and outputs match ``args``
        (count, data types, element counts)."""
        g = self.ctx.info.graphs[graph_name]
        ins = self._order_inputs(g.inputs, self.options.is_from_context_binary)
        n_in = sum(1 for s in ins if s.arg is not None)
        outs = self._order_outputs(g.outputs, self.options.is_from_context_binary, n_in)
        bound = [s for s in ins + outs if s.arg is not None]
        if len(bound) != len(args):
            return False
        for s in bound:
            t = args[s.arg]
            if not isinstance(t, ETensor) or t.scalar_type not in s.allowed:
                return False
            if s.info.dynamic is None and t.numel != s.info.numel:
                return False
        return True

    @staticmethod
    def _order_inputs(infos, from_context_binary) -> list:
        slots = [(i, t) for i, t in enumerate(infos)]
        if not from_context_binary:
            keyed = []
            for i, t in slots:
                k = context.input_number(t.name)
                if k is None:
                    raise ExecuTorchError(
                        ErrorCode.InvalidProgram,
                        f"{BACKEND}: graph input {t.name!r} has no number after its first '_' "
                        "(ExecuTorch names graph inputs input_<n>_...)")
                keyed.append((k, i, t))
            slots = [(i, t) for _, i, t in sorted(keyed, key=lambda e: e[0])]
        out, arg = [], 0
        for pos, (i, t) in enumerate(slots):
            mb = context.mutbuf_number(t.name)
            s = _Slot("input", pos, t, None if mb is not None else arg)
            if mb is not None:
                s.mutbuf = mb
            else:
                arg += 1
            out.append(s)
        return out

    @staticmethod
    def _order_outputs(infos, from_context_binary, first_arg) -> list:
        out, arg = [], first_arg
        for i, t in enumerate(infos):
            mb = context.mutbuf_number(t.name)
            bound = mb is None and (from_context_binary or t.name.startswith("output_"))
            s = _Slot("output", i, t, arg if bound else None)
            s.mutbuf = mb
            arg += bound
            out.append(s)
        return out

    def describe(self) -> str:
        ins = ", ".join(s.info.describe() for s in self.inputs)
        outs = ", ".join(s.info.describe() for s in self.outputs)
        return f"graph {self.graph_name!r}: inputs [{ins}] -> outputs [{outs}]"

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            context.release(self.ctx)


def _error(msg, code=ErrorCode.InvalidArgument) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND}: {msg}")


class QnnBackend(LibraryBackend):
    """The ``QnnBackend`` bridge (see the module docstring and ``delegates.qnn``).

    ``init(..., runtime_options={"method": name})`` selects the graph named after the
    method, as ExecuTorch's runtime does; without it a binary holding one graph runs
    that graph, and one holding several runs the graph its first call's arguments fit.
    ``set_option("verify", True)`` (or ``$PYRUNTIME_QNN_VERIFY=1``) opens each new
    binary in a child process first: a screen for untrusted programs (``verify.py``).
    ``set_option("isolate", True)`` (or ``$PYRUNTIME_QNN_ISOLATE=1``) runs every QNN
    call in a worker process instead, so that a binary the library crashes on costs an
    ExecuTorchError, never this process (``isolated.py``).
    A program compiled for a SoC whose device config the library rejects fails at load
    (``DelegateInvalidCompatibility``, naming the SoC and the library's reason) unless
    ``set_option("soc_fallback", True)`` (or ``init(..., runtime_options={"soc_fallback":
    True})``) asks to run it on a device without SoC config, which warns once per SoC.

    >>> from pyruntime.delegates import backend_registry
    >>> b = backend_registry.get("QnnBackend")   # NotFound (with the install command) if
    >>> # b.library.describe()                    # no QNN library is installed
    """

    id = BACKEND
    install_hint = library.INSTALL_HINT
    library_module = library

    def __init__(self):
        self.verify = False  # open each new binary in a child process first (verify.py)
        self.isolate = False  # run every graph in a worker process (isolated.py)
        self.soc_fallback = False  # a rejected SoC config: a device without config, warned

    _OPTIONS = ("verify", "isolate", "soc_fallback")

    def set_option(self, key: str, value) -> None:
        if key not in self._OPTIONS or not isinstance(value, bool):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: unknown option {key!r}={value!r} (options: "
                                  "verify, isolate, soc_fallback: True/False)")
        setattr(self, key, value)

    def get_option(self, key: str):
        if key in self._OPTIONS:
            return getattr(self, key)
        raise ExecuTorchError(ErrorCode.InvalidArgument, f"{BACKEND}: unknown option {key!r}")

    # ---- init ------------------------------------------------------------------
    def init(self, processed, compile_specs, named_data, runtime_options=None):
        lib = self.require_library()
        opts = runtime_options or {}
        method = opts.get("method", opts.get("method_name"))
        with reading_payload(f"{BACKEND} payload"):
            payload = parse_payload(processed)
            options = parse_compile_specs(compile_specs)
        if options.backend_type != 2:
            raise _error(f"the program targets QNN's {options.describe()}; the bridge runs HTP "
                         "context binaries", ErrorCode.NotSupported)
        if options.online_prepare:
            raise _error("the payload is a DLC for on-device graph preparation (online_prepare); "
                         "the bridge runs prepared context binaries", ErrorCode.NotSupported)
        if options.op_packages:
            raise _error(f"the program needs {options.op_packages} custom op package(s), which "
                         "the bridge cannot register", ErrorCode.NotSupported)
        fallback = bool(opts.get("soc_fallback", self.soc_fallback))
        if opts.get("isolate", self.isolate) or isolated.enabled():
            return isolated.init(lib.folder, bytes(payload_bytes(processed)), compile_specs,
                                 {**opts, "soc_fallback": fallback})
        soc = lib.resolve_soc(options.soc_model, fallback)
        if opts.get("verify", self.verify) or verify.enabled():
            verify.verify(lib.folder, payload.binary, soc)
        ctx = context.acquire(lib, payload.signature, payload.binary,
                              f"{len(payload.binary)}-byte context binary", soc)
        try:
            names = list(ctx.info.graphs)
            if method is not None:
                if method not in ctx.info.graphs:
                    raise _error(f"method {method!r} has no graph in the context binary "
                                 f"(graphs: {', '.join(map(repr, names)) or 'none'})",
                                 ErrorCode.InvalidProgram)
                name = method
            elif len(names) == 1:
                name = names[0]
            elif not names:
                raise _error("the context binary holds no graph", ErrorCode.InvalidProgram)
            else:
                name = None  # chosen by the first execute's arguments
            return QnnHandle(lib, ctx, options, name)
        except BaseException:
            context.release(ctx)
            raise

    # ---- execute ---------------------------------------------------------------
    def execute(self, h: QnnHandle, args) -> None:
        if isinstance(h, isolated.IsolatedHandle):
            return h.execute(args)
        if h is None or h.closed:
            raise ExecuTorchError(ErrorCode.DelegateInvalidHandle, f"{BACKEND}: handle destroyed")
        if h.graph_name is None:
            _choose_graph(h, args)
        if len(args) < h.n_args:
            raise _error(f"{len(args)} arguments, graph {h.graph_name!r} binds {h.n_args}")
        for i, s in enumerate(h.inputs):
            if s.arg is not None:
                self._bind(h, s, args[s.arg], h.in_ptr, h.in_size, i, False)
        for i, s in enumerate(h.outputs):
            if s.arg is not None:
                self._bind(h, s, args[s.arg], h.out_ptr, h.out_size, i, True)
        ctx = h.ctx
        with ctx.lock:
            mark = h.lib._log.mark()
            st = h.lib.fn.graphExecute(h.graph, h.in_structs, h.n_in, h.out_structs, h.n_out,
                                       None, None)
        if st != api.QNN_SUCCESS:
            h.lib.check(st, f"QnnGraph_execute({h.graph_name!r})", mark)
        for s in h.outputs:
            if s.arg is not None and s.info.dynamic is not None:
                t = args[s.arg]
                dims = tuple(s.dims_arr[:len(s.info.dims)])
                if dims != t.sizes:
                    t.resize(dims)

    @staticmethod
    def _bind(h, s: _Slot, t, ptrs, sizes, i, output) -> None:
        if t is not s.tensor or t.storage is not s.storage:
            _check(s, t, output)
            s.tensor, s.storage = t, t.storage
        if t.sizes != s.dims:
            _resize(h, s, t, sizes, i, output)
        ptrs[(i * _TENSOR + _DATA) // 8] = t.data_ptr()

    def destroy(self, h: QnnHandle) -> None:
        if h is not None:
            h.close()


def _choose_graph(h: QnnHandle, args) -> None:
    """Bind the one graph of the binary whose inputs and outputs fit ``args`` (used only
    when the runtime did not pass the method name to ``init``)."""
    fit = [g for g in h.candidates if h.fits(g, args)]
    if len(fit) != 1:
        raise _error(f"the context binary holds graphs {h.candidates} and the method name was "
                     f"not given at init; {len(fit)} of them fit the {len(args)} arguments "
                     f"({', '.join(fit) or 'none'}): pass runtime_options={{'method': name}}",
                     ErrorCode.InvalidProgram)
    h.bind_graph(fit[0])


def _check(s: _Slot, t, output: bool) -> None:
    if not isinstance(t, ETensor):
        raise _error(f"{s.where()} must be a tensor, got {type(t).__name__}")
    if t.scalar_type not in s.allowed:
        raise _error(f"{s.where()}: the argument is {t.describe()}, the graph expects "
                     f"{s.info.dtype_name} data")
    st = t.storage
    if st is None:
        raise _error(f"{s.where()}: the argument has no data", ErrorCode.InvalidState)
    if output and not st.flags.writeable:
        raise _error(f"{s.where()}: the output is bound to read-only memory",
                     ErrorCode.InvalidState)
    cap = s.info.nbytes if s.info.dynamic is None else 0
    if st.nbytes < max(cap, t.nbytes):
        raise _error(f"{s.where()}: the argument's storage has {st.nbytes} bytes, the graph "
                     f"{'writes' if output else 'reads'} {max(cap, t.nbytes)}",
                     ErrorCode.InvalidState)


def _resize(h, s: _Slot, t, sizes, i, output) -> None:
    """The argument's shape differs from the graph's: same bytes (a layout-free view, as
    ExecuTorch binds by pointer), or new dims of a dynamic graph input."""
    info = s.info
    if info.dynamic is None:
        if t.numel != info.numel:
            raise _error(f"{s.where()}: the argument is {t.describe()}, the graph "
                         f"{'writes' if output else 'reads'} {info.numel} elements")
        return
    if output:
        return  # the graph writes its dims, the tensor is resized after the call
    if len(t.sizes) != len(info.dims) or any(
            d != n and not dyn for d, n, dyn in zip(t.sizes, info.dims, info.dynamic)) or any(
            d > n for d, n in zip(t.sizes, info.dims)):
        raise _error(f"{s.where()}: the argument is {t.describe()}, which the graph's dynamic "
                     f"dimensions {list(info.dynamic)} do not allow")
    for k, d in enumerate(t.sizes):
        s.dims_arr[k] = d
    s.dims = t.sizes
    sizes[(i * _TENSOR + _SIZE) // 4] = t.nbytes
