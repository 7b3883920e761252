"""LLM custom ops: ``llama::`` KV-cache updates, SDPA and the Hadamard transform (spec 7.4).

Layouts follow ExecuTorch's ``extension/llm/custom_ops`` (sequence at dim 1):
query ``[B, S, Hq, D]``, key/value and caches ``[B, max_S, Hkv, D]``, with
grouped-query attention when ``Hq`` is a multiple of ``Hkv`` (query head ``h``
reads kv head ``h // (Hq // Hkv)``).

``custom_sdpa`` semantics, as the C++ kernel in executorch 1.5:

* without a mask, only key positions ``< start_pos + S`` are used and, when
  ``is_causal``, query row ``i`` sees key positions ``<= start_pos + i``;
* with a float mask ``[S, max_S]`` (additive), every key position is used and
  ``start_pos`` plays no part; a mask together with ``is_causal`` is an error;
* ``scale`` defaults to ``1/sqrt(D)``; dropout is ignored (inference kernel);
* half and bfloat16 compute in float32 and round once.

``update_cache`` writes ``value`` into ``cache[:, start_pos:start_pos+S]`` in
place; its ``out`` is a placeholder the C++ kernel never writes, and neither
do we. ``sdpa_with_kv_cache`` updates both caches, then attends over them;
its ``seq_len`` argument is ignored in favour of ``query.size(1)``, as in C++.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.registry import register

F32 = np.dtype(np.float32)


def _invalid(op: str, arg: str, expected: str, got) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"llama::{op}: {arg}: expected {expected}, got {got}")


def is_float(dt) -> bool:
    dt = np.dtype(dt)
    return dt.kind == "f" or dt.name == "bfloat16"


def _check_4d(op: str, **tensors: ETensor) -> None:
    for name, t in tensors.items():
        if t.ndim != 4:
            raise _invalid(op, name, "a 4-D tensor [B, S, H, D]", t.describe())


def _check_cache(op: str, value: ETensor, cache: ETensor, name: str = "cache") -> None:
    _check_4d(op, value=value, **{name: cache})
    if value.dtype != cache.dtype:
        raise _invalid(op, "value", f"the dtype of {name} ({cache.dtype.name})", value.dtype.name)
    for d in (0, 2, 3):
        if value.sizes[d] != cache.sizes[d]:
            raise _invalid(op, "value", f"size {cache.sizes[d]} at dim {d} like {name} "
                           f"{cache.describe()}", value.describe())


def _write_cache(op: str, value: ETensor, cache: ETensor, start_pos: int, name: str = "cache"):
    _check_cache(op, value, cache, name)
    seq, cap = value.sizes[1], cache.sizes[1]
    if not 0 <= start_pos < cap or start_pos + seq > cap:
        raise _invalid(op, "start_pos", f"0 <= start_pos < {cap} and start_pos + {seq} <= {cap} "
                       f"({name} holds {cap} positions)", start_pos)
    cache.numpy()[:, start_pos:start_pos + seq] = value.numpy()


# ---- cache updates ------------------------------------------------------------------------

@register("llama::update_cache.out")
def update_cache_out(value, cache, start_pos, out):
    _write_cache("update_cache.out", value, cache, start_pos)


@register("llama::update_cache_with_indices.out")
def update_cache_with_indices_out(value, cache, start_pos, indices, out):
    """``cache[b, indices[b, s]] = value[b, s]``; ``start_pos`` is unused."""
    op = "update_cache_with_indices.out"
    _check_cache(op, value, cache)
    b, s = value.sizes[:2]
    if indices.shape != (b, s) or indices.dtype != np.int64:
        raise _invalid(op, "indices", f"an int64 tensor [{b}, {s}]", indices.describe())
    idx = indices.numpy()
    cap = cache.sizes[1]
    if idx.size and (idx.min() < 0 or idx.max() >= cap):
        raise _invalid(op, "indices", f"positions in [0, {cap})", f"range [{idx.min()}, {idx.max()}]")
    cache.numpy()[np.arange(b)[:, None], idx] = value.numpy()


# ---- attention -----------------------------------------------------------------------------

def attention(q, k, v, start_pos: int, mask, is_causal: bool, scale) -> np.ndarray:
    """SDPA over ``[B, S, H, D]`` float32 arrays; see the module docstring for the rules."""
    b, s, hq, d = q.shape
    hk = k.shape[2]
    length = k.shape[1] if mask is not None else start_pos + s
    rep = hq // hk
    scale = F32.type(1.0 / math.sqrt(d) if scale is None else scale)
    qt = q.transpose(0, 2, 1, 3).reshape(b, hk, rep * s, d)         # query heads grouped by kv head
    kt = k[:, :length].transpose(0, 2, 3, 1)                         # [B, Hk, D, L]
    vt = v[:, :length].transpose(0, 2, 1, 3)                         # [B, Hk, L, D]
    scores = (qt @ kt).reshape(b, hk, rep, s, length) * scale
    if mask is not None:
        scores = scores + mask
    if is_causal:
        visible = np.arange(length)[None, :] <= start_pos + np.arange(s)[:, None]
        scores = np.where(visible, scores, F32.type(-np.inf))
    with np.errstate(invalid="ignore", over="ignore"):  # a fully masked row is NaN, as in C++
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
    res = probs.reshape(b, hk, rep * s, length) @ vt                 # [B, Hk, rep*S, D]
    return res.reshape(b, hq, s, d).transpose(0, 2, 1, 3)


def _sdpa(op, query, key, value, start_pos, attn_mask, is_causal, scale, out):
    _check_4d(op, query=query, key=key, value=value)
    for name, t in (("key", key), ("value", value)):
        if t.dtype != query.dtype:
            raise _invalid(op, name, f"the dtype of query ({query.dtype.name})", t.dtype.name)
    if not is_float(query.dtype):
        raise _invalid(op, "query", "float32, float16 or bfloat16", query.dtype.name)
    b, s, hq, d = query.sizes
    if key.sizes != value.sizes or key.sizes[0] != b or key.sizes[3] != d:
        raise _invalid(op, "key/value", f"equal shapes [{b}, kv_len, Hkv, {d}]",
                       f"{key.describe()}, {value.describe()}")
    hk, kv_len = key.sizes[2], key.sizes[1]
    if hk == 0 or hq % hk:
        raise _invalid(op, "key", f"a kv head count dividing {hq} query heads", hk)
    mask = None
    if attn_mask is not None:
        if is_causal:
            raise _invalid(op, "attn_mask", "None when is_causal is set", attn_mask.describe())
        if attn_mask.shape != (s, kv_len) or not is_float(attn_mask.dtype):
            raise _invalid(op, "attn_mask", f"a float mask [{s}, {kv_len}]", attn_mask.describe())
        mask = attn_mask.numpy().astype(F32)
    elif not 0 <= start_pos or start_pos + s > kv_len:
        raise _invalid(op, "start_pos", f"0 <= start_pos and start_pos + {s} <= {kv_len} "
                       "(the key length)", start_pos)
    f = [t.numpy().astype(F32, copy=False) for t in (query, key, value)]
    out.write(attention(*f, start_pos, mask, is_causal, scale))


@register("llama::custom_sdpa.out")
def custom_sdpa_out(query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale, out):
    _sdpa("custom_sdpa.out", query, key, value, start_pos, attn_mask, is_causal, scale, out)


@register("llama::sdpa_with_kv_cache.out")
def sdpa_with_kv_cache_out(query, key, value, key_cache, value_cache, start_pos, seq_len,
                           attn_mask, drpout_p, is_causal, scale, out):
    op = "sdpa_with_kv_cache.out"
    if key_cache.shape != value_cache.shape:
        raise _invalid(op, "value_cache", f"the shape of key_cache {list(key_cache.shape)}",
                       value_cache.describe())
    _write_cache(op, key, key_cache, start_pos, "key_cache")
    _write_cache(op, value, value_cache, start_pos, "value_cache")
    _sdpa(op, query, key_cache, value_cache, start_pos, attn_mask, is_causal, scale, out)


# ---- Hadamard transform ----------------------------------------------------------------------

@register("llama::fast_hadamard_transform.out")
def fast_hadamard_transform_out(mat, out):
    """Normalized Walsh-Hadamard transform (Sylvester order) over the last dim, a power of 2."""
    op = "fast_hadamard_transform.out"
    if mat.dtype != out.dtype or not is_float(mat.dtype):
        raise _invalid(op, "out", f"a float tensor of mat's dtype ({mat.dtype.name})", out.dtype.name)
    x = mat.numpy().astype(F32)
    n = x.shape[-1] if x.ndim else 1
    if n and n & (n - 1):
        # ExecuTorch also takes 28 * 2**k via a fixed 28x28 Hadamard matrix; not carried here.
        raise ExecuTorchError(ErrorCode.NotImplemented, f"llama::{op}: mat: last dim must be a "
                              f"power of 2, got {n} (28 * 2**k sizes are not supported)")
    if x.ndim and x.size:
        lead = x.shape[:-1]
        h = 1
        while h < n:  # one butterfly stage per bit: pairs (i, i + h) -> (a + b, a - b)
            y = x.reshape(lead + (n // (2 * h), 2, h))
            a, b = y[..., 0, :], y[..., 1, :]
            x = np.stack((a + b, a - b), axis=-2).reshape(lead + (n,))
            h *= 2
        x = x * F32.type(1.0 / math.sqrt(n))
    out.write(x)
