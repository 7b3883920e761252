"""More LLM custom ops (spec 7.4): quantized SDPA, the gated delta rule, the
quantized MoE FFN, ``llama::fallback`` and ``preprocess::tile_crop``.

Semantics follow ExecuTorch 1.5's C++ kernels (``extension/llm/custom_ops``):

* ``custom_quantized_sdpa``: ``custom_sdpa`` (see ``kernels.llm``) over int8
  q/k/v with per-token asymmetric qparams (``x = (q - zero_point) * scale``;
  scales float32 and zero points int8, shaped like the tensor with a last dim
  of 1); the result is float32. ``is_seq_at_dim_2`` selects the ``[B, H, S, D]``
  layout (default ``[B, S, H, D]``). Float q/k/v are plain ``custom_sdpa``.
* ``gated_delta_rule`` (alias ``channelwise_gated_delta_rule``): layout
  ``[B, H, T, D]``; per state head and token, with ``decay`` already
  exponentiated (per key channel ``[B, Hs, T, K]`` or scalar ``[B, Hs, T]``)::

      S = decay * S;  delta = beta * (v - S^T k);  S += k delta^T;  o = S^T q

  Query head ``h`` reads state head ``h // (H // Hs)``. float32 only. The C++
  prefill route (T > 1) evaluates the same recurrence chunkwise, so results
  agree to float rounding, not bit for bit.
* ``quantized_moe_ffn``: router ``x @ gate_weight^T``; ``sigmoid`` scoring picks
  the top-k of ``sigmoid(s) + expert_bias`` (ties: lower expert index) and
  weights the unbiased sigmoids renormalised to ``route_scale``; ``softmax``
  picks the top-k raw scores and softmaxes them. Each chosen expert runs a
  SwiGLU FFN ``(silu(x W1^T) * (x W3^T)) W2^T`` with ``W13 = [W1; W3]`` ``[2F, D]``
  and ``W2`` ``[D, F]`` stored as torchao "universal" packed blobs (below).
* ``fallback``: a copy (``output`` takes ``input``'s shape; same dtype).
* ``tile_crop``: ``[C, H, W]`` -> ``[(H/t)*(W/t), C, t, t]``, tiles row-major.

torchao universal packing (``weight_packing.h``, nr=8, kr=16, sr=2): a 64-byte
header, then per block of 8 output rows (rows padded to a multiple of 8) and
per group along K: for every 16 columns of the group, 128 values ordered
``(half of the 16, row, 8 values)``, stored as int8 (8-bit) or as ``v + 8``
nibbles where byte ``i`` of each 32-value run holds value ``i`` (low) and
``i + 16`` (high); then the 8 rows' float32 scales and 8 int32 value sums.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.llm.reference import is_float, attention
from pyruntime.kernels.registry import register

F32 = np.dtype(np.float32)
I8 = np.dtype(np.int8)
FLT_MIN = np.finfo(np.float32).tiny
HEADER_BYTES = 64
NR, KR = 8, 16


def _invalid(op: str, arg: str, expected: str, got) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{op}: {arg}: expected {expected}, got {got}")


def _need(ok: bool, op: str, arg: str, expected: str, got) -> None:
    if not ok:
        raise _invalid(op, arg, expected, got)


def _check_dtype(op: str, dt, **tensors) -> None:
    for name, t in tensors.items():
        _need(t.dtype == dt, op, name, f"a {np.dtype(dt).name} tensor", t.describe())


# ---- quantized SDPA ---------------------------------------------------------------------

QPARAMS = ("q", "k", "v")


def check_quantized_sdpa(op, query, key, value, start_pos, attn_mask, is_causal, qparams,
                         is_seq_at_dim_2, out):
    """Validate ``custom_quantized_sdpa``'s arguments; ``qparams`` is the six optional
    tensors in schema order (q/k/v zero points and scales)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _need(t.ndim == 4, op, name, "a 4-D tensor", t.describe())
        _need(t.dtype == query.dtype, op, name, f"the dtype of query ({query.dtype.name})",
              t.dtype.name)
    quantized = query.dtype == I8
    _need(quantized or is_float(query.dtype), op, "query",
          "int8, float32, float16 or bfloat16", query.dtype.name)
    want = F32 if quantized else query.dtype
    _need(out.dtype == want, op, "out", f"a {want.name} tensor (query is {query.dtype.name})",
          out.describe())
    _need(attn_mask is None or not is_causal, op, "attn_mask", "None when is_causal is set",
          "a mask")
    if quantized:
        for name, t, zp, sc in zip(QPARAMS, (query, key, value), qparams[0::2], qparams[1::2]):
            _need(zp is not None and sc is not None, op, f"{name}_zero_points/{name}_scales",
                  f"tensors (the {name} tensor is int8)", "None")
            lead = t.shape[:-1]
            want = ", ".join(map(str, lead))
            _need(zp.dtype == I8 and zp.ndim == 4 and zp.shape[:-1] == lead and zp.shape[-1] >= 1,
                  op, f"{name}_zero_points", f"an int8 tensor [{want}, 1]", zp.describe())
            _need(sc.dtype == F32 and sc.ndim == 4 and sc.shape[:-1] == lead and sc.shape[-1] >= 1,
                  op, f"{name}_scales", f"a float32 tensor [{want}, 1]", sc.describe())
    sd, hd = (2, 1) if is_seq_at_dim_2 else (1, 2)
    b, s, hq, d = query.shape[0], query.shape[sd], query.shape[hd], query.shape[3]
    _need(key.shape == value.shape and key.shape[0] == b and key.shape[3] == d, op, "key/value",
          f"equal shapes with batch {b} and head dim {d}", f"{key.describe()}, {value.describe()}")
    hk, kv_len = key.shape[hd], key.shape[sd]
    _need(hk > 0 and hq % hk == 0, op, "key", f"a kv head count dividing {hq} query heads", hk)
    if attn_mask is not None:
        _need(attn_mask.shape == (s, kv_len) and is_float(attn_mask.dtype), op, "attn_mask",
              f"a float mask [{s}, {kv_len}]", attn_mask.describe())
    else:
        _need(0 <= start_pos and start_pos + s <= kv_len, op, "start_pos",
              f"0 <= start_pos and start_pos + {s} <= {kv_len} (the key length)", start_pos)


