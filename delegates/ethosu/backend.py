"""EthosUBackend: vela command streams for Arm's Ethos-U NPUs, run on our functional
model of the NPU (no FVP, no hardware).

``init`` reads the ``vela_bin_stream`` container (``payload.py``), picks the NPU
configuration from the driver header's config word and compiles the register
command stream (``npu.py``): every command decoded, every feature-map address and
DMA checked against its memory region. A malformed stream fails here with an
``ExecuTorchError`` naming the backend and the command's index. ``execute`` copies
each input's bytes to its place in the scratch region (as ExecuTorch's runtime
does: the bytes of the tensor the delegate receives, NCHW included), runs the
operations (``ops.py``) and copies each output's bytes out.

Memory regions: 0 the payload's ``weight_data`` (read-only), 1 the scratch arena
(``scratch_size`` bytes: inputs, outputs, intermediates), 2 the fast scratch
(``fast_scratch_size`` runtime option or ``$PYRUNTIME_ETHOSU_FAST_SCRATCH`` bytes,
default 384 KiB).

What runs: Ethos-U55 (32 to 256 MACs), Ethos-U65-256 and Ethos-U85 (128 to 2048 MACs,
``npu_u85.py``) streams with CONV, DEPTHWISE, POOL (max, average; 1x1 pools as copies
and transposes; on the U85 also min and sum), ELEMENTWISE (add, sub, mul, min, max, abs)
and DMA (1-D, external memory), 8- and 16-bit feature maps in NHWC and NHCWB16, weight
streams decoded with vela's ``mlw_codec`` (and the U85's fast-decoder format, our own
decoder). What does not (a NotSupported error at load, naming the command):
lookup-table, tanh and sigmoid activations, REDUCE_SUM pooling, LRELU/CLZ/shift
elementwise modes, IFM upscaling, 2-D/3-D and SHRAM DMA, Ethos-U65-512's two weight
streams, the elementwise operand scalings vela never emits (ADD/SUB rescaling one
operand of 16- or 32-bit IFMs, MUL with operand scaling; see ``ops.py``) and the
Ethos-U85 features listed in ``npu_u85.py``.
"""
from __future__ import annotations

import os

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.ethosu import weights as W
from pyruntime.delegates.ethosu.npu import Arch, Compiler
from pyruntime.delegates.ethosu.ops import Executor
from pyruntime.delegates.ethosu.payload import BACKEND, payload_error, read_payload
from pyruntime.delegates.availability import PackageBackend
from pyruntime.delegates.bridge_checks import check_call, output_tensor, reading_payload

INSTALL_HINT = W.INSTALL_HINT


class EthosUHandle:
    """One loaded command stream: its operations, memory regions and weight cache."""

    def __init__(self, program, arch, ops, specs, sizes: dict, executor):
        self.program, self.arch, self.ops, self.specs = program, arch, ops, specs
        self.scratch = np.zeros(program.scratch_size, np.uint8)
        self.regions = {0: program.weights, 1: self.scratch,
                        2: np.zeros(sizes[2], np.uint8)}
        for region, size in sizes.items():  # Ethos-U85 chaining buffers
            self.regions.setdefault(region, np.zeros(size, np.uint8))
        self.executor = executor
        self.n_in, self.n_out = len(program.inputs), len(program.outputs)
        self.threads = 1
        self.closed = False

    @property
    def op_counts(self) -> dict:
        """Operation kind (pool.MAX, elementwise.ADD, conv, ...) -> count in the stream."""
        out: dict = {}
        for op in self.ops:
            k = op.kind + (f".{op.attrs['mode']}" if "mode" in op.attrs else "")
            out[k] = out.get(k, 0) + 1
        return out

    def prepare(self) -> None:
        """Decode every convolution's weights and scales at load: replay the stream's DMA
        copies on a scratch copy to find the bytes each operation will read (vela loads
        weights from region 0 by DMA). A stream whose weights in region 0 do not decode
        fails here (vela's decoder runs in a child process: it exits on corrupt input);
        the cache is checked against the bytes in memory on every run."""
        regions = {k: v if k == 0 else np.zeros_like(v) for k, v in self.regions.items()}
        items = []
        for op in self.ops:
            if op.kind == "dma_start":
                self.executor.run(op, regions)
            elif op.kind in ("conv", "depthwise"):
                items.append((op, self.executor.weight_bytes(op, regions)))
                self.executor.scales(op, regions)
        self.executor.load_weights(items)

    def run(self) -> None:
        """Execute the stream once on the current memory contents.

        The NPU's matrices are small (a MobileNetV2 layer is a few hundred by a few
        hundred): OpenBLAS's thread pool costs more than it gains, and on a busy host
        waking it costs ten times the work, so the stream runs with ``threads`` BLAS
        threads (default 1; the method's ``threads=`` when given) and restores the
        setting after."""
        from pyruntime.kernels.blas_lib import blas_threads, set_blas_threads

        before = blas_threads()
        if before and before != self.threads:
            set_blas_threads(self.threads)
        try:
            for op in self.ops:
                self.executor.run(op, self.regions)
        finally:
            if before and before != self.threads:
                set_blas_threads(before)


