#version 450
// Batched C = alpha * A @ B + beta * bias, then clamp: every operand read through strides,
// so one shader serves linear (B = W^T), mm, bmm, addmm and broadcast matmul.
// Each invocation computes a 4x4 block of C; a workgroup of 8x8 invocations covers 32x32.
// P: [M, N, K, nb1, a_off, a_b0, a_b1, a_m, a_k, b_off, b_b0, b_b1, b_k, b_n,
//     has_bias, bias_b0, bias_b1, bias_m, bias_n, alpha, beta, lo, hi]
//     (QUANT:) x_scale, x_zp, 1 / y_scale, y_zp
// batch index z = b0 * nb1 + b1; C is contiguous [batch, M, N].
// WSCALE: C[.., n] *= WS[n] (int8 weights with per-channel scales, float A).
// QUANT: A and B int8, integer accumulation of (a - x_zp) * b, then per column n
// y = quantize(clamp(acc * x_scale * WS[n] + bias[n], lo, hi)).
#include "common.glsl"
layout(local_size_x = 8, local_size_y = 8) in;
IN(1, A)
IN(2, B)
IN(3, BIAS)
#if defined(QUANT) || defined(WSCALE)
IN(4, WS)
OUT(5, Y, y)
#else
OUT(4, Y, y)
#endif
#ifdef QUANT
#define V4 ivec4
#define S1 int
#else
#define V4 vec4
#define S1 float
#endif

void main() {
  int M = P(0), N = P(1), K = P(2), nb1 = P(3);
  int n0 = int(gl_GlobalInvocationID.x) * 4, m0 = int(gl_GlobalInvocationID.y) * 4;
  if (n0 >= N || m0 >= M) return;
  int z = int(gl_GlobalInvocationID.z), z0 = z / nb1, z1 = z % nb1;
  int ab = P(4) + z0 * P(5) + z1 * P(6), am = P(7), ak = P(8);
  int bb = P(9) + z0 * P(10) + z1 * P(11), bk = P(12), bn = P(13);
  int a0 = ab + min(m0, M - 1) * am, a1 = ab + min(m0 + 1, M - 1) * am;
  int a2 = ab + min(m0 + 2, M - 1) * am, a3 = ab + min(m0 + 3, M - 1) * am;
  int b0 = bb + min(n0, N - 1) * bn, b1 = bb + min(n0 + 1, N - 1) * bn;
  int b2 = bb + min(n0 + 2, N - 1) * bn, b3 = bb + min(n0 + 3, N - 1) * bn;
#ifdef QUANT
  int xzp = P(24);
#else
  float xzp = 0.0;
#endif
  V4 c0 = V4(0), c1 = V4(0), c2 = V4(0), c3 = V4(0);
  for (int k = 0; k < K; ++k) {
    int ka = k * ak, kb = k * bk;
    V4 bv = V4(LD(B, b0 + kb), LD(B, b1 + kb), LD(B, b2 + kb), LD(B, b3 + kb));
    c0 += (S1(LD(A, a0 + ka)) - xzp) * bv;
    c1 += (S1(LD(A, a1 + ka)) - xzp) * bv;
    c2 += (S1(LD(A, a2 + ka)) - xzp) * bv;
    c3 += (S1(LD(A, a3 + ka)) - xzp) * bv;
  }
  mat4 c = mat4(vec4(c0), vec4(c1), vec4(c2), vec4(c3));
  float alpha = PF(19), beta = PF(20), lo = PF(21), hi = PF(22);
  int cb = z * M * N;
  bool has_bias = P(14) != 0;
  int bias0 = z0 * P(15) + z1 * P(16), bsm = P(17), bsn = P(18);
  for (int i = 0; i < 4; ++i) {
    int m = m0 + i;
    if (m >= M) break;
    for (int j = 0; j < 4; ++j) {
      int n = n0 + j;
      if (n >= N) break;
      float v = alpha * c[i][j];
#ifdef QUANT
      v *= PF(23) * float(LD(WS, n));
#elif defined(WSCALE)
      v *= float(LD(WS, n));
#endif
      if (has_bias) v += beta * float(LD(BIAS, bias0 + m * bsm + n * bsn));
      v = clamp(v, lo, hi);
#ifdef QUANT
      y[cb + m * N + n] = CV_Y(clamp(roundEven(v * PF(25)) + float(P(26)), -128.0, 127.0));
#else
      y[cb + m * N + n] = CV_Y(v);
#endif
    }
  }
}
