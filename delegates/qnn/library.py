"""Finding and loading Qualcomm's QNN HTP libraries (ctypes), and the process-wide
backend and device every QnnBackend context is created on.

Search order (the first folder holding ``libQnnHtp.so`` and ``libQnnSystem.so``):

1. ``$PYRUNTIME_QNN_LIB_DIR`` (if set, nothing else is tried);
2. ``$QNN_SDK_ROOT/lib/x86_64-linux-clang`` (a QNN SDK, or any folder laid out as one);
3. the installed ``onnxruntime_qnn`` package (``pip install --no-deps onnxruntime-qnn``,
   or ``pip install 'pyruntime[qnn]'``), found without importing it.

On x86_64 ``libQnnHtp.so`` is Qualcomm's simulator of the Hexagon NPU. Devices are
created per SoC model, with the SoC device config of the program's compile spec
as ExecuTorch's runtime does on a phone (the SoC selects the HTP architecture
the simulator runs). The config is written so that both struct layouts QNN has
used read it (``ctypes_api.HtpSocConfig``): ExecuTorch 1.5.1's own runtime writes
the QNN 2.37 layout, which the 2.47+ libraries read as "socModel 0" and reject
(error 14001). A SoC the library rejects is an ExecuTorchError at load: the program
was compiled for that HTP architecture. ``QnnBackend.set_option("soc_fallback", True)``
runs it instead on a device without config (the library's default architecture), with
a warning once per SoC and process (``QnnLibrary.resolve_soc``).

>>> lib = get_library()      # None when no library is found
>>> # lib.describe() -> "QNN 2.51.0 (HTP_QTI_AISW, core API 2.40.0, ...) from ..."
"""
from __future__ import annotations

import atexit
import collections
import ctypes
import os
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.qnn import ctypes_api as api
from pyruntime.delegates.qnn.payload import BACKEND, soc_name
from pyruntime.delegates.shared_library import LibrarySearch, package_dirs

ENV = "PYRUNTIME_QNN_LIB_DIR"
SDK_ENV = "QNN_SDK_ROOT"
LOG_ENV = "PYRUNTIME_QNN_LOG_LEVEL"
HTP, SYSTEM = "libQnnHtp.so", "libQnnSystem.so"
INSTALL_HINT = (
    "no QNN library was found. Install Qualcomm's x86_64 QNN libraries (the HTP simulator): "
    "`pip install --no-deps onnxruntime-qnn==2.7.0` (or `pip install 'pyruntime[qnn]'`), or "
    f"point ${ENV} (or $QNN_SDK_ROOT/lib/x86_64-linux-clang) at a folder holding {HTP} and "
    f"{SYSTEM}")


class QnnError(ExecuTorchError):
    """A QNN call failed: ``status`` is QNN's error code, ``messages`` what it logged."""

    def __init__(self, what: str, status: int, messages: list[str],
                 code: ErrorCode = ErrorCode.Internal):
        self.status = api.error_code(status)
        self.messages = messages
        msg = f"{BACKEND}: {what} failed with QNN error {api.describe_error(status)}"
        if messages:
            msg += ": " + " | ".join(messages[-6:])
        super().__init__(code, msg)


# ---- logging --------------------------------------------------------------------------
# QNN reports through a C callback with a va_list; it is formatted with libc's vsnprintf.
_libc = ctypes.CDLL(None)
_vsnprintf = _libc.vsnprintf
_vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]
_vsnprintf.restype = ctypes.c_int


class _Log:
    """QNN's messages, newest last, numbered so that a call can collect its own."""

    def __init__(self, size=256):
        self.lines = collections.deque(maxlen=size)
        self.count = 0
        self.lock = threading.Lock()
        self.callback = api.LOG_CALLBACK(self._on_message)  # kept alive with the library

    def _on_message(self, fmt, level, timestamp, va_list):
        try:
            buf = ctypes.create_string_buffer(1024)
            _vsnprintf(buf, len(buf), fmt, va_list)
            text = buf.value.decode("utf-8", "replace").strip()
            with self.lock:
                self.count += 1
                self.lines.append((self.count, level, text))
        except Exception:  # noqa: BLE001 - never let an exception cross into C
            pass

    def mark(self) -> int:
        return self.count

    def since(self, mark: int, level: int = api.LOG_WARN) -> list[str]:
        with self.lock:
            return [f"{api.LOG_LEVELS.get(lv, lv)}: {t}" for n, lv, t in self.lines
                    if n > mark and lv <= level]


