// Shared by every pyruntime Vulkan shader.
//
// Binding 0 is the parameter block (a uniform buffer of ints; floats are bit-cast).
// Tensors a shader reads are uniform texel buffers (IN: texelFetch converts fp16, int8
// and uint8 to 32-bit for free, and on lavapipe it is ten times faster than an SSBO
// load); tensors it writes are storage buffers (OUT). The host passes, per tensor
// NAME, S_NAME (samplerBuffer, isamplerBuffer or usamplerBuffer) for inputs and T_NAME
// (float, float16_t, int, int8_t, uint8_t) for outputs. CT is the compute type of
// elementwise math (float, float16_t or int).
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

layout(std140, set = 0, binding = 0) uniform Params { ivec4 PV[16]; };  // 64 ints (commands.PARAM_WORDS)
#define P(i) PV[(i) >> 2][(i) & 3]
#define PF(i) intBitsToFloat(P(i))

#define IN(b, NAME) layout(set = 0, binding = b) uniform S_##NAME NAME;
#define OUT(b, NAME, arr) \
  layout(std430, set = 0, binding = b) writeonly buffer NAME##_buf { T_##NAME arr[]; };
#define LD(NAME, i) texelFetch(NAME, int(i)).x

#ifndef LOCAL_X
#define LOCAL_X 64
#endif

// linear invocation index of a 1-D dispatch that may spill over into y
uint gidx() {
  return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * LOCAL_X;
}

// offset of linear element i (row-major over `nd` sizes at P(sz)) with strides at P(st)
int strided(uint i, int nd, int sz, int st) {
  int off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    int s = P(sz + d);
    int c = int(i % uint(s));
    i /= uint(s);
    off += c * P(st + d);
  }
  return off;
}
