#version 450
// Reduce over a set of dims: one invocation per output element loops over R inputs.
// The kept dims (row-major over the output) and the reduced dims are each coalesced.
// P: [n_out, R, nd_keep, nd_red, keep_sizes[4], keep_strides[4], red_sizes[4], red_strides[4],
//     scale]       OP: 0 sum, 1 mean (sum * scale), 2 max, 3 min, 4 argmax, 5 argmin,
//                      6 any, 7 all, 8 prod
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, X)
OUT(2, Y, y)

void main() {
  uint i = gidx();
  if (i >= uint(P(0))) return;
  int R = P(1);
  int base = strided(i, P(2), 4, 8);
  float acc = OP == 2 || OP == 4 ? -1.0 / 0.0 : (OP == 3 || OP == 5 ? 1.0 / 0.0 : (OP == 7 || OP == 8 ? 1.0 : 0.0));
  int arg = 0;
  for (int r = 0; r < R; ++r) {
    float v = float(LD(X, base + strided(uint(r), P(3), 12, 16)));
#if OP == 0 || OP == 1
    acc += v;
#elif OP == 2
    acc = isnan(v) || isnan(acc) ? v + acc : max(acc, v);
#elif OP == 3
    acc = isnan(v) || isnan(acc) ? v + acc : min(acc, v);
#elif OP == 4
    if (v > acc || (isnan(v) && !isnan(acc))) { acc = v; arg = r; }
#elif OP == 5
    if (v < acc || (isnan(v) && !isnan(acc))) { acc = v; arg = r; }
#elif OP == 6
    acc = max(acc, float(v != 0.0));
#elif OP == 7
    acc = min(acc, float(v != 0.0));
#elif OP == 8
    acc *= v;
#endif
  }
#if OP == 1
  acc *= PF(20);
#endif
#if OP == 4 || OP == 5
  y[i] = CV_Y(arg);
#else
  y[i] = CV_Y(acc);
#endif
}
