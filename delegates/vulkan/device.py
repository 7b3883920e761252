"""The Vulkan device layer over raw ctypes: instance, physical device choice, queue,
buffers (sub-allocated from a few host-visible memory blocks), compute pipelines,
descriptor sets, command buffers and fences.

One ``Device`` per process and device choice (``$PYRUNTIME_VULKAN_DEVICE``: an index
or a substring of the device name; default the first device). Optional features
(``shaderFloat16`` + 16-bit storage, ``shaderInt8`` + 8-bit storage) are enabled
when the device has them; a program needing one the device lacks fails at load.

Every buffer is host-visible and coherent (device-local too where the device offers
such a memory type), so inputs and outputs are plain memcpys into mapped memory.
"""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.vulkan import shaders, vk

BACKEND = "VulkanBackend"
INSTALL_HINT = ("no Vulkan device: install a Vulkan loader and driver (Debian/Ubuntu: "
                "apt-get install libvulkan1 mesa-vulkan-drivers, which gives lavapipe, "
                "a CPU Vulkan device) or a GPU driver with Vulkan 1.1+")
_CHUNK = 256 << 20  # bytes per device-memory block of an arena
_FENCE_TIMEOUT_NS = 600 * 10**9


def vk_error(res: int, what: str) -> ExecuTorchError:
    code = ErrorCode.MemoryAllocationFailed if res in (-1, -2, -1000069000) else ErrorCode.Internal
    return ExecuTorchError(code, f"{BACKEND}: {what} failed with {vk.RESULTS.get(res, res)}")


def check(res: int, what: str) -> None:
    if res != vk.SUCCESS:
        raise vk_error(res, what)


