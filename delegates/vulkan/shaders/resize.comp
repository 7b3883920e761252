#version 450
// 2-D resize of NCHW planes, one output element per invocation, as torch computes it:
// NEAREST: src = min(floor(dst * scale), in - 1); otherwise bilinear, with align_corners
// (src = dst * scale) or half-pixel centres (src = max((dst + 0.5) * scale - 0.5, 0)).
// P: [NC, IH, IW, OH, OW, scale_h, scale_w, align_corners]
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, X)
OUT(2, Y, y)

void main() {
  int NC = P(0), IH = P(1), IW = P(2), OH = P(3), OW = P(4);
  uint i = gidx();
  if (i >= uint(NC * OH * OW)) return;
  int ow = int(i % uint(OW)), oh = int((i / uint(OW)) % uint(OH)), nc = int(i / uint(OW * OH));
  int xb = nc * IH * IW;
  float sh = PF(5), sw = PF(6);
#ifdef NEAREST
  int ih = min(int(floor(float(oh) * sh)), IH - 1), iw = min(int(floor(float(ow) * sw)), IW - 1);
  y[i] = CV_Y(LD(X, xb + ih * IW + iw));
#else
  float fh = P(7) != 0 ? float(oh) * sh : max((float(oh) + 0.5) * sh - 0.5, 0.0);
  float fw = P(7) != 0 ? float(ow) * sw : max((float(ow) + 0.5) * sw - 0.5, 0.0);
  int h0 = min(int(fh), IH - 1), w0 = min(int(fw), IW - 1);
  int h1 = min(h0 + 1, IH - 1), w1 = min(w0 + 1, IW - 1);
  float lh = fh - float(h0), lw = fw - float(w0);
  float v = (1.0 - lh) * ((1.0 - lw) * float(LD(X, xb + h0 * IW + w0)) +
                          lw * float(LD(X, xb + h0 * IW + w1))) +
            lh * ((1.0 - lw) * float(LD(X, xb + h1 * IW + w0)) +
                  lw * float(LD(X, xb + h1 * IW + w1)));
  y[i] = CV_Y(v);
#endif
}
