"""The Vulkan bridge: ExecuTorch's ``VulkanBackend`` payloads run on a Vulkan device
(lavapipe on a CPU-only host, any GPU elsewhere) through raw ctypes on
``libvulkan.so.1``, with GLSL compute shaders of our own compiled by ``glslc``.

Importing this package registers the backend; the Vulkan loader, a device and
``glslc`` are only looked for when a program needs them. ``$PYRUNTIME_VULKAN_DEVICE``
picks the device (an index or part of its name). Layers: ``blob`` (payload reader),
``vk`` + ``device`` + ``commands`` (the device layer), ``shaders`` (GLSL to SPIR-V,
cached), ``graph`` (values, tensors, memory objects), ``ops`` (one builder per op).
"""
from pyruntime.delegates.registry import register_backend
from pyruntime.delegates.vulkan.backend import VulkanBackend

vulkan_backend = register_backend(VulkanBackend())

__all__ = ["VulkanBackend", "vulkan_backend"]
