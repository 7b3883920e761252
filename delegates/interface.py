"""The backend contract every bridge implements (spec section 6.1)."""
from __future__ import annotations

import numpy as np


class BackendInterface:
    """Subclass, set ``id``, and register with ``delegates.register_backend``.

    ``execute`` receives the DelegateCall's argument values in order (inputs,
    then outputs): ``ETensor`` for tensors, Python scalars otherwise. It writes
    results into the output tensors in place (``out.write(array)``).
    """

    id: str = ""
    install_hint: str = ""

    def is_available(self) -> bool:
        return False

    def unavailable_reason(self) -> str:
        return self.install_hint or "its vendor library is not installed"

    def init(self, processed, compile_specs: list[tuple[str, bytes]], named_data,
             runtime_options: dict | None = None):
        """Build the delegate; ``runtime_options`` are per-load settings (ExecuTorch's
        LoadBackendOptionsMap), e.g. ``{"threads": 4}``; a backend ignores unknown keys."""
        raise NotImplementedError

    def execute(self, handle, args: list) -> None:
        raise NotImplementedError

    def destroy(self, handle) -> None:
        pass


def payload_bytes(data) -> np.ndarray:
    """A delegate payload (bytes, memoryview or array) as a flat uint8 array, without a copy:
    the one view every bridge's payload reader starts from."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1).view(np.uint8)
    return np.frombuffer(memoryview(data), np.uint8)
