"""Backend registry keyed by the backend id a .pte names."""
from __future__ import annotations

import importlib
import threading

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.interface import BackendInterface

# Backends ExecuTorch ships that programs may name; a bridge registers over its entry.
_KNOWN = ("XnnpackBackend", "VulkanBackend", "CoreMLBackend", "QnnBackend", "EthosUBackend",
          "VgfBackend", "MPSBackend", "OpenvinoBackend", "NeutronBackend", "EnnBackend",
          "NeuropilotBackend", "CudaBackend", "MetalBackend", "MLXBackend", "NativeBackend")

# Backends whose programs run only on their vendor's device through its SDK: a program
# delegated to one loads with an error saying what would run it (issue 34).
SDK_ONLY = {
    "NeuropilotBackend": "a MediaTek Dimensity NPU, through MediaTek's NeuroPilot runtime "
                         "(lowered with NeuropilotPartitioner and MediaTek's mtk_converter)",
    "NeutronBackend": "an NXP i.MX RT / MCX N NPU, through NXP's eIQ Neutron SDK and firmware "
                      "(lowered with NeutronPartitioner and the Neutron converter from NXP's "
                      "own package index)",
    "MetalBackend": "an Apple GPU on macOS, through Metal (AOTInductor-compiled Metal "
                    "kernels; lowered on a Mac with an MPS build of torch)",
    "CudaBackend": "an NVIDIA GPU, through CUDA (an AOTInductor-compiled shared library "
                   "the program carries; lowered with triton and a CUDA toolchain)",
    "MPSBackend": "an Apple GPU on macOS, through Metal Performance Shaders",
    "EnnBackend": "a Samsung Exynos NPU, through Samsung's ENN SDK",
    "OpenvinoBackend": "an Intel CPU/GPU/NPU through OpenVINO's runtime (not yet bridged)",
    "VgfBackend": "an Arm ML extensions for Vulkan device (VGF files, Arm's model converter)",
}

# Bridges shipped in this package, imported (and so registered) on first use of the
# registry: importing a bridge is cheap, its vendor library is only looked for when
# a program needs it.
_BRIDGES = {bid: f"pyruntime.delegates.{name}" for bid, name in (
    ("XnnpackBackend", "xnnpack"), ("QnnBackend", "qnn"), ("CoreMLBackend", "coreml"),
    ("VulkanBackend", "vulkan"), ("EthosUBackend", "ethosu"), ("TOSABackend", "tosa"),
    ("NativeBackend", "native"), ("MLXBackend", "mlx"))}


class BackendRegistry:
    def __init__(self):
        self._backends: dict[str, BackendInterface] = {}
        self._bridges_loaded = False
        self._lock = threading.Lock()

    def _load_bridges(self) -> None:
        if self._bridges_loaded:
            return
        with self._lock:
            if self._bridges_loaded:
                return
            self._bridges_loaded = True
            for bid, module in _BRIDGES.items():
                if bid not in self._backends:
                    importlib.import_module(module)

    def register(self, backend: BackendInterface) -> BackendInterface:
        if not backend.id:
            raise ValueError("backend must set .id")
        if backend.id in self._backends:
            raise ExecuTorchError(ErrorCode.RegistrationAlreadyRegistered,
                                  f"backend {backend.id!r} is already registered")
        self._backends[backend.id] = backend
        return backend

    def known_ids(self) -> list[str]:
        self._load_bridges()
        return sorted(set(_KNOWN) | set(self._backends))

    def registered(self) -> list[str]:
        self._load_bridges()
        return sorted(self._backends)

    def available(self) -> list[str]:
        self._load_bridges()
        return sorted(k for k, b in self._backends.items() if b.is_available())

    def where_it_runs(self, backend_id: str) -> str | None:
        """Why a program delegated to ``backend_id`` cannot run here, or None if it can."""
        self._load_bridges()
        b = self._backends.get(backend_id)
        if b is not None:
            return None if b.is_available() else b.unavailable_reason()
        if backend_id in SDK_ONLY:
            return f"runs only on {SDK_ONLY[backend_id]}"
        return "no bridge in pyruntime" + ("" if backend_id in _KNOWN else " (unknown backend)")

    def get(self, backend_id: str, where: str = "", allowed=None) -> BackendInterface:
        """The backend for ``backend_id``; NotFound with how to get it otherwise.

        ``allowed`` (a collection of backend ids, or None for all) emulates a device
        that registers only those backends: any other id fails as the C++ runtime
        fails for an unregistered backend (NotFound), even if this host has it.
        """
        prefix = f"{where}: " if where else ""
        if allowed is not None and backend_id not in allowed:
            raise ExecuTorchError(
                ErrorCode.NotFound,
                f"{prefix}backend {backend_id!r} is not registered on this device (its "
                f"backends: {', '.join(sorted(allowed)) or 'none'})")
        self._load_bridges()
        b = self._backends.get(backend_id)
        if b is None and backend_id in SDK_ONLY:
            raise ExecuTorchError(
                ErrorCode.NotFound,
                f"{prefix}backend {backend_id!r} runs only on {SDK_ONLY[backend_id]}; pyruntime "
                "cannot run it on a host (`pyruntime inspect` shows the delegate's payload "
                "and compile specs)")
        if b is None:
            kind = "has no bridge in pyruntime yet" if backend_id in _KNOWN else "is unknown"
            raise ExecuTorchError(
                ErrorCode.NotFound,
                f"{prefix}backend {backend_id!r} is not available: it {kind} "
                f"(registered backends: {', '.join(self.registered()) or 'none'})")
        if not b.is_available():
            raise ExecuTorchError(
                ErrorCode.NotFound,
                f"{prefix}backend {backend_id!r} is not available: {b.unavailable_reason()}")
        return b


backend_registry = BackendRegistry()


def register_backend(backend: BackendInterface) -> BackendInterface:
    return backend_registry.register(backend)