@register("llama::custom_quantized_sdpa.out")
def custom_quantized_sdpa_out(query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale,
                              q_zero_points, q_scales, k_zero_points, k_scales, v_zero_points,
                              v_scales, is_seq_at_dim_2, out):
    qparams = (q_zero_points, q_scales, k_zero_points, k_scales, v_zero_points, v_scales)
    check_quantized_sdpa("llama::custom_quantized_sdpa.out", query, key, value, start_pos,
                         attn_mask, is_causal, qparams, is_seq_at_dim_2, out)
    if query.dtype == I8:  # per token: (q - zero_point) * scale, in float32 as the C++ does
        q, k, v = ((t.numpy().astype(F32) - zp.numpy()[..., :1].astype(F32)) * sc.numpy()[..., :1]
                   for t, zp, sc in zip((query, key, value), qparams[0::2], qparams[1::2]))
    else:
        q, k, v = (t.numpy().astype(F32) for t in (query, key, value))
    perm = (0, 2, 1, 3) if is_seq_at_dim_2 else (0, 1, 2, 3)  # -> [B, S, H, D]
    mask = None if attn_mask is None else attn_mask.numpy().astype(F32)
    res = attention(q.transpose(perm), k.transpose(perm), v.transpose(perm), start_pos, mask,
                    is_causal, scale)
    out.write(res.transpose(perm))


# ---- gated delta rule ---------------------------------------------------------------------

def check_gated_delta(op, query, key, value, decay, beta, initial_state, out, final_state_out):
    """Validate the gated delta rule's arguments; returns (B, H, Hs, T, K, V)."""
    for name, t in (("query", query), ("key", key), ("value", value), ("decay", decay),
                    ("beta", beta), ("initial_state", initial_state), ("out", out),
                    ("final_state_out", final_state_out)):
        _need(t.dtype == F32, op, name, "a float32 tensor", t.describe())
    for name, t, nd in (("query", query, 4), ("key", key, 4), ("value", value, 4),
                        ("beta", beta, 3), ("initial_state", initial_state, 4)):
        _need(t.ndim == nd, op, name, f"a {nd}-D tensor", t.describe())
    bsz, h, t_len, kd = query.shape
    hs = key.shape[1]
    vd = value.shape[3]
    _need(key.shape == (bsz, hs, t_len, kd) and hs > 0 and h % hs == 0, op, "key",
          f"[{bsz}, Hs, {t_len}, {kd}] with Hs dividing {h} query heads", key.describe())
    _need(value.shape[:3] == (bsz, hs, t_len), op, "value", f"[{bsz}, {hs}, {t_len}, V]",
          value.describe())
    _need(decay.shape in ((bsz, hs, t_len, kd), (bsz, hs, t_len)), op, "decay",
          f"[{bsz}, {hs}, {t_len}, {kd}] or [{bsz}, {hs}, {t_len}]", decay.describe())
    _need(beta.shape == (bsz, hs, t_len), op, "beta", f"[{bsz}, {hs}, {t_len}]", beta.describe())
    _need(initial_state.shape == (bsz, hs, kd, vd), op, "initial_state",
          f"[{bsz}, {hs}, {kd}, {vd}]", initial_state.describe())
    a, b, n = initial_state.data_ptr(), final_state_out.data_ptr(), initial_state.nbytes
    _need(not (n and a and b and a < b + n and b < a + n), op, "final_state_out",
          "memory that does not overlap initial_state", "an alias")
    return bsz, h, hs, t_len, kd, vd


