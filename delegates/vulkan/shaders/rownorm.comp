#version 450
// Row-wise ops, one workgroup of 64 per row: rows are `outer x inner`, a row has R
// elements `inner` apart (row r starts at (r / inner) * R * inner + r % inner).
//   OP 0 layer_norm: y = (x - mean) * rstd * w + b; also writes mean and rstd per row
//   OP 1 rms_norm:   y = x * rsqrt(mean(x^2) + eps) * w
//   OP 2 softmax, OP 3 log_softmax
//   OP 4 group_norm: rows are (n, group); weight/bias per channel c = g * (C/G) + k / HW
// P: [rows, R, inner, eps, has_w, has_b, HW, G]
#include "common.glsl"
layout(local_size_x = 64) in;
IN(1, X)
IN(2, W)
IN(3, B)
OUT(4, Y, y)
OUT(5, MEAN, mean_out)
OUT(6, RSTD, rstd_out)

shared float red[64];

float reduce_sum(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

float reduce_max(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (t < s) red[t] = max(red[t], red[t + s]);
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  int row = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
  if (row >= P(0)) return;
  int R = P(1), inner = P(2);
  int base = (row / inner) * R * inner + row % inner;
  uint t = gl_LocalInvocationID.x;
#if OP == 0 || OP == 1 || OP == 4
  float s = 0.0;
  for (int k = int(t); k < R; k += 64) {
    float v = float(LD(X, base + k * inner));
    s += OP == 1 ? v * v : v;
  }
  float mu = OP != 1 ? reduce_sum(s) / float(R) : 0.0;
  float q = 0.0;
  if (OP != 1) {
    for (int k = int(t); k < R; k += 64) {
      float d = float(LD(X, base + k * inner)) - mu;
      q += d * d;
    }
    q = reduce_sum(q) / float(R);
  } else {
    q = reduce_sum(s) / float(R);
  }
  float rstd = inversesqrt(q + PF(3));
  for (int k = int(t); k < R; k += 64) {
    float v = (float(LD(X, base + k * inner)) - mu) * rstd;
#if OP == 4
    int wk = (row % P(7)) * (R / P(6)) + k / P(6);
#else
    int wk = k;
#endif
    if (P(4) != 0) v *= float(LD(W, wk));
    if (P(5) != 0) v += float(LD(B, wk));
    y[base + k * inner] = CV_Y(v);
  }
  if (t == 0u && OP != 1) { mean_out[row] = CV_MEAN(mu); rstd_out[row] = CV_RSTD(rstd); }
#else
  float m = -1.0 / 0.0;
  for (int k = int(t); k < R; k += 64) m = max(m, float(LD(X, base + k * inner)));
  m = reduce_max(m);
  float s = 0.0;
  for (int k = int(t); k < R; k += 64) s += exp(float(LD(X, base + k * inner)) - m);
  s = reduce_sum(s);
  for (int k = int(t); k < R; k += 64) {
    float v = float(LD(X, base + k * inner)) - m;
#if OP == 2
    y[base + k * inner] = CV_Y(exp(v) / s);
#else
    y[base + k * inner] = CV_Y(v - log(s));
#endif
  }
#endif
}