class Device:
    """A logical device with one compute queue; pipelines are cached per shader variant."""

    def __init__(self, api: vk.Api, selector: str | None):
        self.api = api
        self.lock = threading.Lock()  # vkQueueSubmit on one queue is externally synchronized
        self._pipelines: dict = {}
        self._set_layouts: dict = {}
        self._create_instance()
        try:
            self._choose(selector)
            self._create_device()
        except BaseException:
            api.vkDestroyInstance(self.instance, None)
            raise

    # ---- setup -------------------------------------------------------------------
    def _create_instance(self):
        app = vk.ApplicationInfo(vk.ST_APPLICATION_INFO, None, b"pyruntime", 1, b"pyruntime", 1,
                                 vk.API_1_2)
        info = vk.InstanceCreateInfo(vk.ST_INSTANCE_CREATE_INFO, None, 0, ctypes.pointer(app))
        inst = vk.Handle()
        check(self.api.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(inst)),
              "vkCreateInstance")
        self.instance = inst

    def physical_devices(self) -> list:
        n = vk.u32()
        check(self.api.vkEnumeratePhysicalDevices(self.instance, ctypes.byref(n), None),
              "vkEnumeratePhysicalDevices")
        arr = (vk.Handle * max(n.value, 1))()
        res = self.api.vkEnumeratePhysicalDevices(self.instance, ctypes.byref(n), arr)
        if res not in (vk.SUCCESS, vk.INCOMPLETE):
            raise vk_error(res, "vkEnumeratePhysicalDevices")
        out = []
        for i in range(n.value):
            props = vk.PhysicalDeviceProperties()
            self.api.vkGetPhysicalDeviceProperties(arr[i], ctypes.byref(props))
            out.append((vk.Handle(arr[i]), props))
        return out

    def _choose(self, selector):
        devs = self.physical_devices()
        if not devs:
            raise ExecuTorchError(ErrorCode.NotFound, f"{BACKEND}: {INSTALL_HINT}")
        names = [p.deviceName.decode(errors="replace") for _, p in devs]
        pick = 0
        if selector:
            if selector.isdigit():
                pick = int(selector)
                if pick >= len(devs):
                    pick = -1
            else:
                hits = [i for i, n in enumerate(names) if selector.lower() in n.lower()]
                pick = hits[0] if hits else -1
            if pick < 0:
                raise ExecuTorchError(
                    ErrorCode.NotFound,
                    f"{BACKEND}: PYRUNTIME_VULKAN_DEVICE={selector!r} matches no device "
                    f"(devices: {', '.join(f'{i}: {n}' for i, n in enumerate(names))})")
        self.physical, props = devs[pick]
        self.index, self.name = pick, names[pick]
        self.device_type = vk.DEVICE_TYPES.get(props.deviceType, "other")
        self.api_version = props.apiVersion
        if props.apiVersion < vk.API_1_1:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: device {self.name!r} has Vulkan "
                                  f"{vk.version_str(props.apiVersion)}; 1.1 or newer is needed")
        lim = props.limits
        self.max_groups = tuple(lim.maxComputeWorkGroupCount)
        self.max_storage_range = lim.maxStorageBufferRange
        self.max_shared = lim.maxComputeSharedMemorySize
        self.max_texels = lim.maxTexelBufferElements
        self.ubo_align = max(int(lim.minUniformBufferOffsetAlignment), 16)
        fp = vk.FormatProperties()
        self.texel_formats = set()
        for f in set(vk.FORMATS.values()):
            self.api.vkGetPhysicalDeviceFormatProperties(self.physical, f, ctypes.byref(fp))
            if fp.bufferFeatures & vk.FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER:
                self.texel_formats.add(f)
        mem = vk.PhysicalDeviceMemoryProperties()
        self.api.vkGetPhysicalDeviceMemoryProperties(self.physical, ctypes.byref(mem))
        self._mem_types = [mem.memoryTypes[i].propertyFlags for i in range(mem.memoryTypeCount)]

    def _features(self):
        s8 = vk.Storage8Features(vk.ST_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, None)
        f16i8 = vk.Float16Int8Features(vk.ST_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
                                       ctypes.cast(ctypes.pointer(s8), ctypes.c_void_p))
        s16 = vk.Storage16Features(vk.ST_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
                                   ctypes.cast(ctypes.pointer(f16i8), ctypes.c_void_p))
        f2 = vk.PhysicalDeviceFeatures2(vk.ST_PHYSICAL_DEVICE_FEATURES_2,
                                        ctypes.cast(ctypes.pointer(s16), ctypes.c_void_p))
        return f2, s16, f16i8, s8

    def _extensions(self) -> set:
        n = vk.u32()
        self.api.vkEnumerateDeviceExtensionProperties(self.physical, None, ctypes.byref(n), None)
        arr = (vk.ExtensionProperties * max(n.value, 1))()
        self.api.vkEnumerateDeviceExtensionProperties(self.physical, None, ctypes.byref(n), arr)
        return {arr[i].extensionName.decode(errors="replace") for i in range(n.value)}

    def _create_device(self):
        api = self.api
        n = vk.u32()
        api.vkGetPhysicalDeviceQueueFamilyProperties(self.physical, ctypes.byref(n), None)
        fams = (vk.QueueFamilyProperties * max(n.value, 1))()
        api.vkGetPhysicalDeviceQueueFamilyProperties(self.physical, ctypes.byref(n), fams)
        qf = [i for i in range(n.value) if fams[i].queueFlags & vk.QUEUE_COMPUTE_BIT]
        if not qf:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: device {self.name!r} has no compute queue")
        self.queue_family = qf[0]
        exts = self._extensions() if self.api_version < vk.API_1_2 else set()
        f2, s16, f16i8, s8 = self._features()
        api.vkGetPhysicalDeviceFeatures2(self.physical, ctypes.byref(f2))
        self.features = {
            "shaderFloat16": bool(f16i8.shaderFloat16), "shaderInt8": bool(f16i8.shaderInt8),
            "storageBuffer16BitAccess": bool(s16.storageBuffer16BitAccess),
            "storageBuffer8BitAccess": bool(s8.storageBuffer8BitAccess)}
        self.fp16 = self.features["shaderFloat16"] and self.features["storageBuffer16BitAccess"]
        self.int8 = self.features["shaderInt8"] and self.features["storageBuffer8BitAccess"]
        # enable only what we use, and nothing the device lacks
        e2, e16, ef16i8, e8 = self._features()
        e16.storageBuffer16BitAccess = s16.storageBuffer16BitAccess
        ef16i8.shaderFloat16, ef16i8.shaderInt8 = f16i8.shaderFloat16, f16i8.shaderInt8
        e8.storageBuffer8BitAccess = s8.storageBuffer8BitAccess
        want = [e for e in ("VK_KHR_shader_float16_int8", "VK_KHR_8bit_storage") if e in exts]
        ext_arr = (ctypes.c_char_p * max(len(want), 1))(*[e.encode() for e in want])
        prio = (ctypes.c_float * 1)(1.0)
        qinfo = vk.DeviceQueueCreateInfo(vk.ST_DEVICE_QUEUE_CREATE_INFO, None, 0,
                                         self.queue_family, 1, prio)
        info = vk.DeviceCreateInfo(vk.ST_DEVICE_CREATE_INFO,
                                   ctypes.cast(ctypes.pointer(e2), ctypes.c_void_p), 0, 1,
                                   ctypes.pointer(qinfo), 0, None, len(want), ext_arr, None)
        dev = vk.Handle()
        check(api.vkCreateDevice(self.physical, ctypes.byref(info), None, ctypes.byref(dev)),
              "vkCreateDevice")
        self.device = dev
        q = vk.Handle()
        api.vkGetDeviceQueue(dev, self.queue_family, 0, ctypes.byref(q))
        self.queue = q

    def describe(self) -> str:
        feats = ", ".join(k for k, v in self.features.items() if v) or "none"
        return (f"{self.name} ({self.device_type}, Vulkan {vk.version_str(self.api_version)}; "
                f"features: {feats})")

    def memory_type(self, bits: int) -> int:
        want = vk.MEM_HOST_VISIBLE | vk.MEM_HOST_COHERENT
        ok = [i for i, f in enumerate(self._mem_types) if bits >> i & 1 and f & want == want]
        if not ok:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: device {self.name!r} has no host-visible coherent "
                                  "memory for storage buffers")
        return max(ok, key=lambda i: (self._mem_types[i] & vk.MEM_DEVICE_LOCAL,
                                      self._mem_types[i] & vk.MEM_HOST_CACHED))

    # ---- pipelines -----------------------------------------------------------------
    _DESC = {"u": vk.DESCRIPTOR_UNIFORM_BUFFER, "t": vk.DESCRIPTOR_UNIFORM_TEXEL_BUFFER,
             "s": vk.DESCRIPTOR_STORAGE_BUFFER}

    def set_layout(self, kinds: str):
        """(descriptor set layout, pipeline layout) for bindings of ``kinds`` (one letter each:
        u uniform buffer, t uniform texel buffer, s storage buffer)."""
        lay = self._set_layouts.get(kinds)
        if lay is None:
            n = len(kinds)
            b = (vk.DescriptorSetLayoutBinding * n)(*[
                vk.DescriptorSetLayoutBinding(i, self._DESC[k], 1, vk.STAGE_COMPUTE)
                for i, k in enumerate(kinds)])
            info = vk.DescriptorSetLayoutCreateInfo(vk.ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, None,
                                                    0, n, b)
            dsl = vk.Handle()
            check(self.api.vkCreateDescriptorSetLayout(self.device, ctypes.byref(info), None,
                                                       ctypes.byref(dsl)),
                  "vkCreateDescriptorSetLayout")
            pinfo = vk.PipelineLayoutCreateInfo(vk.ST_PIPELINE_LAYOUT_CREATE_INFO, None, 0, 1,
                                                ctypes.pointer(dsl), 0, None)
            pl = vk.Handle()
            check(self.api.vkCreatePipelineLayout(self.device, ctypes.byref(pinfo), None,
                                                  ctypes.byref(pl)), "vkCreatePipelineLayout")
            lay = self._set_layouts[kinds] = (dsl, pl)
        return lay

    def pipeline(self, name: str, defines: tuple, kinds: str):
        """(pipeline, pipeline layout, set layout) for a shader variant and its bindings."""
        key = (name, defines, kinds)
        with self.lock:
            p = self._pipelines.get(key)
            if p is not None:
                return p
            code = shaders.spirv(name, defines)
            dsl, pl = self.set_layout(kinds)
            words = ctypes.create_string_buffer(code, len(code))
            minfo = vk.ShaderModuleCreateInfo(vk.ST_SHADER_MODULE_CREATE_INFO, None, 0, len(code),
                                              ctypes.cast(words, ctypes.c_void_p))
            mod = vk.Handle()
            check(self.api.vkCreateShaderModule(self.device, ctypes.byref(minfo), None,
                                                ctypes.byref(mod)), f"creating shader {name}")
            try:
                stage = vk.PipelineShaderStageCreateInfo(vk.ST_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                         None, 0, vk.STAGE_COMPUTE, mod, b"main",
                                                         None)
                cinfo = vk.ComputePipelineCreateInfo(vk.ST_COMPUTE_PIPELINE_CREATE_INFO, None, 0,
                                                     stage, pl, None, -1)
                pipe = vk.Handle()
                check(self.api.vkCreateComputePipelines(self.device, None, 1, ctypes.byref(cinfo),
                                                        None, ctypes.byref(pipe)),
                      f"creating the pipeline of shader {name} {dict(defines)}")
            finally:
                self.api.vkDestroyShaderModule(self.device, mod, None)
            p = self._pipelines[key] = (pipe, pl, dsl)
            return p

    def submit(self, cmd, fence) -> None:
        api, dev = self.api, self.device
        cmds = (vk.Handle * 1)(cmd)
        info = vk.SubmitInfo(vk.ST_SUBMIT_INFO, None, 0, None, None, 1, cmds, 0, None)
        fences = (vk.Handle * 1)(fence)
        with self.lock:
            check(api.vkResetFences(dev, 1, fences), "vkResetFences")
            check(api.vkQueueSubmit(self.queue, 1, ctypes.byref(info), fence), "vkQueueSubmit")
        res = api.vkWaitForFences(dev, 1, fences, 1, _FENCE_TIMEOUT_NS)
        check(res, "waiting for the command buffer (vkWaitForFences)")


