"""The OpenCL device of the ``tier="opencl"`` plan: choice, context, queue, programs.

``open_device()`` picks a device (``PYRUNTIME_OPENCL_DEVICE``: an index into the list of
every platform's devices, or a substring of a device or platform name; default the first
GPU, else the first device) and gives a ``Device``: one context; each loaded method
takes its own in-order queue.
``Device.kernel(source, name, defines)`` builds our OpenCL C once per device and caches
the binary on disk, keyed by the source, the build options and the device's name, driver
and platform version (``$PYRUNTIME_CACHE/opencl``, beside the compiled CPU kernels).

Every program is built without ``-cl-fast-relaxed-math``, with ``FP_CONTRACT OFF`` (a
multiply then an add stays two roundings, as in the C++ loops) and, where the device
offers it, ``-cl-fp32-correctly-rounded-divide-sqrt``.

>>> # dev = open_device(); k = dev.kernel(SRC, "fill", {"T": "float"})
"""
from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError

PREAMBLE = "#pragma OPENCL FP_CONTRACT OFF\n"
FP64_PRAGMA = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
# numpy dtype -> OpenCL C type (half needs cl_khr_fp16: those ops stay on the host)
CL_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
            np.dtype(np.int8): "char", np.dtype(np.uint8): "uchar",
            np.dtype(np.int16): "short", np.dtype(np.int32): "int",
            np.dtype(np.int64): "long", np.dtype(np.bool_): "uchar"}


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              "tier='opencl' needs pyopencl and an OpenCL driver "
                              "(pip install 'pyruntime[opencl]'; on Debian/Ubuntu "
                              "apt-get install pocl-opencl-icd for a CPU device)") from e
    return cl


def list_devices() -> list:
    """Every OpenCL device of every platform, in platform order: ``[(platform, device)]``."""
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:  # no ICD loader entries: "PLATFORM_NOT_FOUND_KHR"
        raise ExecuTorchError(ErrorCode.NotFound,
                              f"tier='opencl': no OpenCL platform is installed ({e}); on "
                              "Debian/Ubuntu apt-get install pocl-opencl-icd for a CPU "
                              "device") from e
    out = []
    for p in platforms:
        try:
            out.extend((p, d) for d in p.get_devices())
        except cl.Error:
            continue  # a platform without devices
    return out


def describe_devices() -> str:
    return "; ".join(f"{i}: {d.name.strip()} ({p.name.strip()})"
                     for i, (p, d) in enumerate(list_devices())) or "none"


def choose(selector: str | None = None):
    """The (platform, device) ``selector`` (or ``PYRUNTIME_OPENCL_DEVICE``) names."""
    cl = _cl()
    devices = list_devices()
    if not devices:
        raise ExecuTorchError(ErrorCode.NotFound, "tier='opencl': the OpenCL platforms have "
                                                  "no devices")
    sel = os.environ.get("PYRUNTIME_OPENCL_DEVICE") if selector is None else selector
    if sel is None or sel == "":
        gpus = [pd for pd in devices if pd[1].type & cl.device_type.GPU]
        return (gpus or devices)[0]
    sel = str(sel).strip()
    if sel.isdigit():
        i = int(sel)
        if i >= len(devices):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"PYRUNTIME_OPENCL_DEVICE={sel}: there are {len(devices)} "
                                  f"OpenCL devices ({describe_devices()})")
        return devices[i]
    low = sel.lower()
    for p, d in devices:
        if low in d.name.lower() or low in p.name.lower():
            return p, d
    raise ExecuTorchError(ErrorCode.InvalidArgument,
                          f"PYRUNTIME_OPENCL_DEVICE={sel!r} names no OpenCL device "
                          f"(devices: {describe_devices()})")


@dataclass(slots=True)
class DeviceInfo:
    name: str
    platform: str
    driver: str
    fp64: bool
    correct_div_sqrt: bool
    global_mem: int
    max_alloc: int


