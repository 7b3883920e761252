#version 450
// Rotary embedding on interleaved (real, imag) pairs of the last dim:
//   y[2i]   = x[2i] * cos - x[2i+1] * sin,   y[2i+1] = x[2i] * sin + x[2i+1] * cos
// x: [B, S, H, 2 * D2]; cos/sin: [S, D2] (or [S, H, D2] when P(4) != 0).
// P: [pairs, S, H, D2, per_head]
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, X)
IN(2, COS)
IN(3, SIN)
OUT(4, Y, y)

void main() {
  uint p = gidx();
  if (p >= uint(P(0))) return;
  int S = P(1), H = P(2), D2 = P(3);
  int i = int(p % uint(D2));
  int h = int((p / uint(D2)) % uint(H));
  int s = int((p / uint(D2 * H)) % uint(S));
  int f = P(4) != 0 ? (s * H + h) * D2 + i : s * D2 + i;
  float c = float(LD(COS, f)), sn = float(LD(SIN, f));
  float xr = float(LD(X, 2 * int(p))), xi = float(LD(X, 2 * int(p) + 1));
  y[2 * p] = CV_Y(xr * c - xi * sn);
  y[2 * p + 1] = CV_Y(xr * sn + xi * c);
}