# ---- buffers --------------------------------------------------------------------------
class Buffer:
    """A VkBuffer bound into an arena's memory; ``addr`` is its mapped host address."""

    __slots__ = ("handle", "size", "addr", "arena", "views")

    def __init__(self, handle, size, arena):
        self.handle, self.size, self.addr, self.arena = handle, size, 0, arena
        self.views = {}

    def texel_view(self, fmt: int, itemsize: int):
        """A VkBufferView of the whole buffer as ``fmt`` texels (made once)."""
        v = self.views.get(fmt)
        if v is None:
            dev = self.arena.dev
            rng = self.size // itemsize * itemsize
            if rng // itemsize > dev.max_texels:
                raise ExecuTorchError(ErrorCode.NotSupported,
                                      f"{BACKEND}: a {rng // itemsize}-element tensor exceeds "
                                      f"the device's {dev.max_texels} texel-buffer elements")
            info = vk.BufferViewCreateInfo(vk.ST_BUFFER_VIEW_CREATE_INFO, None, 0, self.handle,
                                           fmt, 0, rng)
            v = vk.Handle()
            check(dev.api.vkCreateBufferView(dev.device, ctypes.byref(info), None,
                                             ctypes.byref(v)), "vkCreateBufferView")
            self.views[fmt] = v
        return v

    def view(self, dtype, count: int, offset: int = 0) -> np.ndarray:
        dtype = np.dtype(dtype)
        n = count * dtype.itemsize
        if offset < 0 or offset + n > self.size or not self.addr:
            raise ExecuTorchError(ErrorCode.Internal,
                                  f"{BACKEND}: view of {n} bytes at {offset} outside a "
                                  f"{self.size}-byte buffer")
        raw = (ctypes.c_char * max(n, 1)).from_address(self.addr + offset)
        return np.frombuffer(raw, np.uint8, n).view(dtype)


