"""How a bridge tells whether its vendor piece is installed, and says what to install
when it is not: the two kinds of bridge share one way each.

``PackageBackend``: the vendor piece is a Python package (coremltools' protobufs, the
TOSA reference model, vela's weight codec), probed by importing it.
``LibraryBackend``: it is a shared library found by a ``shared_library.LibrarySearch``
(QNN, XNNPACK).
"""
from __future__ import annotations

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.interface import BackendInterface


class PackageBackend(BackendInterface):
    """A bridge whose ``probe()`` imports its vendor package: ImportError (or an
    ExecuTorchError saying what is missing) when it is not installed."""

    def probe(self) -> None:
        raise NotImplementedError

    def is_available(self) -> bool:
        try:
            self.probe()
            return True
        except (ImportError, ExecuTorchError):
            return False

    def unavailable_reason(self) -> str:
        try:
            self.probe()
        except ImportError as e:
            return f"{self.install_hint} ({e})"
        except ExecuTorchError:
            pass
        return self.install_hint

    def require_package(self) -> None:
        """NotFound naming the bridge and what to install, when the package is missing."""
        try:
            self.probe()
        except ImportError as e:
            raise ExecuTorchError(ErrorCode.NotFound, f"{self.id}: {self.install_hint} ({e})") \
                from None


class LibraryBackend(BackendInterface):
    """A bridge whose vendor library its ``library_module`` (the bridge's ``library.py``:
    ``get_library()``, ``unavailable_reason()``) finds."""

    library_module = None

    @property
    def library(self):
        return self.library_module.get_library()

    def is_available(self) -> bool:
        return self.library is not None

    def unavailable_reason(self) -> str:
        return self.library_module.unavailable_reason()

    def require_library(self):
        """The library, or NotFound naming the bridge, what to install and what was tried."""
        lib = self.library
        if lib is None:
            raise ExecuTorchError(ErrorCode.NotFound, f"{self.id}: {self.unavailable_reason()}")
        return lib