def _log_level() -> int:
    v = os.environ.get(LOG_ENV, "warn").strip().lower()
    names = {n.lower(): k for k, n in api.LOG_LEVELS.items()}
    if v.isdigit():
        return max(1, min(5, int(v)))
    return names.get(v, api.LOG_WARN)


# ---- guarded copies of binaries ---------------------------------------------------------
_GUARD_BEFORE, _GUARD_AFTER = 1 << 20, 64 << 20


def guarded(binary: np.ndarray) -> np.ndarray:
    """A copy of ``binary`` between zeroed guard regions (1 MiB before, 64 MiB after).

    QNN's parsers follow offsets in the binary without checking them against its size;
    a corrupted one made them read past the buffer into whatever was mapped there, a
    crash or not depending on the heap. Reads that land in a guard see zeros, the same
    on every run. The guards cost address space only: the zeroed pages of a large
    allocation are mapped on first read to the kernel's shared zero page."""
    n = len(binary)
    work = np.zeros(_GUARD_BEFORE + n + _GUARD_AFTER, np.uint8)
    view = work[_GUARD_BEFORE:_GUARD_BEFORE + n]
    view[:] = binary
    return view


# ---- the library ----------------------------------------------------------------------
@dataclass
class QnnLibrary:
    """A loaded QNN HTP library and its system library, with typed function tables."""

    folder: str
    source: str
    htp: ctypes.CDLL = field(repr=False)
    system: ctypes.CDLL = field(repr=False)
    fn: api.Functions = field(repr=False)
    sys_fn: api.Functions = field(repr=False)
    provider: str = ""
    backend_id: int = 0
    core_api: str = ""
    backend_api: str = ""
    build_id: str = ""
    _log: _Log = field(default_factory=_Log, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _log_handle: ctypes.c_void_p = field(default_factory=ctypes.c_void_p, repr=False)
    _backend: ctypes.c_void_p = field(default_factory=ctypes.c_void_p, repr=False)
    _devices: dict = field(default_factory=dict, repr=False)  # SoC model -> device handle
    device_notes: dict = field(default_factory=dict, repr=False)  # SoC -> why rejected
    _warned: set = field(default_factory=set, repr=False)  # SoCs a fallback warned about
    _contexts: dict = field(default_factory=dict, repr=False)  # id -> handle, freed at exit
    _closed: bool = False

    @property
    def version(self) -> str:
        """QNN SDK version from the build id (``v2.51.0.2609...`` -> ``2.51.0``)."""
        b = self.build_id.lstrip("v")
        return ".".join(b.split(".")[:3]) if b else "unknown"

    def describe(self) -> str:
        return (f"QNN {self.version} ({self.provider}, backend id {self.backend_id}, core API "
                f"{self.core_api}, HTP API {self.backend_api}) from {self.source} "
                f"({self.folder})")

    def messages(self, level: int = api.LOG_DEBUG) -> list[str]:
        """QNN's recent log messages (for diagnostics)."""
        return self._log.since(0, level)

    # ---- calls ------------------------------------------------------------------------
    def check(self, status: int, what: str, mark: int, code=ErrorCode.Internal) -> None:
        if status != api.QNN_SUCCESS:
            raise QnnError(what, status, self._log.since(mark), code)

    def call(self, name: str, *args, what: str = "", code=ErrorCode.Internal):
        f = getattr(self.fn, name, None) or getattr(self.sys_fn, name, None)
        if f is None:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: the QNN library ({self.folder}) has no {name}")
        mark = self._log.mark()
        self.check(f(*args), what or name, mark, code)

    # ---- backend (one per process) and devices (one per SoC), created on first use ----
    def ensure_backend(self) -> ctypes.c_void_p:
        with self._lock:
            if self._closed:
                raise ExecuTorchError(ErrorCode.InvalidState,
                                      f"{BACKEND}: the QNN library was shut down")
            if not self._backend.value:
                if not self._log_handle.value:
                    self.call("logCreate", self._log.callback, _log_level(),
                              ctypes.byref(self._log_handle), what="QnnLog_create")
                self.call("backendCreate", self._log_handle, None, ctypes.byref(self._backend),
                          what="QnnBackend_create")
            return self._backend

    def device(self, soc_model: int = 0) -> ctypes.c_void_p:
        """The device for ``soc_model`` (0: no SoC config); an ExecuTorchError naming the
        SoC and the library's reason when the library rejects its config."""
        with self._lock:
            self.ensure_backend()
            dev = self._devices.get(soc_model)
            if dev is not None:
                return dev
            if soc_model in self.device_notes:
                raise self._rejected(soc_model)
            dev = ctypes.c_void_p()
            if soc_model:
                soc = api.HtpSocConfig(api.HTP_DEVICE_CONFIG_SOC, soc_model, soc_model)
                cfg = api.DeviceConfig(api.DEVICE_CONFIG_CUSTOM, ctypes.addressof(soc))
                cfgs = (ctypes.c_void_p * 2)(ctypes.addressof(cfg), None)
                mark = self._log.mark()
                st = self.fn.deviceCreate(self._log_handle, cfgs, ctypes.byref(dev))
                if st != api.QNN_SUCCESS:
                    self.device_notes[soc_model] = (
                        f"{api.describe_error(st)}: {' | '.join(self._log.since(mark)[-2:])}")
                    raise self._rejected(soc_model)
            else:
                self.call("deviceCreate", self._log_handle, None, ctypes.byref(dev),
                          what="QnnDevice_create")
            self._devices[soc_model] = dev
            return dev

    def _rejected(self, soc_model: int) -> ExecuTorchError:
        return ExecuTorchError(
            ErrorCode.DelegateInvalidCompatibility,
            f"{BACKEND}: the program was compiled for SoC {soc_name(soc_model)}, whose device "
            f"config the QNN library {self.version} rejects ({self.device_notes[soc_model]}); "
            "QnnBackend.set_option('soc_fallback', True) runs it on a device without SoC "
            "config (the library's default HTP architecture) instead")

    def resolve_soc(self, soc_model: int, fallback: bool = False) -> int:
        """The SoC model to create a program's contexts for: ``soc_model`` when the library
        accepts its config. When it rejects it: the ExecuTorchError of ``device``, or with
        ``fallback`` 0 (a device without config) and a RuntimeWarning, once per SoC and
        process.

        >>> # lib.resolve_soc(57) -> 57 (SM8650); lib.resolve_soc(9999) raises
        >>> # lib.resolve_soc(9999, fallback=True) -> 0, warning once
        """
        if not soc_model:
            return 0
        try:
            self.device(soc_model)
            return soc_model
        except ExecuTorchError:
            if not fallback:
                raise
        with self._lock:
            first = soc_model not in self._warned
            self._warned.add(soc_model)
        if first:
            warnings.warn(f"{BACKEND}: SoC {soc_name(soc_model)} rejected by the QNN library "
                          f"{self.version} ({self.device_notes[soc_model]}); running on a device "
                          "without SoC config, as asked (soc_fallback), so possibly on another "
                          "HTP architecture than the program was compiled for",
                          RuntimeWarning, stacklevel=3)
        return 0

    def create_context(self, binary, what: str, soc_model: int = 0) -> ctypes.c_void_p:
        device = self.device(soc_model)
        backend = self._backend
        handle = ctypes.c_void_p()
        work = guarded(binary)  # QNN copies what it keeps: the copy is freed on return
        self.call("contextCreateFromBinary", backend, device, None, work.ctypes.data,
                  len(work), ctypes.byref(handle), None,
                  what=f"QnnContext_createFromBinary ({what})",
                  code=ErrorCode.DelegateInvalidCompatibility)
        with self._lock:
            self._contexts[handle.value] = handle
        return handle

    def free_context(self, handle: ctypes.c_void_p) -> None:
        with self._lock:
            if self._closed or self._contexts.pop(handle.value, None) is None:
                return
        self.fn.contextFree(handle, None)

    def shutdown(self) -> None:
        """Free every context, the device, the backend and the logger (at exit)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for h in list(self._contexts.values())[::-1]:
                self.fn.contextFree(h, None)
            self._contexts.clear()
            if self.fn.deviceFree is not None:
                for dev in {d.value: d for d in self._devices.values() if d.value}.values():
                    self.fn.deviceFree(dev)
            self._devices.clear()
            if self._backend.value:
                self.fn.backendFree(self._backend)
            if self._log_handle.value and self.fn.logFree is not None:
                self.fn.logFree(self._log_handle)


_load_lock = threading.Lock()


# ---- candidates ----------------------------------------------------------------------
def candidates() -> list[tuple[str, str]]:
    """(source, folder) pairs to try, in order (the explicit folder is handled by
    ``find_library``)."""
    out = []
    root = os.environ.get(SDK_ENV)
    if root:
        out.append((SDK_ENV, os.path.join(root, "lib", "x86_64-linux-clang")))
    out += [("onnxruntime-qnn", d) for d in package_dirs("onnxruntime_qnn")]
    return list(dict.fromkeys(out))


def _providers(cdll, symbol, restype_args, what):
    try:
        get = getattr(cdll, symbol)
    except AttributeError:
        raise OSError(f"{what} does not export {symbol}") from None
    get.restype, get.argtypes = restype_args
    return get


_loaded: dict[str, QnnLibrary] = {}  # real folder -> library (one backend per folder)


def load_library(folder: str, source: str = "path") -> QnnLibrary:
    """Load the HTP and system libraries in ``folder``; raises OSError if not usable."""
    real = os.path.realpath(folder)
    with _load_lock:
        lib = _loaded.get(real)
        if lib is None:
            lib = _loaded[real] = _load(folder, source)
        return lib


def _load(folder: str, source: str) -> QnnLibrary:
    htp_path, sys_path = os.path.join(folder, HTP), os.path.join(folder, SYSTEM)
    for p in (htp_path, sys_path):
        if not os.path.isfile(p):
            raise OSError(f"{p} does not exist")
    # by absolute path: the libraries' RUNPATH ($ORIGIN) finds their dependencies
    htp = ctypes.CDLL(htp_path)
    system = ctypes.CDLL(sys_path)
    get = _providers(htp, "QnnInterface_getProviders", api.GET_PROVIDERS, htp_path)
    plist, n = ctypes.POINTER(ctypes.POINTER(api.QnnInterface))(), ctypes.c_uint32()
    st = get(ctypes.byref(plist), ctypes.byref(n))
    if st != 0 or n.value == 0:
        raise OSError(f"QnnInterface_getProviders failed ({api.describe_error(st)}, "
                      f"{n.value} providers)")
    iface = None
    for i in range(n.value):
        p = plist[i].contents
        if p.backend_id == api.BACKEND_ID_HTP and p.api_version.core.major == 2:
            iface = p
            break
    if iface is None:
        raise OSError(f"{htp_path} provides no HTP interface of core API 2.x")
    get = _providers(system, "QnnSystemInterface_getProviders", api.GET_SYS_PROVIDERS, sys_path)
    slist, n = ctypes.POINTER(ctypes.POINTER(api.QnnSystemInterface))(), ctypes.c_uint32()
    st = get(ctypes.byref(slist), ctypes.byref(n))
    if st != 0 or n.value == 0:
        raise OSError(f"QnnSystemInterface_getProviders failed ({api.describe_error(st)})")
    siface = slist[0].contents
    fn = api.Functions(iface.table, api.PROTOTYPES, api.SLOT)
    sys_fn = api.Functions(siface.table, api.SYS_PROTOTYPES, api.SYS_SLOT)
    need = ("backendCreate", "contextCreateFromBinary", "contextFree", "graphRetrieve",
            "graphExecute", "logCreate", "deviceCreate", "backendFree")
    missing = [k for k in need if getattr(fn, k) is None]
    missing += [k for k in ("systemContextCreate", "systemContextGetBinaryInfo",
                            "systemContextFree") if getattr(sys_fn, k) is None]
    if missing:
        raise OSError(f"{folder}: the QNN interface lacks {', '.join(missing)}")
    build = ctypes.c_char_p()
    if fn.backendGetBuildId is not None and fn.backendGetBuildId(ctypes.byref(build)) == 0:
        build_id = (build.value or b"").decode("utf-8", "replace")
    else:
        build_id = ""
    lib = QnnLibrary(folder=folder, source=source, htp=htp, system=system, fn=fn,
                     sys_fn=sys_fn, provider=(iface.provider_name or b"").decode(),
                     backend_id=iface.backend_id, core_api=str(iface.api_version.core),
                     backend_api=str(iface.api_version.backend), build_id=build_id)
    atexit.register(lib.shutdown)
    return lib


_search = LibrarySearch(ENV, INSTALL_HINT)
attempts = _search.attempts  # why each candidate of the last search was rejected


def find_library(folder: str | None = None) -> QnnLibrary | None:
    """The first usable QNN library (see the module docstring), or None."""
    return _search.find(folder, candidates, load_library)


def get_library() -> QnnLibrary | None:
    """``find_library()``, cached per value of the environment variables it reads."""
    return _search.cached((os.environ.get(ENV), os.environ.get(SDK_ENV)), find_library)


clear_cache = _search.clear
unavailable_reason = _search.unavailable_reason


__all__ = ["QnnLibrary", "QnnError", "find_library", "get_library", "load_library",
           "candidates", "clear_cache", "unavailable_reason", "INSTALL_HINT"]
