#version 450
// Direct 2-D convolution (also 1-D as H = 1) over NCHW tensors. The weight is read through
// strides (P 19..22: per output channel, input channel, kh, kw), so torch's [OC, IC/g, KH,
// KW], ExecuTorch's packed int8 layouts and, with TRANSPOSED, [IC, OC/g, KH, KW] all work.
// Each invocation computes TILE_OC output channels (of one group) x 4 output columns.
// With QUANT, X and W are int8: integer accumulation of (x - x_zp) * w, then
// y = quantize(acc * x_scale * w_scale[oc] + bias, clamped to [lo, hi]).
// P: [N, IC, IH, IW, OC, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups, has_bias, lo, hi,
//     w_oc, w_ic, w_kh, w_kw, x_scale, x_zp, y_inv_scale, y_zp]
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, X)
IN(2, W)
IN(3, BIAS)
#ifdef QUANT
IN(4, WS)
OUT(5, Y, y)
#define ACC int
#else
OUT(4, Y, y)
#define ACC float
#endif

void main() {
  int N = P(0), IC = P(1), IH = P(2), IW = P(3), OC = P(4), OH = P(5), OW = P(6);
  int KH = P(7), KW = P(8), sh = P(9), sw = P(10), ph = P(11), pw = P(12), dh = P(13), dw = P(14);
  int G = P(15), wso = P(19), wsc = P(20), wsh = P(21), wsw = P(22);
  int owb = (OW + 3) / 4, ocb = OC / TILE_OC;
  uint i = gidx();
  if (i >= uint(N * ocb * OH * owb)) return;
  int ow0 = int(i % uint(owb)) * 4; i /= uint(owb);
  int oh = int(i % uint(OH)); i /= uint(OH);
  int oc0 = int(i % uint(ocb)) * TILE_OC;
  int n = int(i / uint(ocb));
  int icg = IC / G, ocg = OC / G, g = oc0 / ocg;
#ifdef QUANT
  int xzp = P(24);
#else
  float xzp = 0.0;
#endif
  ACC acc[TILE_OC][4];
  for (int t = 0; t < TILE_OC; ++t)
    for (int j = 0; j < 4; ++j) acc[t][j] = ACC(0);
#ifdef TRANSPOSED
  int wb = (oc0 - g * ocg) * wso;  // W[ic][oc_in_group][kh][kw]
#else
  int wb = oc0 * wso;
#endif
  for (int c = 0; c < icg; ++c) {
    int ic = g * icg + c;
    int xb = (n * IC + ic) * IH * IW;
#ifdef TRANSPOSED
    int wc = wb + ic * wsc;
#else
    int wc = wb + c * wsc;
#endif
    for (int kh = 0; kh < KH; ++kh) {
#ifdef TRANSPOSED
      int th = oh + ph - kh * dh;
      if (th < 0 || th % sh != 0) continue;
      int ih = th / sh;
#else
      int ih = oh * sh - ph + kh * dh;
#endif
      if (ih < 0 || ih >= IH) continue;
      for (int kw = 0; kw < KW; ++kw) {
        ACC xv[4];
        for (int j = 0; j < 4; ++j) {
#ifdef TRANSPOSED
          int tw = ow0 + j + pw - kw * dw;
          int iw = tw / sw;
          bool ok = tw >= 0 && tw % sw == 0 && iw < IW;
#else
          int iw = (ow0 + j) * sw - pw + kw * dw;
          bool ok = iw >= 0 && iw < IW;
#endif
          xv[j] = ok ? ACC(LD(X, xb + ih * IW + iw)) - xzp : ACC(0);
        }
        int wk = wc + kh * wsh + kw * wsw;
        for (int t = 0; t < TILE_OC; ++t) {
          ACC wv = ACC(LD(W, wk + t * wso));
          for (int j = 0; j < 4; ++j) acc[t][j] += wv * xv[j];
        }
      }
    }
  }
  float lo = PF(17), hi = PF(18);
  for (int t = 0; t < TILE_OC; ++t) {
    int oc = oc0 + t;
    float b = P(16) != 0 ? float(LD(BIAS, oc)) : 0.0;
    int yb = ((n * OC + oc) * OH + oh) * OW;
#ifdef QUANT
    float sc = PF(23) * float(LD(WS, oc));
#endif
    for (int j = 0; j < 4; ++j) {
      if (ow0 + j >= OW) continue;
#ifdef QUANT
      float v = clamp(float(acc[t][j]) * sc + b, lo, hi);
      y[yb + ow0 + j] = CV_Y(clamp(roundEven(v * PF(25)) + float(P(26)), -128.0, 127.0));
#else
      y[yb + ow0 + j] = CV_Y(clamp(acc[t][j] + b, lo, hi));
#endif
    }
  }
}