@register("llama::gated_delta_rule.out", "llama::channelwise_gated_delta_rule.out")
def gated_delta_rule_out(query, key, value, decay, beta, initial_state, out, final_state_out):
    op = "llama::gated_delta_rule.out"
    bsz, h, hs, t_len, kd, vd = check_gated_delta(op, query, key, value, decay, beta,
                                                  initial_state, out, final_state_out)
    q = query.numpy().reshape(bsz, hs, h // hs, t_len, kd)
    k, v, g, bt = key.numpy(), value.numpy(), decay.numpy(), beta.numpy()
    if g.ndim == 3:
        g = g[..., None]
    state = initial_state.numpy().astype(F32)  # a copy: the input stays untouched
    res = np.empty((bsz, hs, h // hs, t_len, vd), F32)
    for t in range(t_len):  # a recurrence over tokens; each step is vectorized
        state *= g[:, :, t, :, None]
        kt = k[:, :, t]
        pred = np.einsum("bhkv,bhk->bhv", state, kt)
        delta = (v[:, :, t] - pred) * bt[:, :, t, None]
        state += kt[..., None] * delta[:, :, None, :]
        res[:, :, :, t] = np.einsum("bhkv,bhrk->bhrv", state, q[:, :, :, t])
    out.write(res.reshape(bsz, h, t_len, vd))
    final_state_out.write(state)


# ---- quantized MoE FFN -----------------------------------------------------------------

def packed_size(n: int, k: int, group_size: int, nbit: int) -> int:
    """Bytes of a universal-packed [n, k] weight (header included)."""
    per_row = k * nbit // 8 + 8 * (k // group_size)
    return HEADER_BYTES + per_row * ((n + NR - 1) // NR * NR)


def unpack_weight(blob: np.ndarray, n: int, k: int, group_size: int, nbit: int) -> np.ndarray:
    """Dequantized float32 [n, k] weight from a universal-packed uint8 blob."""
    nb, g, c = (n + NR - 1) // NR, k // group_size, group_size // KR
    chunk = NR * KR * nbit // 8
    body = blob[HEADER_BYTES:packed_size(n, k, group_size, nbit)].reshape(nb, g, c * chunk + 64)
    vals = body[..., :c * chunk].reshape(nb, g, c, chunk)
    if nbit == 4:  # 32-value runs: byte i = value i (low nibble) | value i + 16 (high nibble)
        runs = vals.reshape(nb, g, c, 4, 16)
        q = np.stack((runs & 0x0F, runs >> 4), axis=-2).astype(np.int8) - 8
    else:
        q = vals.view(np.int8)
    # packed order (half, row, 8 values) -> (row, 16 values of the chunk)
    q = q.reshape(nb, g, c, 2, NR, 8).transpose(0, 4, 1, 2, 3, 5).reshape(nb * NR, k)
    scales = np.ascontiguousarray(body[..., c * chunk:c * chunk + 32]).view(F32)  # [nb, g, 8]
    scales = scales.transpose(0, 2, 1).reshape(nb * NR, g)
    w = q[:n].astype(F32).reshape(n, g, group_size) * scales[:n, :, None]
    return w.reshape(n, k)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))  # never overflows; the C++ branches on the sign the same way
    return np.where(x >= 0, F32.type(1) / (F32.type(1) + e), e / (F32.type(1) + e))


def check_moe(op, x, gate_weight, expert_bias, packed_w13, packed_w2, num_activated_experts,
              num_experts, hidden_dim, dim, group_size, weight_nbit, score_func, out):
    e = num_experts
    _check_dtype(op, F32, x=x, gate_weight=gate_weight, out=out)
    _need(x.ndim == 2 and x.shape[1] == dim, op, "x", f"a float32 tensor [T, {dim}]", x.describe())
    _need(gate_weight.shape == (e, dim), op, "gate_weight", f"[{e}, {dim}]",
          gate_weight.describe())
    if expert_bias.numel:
        _need(expert_bias.shape == (e,) and expert_bias.dtype == F32, op, "expert_bias",
              f"a float32 tensor [{e}] or an empty tensor", expert_bias.describe())
    _need(0 < num_activated_experts <= e, op, "num_activated_experts", f"in [1, {e}]",
          num_activated_experts)
    _need(score_func in ("sigmoid", "softmax"), op, "score_func", "'sigmoid' or 'softmax'",
          repr(score_func))
    _need(not (expert_bias.numel and score_func == "softmax"), op, "expert_bias",
          "an empty tensor with score_func 'softmax'", expert_bias.describe())
    _need(weight_nbit in (4, 8), op, "weight_nbit", "4 or 8", weight_nbit)
    _need(dim > 0 and hidden_dim > 0, op, "dim/hidden_dim", "positive", (dim, hidden_dim))
    _need(group_size > 0 and group_size % KR == 0 and dim % group_size == 0
          and hidden_dim % group_size == 0, op, "group_size",
          f"a multiple of {KR} dividing dim ({dim}) and hidden_dim ({hidden_dim})", group_size)
    for name, t, n, k in (("packed_w13", packed_w13, 2 * hidden_dim, dim),
                          ("packed_w2", packed_w2, dim, hidden_dim)):
        need = packed_size(n, k, group_size, weight_nbit)
        _need(t.dtype == np.uint8 and t.ndim == 2 and t.shape[0] == e and t.shape[1] >= need,
              op, name, f"a uint8 tensor [{e}, >= {need}] (packed [{n}, {k}] weights)",
              t.describe())


@register("llama::quantized_moe_ffn.out")
def quantized_moe_ffn_out(x, gate_weight, expert_bias, packed_w13, packed_w2,
                          num_activated_experts, num_experts, hidden_dim, dim, group_size,
                          weight_nbit, score_func, route_scale, out):
    op = "llama::quantized_moe_ffn.out"
    check_moe(op, x, gate_weight, expert_bias, packed_w13, packed_w2, num_activated_experts,
              num_experts, hidden_dim, dim, group_size, weight_nbit, score_func, out)
    xs, kk, f = x.numpy(), num_activated_experts, hidden_dim
    scores = xs @ gate_weight.numpy().T
    if score_func == "sigmoid":
        scores = _sigmoid(scores)
        sel = scores + expert_bias.numpy() if expert_bias.numel else scores
    else:
        sel = scores
    # top-k, ties to the lower index; NaN sorts last (C++: picked only when nothing else is left)
    idx = np.argsort(-sel, axis=1, kind="stable")[:, :kk]
    w = np.take_along_axis(scores, idx, axis=1)
    if score_func == "sigmoid":
        total = np.zeros(len(w), F32)
        for j in range(kk):  # the C++ sums in selection order
            total += w[:, j]
        w = w * (F32.type(route_scale) / np.maximum(total, FLT_MIN))[:, None]
    else:
        ex = np.exp(w - w.max(axis=1, keepdims=True))
        w = ex * (F32.type(1) / ex.sum(axis=1, keepdims=True))
    res = np.zeros((len(xs), dim), F32)
    w13s, w2s = packed_w13.numpy(), packed_w2.numpy()
    for e in np.unique(idx):  # experts in ascending order, as the C++ accumulates
        tok, slot = np.nonzero(idx == e)
        w13 = unpack_weight(w13s[e], 2 * f, dim, group_size, weight_nbit)
        h13 = xs[tok] @ w13.T
        mid = h13[:, :f] * _sigmoid(h13[:, :f]) * h13[:, f:]
        y = mid @ unpack_weight(w2s[e], dim, f, group_size, weight_nbit).T
        res[tok] += w[tok, slot][:, None] * y
    out.write(res)


# ---- fallback, tile_crop ------------------------------------------------------------------

@register("llama::fallback.out")
def fallback_out(input, output):
    _need(output.dtype == input.dtype, "llama::fallback.out", "output",
          f"the dtype of input ({input.dtype.name})", output.describe())
    output.write(input.numpy())


@register("preprocess::tile_crop.out")
def tile_crop_out(input, tile_size, out):
    op = "preprocess::tile_crop.out"
    _need(out.dtype == input.dtype, op, "out", f"the dtype of input ({input.dtype.name})",
          out.describe())
    _need(input.ndim == 3, op, "input", "a 3-D tensor [C, H, W]", input.describe())
    _need(out.ndim == 4, op, "out", "a 4-D tensor", out.describe())
    c, hh, ww = input.shape
    _need(tile_size > 0 and hh % tile_size == 0 and ww % tile_size == 0, op, "tile_size",
          f"a positive divisor of H ({hh}) and W ({ww})", tile_size)
    t = tile_size
    tiles = input.numpy().reshape(c, hh // t, t, ww // t, t).transpose(1, 3, 0, 2, 4)
    out.write(tiles.reshape(-1, c, t, t))
