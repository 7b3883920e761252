#version 450
// y[o, j, k] = X[o, IDX[j] (wrapped if negative, clamped into range), k]: embedding,
// index_select and index.Tensor with one index tensor. y is contiguous [outer, J, inner].
// P: [n, J, inner, xdim]
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, X)
IN(2, IDX)
OUT(3, Y, y)

void main() {
  uint i = gidx();
  if (i >= uint(P(0))) return;
  int J = P(1), inner = P(2), xdim = P(3);
  int k = int(i % uint(inner));
  int j = int((i / uint(inner)) % uint(J));
  int o = int(i / uint(inner * J));
  int r = int(LD(IDX, j));
  r = clamp(r < 0 ? r + xdim : r, 0, xdim - 1);
  y[i] = CV_Y(LD(X, (o * xdim + r) * inner + k));
}
