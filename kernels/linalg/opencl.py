"""Matrix products on the device: ``mm``, ``bmm``, ``addmm``, ``linear``. One
work-item per output, ``acc = acc + a * b`` over k in order from zero with separate
roundings (``FP_CONTRACT OFF``): the sums of the C++ loops and of the reference
tier's ``ordered_matmul``, bit for bit; then addmm's ``* alpha`` and ``+ self * beta``
as the portable kernel rounds them."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import Launch, contiguous, register_cl, table
from pyruntime.kernels.opencl.device import CL_TYPES

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

SRC = r"""
// out[b, i, j] = sum_t a[b, i, t] * w[b, t, j]  (w's (t, j) strides given: linear reads W^T)
__kernel void matmul(__global T* out, long ooff, __global const T* a, long aoff,
                     __global const T* w, long woff, __global const T* bias, long boff,
                     __global const long* p) {
    long m = p[0], n = p[1], k = p[2];
    long sab = p[3], swb = p[4], swt = p[5], swj = p[6];
    long bsi = p[7], bsj = p[8], mode = p[9];   // bias strides; mode 0 none, 1 add, 2 beta
    long g = get_global_id(0);
    long j = g % n, i = (g / n) % m, b = g / (m * n);
    __global const T* ar = a + aoff + b * sab + i * k;
    __global const T* wc = w + woff + b * swb + j * swj;
    T acc = (T)0;
    for (long t = 0; t < k; ++t) {
        T prod = ar[t] * wc[t * swt];
        acc = acc + prod;
    }
    if (HAS_ALPHA) acc = acc * (T)ALPHA;
    if (mode == 1) acc = acc + bias[boff + i * bsi + j * bsj];
    if (mode == 2) acc = acc + bias[boff + i * bsi + j * bsj] * (T)BETA;
    out[ooff + g] = acc;
}
"""


def _launch(dev, out, a, w, batch, m, n, k, sab, swb, swt, swj, bias=None, bsi=0, bsj=0,
            alpha=1, beta=1):
    t = CL_TYPES[out.dtype]
    mode = 0 if bias is None or beta == 0 else (1 if beta == 1 else 2)
    lit = (lambda v: float(v).hex() + ("f" if t == "float" else ""))  # exact literals
    defs = {"T": t, "HAS_ALPHA": int(alpha != 1), "ALPHA": lit(alpha), "BETA": lit(beta)}
    if batch * m * n == 0:
        return Launch([])
    p = table(dev, [m, n, k, sab, swb, swt, swj, bsi, bsj, mode])
    kern = dev.kernel(SRC, "matmul", defs)
    bb = bias if bias is not None else a
    kern.set_args(out.buf, np.int64(out.off), a.buf, np.int64(a.off), w.buf, np.int64(w.off),
                  bb.buf, np.int64(bb.off), p)
    return Launch([(kern, (batch * m * n,))], [p])


def _ok(out, *ts) -> bool:
    return contiguous(out, *ts) and out.dtype in FLOATS and all(t.dtype == out.dtype for t in ts)


@register_cl("aten::mm.out")
def mm(dev, args):
    a, b, out = args[0], args[1], args[-1]
    if not _ok(out, a, b) or len(a.sizes) != 2 or len(b.sizes) != 2:
        return None
    (m, k), (k2, n) = a.sizes, b.sizes
    if k != k2 or out.sizes != (m, n):
        return None
    return _launch(dev, out, a, b, 1, m, n, k, 0, 0, n, 1)


@register_cl("aten::bmm.out")
def bmm(dev, args):
    a, b, out = args[0], args[1], args[-1]
    if not _ok(out, a, b) or len(a.sizes) != 3 or len(b.sizes) != 3:
        return None
    (B, m, k), (B2, k2, n) = a.sizes, b.sizes
    if B != B2 or k != k2 or out.sizes != (B, m, n):
        return None
    return _launch(dev, out, a, b, B, m, n, k, m * k, k * n, n, 1)


def _bias_strides(bias, m, n):
    """Strides of a bias broadcast over (m, n), or None."""
    s = bias.sizes
    if len(s) == 0:
        return 0, 0
    if len(s) == 1:
        return (0, 1) if s[0] == n else (0, 0) if s[0] == 1 else None
    if len(s) == 2 and s[0] in (1, m) and s[1] in (1, n):
        return (n if s[1] == n else 1) * (s[0] == m), 1 * (s[1] == n)
    return None


@register_cl("aten::addmm.out")
def addmm(dev, args):
    bias, a, b, beta, alpha, out = args[0], args[1], args[2], args[3], args[4], args[-1]
    if not _ok(out, bias, a, b) or len(a.sizes) != 2 or len(b.sizes) != 2:
        return None
    if isinstance(alpha, bool) or isinstance(beta, bool):
        return None
    (m, k), (k2, n) = a.sizes, b.sizes
    st = _bias_strides(bias, m, n)
    if k != k2 or out.sizes != (m, n) or st is None:
        return None
    return _launch(dev, out, a, b, 1, m, n, k, 0, 0, n, 1, bias, *st, alpha=alpha, beta=beta)


@register_cl("aten::linear.out")
def linear(dev, args):
    x, w, bias, out = args[0], args[1], args[2], args[-1]
    ts = (x, w) if bias is None else (x, w, bias)
    if not _ok(out, *ts) or len(w.sizes) != 2 or not x.sizes:
        return None
    k = x.sizes[-1]
    n = w.sizes[0]
    m = x.numel // k if k else 0
    if w.sizes[1] != k or out.sizes != x.sizes[:-1] + (n,):
        return None
    st = (0, 0) if bias is None else _bias_strides(bias, m, n)
    if st is None or (bias is not None and len(bias.sizes) > 1):
        return None
    return _launch(dev, out, x, w, 1, m, n, k, 0, 0, 1, k, bias, *st)
