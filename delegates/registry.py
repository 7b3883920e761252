"""Backend registry keyed by the backend id a .pte names."""
from __future__ import annotations

from cython_ext.errors import ErrorCode, ExecuTorchError
from delegates.interface import BackendInterface

# Backends ExecuTorch ships that programs may name; a bridge registers over its entry.
_KNOWN = ("XnnpackBackend", "VulkanBackend", "CoreMLBackend", "QnnBackend", "EthosUBackend",
          "VgfBackend", "MPSBackend", "OpenvinoBackend", "NeutronBackend", "EnnBackend",
          "NeuropilotBackend", "CudaBackend", "MetalBackend", "MLXBackend")


class BackendRegistry:
    def __init__(self):
        self._backends: dict[str, BackendInterface] = {}

    def register(self, backend: BackendInterface) -> BackendInterface:
        if not backend.id:
            raise ValueError("backend must set .id")
        if backend.id in self._backends:
            raise ExecuTorchError(ErrorCode.RegistrationAlreadyRegistered,
                                  f"backend {backend.id!r} is already registered")
        self._backends[backend.id] = backend
        return backend

    def known_ids(self) -> list[str]:
        return sorted(set(_KNOWN) | set(self._backends))

    def registered(self) -> list[str]:
        return sorted(self._backends)

    def available(self) -> list[str]:
        return sorted(k for k, b in self._backends.items() if b.is_available())

    def get(self, backend_id: str, where: str = "") -> BackendInterface:
        """The backend for ``backend_id``; NotFound with how to get it otherwise."""
        prefix = f"{where}: " if where else ""
        b = self._backends.get(backend_id)
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
