"""llama:: custom ops against ExecuTorch's own kernels (``torch.ops.llama.*``).

``from executorch.extension.llm.custom_ops import custom_ops`` loads the C++
kernels into torch; they are the reference here.
"""
import math

import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ErrorCode, ExecuTorchError, ETensor
from tests import parts
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

try:
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    L = torch.ops.llama
    L.custom_sdpa.default  # noqa: B018
except Exception as e:  # pragma: no cover
    parts.need("executorch", f"ExecuTorch llama custom ops unavailable: {e}")

TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (3e-2, 3e-2)}


def gen(seed):
    return torch.Generator().manual_seed(seed)


def et(x: torch.Tensor) -> ETensor:
    """A torch tensor as an ETensor over its own copy (kernels may mutate it)."""
    return ETensor.from_array(to_np(x).copy())


# ---- update_cache ----------------------------------------------------------------------------

@pytest.mark.parametrize("b,s,h,d,max_s,start", [(1, 3, 2, 4, 8, 0), (2, 1, 3, 4, 6, 5),
                                                 (2, 4, 1, 8, 4, 0), (1, 2, 2, 2, 8, 3)])
@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.int8])
def test_update_cache(b, s, h, d, max_s, start, dt):
    value = (torch.randn(b, s, h, d, generator=gen(0)) * 10).to(dt)
    cache = (torch.randn(b, max_s, h, d, generator=gen(1)) * 10).to(dt)
    want = cache.clone()
    L.update_cache.out(value, want, start, out=torch.empty(1, dtype=dt))
    got = et(cache)
    out = static_out((1,), to_np(value).dtype)
    call("llama::update_cache.out", et(value), got, start, out, out)
    assert_close(got.numpy(), to_np(want), rtol=0, atol=0)


@pytest.mark.parametrize("start", [-1, 6, 8])
def test_update_cache_out_of_range(start):
    value, cache = np.ones((1, 3, 1, 2), np.float32), ETensor.from_array(np.zeros((1, 8, 1, 2), np.float32))
    out = static_out((1,), np.float32)
    with pytest.raises(ExecuTorchError) as e:
        call("llama::update_cache.out", value, cache, start, out)
    assert e.value.code == ErrorCode.InvalidArgument
    assert not cache.numpy().any()


@pytest.mark.parametrize("b,s,max_s", [(1, 3, 8), (2, 2, 5)])
def test_update_cache_with_indices(b, s, max_s):
    value = torch.randn(b, s, 2, 4, generator=gen(2))
    cache = torch.randn(b, max_s, 2, 4, generator=gen(3))
    indices = torch.stack([torch.randperm(max_s, generator=gen(4 + i))[:s] for i in range(b)])
    want = cache.clone()
    L.update_cache_with_indices.out(value, want, 0, indices, out=torch.empty(1))
    got = et(cache)
    out = static_out((1,), np.float32)
    call("llama::update_cache_with_indices.out", et(value), got, 0, to_np(indices), out, out)
    assert_close(got.numpy(), to_np(want), rtol=0, atol=0)


# ---- custom_sdpa -----------------------------------------------------------------------------

SDPA_CASES = [  # b, s, hq, hkv, d, kv_len, start_pos
    (1, 1, 2, 2, 8, 8, 0),
    (1, 3, 4, 2, 8, 8, 3),
    (2, 5, 4, 1, 16, 12, 7),
    (1, 4, 2, 2, 4, 4, 0),
    (1, 1, 8, 2, 8, 40, 37),  # decode step
]


@pytest.mark.parametrize("case", SDPA_CASES)
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
def test_custom_sdpa(case, is_causal, scale, dt):
    b, s, hq, hk, d, kv, start = case
    q = torch.randn(b, s, hq, d, generator=gen(5)).to(dt)
    k = torch.randn(b, kv, hk, d, generator=gen(6)).to(dt)
    v = torch.randn(b, kv, hk, d, generator=gen(7)).to(dt)
    want = L.custom_sdpa(q, k, v, start, None, 0.0, is_causal, scale)
    out = static_out((b, s, hq, d), to_np(q).dtype)
    call("llama::custom_sdpa.out", to_np(q), to_np(k), to_np(v), start, None, 0.0, is_causal,
         scale, out, out)
    rtol, atol = TOL[dt]
    assert_close(out.numpy(), to_np(want), rtol=rtol, atol=atol)


def reference_sdpa(q, k, v, start, causal, scale=None, mask=None):
    """Textbook SDPA in float64 (checks the C++ kernel and ours against the semantics)."""
    s, hq, d = q.shape[1:]
    n = k.shape[1] if mask is not None else start + s
    rep = hq // k.shape[2]
    kk = k[:, :n].repeat_interleave(rep, dim=2).transpose(1, 2).double()
    vv = v[:, :n].repeat_interleave(rep, dim=2).transpose(1, 2).double()
    att = q.transpose(1, 2).double() @ kk.transpose(-1, -2) * (scale or 1 / math.sqrt(d))
    if causal:
        att = att.masked_fill(torch.arange(n)[None] > start + torch.arange(s)[:, None], -math.inf)
    if mask is not None:
        att = att + mask.double()
    return (att.softmax(-1) @ vv).transpose(1, 2)


