// Shared by every pyruntime Vulkan shader.
//
// Binding 0 is the parameter block (a uniform buffer of ints; floats are bit-cast).
// Tensors a shader reads are uniform texel buffers (IN: texelFetch converts fp16, int8
// and uint8 to 32-bit for free, and on lavapipe it is ten times faster than an SSBO
// load); tensors it writes are storage buffers (OUT). The host passes, per tensor
// NAME, S_NAME (samplerBuffer, isamplerBuffer or usamplerBuffer) for inputs and T_NAME
// (float, float16_t, int, int8_t, uint8_t) for outputs, and CV_NAME, the conversion a
// store to NAME goes through: T_NAME, or f16rne for float16_t. CT is the compute type of
// elementwise math (float or int; float16 tensors are computed on in float).
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

// float -> float16 rounded to nearest, ties to even, as torch and numpy cast. A plain
// float16_t(v) conversion has an implementation-defined rounding mode (lavapipe truncates
// a float32 texel converted straight to float16: every fp32 -> fp16 cast). The bits are
// built here, then widened exactly (unpackHalf2x16), so the final float16_t() conversion
// is exact whatever its rounding mode.
float16_t f16rne(float v) {
  uint x = floatBitsToUint(v);
  uint sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu, h;
  if (ax > 0x7f800000u) {
    h = 0x7e00u;  // NaN
  } else if (ax >= 0x477ff000u) {
    h = 0x7c00u;  // at or beyond 65520 (and inf): inf
  } else if (ax < 0x38800000u) {
    h = uint(roundEven(uintBitsToFloat(ax) * 16777216.0));  // subnormal: |v| * 2^24, exact
  } else {
    uint r = ax - 0x38000000u, rest = r & 0x1fffu;
    h = r >> 13;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) h += 1u;
  }
  return float16_t(unpackHalf2x16(sign | h).x);
}
float16_t f16rne(float16_t v) { return v; }
float16_t f16rne(int v) { return f16rne(float(v)); }
float16_t f16rne(uint v) { return f16rne(float(v)); }
float16_t f16rne(bool v) { return float16_t(v ? 1.0 : 0.0); }

// a dispatch that names no conversion stores through the plain constructor
#if defined(T_Y) && !defined(CV_Y)
#define CV_Y T_Y
#endif
#if defined(T_MEAN) && !defined(CV_MEAN)
#define CV_MEAN T_MEAN
#define CV_RSTD T_RSTD
#endif

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
