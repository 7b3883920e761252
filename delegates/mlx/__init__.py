"""The MLX bridge: ExecuTorch's ``MLXBackend`` payloads (made by ``MLXPartitioner`` for
Apple's MLX) run on any host, MLX's op semantics in numpy.

Importing this package registers the backend; it needs nothing beyond pyruntime.
"""
from pyruntime.delegates.mlx.backend import MLXBackend, MLXHandle
from pyruntime.delegates.registry import register_backend

mlx_backend = register_backend(MLXBackend())

__all__ = ["MLXBackend", "MLXHandle", "mlx_backend"]