# Region 2, the fast scratch (an NPU-private SRAM: Ethos-U65's Dedicated_Sram memory
# mode), is not in the payload: ExecuTorch's runtime gets it from the platform. We give
# it ``fast_scratch_size`` bytes (runtime option; else ``$PYRUNTIME_ETHOSU_FAST_SCRATCH``),
# by default the 384 KiB of vela's Ethos-U65 Dedicated_Sram_384KB memory mode.
DEFAULT_FAST_SCRATCH = 384 << 10


def _region_sizes(program, fast_scratch: int) -> dict:
    return {0: len(program.weights), 1: program.scratch_size, 2: fast_scratch}


class EthosUBackend(PackageBackend):
    """The ``EthosUBackend`` bridge (see the module docstring).

    >>> from pyruntime.delegates import backend_registry
    >>> b = backend_registry.get("EthosUBackend")   # NotFound without ethos-u-vela
    """

    id = BACKEND
    install_hint = INSTALL_HINT

    def probe(self) -> None:
        W.codec()

    def init(self, processed, compile_specs, named_data, runtime_options=None):
        specs = {k: bytes(v).decode("utf-8", "replace") for k, v in compile_specs or []}
        self.require_package()
        with reading_payload(f"{BACKEND} payload"):
            program = read_payload(processed, named_data)
            u85 = program.config.product == 2
            if u85:
                from pyruntime.delegates.ethosu.npu_u85 import ArchU85, CompilerU85
                from pyruntime.delegates.ethosu.ops_u85 import ExecutorU85
            arch = ArchU85(program.config) if u85 else Arch(program.config)
            fast = (runtime_options or {}).get("fast_scratch_size")
            if fast is None:
                env = os.environ.get("PYRUNTIME_ETHOSU_FAST_SCRATCH", "").strip()
                fast = int(env) if env.isdigit() else DEFAULT_FAST_SCRATCH
            if isinstance(fast, bool) or not isinstance(fast, int) or not 0 <= fast <= 1 << 30:
                raise ExecuTorchError(ErrorCode.InvalidArgument, f"{BACKEND}: fast_scratch_size "
                                                                 f"{fast!r} (bytes, up to 1 GiB)")
            sizes = _region_sizes(program, fast)
            for what, ios in (("input", program.inputs), ("output", program.outputs)):
                for i, io in enumerate(ios):
                    if io.region not in sizes or io.offset + io.nbytes > sizes[io.region]:
                        raise payload_error(f"{what} {i} ({io.nbytes} bytes at {io.offset}) is "
                                            f"outside memory region {io.region}")
            compiler = (CompilerU85 if u85 else Compiler)(arch, sizes)
            ops = compiler.compile(program.commands)
        executor = (ExecutorU85 if u85 else Executor)(arch)
        h = EthosUHandle(program, arch, ops, specs, compiler.sizes, executor)
        threads = (runtime_options or {}).get("threads")
        if isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1:
            h.threads = threads
        h.prepare()
        return h

    def execute(self, h: EthosUHandle, args) -> None:
        check_call(BACKEND, h, args, "the command stream")
        for i, io in enumerate(h.program.inputs):
            raw = _tensor_bytes(args[i], io, f"input {i}")
            h.regions[io.region][io.offset:io.offset + io.nbytes] = raw
        try:
            h.run()
        except ExecuTorchError:
            raise
        except Exception as e:  # noqa: BLE001
            raise ExecuTorchError(ErrorCode.Internal,
                                  f"{BACKEND}: the NPU model failed: {type(e).__name__}: {e}") \
                from e
        for j, io in enumerate(h.program.outputs):
            t = output_tensor(BACKEND, args, j, h.n_in)
            dt = np.dtype(t.dtype)
            if dt.itemsize != io.elem_size or int(np.prod(t.sizes)) * dt.itemsize != io.nbytes:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"{BACKEND}: output {j} is {dt} {list(t.sizes)}, the "
                                      f"stream writes {io.nbytes} bytes of {io.elem_size}-byte "
                                      "elements")
            raw = h.regions[io.region][io.offset:io.offset + io.nbytes]
            t.write(raw.view(dt).reshape(t.sizes))

    def destroy(self, h: EthosUHandle) -> None:
        if h is not None:
            h.closed = True


def _tensor_bytes(t, io, what: str) -> np.ndarray:
    if not isinstance(t, ETensor):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{BACKEND}: {what} must be a tensor, got {type(t).__name__}")
    a = np.ascontiguousarray(t.numpy())
    if a.dtype.itemsize != io.elem_size or a.nbytes != io.nbytes:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{BACKEND}: {what} is {a.dtype} {list(a.shape)} ({a.nbytes} "
                              f"bytes), the command stream takes {io.nbytes} bytes of "
                              f"{io.elem_size}-byte elements")
    return a.reshape(-1).view(np.uint8)