def test_custom_sdpa_semantics_match_textbook():
    q, k, v = (torch.randn(sh, generator=gen(i)) for i, sh in
               enumerate([(2, 3, 4, 8), (2, 10, 2, 8), (2, 10, 2, 8)]))
    out = static_out((2, 3, 4, 8), np.float32)
    call("llama::custom_sdpa.out", to_np(q), to_np(k), to_np(v), 4, None, 0.0, True, None, out)
    assert_close(out.numpy().astype(np.float64), to_np(reference_sdpa(q, k, v, 4, True)),
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("start", [0, 3])
def test_custom_sdpa_with_mask(start):
    q = torch.randn(1, 3, 2, 8, generator=gen(8))
    k = torch.randn(1, 8, 2, 8, generator=gen(9))
    v = torch.randn(1, 8, 2, 8, generator=gen(10))
    mask = torch.randn(3, 8, generator=gen(11))
    mask[:, 6:] = -math.inf
    want = L.custom_sdpa(q, k, v, start, mask, 0.0, False, None)
    out = bound_out((1, 3, 2, 8), np.float32)
    call("llama::custom_sdpa.out", to_np(q), to_np(k), to_np(v), start, to_np(mask), 0.0, False,
         None, out, out)
    assert_close(out.numpy(), to_np(want), rtol=2e-5, atol=2e-5)
    assert_close(out.numpy().astype(np.float64), to_np(reference_sdpa(q, k, v, start, False, mask=mask)),
                 rtol=1e-5, atol=1e-5)


def test_custom_sdpa_bad_arguments():
    q, k = np.zeros((1, 3, 2, 4), np.float32), np.zeros((1, 8, 2, 4), np.float32)
    out = static_out((1, 3, 2, 4), np.float32)
    with pytest.raises(ExecuTorchError, match="attn_mask"):  # mask and is_causal together
        call("llama::custom_sdpa.out", q, k, k, 0, np.zeros((3, 8), np.float32), 0.0, True, None, out)
    with pytest.raises(ExecuTorchError, match="start_pos"):  # keys run past the cache
        call("llama::custom_sdpa.out", q, k, k, 6, None, 0.0, True, None, out)
    with pytest.raises(ExecuTorchError, match="kv head"):  # 2 query heads over 3 kv heads
        k3 = np.zeros((1, 8, 3, 4), np.float32)
        call("llama::custom_sdpa.out", q, k3, k3, 0, None, 0.0, True, None, out)


# ---- sdpa_with_kv_cache ----------------------------------------------------------------------

@pytest.mark.parametrize("b,s,hq,hk,d,max_s,start", [(1, 3, 4, 2, 8, 10, 0), (2, 1, 2, 2, 4, 6, 4),
                                                     (1, 2, 4, 1, 8, 8, 6)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_with_kv_cache(b, s, hq, hk, d, max_s, start, is_causal):
    q = torch.randn(b, s, hq, d, generator=gen(12))
    k = torch.randn(b, s, hk, d, generator=gen(13))
    v = torch.randn(b, s, hk, d, generator=gen(14))
    kc0 = torch.randn(b, max_s, hk, d, generator=gen(15))
    vc0 = torch.randn(b, max_s, hk, d, generator=gen(16))
    kc, vc = kc0.clone(), vc0.clone()
    want = L.sdpa_with_kv_cache(q, k, v, kc, vc, start, s, None, 0.0, is_causal, None)
    gkc, gvc = et(kc0), et(vc0)
    out = static_out((b, s, hq, d), np.float32)
    call("llama::sdpa_with_kv_cache.out", to_np(q), to_np(k), to_np(v), gkc, gvc, start, s, None,
         0.0, is_causal, None, out, out)
    assert_close(gkc.numpy(), to_np(kc), rtol=0, atol=0)
    assert_close(gvc.numpy(), to_np(vc), rtol=0, atol=0)
    assert_close(out.numpy(), to_np(want), rtol=2e-5, atol=2e-5)


# ---- fast_hadamard_transform -------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4,), (3, 8), (2, 2, 16), (5, 1), (2, 128)])
@pytest.mark.parametrize("dt", [torch.float32, torch.float16])
def test_fast_hadamard_transform(shape, dt):
    x = torch.randn(shape, generator=gen(17)).to(dt)
    want = L.fast_hadamard_transform(x)
    out = static_out(shape, to_np(x).dtype)
    call("llama::fast_hadamard_transform.out", to_np(x), out, out)
    rtol, atol = (1e-5, 1e-5) if dt == torch.float32 else (1e-2, 1e-2)
    assert_close(out.numpy(), to_np(want), rtol=rtol, atol=atol)


def test_fast_hadamard_transform_is_orthonormal():
    eye = np.eye(8, dtype=np.float32)
    out = static_out((8, 8), np.float32)
    call("llama::fast_hadamard_transform.out", eye, out)
    h = out.numpy()
    np.testing.assert_allclose(h @ h.T, np.eye(8), atol=1e-6)


def test_fast_hadamard_transform_rejects_other_sizes():
    out = static_out((2, 12), np.float32)
    with pytest.raises(ExecuTorchError):
        call("llama::fast_hadamard_transform.out", np.zeros((2, 12), np.float32), out)
