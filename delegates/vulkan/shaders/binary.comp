#version 450
// out[i] = f(a[..], b[..]) with broadcasting: out is contiguous over `nd` sizes, a and b are
// read through their own (0 for broadcast) strides; b may be a scalar parameter.
// P: [n, nd, alpha, b_is_scalar, b_scalar, sizes[8], a_strides[8], b_strides[8],
//     (QADD:) a_scale, a_zp, b_scale, b_zp, 1 / y_scale, y_zp]
// QADD: int8 a + alpha * b, dequantized, added in float, requantized.
// AFFINE (with OP_MUL): a * b + c, c read with b's strides, rounded once.
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, A)
IN(2, B)
#ifdef AFFINE
IN(3, C)
OUT(4, Y, y)
#else
OUT(3, Y, y)
#endif

#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3
#define OP_POW 4
#define OP_MAX 5
#define OP_MIN 6
#define OP_EQ 7
#define OP_NE 8
#define OP_LT 9
#define OP_LE 10
#define OP_GT 11
#define OP_GE 12
#define OP_AND 13
#define OP_OR 14
#define OP_FLOORDIV 15
#define OP_TRUNCDIV 16
#define OP_REM 17
#define OP_XOR 18

#ifdef INT_CT
#define SCALAR(w) CT(w)
#else
#define SCALAR(w) CT(intBitsToFloat(w))
#endif

void main() {
  uint i = gidx();
  if (i >= uint(P(0))) return;
  int nd = P(1);
#ifdef QADD
  float qa = (float(LD(A, strided(i, nd, 5, 13))) - float(P(30))) * PF(29);
  float qb = (float(LD(B, strided(i, nd, 5, 21))) - float(P(32))) * PF(31);
  y[i] = CV_Y(clamp(roundEven((qa + PF(2) * qb) * PF(33)) + float(P(34)), -128.0, 127.0));
  return;
#endif
  CT av = CT(LD(A, strided(i, nd, 5, 13)));
  CT bv = P(3) != 0 ? SCALAR(P(4)) : CT(LD(B, strided(i, nd, 5, 21)));
  CT r;
#if OP == OP_ADD
  r = av + SCALAR(P(2)) * bv;
#elif OP == OP_SUB
  r = av - SCALAR(P(2)) * bv;
#elif OP == OP_MUL
  r = av * bv;
#ifdef AFFINE
  r += CT(LD(C, strided(i, nd, 5, 21)));
#endif
#elif OP == OP_DIV
  r = CT(float(av) / float(bv));
#elif OP == OP_POW
  float fa = float(av), fb = float(bv);
  float p = fb == 2.0 ? fa * fa : pow(abs(fa), fb);
  if (fa < 0.0 && fb != 2.0) p = floor(fb) != fb ? intBitsToFloat(0x7fc00000) : (mod(fb, 2.0) == 1.0 ? -p : p);
  r = CT(p);
#elif OP == OP_MAX
  r = max(av, bv);
#elif OP == OP_MIN
  r = min(av, bv);
#elif OP == OP_EQ
  r = CT(av == bv);
#elif OP == OP_NE
  r = CT(av != bv);
#elif OP == OP_LT
  r = CT(av < bv);
#elif OP == OP_LE
  r = CT(av <= bv);
#elif OP == OP_GT
  r = CT(av > bv);
#elif OP == OP_GE
  r = CT(av >= bv);
#elif OP == OP_AND
  r = CT(av != CT(0) && bv != CT(0));
#elif OP == OP_OR
  r = CT(av != CT(0) || bv != CT(0));
#elif OP == OP_XOR
  r = CT((av != CT(0)) != (bv != CT(0)));
#elif OP == OP_FLOORDIV
  r = CT(floor(float(av) / float(bv)));
#elif OP == OP_TRUNCDIV
  r = CT(trunc(float(av) / float(bv)));
#elif OP == OP_REM
  float fa = float(av), fb = float(bv);
  r = CT(fa - fb * floor(fa / fb));
#endif
  y[i] = CV_Y(r);
}