class Arena:
    """Buffers of one delegate: created first, then bound to a few memory blocks at once."""

    def __init__(self, dev: Device):
        self.dev = dev
        self.buffers: list[Buffer] = []
        self.memories: list = []
        self.committed = False

    def buffer(self, nbytes: int) -> Buffer:
        size = max(16, (int(nbytes) + 15) // 16 * 16)
        info = vk.BufferCreateInfo(vk.ST_BUFFER_CREATE_INFO, None, 0, size,
                                   vk.BUFFER_USAGE, vk.SHARING_EXCLUSIVE, 0, None)
        h = vk.Handle()
        check(self.dev.api.vkCreateBuffer(self.dev.device, ctypes.byref(info), None,
                                          ctypes.byref(h)), f"vkCreateBuffer({size} bytes)")
        b = Buffer(h, size, self)
        self.buffers.append(b)
        return b

    def commit(self) -> None:
        api, dev = self.dev.api, self.dev.device
        pending = [b for b in self.buffers if not b.addr]
        groups, cur, used, bits = [], [], 0, ~0
        for b in pending:
            req = vk.MemoryRequirements()
            api.vkGetBufferMemoryRequirements(dev, b.handle, ctypes.byref(req))
            off = (used + req.alignment - 1) // req.alignment * req.alignment
            if cur and off + req.size > _CHUNK:
                groups.append((cur, used, bits))
                cur, used, bits, off = [], 0, ~0, 0
            cur.append((b, off))
            used, bits = off + req.size, bits & req.memoryTypeBits
        if cur:
            groups.append((cur, used, bits))
        for items, total, bits in groups:
            info = vk.MemoryAllocateInfo(vk.ST_MEMORY_ALLOCATE_INFO, None, total,
                                         self.dev.memory_type(bits & 0xFFFFFFFF))
            mem = vk.Handle()
            check(api.vkAllocateMemory(dev, ctypes.byref(info), None, ctypes.byref(mem)),
                  f"vkAllocateMemory({total} bytes)")
            self.memories.append(mem)
            p = ctypes.c_void_p()
            check(api.vkMapMemory(dev, mem, 0, total, 0, ctypes.byref(p)), "vkMapMemory")
            for b, off in items:
                check(api.vkBindBufferMemory(dev, b.handle, mem, off), "vkBindBufferMemory")
                b.addr = p.value + off
        self.committed = True

    def close(self) -> None:
        api, dev = self.dev.api, self.dev.device
        for b in self.buffers:
            for v in b.views.values():
                api.vkDestroyBufferView(dev, v, None)
            b.views = {}
            api.vkDestroyBuffer(dev, b.handle, None)
            b.addr = 0
        for m in self.memories:
            api.vkFreeMemory(dev, m, None)  # (implicitly unmapped)
        self.buffers, self.memories = [], []


# ---- the process-wide device ------------------------------------------------------------
_devices: dict = {}
_dev_lock = threading.Lock()
_probe: tuple | None = None


def get_device() -> Device:
    sel = os.environ.get("PYRUNTIME_VULKAN_DEVICE") or None
    with _dev_lock:
        d = _devices.get(sel)
        if d is None:
            api, why = vk.load_loader()
            if api is None:
                raise ExecuTorchError(ErrorCode.NotFound,
                                      f"{BACKEND}: cannot load the Vulkan loader ({why}); "
                                      f"{INSTALL_HINT}")
            d = _devices[sel] = Device(api, sel)
        return d


def availability() -> tuple[bool, str]:
    """(True, device description) or (False, why not), probed once per process."""
    global _probe
    if _probe is None:
        try:
            _probe = (True, get_device().describe())
        except ExecuTorchError as e:
            _probe = (False, str(e).removeprefix(f"{BACKEND}: "))
    return _probe
