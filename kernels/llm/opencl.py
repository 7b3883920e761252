"""LLM ops on the device: ``llama::update_cache`` and ``llama::custom_sdpa`` (float32,
layouts and rules of ``kernels/llm/reference.py``). ``start_pos`` may be computed at run time
(``Late``): the kernels take it as an argument and set the plan's error flag when it
is out of range.

``custom_sdpa``: one work-item per (batch, query position, query head) computes its
scores ``(q . k) * scale`` in order over ``D``, the row's max, ``exp(s - max)``, their
sum in order, then each output ``sum_j p_j * v_j`` in order. The reference computes
the same formula with BLAS matrix products and numpy sums, so the two agree within a
few ulp, not bit for bit (docs/NUMERICS.md)."""
from __future__ import annotations

import math

import numpy as np

from pyruntime.kernels.opencl.api import DTensor, Late, Launch, i64, register_cl

F32 = np.dtype(np.float32)

UPDATE = r"""
__kernel void update_cache(__global float* cache, long coff, __global const float* v,
                           long voff, long S, long cap, long HD, long start,
                           __global int* flag, int code) {
    long g = get_global_id(0), e = g % HD, s = (g / HD) % S, b = g / (HD * S);
    if (start < 0 || start + S > cap) { atomic_cmpxchg(flag, 0, code); return; }
    cache[coff + (b * cap + start + s) * HD + e] = v[voff + g];
}
"""

SDPA = r"""
__kernel void sdpa(__global float* out, long ooff, __global const float* q, long qoff,
                   __global const float* k, long koff, __global const float* v, long voff,
                   __global const float* mask, long moff, __global float* scores,
                   long S, long HQ, long HK, long D, long L, long start, float scale,
                   int causal, int masked, __global int* flag, int code) {
    long g = get_global_id(0), h = g % HQ, s = (g / HQ) % S, b = g / (HQ * S);
    long kh = h / (HQ / HK), n = masked ? L : start + S;
    if (!masked && (start < 0 || start + S > L)) { atomic_cmpxchg(flag, 0, code); return; }
    __global const float* qr = q + qoff + ((b * S + s) * HQ + h) * D;
    __global float* sc = scores + g * L;
    float mx = -INFINITY;
    for (long j = 0; j < n; ++j) {
        __global const float* kr = k + koff + ((b * L + j) * HK + kh) * D;
        float dot = qr[0] * kr[0];
        for (long d = 1; d < D; ++d) dot = dot + qr[d] * kr[d];
        float x = dot * scale;
        if (masked) x = x + mask[moff + s * L + j];
        if (causal && j > start + s) x = -INFINITY;
        sc[j] = x;
        mx = (mx != mx || x != x) ? mx + x : (x > mx ? x : mx);
    }
    float total = 0.0f;
    for (long j = 0; j < n; ++j) {
        float e = exp(sc[j] - mx);
        sc[j] = e;
        total = j == 0 ? e : total + e;
    }
    for (long j = 0; j < n; ++j) sc[j] = sc[j] / total;
    __global float* o = out + ooff + ((b * S + s) * HQ + h) * D;
    for (long d = 0; d < D; ++d) {
        float acc = 0.0f;
        for (long j = 0; j < n; ++j) {
            float t = sc[j] * v[voff + ((b * L + j) * HK + kh) * D + d];
            acc = j == 0 ? t : acc + t;
        }
        o[d] = acc;
    }
}
"""


def _f32_4d(*ts) -> bool:
    return all(isinstance(t, DTensor) and t.dtype == F32 and len(t.sizes) == 4
               and t.contiguous() for t in ts)


def _start(start_pos, kernel, pos: int, launch: Launch):
    """``start_pos`` as a kernel argument: its value, or set at each enqueue (Late)."""
    if isinstance(start_pos, Late):
        launch.late.append((kernel, pos, start_pos))
        return np.int64(0)
    return np.int64(start_pos)


@register_cl("llama::update_cache.out", late=True)
def update_cache(dev, args):
    value, cache, start_pos = args[0], args[1], args[2]
    if not _f32_4d(value, cache) or cache.const or value.sizes[0] != cache.sizes[0] \
            or value.sizes[2:] != cache.sizes[2:]:
        return None
    if not isinstance(start_pos, (int, Late)) or isinstance(start_pos, bool):
        return None
    if value.numel == 0:
        return Launch([])
    B, S, H, D = value.sizes
    cap = cache.sizes[1]
    launch = Launch([])
    k = dev.kernel(UPDATE, "update_cache")
    k.set_args(cache.buf, *i64(cache.off), value.buf, *i64(value.off, S, cap, H * D),
               _start(start_pos, k, 7, launch),
               *dev.check(f"start_pos: expected 0 <= start_pos and start_pos + {S} <= {cap} "
                          f"(the cache holds {cap} positions)"))
    launch.steps.append((k, (value.numel,)))
    return launch


@register_cl("llama::custom_sdpa.out", late=True)
def custom_sdpa(dev, args):
    q, k, v, start_pos, mask, _dropout, is_causal, scale, out = args[:8] + [args[-1]]
    if not _f32_4d(q, k, v, out) or out.sizes != q.sizes or k.sizes != v.sizes:
        return None
    B, S, HQ, D = q.sizes
    L, HK = k.sizes[1], k.sizes[2]
    if k.sizes[0] != B or k.sizes[3] != D or HK == 0 or HQ % HK or D == 0 or L == 0:
        return None
    if mask is not None and (is_causal or not isinstance(mask, DTensor) or mask.dtype != F32
                             or mask.sizes != (S, L) or not mask.contiguous()):
        return None
    if not isinstance(start_pos, (int, Late)) or isinstance(start_pos, bool):
        return None
    if q.numel == 0:
        return Launch([])
    sc = F32.type(1.0 / math.sqrt(D) if scale is None else scale)
    scratch = dev.buffer(B * S * HQ * L * 4, None, "custom_sdpa scores")
    launch = Launch([], [scratch])
    kern = dev.kernel(SDPA, "sdpa")
    m = mask if mask is not None else q  # any buffer: unread without a mask
    kern.set_args(out.buf, *i64(out.off), q.buf, *i64(q.off), k.buf, *i64(k.off), v.buf,
                  *i64(v.off), m.buf, *i64(m.off if mask is not None else 0), scratch,
                  *i64(S, HQ, HK, D, L), _start(start_pos, kern, 16, launch), sc,
                  np.int32(bool(is_causal)), np.int32(mask is not None),
                  *dev.check(f"start_pos: expected 0 <= start_pos and start_pos + {S} <= {L} "
                             "(the key length)"))
    launch.steps.append((kern, (B * S * HQ,)))
    return launch
