"""The Ethos-U bridge: ExecuTorch's ``EthosUBackend`` payloads (vela command streams made
by ``EthosUPartitioner``) run on pyruntime's functional model of the NPU.

Importing this package registers the backend; vela's weight codec (``ethos-u-vela``,
``pip install 'pyruntime[arm]'``) is only looked for when a program needs it, and its
absence is a NotFound error at load naming the backend. See ``backend.py`` for what
the model covers, ``npu.py`` for the register machine and ``ops.py`` for the
arithmetic.
"""
from pyruntime.delegates.ethosu.backend import EthosUBackend, EthosUHandle
from pyruntime.delegates.registry import register_backend

ethosu_backend = register_backend(EthosUBackend())

__all__ = ["EthosUBackend", "EthosUHandle", "ethosu_backend"]
