#version 450
// out[i] = cond[..] != 0 ? a[..] : b[..], all three broadcast to out's contiguous shape.
// P: [n, nd, sizes[8], c_strides[8], a_strides[8], b_strides[8]]
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, C)
IN(2, A)
IN(3, B)
OUT(4, Y, y)

void main() {
  uint i = gidx();
  if (i >= uint(P(0))) return;
  int nd = P(1);
  bool cv = bool(LD(C, strided(i, nd, 2, 10)));
  y[i] = cv ? CV_Y(LD(A, strided(i, nd, 2, 18))) : CV_Y(LD(B, strided(i, nd, 2, 26)));
}
