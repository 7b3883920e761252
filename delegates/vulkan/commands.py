"""Dispatches recorded into one command buffer, resubmitted while shapes are unchanged.

A ``Dispatch`` names a shader variant, its bindings and its parameter words; a
``CommandList`` owns the command buffer, fence, descriptor pool and the parameter
buffer of one delegate. Every shader sees its parameters at binding 0 (a uniform
block of ``PARAM_WORDS`` ints; floats are bit-cast), then the tensors it reads (uniform
texel buffers) and the tensors it writes (storage buffers).
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from pyruntime.delegates.vulkan import vk
from pyruntime.delegates.vulkan.device import Arena, Device, check

_F32_MAX = float(np.finfo(np.float32).max)
LOCAL = 64  # local_size_x of the 1-D shaders (common.glsl)


PARAM_WORDS = 64  # the size of common.glsl's parameter block


class Dispatch:
    __slots__ = ("shader", "defines", "bufs", "params", "groups", "label", "kinds")

    def __init__(self, shader, defines, bufs, params, groups, label=""):
        self.shader = shader
        self.defines = tuple(defines)
        self.bufs = bufs  # [("t", Buffer, format, itemsize) | ("s", Buffer, 0, 0)]
        self.kinds = "u" + "".join(b[0] for b in bufs)
        self.params = np.asarray(params, np.int32)
        if len(self.params) > PARAM_WORDS:
            raise ValueError(f"{shader}: {len(self.params)} parameter words > {PARAM_WORDS}")
        self.groups = groups  # (x, y, z)
        self.label = label


def pack(*vals) -> np.ndarray:
    """Parameter words: ints as they are, floats bit-cast to int32."""
    out = np.empty(len(vals), np.int32)
    for i, v in enumerate(vals):
        if isinstance(v, float):
            if abs(v) > _F32_MAX and v == v:  # beyond float32 (DBL_MAX clamp bounds): inf
                v = math.copysign(math.inf, v)
            out[i] = np.float32(v).view(np.int32)
        else:
            out[i] = int(v)
    return out


def groups_1d(dev: Device, n: int) -> tuple:
    """Workgroups for ``n`` invocations of a 1-D shader (x capped at the device limit)."""
    g = max(1, -(-int(n) // LOCAL))
    gx = min(g, dev.max_groups[0], 65535)
    return (gx, -(-g // gx), 1)


class CommandList:
    def __init__(self, dev: Device):
        self.dev = dev
        api, d = dev.api, dev.device
        info = vk.CommandPoolCreateInfo(vk.ST_COMMAND_POOL_CREATE_INFO, None,
                                        vk.COMMAND_POOL_RESET_BUFFER, dev.queue_family)
        self.pool = vk.Handle()
        check(api.vkCreateCommandPool(d, ctypes.byref(info), None, ctypes.byref(self.pool)),
              "vkCreateCommandPool")
        ainfo = vk.CommandBufferAllocateInfo(vk.ST_COMMAND_BUFFER_ALLOCATE_INFO, None, self.pool,
                                             0, 1)
        self.cmd = vk.Handle()
        check(api.vkAllocateCommandBuffers(d, ctypes.byref(ainfo), ctypes.byref(self.cmd)),
              "vkAllocateCommandBuffers")
        finfo = vk.FenceCreateInfo(vk.ST_FENCE_CREATE_INFO, None, 0)
        self.fence = vk.Handle()
        check(api.vkCreateFence(d, ctypes.byref(finfo), None, ctypes.byref(self.fence)),
              "vkCreateFence")
        self.desc_pool = None
        self.desc_cap = (0, 0)
        self.params_arena = None
        self.params_buf = None
        self.recorded = False
        self.count = 0

    def _params(self, dispatches) -> list:
        align = self.dev.ubo_align
        offs, total = [], 0
        step = (PARAM_WORDS * 4 + align - 1) // align * align
        for d in dispatches:
            offs.append(total)
            total += step
        if self.params_buf is None or self.params_buf.size < total:
            if self.params_arena is not None:
                self.params_arena.close()
            self.params_arena = Arena(self.dev)
            self.params_buf = self.params_arena.buffer(max(total, 256) * 5 // 4)
            self.params_arena.commit()
        words = self.params_buf.view(np.int32, self.params_buf.size // 4)
        for d, o in zip(dispatches, offs):
            words[o // 4:o // 4 + len(d.params)] = d.params
        return offs

    def _descriptor_pool(self, nsets: int, counts: dict):
        api, d = self.dev.api, self.dev.device
        need = (nsets, counts.get("u", 0), counts.get("t", 0), counts.get("s", 0))
        if self.desc_pool is not None and all(a <= b for a, b in zip(need, self.desc_cap)):
            check(api.vkResetDescriptorPool(d, self.desc_pool, 0), "vkResetDescriptorPool")
            return
        if self.desc_pool is not None:
            api.vkDestroyDescriptorPool(d, self.desc_pool, None)
            self.desc_pool = None
        cap = tuple(max(v, 1) for v in need)
        sizes = (vk.DescriptorPoolSize * 3)(
            vk.DescriptorPoolSize(vk.DESCRIPTOR_UNIFORM_BUFFER, cap[1]),
            vk.DescriptorPoolSize(vk.DESCRIPTOR_UNIFORM_TEXEL_BUFFER, cap[2]),
            vk.DescriptorPoolSize(vk.DESCRIPTOR_STORAGE_BUFFER, cap[3]))
        info = vk.DescriptorPoolCreateInfo(vk.ST_DESCRIPTOR_POOL_CREATE_INFO, None, 0, cap[0], 3,
                                           sizes)
        pool = vk.Handle()
        check(api.vkCreateDescriptorPool(d, ctypes.byref(info), None, ctypes.byref(pool)),
              "vkCreateDescriptorPool")
        self.desc_pool, self.desc_cap = pool, cap

    def record(self, dispatches: list) -> None:
        dev, api, d = self.dev, self.dev.api, self.dev.device
        pipes = [dev.pipeline(x.shader, x.defines, x.kinds) for x in dispatches]
        offs = self._params(dispatches)
        n = len(dispatches)
        counts: dict = {}
        for x in dispatches:
            for k in x.kinds:
                counts[k] = counts.get(k, 0) + 1
        nb = sum(counts.values())
        self._descriptor_pool(n, counts)
        sets = (vk.Handle * max(n, 1))()
        if n:
            layouts = (vk.Handle * n)(*[p[2] for p in pipes])
            ainfo = vk.DescriptorSetAllocateInfo(vk.ST_DESCRIPTOR_SET_ALLOCATE_INFO, None,
                                                 self.desc_pool, n, layouts)
            check(api.vkAllocateDescriptorSets(d, ctypes.byref(ainfo), sets),
                  "vkAllocateDescriptorSets")
        infos = (vk.DescriptorBufferInfo * max(nb, 1))()
        views = (vk.Handle * max(nb, 1))()
        writes = (vk.WriteDescriptorSet * max(nb, 1))()
        k = 0
        pb = self.params_buf.handle
        for i, x in enumerate(dispatches):
            binds = [("u", pb, offs[i])] + [(b[0], b[1], b[2:]) for b in x.bufs]
            for j, (kind, buf, extra) in enumerate(binds):
                w = writes[k]
                w.sType, w.dstSet, w.dstBinding, w.descriptorCount = \
                    vk.ST_WRITE_DESCRIPTOR_SET, sets[i], j, 1
                if kind == "u":
                    w.descriptorType = vk.DESCRIPTOR_UNIFORM_BUFFER
                    infos[k].buffer, infos[k].offset, infos[k].range = buf, extra, PARAM_WORDS * 4
                    w.pBufferInfo = ctypes.pointer(infos[k])
                elif kind == "t":
                    w.descriptorType = vk.DESCRIPTOR_UNIFORM_TEXEL_BUFFER
                    views[k] = buf.texel_view(*extra)
                    w.pTexelBufferView = ctypes.addressof(views) + k * ctypes.sizeof(vk.Handle)
                else:
                    w.descriptorType = vk.DESCRIPTOR_STORAGE_BUFFER
                    infos[k].buffer, infos[k].offset, infos[k].range = buf.handle, 0, buf.size
                    w.pBufferInfo = ctypes.pointer(infos[k])
                k += 1
        if k:
            api.vkUpdateDescriptorSets(d, k, writes, 0, None)
        cmd = self.cmd
        check(api.vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer")
        binfo = vk.CommandBufferBeginInfo(vk.ST_COMMAND_BUFFER_BEGIN_INFO, None, 0, None)
        check(api.vkBeginCommandBuffer(cmd, ctypes.byref(binfo)), "vkBeginCommandBuffer")
        bar = vk.MemoryBarrier(vk.ST_MEMORY_BARRIER, None, vk.ACCESS_SHADER_WRITE,
                               vk.ACCESS_SHADER_READ | vk.ACCESS_SHADER_WRITE)
        setp = (vk.Handle * 1)()
        for i, x in enumerate(dispatches):
            pipe, pl, _ = pipes[i]
            api.vkCmdBindPipeline(cmd, vk.BIND_POINT_COMPUTE, pipe)
            setp[0] = sets[i]
            api.vkCmdBindDescriptorSets(cmd, vk.BIND_POINT_COMPUTE, pl, 0, 1, setp, 0, None)
            api.vkCmdDispatch(cmd, *x.groups)
            api.vkCmdPipelineBarrier(cmd, vk.PIPELINE_STAGE_COMPUTE, vk.PIPELINE_STAGE_COMPUTE, 0,
                                     1, ctypes.byref(bar), 0, None, 0, None)
        host = vk.MemoryBarrier(vk.ST_MEMORY_BARRIER, None, vk.ACCESS_SHADER_WRITE,
                                vk.ACCESS_HOST_READ)
        api.vkCmdPipelineBarrier(cmd, vk.PIPELINE_STAGE_COMPUTE, vk.PIPELINE_STAGE_HOST, 0, 1,
                                 ctypes.byref(host), 0, None, 0, None)
        check(api.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")
        self.recorded, self.count = True, n

    def run(self) -> None:
        self.dev.submit(self.cmd, self.fence)

    def close(self) -> None:
        api, d = self.dev.api, self.dev.device
        if self.pool is None:
            return
        api.vkDestroyFence(d, self.fence, None)
        api.vkDestroyCommandPool(d, self.pool, None)  # frees the command buffer
        if self.desc_pool is not None:
            api.vkDestroyDescriptorPool(d, self.desc_pool, None)
        if self.params_arena is not None:
            self.params_arena.close()
        self.pool = self.desc_pool = self.params_arena = self.params_buf = None
