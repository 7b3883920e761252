"""Raw ctypes bindings to the Vulkan loader (``libvulkan.so.1``): the structs, enums and
entry points a compute-only client needs. Written from the Vulkan 1.3 registry
(``vulkan_core.h``); x86_64/aarch64 layouts (non-dispatchable handles are 64-bit).

Nothing here allocates Vulkan objects; ``device.py`` drives these calls.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from ctypes import POINTER, Structure, c_char, c_char_p, c_float, c_int32, c_size_t, c_uint8, \
    c_uint32, c_uint64, c_void_p

u32, u64, f32, ptr = c_uint32, c_uint64, c_float, c_void_p
Handle = c_void_p  # dispatchable and non-dispatchable handles alike (64-bit targets)

# ---- enums ---------------------------------------------------------------------
SUCCESS, NOT_READY, TIMEOUT, INCOMPLETE = 0, 1, 2, 5
RESULTS = {0: "VK_SUCCESS", 1: "VK_NOT_READY", 2: "VK_TIMEOUT", 5: "VK_INCOMPLETE",
           -1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
           -3: "VK_ERROR_INITIALIZATION_FAILED", -4: "VK_ERROR_DEVICE_LOST",
           -5: "VK_ERROR_MEMORY_MAP_FAILED", -6: "VK_ERROR_LAYER_NOT_PRESENT",
           -7: "VK_ERROR_EXTENSION_NOT_PRESENT", -8: "VK_ERROR_FEATURE_NOT_PRESENT",
           -9: "VK_ERROR_INCOMPATIBLE_DRIVER", -10: "VK_ERROR_TOO_MANY_OBJECTS",
           -13: "VK_ERROR_UNKNOWN", -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY",
           -1000012000: "VK_ERROR_INVALID_SHADER_NV"}

ST_APPLICATION_INFO, ST_INSTANCE_CREATE_INFO = 0, 1
ST_DEVICE_QUEUE_CREATE_INFO, ST_DEVICE_CREATE_INFO, ST_SUBMIT_INFO = 2, 3, 4
ST_MEMORY_ALLOCATE_INFO, ST_FENCE_CREATE_INFO, ST_BUFFER_CREATE_INFO = 5, 8, 12
ST_SHADER_MODULE_CREATE_INFO, ST_PIPELINE_SHADER_STAGE_CREATE_INFO = 16, 18
ST_COMPUTE_PIPELINE_CREATE_INFO, ST_PIPELINE_LAYOUT_CREATE_INFO = 29, 30
ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, ST_DESCRIPTOR_POOL_CREATE_INFO = 32, 33
ST_DESCRIPTOR_SET_ALLOCATE_INFO, ST_WRITE_DESCRIPTOR_SET = 34, 35
ST_COMMAND_POOL_CREATE_INFO, ST_COMMAND_BUFFER_ALLOCATE_INFO = 39, 40
ST_COMMAND_BUFFER_BEGIN_INFO, ST_MEMORY_BARRIER = 42, 46
ST_BUFFER_VIEW_CREATE_INFO = 13
ST_PHYSICAL_DEVICE_FEATURES_2 = 1000059000
ST_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES = 1000083000
ST_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES = 1000082000
ST_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES = 1000177000

QUEUE_COMPUTE_BIT = 0x2
DEVICE_TYPES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}
MEM_DEVICE_LOCAL, MEM_HOST_VISIBLE, MEM_HOST_COHERENT, MEM_HOST_CACHED = 1, 2, 4, 8
# transfer src/dst, uniform texel, uniform, storage
BUFFER_USAGE = 0x1 | 0x2 | 0x4 | 0x10 | 0x20
SHARING_EXCLUSIVE = 0
DESCRIPTOR_UNIFORM_TEXEL_BUFFER, DESCRIPTOR_UNIFORM_BUFFER, DESCRIPTOR_STORAGE_BUFFER = 4, 6, 7
FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER = 0x8
# texel formats by numpy dtype name, as uniform texel buffers read them
FORMATS = {"float32": 100, "float16": 76, "int32": 99, "int8": 14, "uint8": 13, "bool": 13}
FORMAT_NAMES = {100: "R32_SFLOAT", 76: "R16_SFLOAT", 99: "R32_SINT", 14: "R8_SINT",
                13: "R8_UINT"}
STAGE_COMPUTE = 0x20
BIND_POINT_COMPUTE = 1
PIPELINE_STAGE_COMPUTE, PIPELINE_STAGE_HOST = 0x800, 0x4000
ACCESS_SHADER_READ, ACCESS_SHADER_WRITE = 0x20, 0x40
ACCESS_HOST_READ, ACCESS_HOST_WRITE = 0x2000, 0x4000
COMMAND_POOL_RESET_BUFFER = 0x2
API_1_1, API_1_2 = (1 << 22) | (1 << 12), (1 << 22) | (2 << 12)


def version_str(v: int) -> str:
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


# ---- structs -------------------------------------------------------------------
def _struct(name, fields):
    return type(name, (Structure,), {"_fields_": fields})


ApplicationInfo = _struct("ApplicationInfo", [
    ("sType", u32), ("pNext", ptr), ("pApplicationName", c_char_p), ("applicationVersion", u32),
    ("pEngineName", c_char_p), ("engineVersion", u32), ("apiVersion", u32)])
InstanceCreateInfo = _struct("InstanceCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("pApplicationInfo", POINTER(ApplicationInfo)),
    ("enabledLayerCount", u32), ("ppEnabledLayerNames", POINTER(c_char_p)),
    ("enabledExtensionCount", u32), ("ppEnabledExtensionNames", POINTER(c_char_p))])

_LIMIT_FIELDS = (
    "u32 maxImageDimension1D maxImageDimension2D maxImageDimension3D maxImageDimensionCube "
    "maxImageArrayLayers maxTexelBufferElements maxUniformBufferRange maxStorageBufferRange "
    "maxPushConstantsSize maxMemoryAllocationCount maxSamplerAllocationCount|"
    "u64 bufferImageGranularity sparseAddressSpaceSize|"
    "u32 maxBoundDescriptorSets maxPerStageDescriptorSamplers maxPerStageDescriptorUniformBuffers "
    "maxPerStageDescriptorStorageBuffers maxPerStageDescriptorSampledImages "
    "maxPerStageDescriptorStorageImages maxPerStageDescriptorInputAttachments maxPerStageResources "
    "maxDescriptorSetSamplers maxDescriptorSetUniformBuffers maxDescriptorSetUniformBuffersDynamic "
    "maxDescriptorSetStorageBuffers maxDescriptorSetStorageBuffersDynamic "
    "maxDescriptorSetSampledImages maxDescriptorSetStorageImages maxDescriptorSetInputAttachments "
    "maxVertexInputAttributes maxVertexInputBindings maxVertexInputAttributeOffset "
    "maxVertexInputBindingStride maxVertexOutputComponents maxTessellationGenerationLevel "
    "maxTessellationPatchSize maxTessellationControlPerVertexInputComponents "
    "maxTessellationControlPerVertexOutputComponents "
    "maxTessellationControlPerPatchOutputComponents maxTessellationControlTotalOutputComponents "
    "maxTessellationEvaluationInputComponents maxTessellationEvaluationOutputComponents "
    "maxGeometryShaderInvocations maxGeometryInputComponents maxGeometryOutputComponents "
    "maxGeometryOutputVertices maxGeometryTotalOutputComponents maxFragmentInputComponents "
    "maxFragmentOutputAttachments maxFragmentDualSrcAttachments "
    "maxFragmentCombinedOutputResources maxComputeSharedMemorySize|"
    "u32*3 maxComputeWorkGroupCount|u32 maxComputeWorkGroupInvocations|"
    "u32*3 maxComputeWorkGroupSize|"
    "u32 subPixelPrecisionBits subTexelPrecisionBits mipmapPrecisionBits maxDrawIndexedIndexValue "
    "maxDrawIndirectCount|f32 maxSamplerLodBias maxSamplerAnisotropy|u32 maxViewports|"
    "u32*2 maxViewportDimensions|f32*2 viewportBoundsRange|u32 viewportSubPixelBits|"
    "size minMemoryMapAlignment|u64 minTexelBufferOffsetAlignment minUniformBufferOffsetAlignment "
    "minStorageBufferOffsetAlignment|i32 minTexelOffset|u32 maxTexelOffset|"
    "i32 minTexelGatherOffset|"
    "u32 maxTexelGatherOffset|f32 minInterpolationOffset maxInterpolationOffset|"
    "u32 subPixelInterpolationOffsetBits maxFramebufferWidth maxFramebufferHeight "
    "maxFramebufferLayers framebufferColorSampleCounts framebufferDepthSampleCounts "
    "framebufferStencilSampleCounts framebufferNoAttachmentsSampleCounts maxColorAttachments "
    "sampledImageColorSampleCounts sampledImageIntegerSampleCounts sampledImageDepthSampleCounts "
    "sampledImageStencilSampleCounts storageImageSampleCounts maxSampleMaskWords "
    "timestampComputeAndGraphics|f32 timestampPeriod|u32 maxClipDistances maxCullDistances "
    "maxCombinedClipAndCullDistances discreteQueuePriorities|f32*2 pointSizeRange lineWidthRange|"
    "f32 pointSizeGranularity lineWidthGranularity|u32 strictLines standardSampleLocations|"
    "u64 optimalBufferCopyOffsetAlignment optimalBufferCopyRowPitchAlignment nonCoherentAtomSize")
_TYPES = {"u32": u32, "u64": u64, "f32": f32, "i32": c_int32, "size": c_size_t}


def _limit_fields():
    out = []
    for group in _LIMIT_FIELDS.split("|"):
        kind, *names = group.split()
        t, _, n = kind.partition("*")
        ct = _TYPES[t] * int(n) if n else _TYPES[t]
        out += [(name, ct) for name in names]
    return out


Limits = _struct("Limits", _limit_fields())
PhysicalDeviceProperties = _struct("PhysicalDeviceProperties", [
    ("apiVersion", u32), ("driverVersion", u32), ("vendorID", u32), ("deviceID", u32),
    ("deviceType", u32), ("deviceName", c_char * 256), ("pipelineCacheUUID", c_uint8 * 16),
    ("limits", Limits), ("sparseProperties", u32 * 5)])
QueueFamilyProperties = _struct("QueueFamilyProperties", [
    ("queueFlags", u32), ("queueCount", u32), ("timestampValidBits", u32),
    ("minImageTransferGranularity", u32 * 3)])
MemoryType = _struct("MemoryType", [("propertyFlags", u32), ("heapIndex", u32)])
MemoryHeap = _struct("MemoryHeap", [("size", u64), ("flags", u32)])
PhysicalDeviceMemoryProperties = _struct("PhysicalDeviceMemoryProperties", [
    ("memoryTypeCount", u32), ("memoryTypes", MemoryType * 32), ("memoryHeapCount", u32),
    ("memoryHeaps", MemoryHeap * 16)])
PhysicalDeviceFeatures = _struct("PhysicalDeviceFeatures", [(n, u32) for n in (
    "robustBufferAccess fullDrawIndexUint32 imageCubeArray independentBlend geometryShader "
    "tessellationShader sampleRateShading dualSrcBlend logicOp multiDrawIndirect "
    "drawIndirectFirstInstance depthClamp depthBiasClamp fillModeNonSolid depthBounds wideLines "
    "largePoints alphaToOne multiViewport samplerAnisotropy textureCompressionETC2 "
    "textureCompressionASTC_LDR textureCompressionBC occlusionQueryPrecise pipelineStatisticsQuery "
    "vertexPipelineStoresAndAtomics fragmentStoresAndAtomics "
    "shaderTessellationAndGeometryPointSize "
    "shaderImageGatherExtended shaderStorageImageExtendedFormats shaderStorageImageMultisample "
    "shaderStorageImageReadWithoutFormat shaderStorageImageWriteWithoutFormat "
    "shaderUniformBufferArrayDynamicIndexing shaderSampledImageArrayDynamicIndexing "
    "shaderStorageBufferArrayDynamicIndexing shaderStorageImageArrayDynamicIndexing "
    "shaderClipDistance shaderCullDistance shaderFloat64 shaderInt64 shaderInt16 "
    "shaderResourceResidency shaderResourceMinLod sparseBinding sparseResidencyBuffer "
    "sparseResidencyImage2D sparseResidencyImage3D sparseResidency2Samples "
    "sparseResidency4Samples sparseResidency8Samples sparseResidency16Samples "
    "sparseResidencyAliased variableMultisampleRate inheritedQueries").split()])
PhysicalDeviceFeatures2 = _struct("PhysicalDeviceFeatures2", [
    ("sType", u32), ("pNext", ptr), ("features", PhysicalDeviceFeatures)])
Storage16Features = _struct("Storage16Features", [
    ("sType", u32), ("pNext", ptr), ("storageBuffer16BitAccess", u32),
    ("uniformAndStorageBuffer16BitAccess", u32), ("storagePushConstant16", u32),
    ("storageInputOutput16", u32)])
Float16Int8Features = _struct("Float16Int8Features", [
    ("sType", u32), ("pNext", ptr), ("shaderFloat16", u32), ("shaderInt8", u32)])
Storage8Features = _struct("Storage8Features", [
    ("sType", u32), ("pNext", ptr), ("storageBuffer8BitAccess", u32),
    ("uniformAndStorageBuffer8BitAccess", u32), ("storagePushConstant8", u32)])

DeviceQueueCreateInfo = _struct("DeviceQueueCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("queueFamilyIndex", u32),
    ("queueCount", u32), ("pQueuePriorities", POINTER(f32))])
DeviceCreateInfo = _struct("DeviceCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("queueCreateInfoCount", u32),
    ("pQueueCreateInfos", POINTER(DeviceQueueCreateInfo)), ("enabledLayerCount", u32),
    ("ppEnabledLayerNames", POINTER(c_char_p)), ("enabledExtensionCount", u32),
    ("ppEnabledExtensionNames", POINTER(c_char_p)), ("pEnabledFeatures", ptr)])
ExtensionProperties = _struct("ExtensionProperties", [
    ("extensionName", c_char * 256), ("specVersion", u32)])
BufferCreateInfo = _struct("BufferCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("size", u64), ("usage", u32),
    ("sharingMode", u32), ("queueFamilyIndexCount", u32), ("pQueueFamilyIndices", POINTER(u32))])
BufferViewCreateInfo = _struct("BufferViewCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("buffer", Handle), ("format", u32),
    ("offset", u64), ("range", u64)])
FormatProperties = _struct("FormatProperties", [
    ("linearTilingFeatures", u32), ("optimalTilingFeatures", u32), ("bufferFeatures", u32)])
MemoryRequirements = _struct("MemoryRequirements", [
    ("size", u64), ("alignment", u64), ("memoryTypeBits", u32)])
MemoryAllocateInfo = _struct("MemoryAllocateInfo", [
    ("sType", u32), ("pNext", ptr), ("allocationSize", u64), ("memoryTypeIndex", u32)])
ShaderModuleCreateInfo = _struct("ShaderModuleCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("codeSize", c_size_t), ("pCode", ptr)])
DescriptorSetLayoutBinding = _struct("DescriptorSetLayoutBinding", [
    ("binding", u32), ("descriptorType", u32), ("descriptorCount", u32), ("stageFlags", u32),
    ("pImmutableSamplers", ptr)])
DescriptorSetLayoutCreateInfo = _struct("DescriptorSetLayoutCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("bindingCount", u32),
    ("pBindings", POINTER(DescriptorSetLayoutBinding))])
PushConstantRange = _struct("PushConstantRange", [
    ("stageFlags", u32), ("offset", u32), ("size", u32)])
PipelineLayoutCreateInfo = _struct("PipelineLayoutCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("setLayoutCount", u32),
    ("pSetLayouts", POINTER(Handle)), ("pushConstantRangeCount", u32),
    ("pPushConstantRanges", POINTER(PushConstantRange))])
SpecializationMapEntry = _struct("SpecializationMapEntry", [
    ("constantID", u32), ("offset", u32), ("size", c_size_t)])
SpecializationInfo = _struct("SpecializationInfo", [
    ("mapEntryCount", u32), ("pMapEntries", POINTER(SpecializationMapEntry)),
    ("dataSize", c_size_t), ("pData", ptr)])
PipelineShaderStageCreateInfo = _struct("PipelineShaderStageCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("stage", u32), ("module", Handle),
    ("pName", c_char_p), ("pSpecializationInfo", POINTER(SpecializationInfo))])
ComputePipelineCreateInfo = _struct("ComputePipelineCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("stage", PipelineShaderStageCreateInfo),
    ("layout", Handle), ("basePipelineHandle", Handle), ("basePipelineIndex", c_int32)])
DescriptorPoolSize = _struct("DescriptorPoolSize", [("type", u32), ("descriptorCount", u32)])
DescriptorPoolCreateInfo = _struct("DescriptorPoolCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("maxSets", u32), ("poolSizeCount", u32),
    ("pPoolSizes", POINTER(DescriptorPoolSize))])
DescriptorSetAllocateInfo = _struct("DescriptorSetAllocateInfo", [
    ("sType", u32), ("pNext", ptr), ("descriptorPool", Handle), ("descriptorSetCount", u32),
    ("pSetLayouts", POINTER(Handle))])
DescriptorBufferInfo = _struct("DescriptorBufferInfo", [
    ("buffer", Handle), ("offset", u64), ("range", u64)])
WriteDescriptorSet = _struct("WriteDescriptorSet", [
    ("sType", u32), ("pNext", ptr), ("dstSet", Handle), ("dstBinding", u32),
    ("dstArrayElement", u32), ("descriptorCount", u32), ("descriptorType", u32),
    ("pImageInfo", ptr), ("pBufferInfo", POINTER(DescriptorBufferInfo)), ("pTexelBufferView", ptr)])
CommandPoolCreateInfo = _struct("CommandPoolCreateInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("queueFamilyIndex", u32)])
CommandBufferAllocateInfo = _struct("CommandBufferAllocateInfo", [
    ("sType", u32), ("pNext", ptr), ("commandPool", Handle), ("level", u32),
    ("commandBufferCount", u32)])
CommandBufferBeginInfo = _struct("CommandBufferBeginInfo", [
    ("sType", u32), ("pNext", ptr), ("flags", u32), ("pInheritanceInfo", ptr)])
MemoryBarrier = _struct("MemoryBarrier", [
    ("sType", u32), ("pNext", ptr), ("srcAccessMask", u32), ("dstAccessMask", u32)])
SubmitInfo = _struct("SubmitInfo", [
    ("sType", u32), ("pNext", ptr), ("waitSemaphoreCount", u32), ("pWaitSemaphores", ptr),
    ("pWaitDstStageMask", ptr), ("commandBufferCount", u32), ("pCommandBuffers", POINTER(Handle)),
    ("signalSemaphoreCount", u32), ("pSignalSemaphores", ptr)])
FenceCreateInfo = _struct("FenceCreateInfo", [("sType", u32), ("pNext", ptr), ("flags", u32)])

# ---- entry points ----------------------------------------------------------------
_P, _H = POINTER, POINTER(Handle)
_FUNCS = {
    # name: (restype, argtypes); restype None = void, c_int32 = VkResult
    "vkCreateInstance": (c_int32, [_P(InstanceCreateInfo), ptr, _H]),
    "vkDestroyInstance": (None, [Handle, ptr]),
    "vkEnumeratePhysicalDevices": (c_int32, [Handle, _P(u32), _H]),
    "vkGetPhysicalDeviceProperties": (None, [Handle, _P(PhysicalDeviceProperties)]),
    "vkGetPhysicalDeviceQueueFamilyProperties": (None, [Handle, _P(u32),
                                                        _P(QueueFamilyProperties)]),
    "vkGetPhysicalDeviceMemoryProperties": (None, [Handle, _P(PhysicalDeviceMemoryProperties)]),
    "vkGetPhysicalDeviceFeatures2": (None, [Handle, _P(PhysicalDeviceFeatures2)]),
    "vkEnumerateDeviceExtensionProperties": (c_int32, [Handle, c_char_p, _P(u32),
                                                       _P(ExtensionProperties)]),
    "vkCreateDevice": (c_int32, [Handle, _P(DeviceCreateInfo), ptr, _H]),
    "vkDestroyDevice": (None, [Handle, ptr]),
    "vkGetDeviceQueue": (None, [Handle, u32, u32, _H]),
    "vkDeviceWaitIdle": (c_int32, [Handle]),
    "vkCreateBuffer": (c_int32, [Handle, _P(BufferCreateInfo), ptr, _H]),
    "vkDestroyBuffer": (None, [Handle, Handle, ptr]),
    "vkCreateBufferView": (c_int32, [Handle, _P(BufferViewCreateInfo), ptr, _H]),
    "vkDestroyBufferView": (None, [Handle, Handle, ptr]),
    "vkGetPhysicalDeviceFormatProperties": (None, [Handle, u32, _P(FormatProperties)]),
    "vkGetBufferMemoryRequirements": (None, [Handle, Handle, _P(MemoryRequirements)]),
    "vkAllocateMemory": (c_int32, [Handle, _P(MemoryAllocateInfo), ptr, _H]),
    "vkFreeMemory": (None, [Handle, Handle, ptr]),
    "vkBindBufferMemory": (c_int32, [Handle, Handle, Handle, u64]),
    "vkMapMemory": (c_int32, [Handle, Handle, u64, u64, u32, _P(c_void_p)]),
    "vkUnmapMemory": (None, [Handle, Handle]),
    "vkCreateShaderModule": (c_int32, [Handle, _P(ShaderModuleCreateInfo), ptr, _H]),
    "vkDestroyShaderModule": (None, [Handle, Handle, ptr]),
    "vkCreateDescriptorSetLayout": (c_int32, [Handle, _P(DescriptorSetLayoutCreateInfo), ptr, _H]),
    "vkDestroyDescriptorSetLayout": (None, [Handle, Handle, ptr]),
    "vkCreatePipelineLayout": (c_int32, [Handle, _P(PipelineLayoutCreateInfo), ptr, _H]),
    "vkDestroyPipelineLayout": (None, [Handle, Handle, ptr]),
    "vkCreateComputePipelines": (c_int32, [Handle, Handle, u32, _P(ComputePipelineCreateInfo),
                                           ptr, _H]),
    "vkDestroyPipeline": (None, [Handle, Handle, ptr]),
    "vkCreateDescriptorPool": (c_int32, [Handle, _P(DescriptorPoolCreateInfo), ptr, _H]),
    "vkDestroyDescriptorPool": (None, [Handle, Handle, ptr]),
    "vkResetDescriptorPool": (c_int32, [Handle, Handle, u32]),
    "vkAllocateDescriptorSets": (c_int32, [Handle, _P(DescriptorSetAllocateInfo), _H]),
    "vkUpdateDescriptorSets": (None, [Handle, u32, _P(WriteDescriptorSet), u32, ptr]),
    "vkCreateCommandPool": (c_int32, [Handle, _P(CommandPoolCreateInfo), ptr, _H]),
    "vkDestroyCommandPool": (None, [Handle, Handle, ptr]),
    "vkAllocateCommandBuffers": (c_int32, [Handle, _P(CommandBufferAllocateInfo), _H]),
    "vkFreeCommandBuffers": (None, [Handle, Handle, u32, _H]),
    "vkBeginCommandBuffer": (c_int32, [Handle, _P(CommandBufferBeginInfo)]),
    "vkEndCommandBuffer": (c_int32, [Handle]),
    "vkResetCommandBuffer": (c_int32, [Handle, u32]),
    "vkCmdBindPipeline": (None, [Handle, u32, Handle]),
    "vkCmdBindDescriptorSets": (None, [Handle, u32, Handle, u32, u32, _H, u32, ptr]),
    "vkCmdPushConstants": (None, [Handle, Handle, u32, u32, u32, ptr]),
    "vkCmdDispatch": (None, [Handle, u32, u32, u32]),
    "vkCmdPipelineBarrier": (None, [Handle, u32, u32, u32, u32, _P(MemoryBarrier), u32, ptr,
                                    u32, ptr]),
    "vkCreateFence": (c_int32, [Handle, _P(FenceCreateInfo), ptr, _H]),
    "vkDestroyFence": (None, [Handle, Handle, ptr]),
    "vkResetFences": (c_int32, [Handle, u32, _H]),
    "vkWaitForFences": (c_int32, [Handle, u32, _H, u32, u64]),
    "vkQueueSubmit": (c_int32, [Handle, u32, _P(SubmitInfo), Handle]),
}


class Api:
    """The loader's entry points as attributes (``api.vkCreateInstance(...)``)."""

    def __init__(self, lib: ctypes.CDLL, path: str):
        self.lib, self.path = lib, path
        for name, (res, args) in _FUNCS.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
            setattr(self, name, fn)


def load_loader() -> tuple[Api | None, str]:
    """(Api, "") or (None, why) for the system Vulkan loader."""
    names = ["libvulkan.so.1", "libvulkan.so"]
    found = ctypes.util.find_library("vulkan")
    if found and found not in names:
        names.append(found)
    errors = []
    for n in names:
        try:
            return Api(ctypes.CDLL(n), n), ""
        except (OSError, AttributeError) as e:
            errors.append(f"{n}: {e}")
    return None, "; ".join(errors)
