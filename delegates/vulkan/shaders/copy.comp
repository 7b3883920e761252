#version 450
// Strided copy with a type conversion: views, permutes, slices, cat pieces, expand, pad.
//   y[out_off + sum(c_d * os_d)] = X[in_off + sum(c_d * is_d)] for every coordinate c
//   of `sizes` (row-major, i = linear index).
// P: [n, nd, in_off, out_off, sizes[8], in_strides[8], out_strides[8]]
// With FILL defined there is no input: y[...] = value + i * step (P(2), P(12): float
// bits, or ints).
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
#ifdef FILL
OUT(1, Y, y)
#else
IN(1, X)
OUT(2, Y, y)
#endif

void main() {
  uint i = gidx();
  if (i >= uint(P(0))) return;
  int nd = P(1);
  int o = P(3) + strided(i, nd, 4, 20);
#ifdef FILL
#ifdef INT_CT
  y[o] = CV_Y(P(2) + int(i) * P(12));  // P(12): the step of arange (0 for a fill)
#else
  y[o] = CV_Y(PF(2) + float(i) * PF(12));
#endif
#elif defined(TO_BOOL)
  y[o] = CV_Y(bool(LD(X, P(2) + strided(i, nd, 4, 12))));
#else
  y[o] = CV_Y(LD(X, P(2) + strided(i, nd, 4, 12)));
#endif
}
