#version 450
// out[i] = f(in[i]) over n contiguous elements; OP selects f.
// P: [n, a, b, zp, qmin, qmax, zp_out]  (a, b: float parameters: clamp bounds, slopes,
//    exponents; quantization: a = scale or 1 / scale, b = 1 / output scale)
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, X)
OUT(2, Y, y)

#define OP_COPY 0
#define OP_RELU 1
#define OP_CLAMP 2
#define OP_SIGMOID 3
#define OP_TANH 4
#define OP_GELU 5
#define OP_GELU_TANH 6
#define OP_SILU 7
#define OP_HARDSWISH 8
#define OP_HARDSIGMOID 9
#define OP_EXP 10
#define OP_LOG 11
#define OP_SQRT 12
#define OP_RSQRT 13
#define OP_NEG 14
#define OP_ABS 15
#define OP_SIN 16
#define OP_COS 17
#define OP_LEAKY 18
#define OP_ELU 19
#define OP_POW 20
#define OP_FLOOR 21
#define OP_CEIL 22
#define OP_ROUND 23
#define OP_SQUARE 24
#define OP_RECIP 25
#define OP_NOT 26
#define OP_SIGN 27
#define OP_ERF 28
#define OP_QUANT 30
#define OP_DEQUANT 31
#define OP_QRELU 32
#define OP_HARDSHRINK 33
#define OP_LOG10 34
#define OP_BITNOT 35

float erf_approx(float v) {
  // Abramowitz-Stegun 7.1.26 is too coarse for fp32 parity; use erf via tanh-free series
  float a = abs(v);
  float t = 1.0 / (1.0 + 0.5 * a);
  float r = t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
            t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
            t * (-0.82215223 + t * 0.17087277)))))))));
  return v >= 0.0 ? 1.0 - r : r - 1.0;
}

void main() {
  uint i = gidx();
  if (i >= uint(P(0))) return;
  CT v = CT(LD(X, i));
  float f = float(LD(X, i));
  CT a = CT(PF(1)), b = CT(PF(2));
  CT r;
#if OP == OP_COPY
  r = v;
#elif OP == OP_RELU
  r = max(v, CT(0));
#elif OP == OP_CLAMP
  r = min(max(v, a), b);
#elif OP == OP_SIGMOID
  r = CT(1.0 / (1.0 + exp(-f)));
#elif OP == OP_TANH
  r = CT(tanh(clamp(f, -15.0, 15.0)));
#elif OP == OP_GELU
  r = CT(0.5 * f * (1.0 + erf_approx(f * 0.70710678118654752)));
#elif OP == OP_GELU_TANH
  r = CT(0.5 * f * (1.0 + tanh(clamp(0.79788456080286536 * (f + 0.044715 * f * f * f), -15.0, 15.0))));
#elif OP == OP_SILU
  r = CT(f / (1.0 + exp(-f)));
#elif OP == OP_HARDSWISH
  r = v * min(max(v + CT(3), CT(0)), CT(6)) / CT(6);
#elif OP == OP_HARDSIGMOID
  r = min(max(v + CT(3), CT(0)), CT(6)) / CT(6);
#elif OP == OP_EXP
  r = CT(exp(f));
#elif OP == OP_LOG
  r = CT(log(f));
#elif OP == OP_SQRT
  r = CT(sqrt(f));
#elif OP == OP_RSQRT
  r = CT(inversesqrt(f));
#elif OP == OP_NEG
  r = -v;
#elif OP == OP_ABS
  r = abs(v);
#elif OP == OP_SIN
  r = CT(sin(f));
#elif OP == OP_COS
  r = CT(cos(f));
#elif OP == OP_LEAKY
  r = v >= CT(0) ? v : v * a;
#elif OP == OP_ELU
  r = v > CT(0) ? v : CT(PF(1) * (exp(f) - 1.0));
#elif OP == OP_POW
  float e = PF(1);
  if (e == 2.0) {
    r = CT(f * f);
  } else {
    float p = pow(abs(f), e);
    if (f < 0.0) p = floor(e) != e ? intBitsToFloat(0x7fc00000) : (mod(e, 2.0) == 1.0 ? -p : p);
    r = CT(p);
  }
#elif OP == OP_FLOOR
  r = floor(v);
#elif OP == OP_CEIL
  r = ceil(v);
#elif OP == OP_ROUND
  r = roundEven(v);
#elif OP == OP_SQUARE
  r = v * v;
#elif OP == OP_RECIP
  r = CT(1) / v;
#elif OP == OP_NOT
  r = CT(v == CT(0));
#elif OP == OP_SIGN
  r = sign(v);
#elif OP == OP_ERF
  r = CT(erf_approx(f));
#elif OP == OP_HARDSHRINK
  r = abs(f) > PF(1) ? v : CT(0);
#elif OP == OP_LOG10
  r = CT(log2(f) * 0.30102999566398120);
#elif OP == OP_BITNOT
  r = CT(~int(v));
#elif OP == OP_QUANT
  r = CT(clamp(roundEven(f * PF(1)) + float(P(3)), float(P(4)), float(P(5))));
#elif OP == OP_DEQUANT
  r = CT((f - float(P(3))) * PF(1));
#elif OP == OP_QRELU
  float d = max((f - float(P(3))) * PF(1), 0.0);
  r = CT(clamp(roundEven(d * PF(2)) + float(P(6)), -128.0, 127.0));
#endif
  y[i] = CV_Y(r);
}
