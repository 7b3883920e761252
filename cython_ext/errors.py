"""One exception family carrying ExecuTorch's error codes (spec section 4.12)."""
from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    Ok = 0x00
    Internal = 0x01
    InvalidState = 0x02
    EndOfMethod = 0x03
    AlreadyLoaded = 0x04
    NotSupported = 0x10
    NotImplemented = 0x11
    InvalidArgument = 0x12
    InvalidType = 0x13
    OperatorMissing = 0x14
    RegistrationExceedingMaxKernels = 0x15
    RegistrationAlreadyRegistered = 0x16
    NotFound = 0x20
    MemoryAllocationFailed = 0x21
    AccessFailed = 0x22
    InvalidProgram = 0x23
    InvalidExternalData = 0x24
    OutOfResources = 0x25
    DelegateInvalidCompatibility = 0x30
    DelegateMemoryAllocationFailed = 0x31
    DelegateInvalidHandle = 0x32


class ExecuTorchError(RuntimeError):
    """An error with an ExecuTorch error code and a human message.

    >>> e = ExecuTorchError(ErrorCode.InvalidArgument, "input 0: expected float32, got int64")
    >>> e.code.name, str(e)
    ('InvalidArgument', '[InvalidArgument 0x12] input 0: expected float32, got int64')
    """

    def __init__(self, code: ErrorCode, message: str):
        self.code = ErrorCode(code)
        self.message = message
        super().__init__(f"[{self.code.name} 0x{int(self.code):02x}] {message}")

    def with_context(self, context: str) -> "ExecuTorchError":
        """A copy of this error whose message is prefixed with ``context``."""
        err = ExecuTorchError(self.code, f"{context}: {self.message}")
        err.__cause__ = self.__cause__
        return err


def invalid_program(msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidProgram, msg)


def invalid_argument(msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, msg)


def not_supported(msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.NotSupported, msg)