class Device:
    """One context on one OpenCL device (each loaded method takes its own in-order
    queue: ``new_queue()``, so executes of several methods overlap)."""

    def __init__(self, platform, device):
        cl = self.cl = _cl()
        self.platform, self.device = platform, device
        self.info = DeviceInfo(
            name=device.name.strip(), platform=f"{platform.name.strip()} {platform.version}",
            driver=device.driver_version, fp64="cl_khr_fp64" in device.extensions,
            correct_div_sqrt=bool(device.single_fp_config
                                  & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT),
            global_mem=device.global_mem_size, max_alloc=device.max_mem_alloc_size)
        self.context = cl.Context([device])
        self._programs: dict = {}
        self._lock = threading.Lock()
        self.options = ["-cl-fp32-correctly-rounded-divide-sqrt"] \
            if self.info.correct_div_sqrt else []

    # ---- memory ------------------------------------------------------------------
    def buffer(self, nbytes: int, host=None, where: str = "") -> object:
        """A device buffer of ``nbytes`` (at least 1), filled from ``host`` when given."""
        cl = self.cl
        n = max(int(nbytes), 1)
        if n > self.info.max_alloc:
            raise ExecuTorchError(ErrorCode.MemoryAllocationFailed,
                                  f"{where}: {n} bytes exceed the largest buffer "
                                  f"{self.info.name} allocates ({self.info.max_alloc})")
        try:
            if host is not None and host.nbytes:
                data = np.zeros(n, np.uint8)
                data[:host.nbytes] = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
                return cl.Buffer(self.context, cl.mem_flags.READ_WRITE
                                 | cl.mem_flags.COPY_HOST_PTR, hostbuf=data)
            return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, n)
        except cl.Error as e:
            raise ExecuTorchError(ErrorCode.MemoryAllocationFailed,
                                  f"{where}: cannot allocate {n} bytes on {self.info.name}: "
                                  f"{e}") from e

    def new_queue(self):
        return self.cl.CommandQueue(self.context)

    def upload(self, queue, buf, offset: int, host: np.ndarray) -> None:
        # blocking: the plan reuses host bytes (a later host op may overwrite them)
        if host.nbytes:
            self.cl.enqueue_copy(queue, buf, host, dst_offset=offset, is_blocking=True)

    def download(self, queue, host: np.ndarray, buf, offset: int) -> None:
        if host.nbytes:
            self.cl.enqueue_copy(queue, host, buf, src_offset=offset, is_blocking=True)

    # ---- programs ----------------------------------------------------------------
    def kernel(self, source: str, name: str, defines: dict | None = None):
        """A new kernel object ``name`` of ``source`` built with ``defines`` (``#define``
        lines put before it: values may be expressions)."""
        prg = self.program(source, defines or {})
        return self.cl.Kernel(prg, name)

    def program(self, source: str, defines: dict):
        key = (source, tuple(sorted(defines.items())))
        with self._lock:  # methods load on several threads (MethodPool)
            prg = self._programs.get(key)
            if prg is None:
                prg = self._programs[key] = self._build(source, defines)
        return prg

    def _build(self, source: str, defines: dict):
        cl = self.cl
        wants_fp64 = "double" in defines.values()
        if wants_fp64 and not self.info.fp64:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{self.info.name} has no cl_khr_fp64: float64 tensors "
                                  "cannot run on it (tier='opencl')")
        text = PREAMBLE + (FP64_PRAGMA if self.info.fp64 else "") + "".join(
            f"#define {k} {v}\n" for k, v in sorted(defines.items())) + source
        opts = list(self.options)
        ident = "\0".join([text, " ".join(opts), self.info.name, self.info.driver,
                           self.info.platform, cl.VERSION_TEXT])
        path = _cache_dir() / (hashlib.sha256(ident.encode()).hexdigest()[:32] + ".bin")
        if path.exists():
            try:
                prg = cl.Program(self.context, [self.device], [path.read_bytes()])
                return prg.build(options=opts)
            except (cl.Error, OSError):
                pass  # a stale or torn file: build from source below
        try:
            prg = cl.Program(self.context, text).build(options=opts)
        except cl.Error as e:
            raise ExecuTorchError(ErrorCode.Internal,
                                  f"OpenCL build failed on {self.info.name}: {e}") from e
        try:
            binary = prg.get_info(cl.program_info.BINARIES)[0]
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(binary)
            os.replace(tmp, path)
        except (cl.Error, OSError):
            pass  # caching is an optimisation
        return prg


def _cache_dir() -> Path:
    root = os.environ.get("PYRUNTIME_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyruntime")
    return Path(root) / "opencl"


_DEVICES: dict = {}
_DEVICES_LOCK = threading.Lock()


def open_device(selector: str | None = None) -> Device:
    """The ``Device`` for ``selector`` (see ``choose``), one per process and device."""
    p, d = choose(selector)
    key = (p.name, d.name, d.int_ptr)
    with _DEVICES_LOCK:
        dev = _DEVICES.get(key)
        if dev is None:
            dev = _DEVICES[key] = Device(p, d)
    return dev
