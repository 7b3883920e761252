"""Numpy references shared by the bridges that run a graph themselves (NativeBackend, MLX):
the ops ExecuTorch's portable library has no kernel for."""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))
    return e / np.sum(e, axis=axis, keepdims=True)


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    """softmax(Q K^T * scale + mask) V, as torch's math reference (dropout must be 0)."""
    if dropout_p:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"scaled_dot_product_attention with dropout_p "
                              f"{dropout_p} (inference graphs have 0)")
    q, k, v = (np.asarray(t) for t in (query, key, value))
    dt = q.dtype
    q, k, v = (t.astype(np.float32, copy=False) for t in (q, k, v))
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, rep, axis=-3), np.repeat(v, rep, axis=-3)
    s = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    w = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(s)
    L, S_ = q.shape[-2], k.shape[-2]
    if is_causal:
        w = np.where(np.tril(np.ones((L, S_), bool)), w, -np.inf)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        w = np.where(m, w, -np.inf) if m.dtype == np.bool_ else w + m.astype(np.float32)
    return np.matmul(softmax(w.astype(np.float32)), v).astype(dt, copy=False)
