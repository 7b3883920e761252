#version 450
// 2-D max / average pooling over NCHW, one output element per invocation.
// P: [NC, IH, IW, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, count_include_pad, divisor]
// MAX also writes the flat argmax (ih * IW + iw) per element when WITH_INDICES.
#include "common.glsl"
layout(local_size_x = LOCAL_X) in;
IN(1, X)
OUT(2, Y, y)
#ifdef WITH_INDICES
OUT(3, I, idx)
#endif

void main() {
  int NC = P(0), IH = P(1), IW = P(2), OH = P(3), OW = P(4), KH = P(5), KW = P(6);
  int sh = P(7), sw = P(8), ph = P(9), pw = P(10), dh = P(11), dw = P(12);
  uint i = gidx();
  if (i >= uint(NC * OH * OW)) return;
  int ow = int(i % uint(OW)), oh = int((i / uint(OW)) % uint(OH)), nc = int(i / uint(OW * OH));
  int xb = nc * IH * IW;
  int h0 = oh * sh - ph, w0 = ow * sw - pw;
#ifdef MAX
  float best = -1.0 / 0.0;
  int arg = -1;
  for (int kh = 0; kh < KH; ++kh) {
    int ih = h0 + kh * dh;
    if (ih < 0 || ih >= IH) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int iw = w0 + kw * dw;
      if (iw < 0 || iw >= IW) continue;
      float v = float(LD(X, xb + ih * IW + iw));
      if (v > best || isnan(v) || arg < 0) { best = v; arg = ih * IW + iw; }
      if (isnan(v)) { kh = KH; break; }
    }
  }
  y[i] = CV_Y(best);
#ifdef WITH_INDICES
  idx[i] = arg;
#endif
#else
  float s = 0.0;
  int cnt = 0;
  int hs = max(h0, 0), ws = max(w0, 0);
  int he = min(h0 + KH, IH + ph), we = min(w0 + KW, IW + pw);
  int pool = (he - h0) * (we - w0);
  for (int ih = hs; ih < min(h0 + KH, IH); ++ih)
    for (int iw = ws; iw < min(w0 + KW, IW); ++iw) { s += float(LD(X, xb + ih * IW + iw)); ++cnt; }
  int div = P(14) != 0 ? P(14) : (P(13) != 0 ? pool : cnt);
  y[i] = CV_Y(s / float(max(div, 1)));
#endif
}
