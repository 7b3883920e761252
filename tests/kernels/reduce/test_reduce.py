"""Reduction kernels against torch.ops.aten."""
import ml_dtypes
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ETensor, ExecuTorchError, from_numpy_dtype
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

aten = torch.ops.aten

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]
SHAPES = [(2, 3, 4), (5,), (), (0, 3), (3, 1, 2)]


def make(shape, dtype, seed=0, lo=-3, hi=4):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(dtype)
    if dtype == torch.uint8:
        lo = 0
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def tol(dtype):
    return {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(dtype, 1e-5)


def dim_lists(ndim):
    """Dim-list choices valid for rank ``ndim`` (None and [] mean all dims)."""
    out = [None, []]
    if ndim == 0:
        return out + [[0], [-1]]
    out += [[0], [-1]]
    if ndim >= 2:
        out += [[0, -1], [1]]
    if ndim >= 3:
        out += [[2, 0, 1]]
    return out


def et(a):
    """An ETensor holding ``a`` (keeps rank 0, which ETensor.from_array turns into rank 1)."""
    if not isinstance(a, np.ndarray):
        return a
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape)
    t.write(a)
    return t


def check(name, args, want, rtol=1e-5, outs=1):
    """Call ``name`` with ``args`` + exact-shape out tensor(s) and compare to ``want``."""
    wants = want if outs > 1 else (want,)
    ts = [static_out(tuple(w.shape), to_np(w).dtype) for w in wants]
    call(name, *[et(a) for a in args], *ts)
    for t, w in zip(ts, wants):
        assert_close(t.numpy(), to_np(w), rtol=rtol, atol=rtol)


def nonempty(t, dims):
    axes = range(t.dim()) if not dims else [d % max(t.dim(), 1) for d in dims]
    return t.dim() == 0 or all(t.shape[a] > 0 for a in axes)


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape", SHAPES)
def test_sum(shape, dtype):
    x = make(shape, dtype)
    for dims in dim_lists(len(shape)):
        for keep in (False, True):
            want = aten.sum.dim_IntList(x, dims, keep)
            check("aten::sum.IntList_out", [to_np(x), dims, keep, None], want, rtol=tol(dtype))


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.bool])
def test_sum_dtype_arg(dtype):
    x = make((3, 4), dtype)
    for st, tdt in [(7, torch.float64), (4, torch.int64), (6, torch.float32)]:
        want = aten.sum.dim_IntList(x, [1], True, dtype=tdt)
        check("aten::sum.IntList_out", [to_np(x), [1], True, st], want)


def test_sum_dtype_mismatch_and_bad_dim():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ExecuTorchError, match="dtype"):
        call("aten::sum.IntList_out", x, [0], False, 7, static_out((3,), np.float32))
    with pytest.raises(ExecuTorchError, match="dim"):
        call("aten::sum.IntList_out", x, [2], False, None, static_out((2,), np.float32))


def test_sum_dynamic_out_resizes():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = bound_out((8,), np.float32)
    call("aten::sum.IntList_out", x, [0], False, None, out)
    assert_close(out.numpy(), x.sum(0))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_mean(shape, dtype):
    x = make(shape, dtype)
    for dims in dim_lists(len(shape)):
        for keep in (False, True):
            want = aten.mean.dim(x, dims, keep)
            check("aten::mean.out", [to_np(x), dims, keep, None], want, rtol=tol(dtype))
    check("aten::mean.dtype_out", [to_np(x), None], aten.mean.default(x), rtol=tol(dtype))


def test_mean_dtype_arg():
    x = make((4, 5), torch.float32)
    check("aten::mean.out", [to_np(x), [-1], False, 7], aten.mean.dim(x, [-1], False, dtype=torch.float64))
    check("aten::mean.dtype_out", [to_np(x), 7], aten.mean.default(x, dtype=torch.float64))


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape", SHAPES)
def test_prod(shape, dtype):
    x = make(shape, dtype, lo=-2, hi=3)
    r = tol(dtype) * 4
    check("aten::prod.out", [to_np(x), None], aten.prod.default(x), rtol=r)
    for d in ([0, -1] if len(shape) else [0, -1]):
        for keep in (False, True):
            check("aten::prod.int_out", [to_np(x), d, keep, None], aten.prod.dim_int(x, d, keep), rtol=r)
    check("aten::prod.out", [to_np(x), 7], aten.prod.default(x, dtype=torch.float64), rtol=r)


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape", SHAPES)
def test_amax_amin(op, shape, dtype):
    x = make(shape, dtype)
    for dims in dim_lists(len(shape))[1:]:
        if not nonempty(x, dims):
            continue
        for keep in (False, True):
            want = getattr(aten, op).default(x, dims, keep)
            check(f"aten::{op}.out", [to_np(x), dims, keep], want)


@pytest.mark.parametrize("op", ["amax", "amin", "max", "min"])
def test_nan_propagates(op):
    x = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, -1.0]])
    if op in ("amax", "amin"):
        check(f"aten::{op}.out", [to_np(x), [1], False], getattr(aten, op).default(x, [1]))
        check(f"aten::{op}.out", [to_np(x), [], False], getattr(aten, op).default(x, []))
    else:
        check(f"aten::{op}.unary_out", [to_np(x)], getattr(aten, op).default(x))
        check(f"aten::{op}.dim_{op}", [to_np(x), 1, False], getattr(aten, op).dim(x, 1), outs=2)
        check(f"aten::arg{op}.out", [to_np(x), 1, False], getattr(aten, f"arg{op}").default(x, 1))


def test_empty_extreme_raises():
    with pytest.raises(ExecuTorchError, match="non-empty"):
        call("aten::amax.out", np.zeros((0, 3), np.float32), [0], False, static_out((3,), np.float32))
    with pytest.raises(ExecuTorchError, match="non-empty"):
        call("aten::argmax.out", np.zeros((0,), np.float32), None, False, static_out((), np.int64))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.uint8])
@pytest.mark.parametrize("shape", [(2, 3, 4), (7,), (), (3, 0)])
def test_argmax_argmin(op, shape, dtype):
    x = make(shape, dtype)  # integer inputs have ties: ATen picks the first
    dims = [None, 0, -1] + ([1] if len(shape) > 1 else [])
    for d in dims:
        if not nonempty(x, None if d is None else [d]):
            continue
        for keep in (False, True):
            want = getattr(aten, op).default(x, d, keep)
            check(f"aten::{op}.out", [to_np(x), d, keep], want)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int8, torch.bool])
@pytest.mark.parametrize("shape", [(2, 3, 4), (6,), (), (0, 3)])
def test_max_min_dim(op, shape, dtype):
    x = make(shape, dtype)
    for d in [0, -1] + ([1] if len(shape) > 1 else []):
        if not nonempty(x, [d]):
            continue
        for keep in (False, True):
            want = getattr(aten, op).dim(x, d, keep)
            check(f"aten::{op}.dim_{op}", [to_np(x), d, keep], tuple(want), outs=2)
    if x.numel():
        check(f"aten::{op}.unary_out", [to_np(x)], getattr(aten, op).default(x))


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64, torch.uint8, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_any(shape, dtype):
    x = make(shape, dtype, lo=0, hi=2)
    check("aten::any.all_out", [to_np(x)], aten.any.default(x))
    for dims in dim_lists(len(shape)):
        for keep in (False, True):
            check("aten::any.dims_out", [to_np(x), dims, keep], aten.any.dims(x, dims, keep))
            if dims and len(dims) == 1:
                check("aten::any.out", [to_np(x), dims[0], keep], aten.any.dim(x, dims[0], keep))


def test_any_into_uint8_out():
    x = np.array([[0, 1], [0, 0]], np.int32)
    out = static_out((2,), np.uint8)
    call("aten::any.out", x, 1, False, out)
    assert out.numpy().tolist() == [1, 0]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES + [(1,)])
def test_var(shape, dtype):
    x = make(shape, dtype)
    r = tol(dtype) * 2
    for dims in dim_lists(len(shape)):
        for keep in (False, True):
            for corr in (None, 0, 1, 2.5):
                want = aten.var.correction(x, dims, correction=corr, keepdim=keep)
                check("aten::var.correction_out", [to_np(x), dims, corr, keep], want, rtol=r)
                want2 = aten.var_mean.correction(x, dims, correction=corr, keepdim=keep)
                check("aten::var_mean.correction_out", [to_np(x), dims, corr, keep],
                      tuple(want2), rtol=r, outs=2)
            if dims:
                for unbiased in (True, False):
                    want = aten.var.dim(x, dims, unbiased, keep)
                    check("aten::var.out", [to_np(x), dims, unbiased, keep], want, rtol=r)


def test_var_rejects_int():
    with pytest.raises(ExecuTorchError, match="floating"):
        call("aten::var.out", np.ones(3, np.int64), [0], True, False, static_out((), np.int64))


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (), (0, 3)])
def test_cumsum(shape, dtype):
    x = make(shape, dtype)
    for d in [0, -1] + ([1] if len(shape) > 1 else []):
        check("aten::cumsum.out", [to_np(x), d, None], aten.cumsum.default(x, d), rtol=tol(dtype) * 4)
    check("aten::cumsum.out", [to_np(x), 0, 7], aten.cumsum.default(x, 0, dtype=torch.float64))


def _topk_check(x, k, d, largest, sorted_):
    wv, wi = aten.topk.default(x, k, d, largest, sorted_)
    v = static_out(tuple(wv.shape), to_np(wv).dtype)
    i = static_out(tuple(wi.shape), np.int64)
    call("aten::topk.values", et(to_np(x)), k, d, largest, sorted_, v, i)
    gv, gi = v.numpy(), i.numpy()
    if sorted_:
        assert_close(gv, to_np(wv))
    else:  # order unspecified: compare as sorted sets
        ax = d % max(x.dim(), 1)
        assert_close(np.sort(gv.astype(np.float64), axis=ax) if x.dim() else gv.astype(np.float64),
                     np.sort(to_np(wv).astype(np.float64), axis=ax) if x.dim() else to_np(wv).astype(np.float64))
    # indices must address the returned values (ties may pick other positions)
    if x.dim():
        picked = np.take_along_axis(to_np(x), gi, axis=d % x.dim())
        assert_close(picked, gv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32])
@pytest.mark.parametrize("shape,d", [((3, 6), -1), ((3, 6), 0), ((2, 5, 4), 1), ((8,), 0)])
def test_topk(shape, d, dtype):
    x = make(shape, dtype, lo=-50, hi=50)
    n = shape[d]
    for k in (0, 1, n // 2, n):
        for largest in (True, False):
            for sorted_ in (True, False):
                _topk_check(x, k, d, largest, sorted_)


def test_topk_nan_and_rank0():
    x = torch.tensor([1.0, float("nan"), 3.0, -2.0])
    _topk_check(x, 2, 0, True, True)
    _topk_check(x, 2, 0, False, True)
    _topk_check(torch.tensor(5.0), 1, 0, True, True)
    with pytest.raises(ExecuTorchError, match="k"):
        call("aten::topk.values", np.ones(3, np.float32), 4, 0, True, True,
             static_out((4,), np.float32), static_out((4,), np.int64))


def test_bf16_dtype_roundtrip():
    x = make((4, 4), torch.bfloat16)
    out = static_out((4,), ml_dtypes.bfloat16)
    call("aten::amax.out", to_np(x), [0], False, out)
    assert out.numpy().dtype == np.dtype(ml_dtypes.bfloat16)
    assert from_numpy_dtype(out.numpy().dtype) == 15
    assert_close(out.numpy(), to_np(aten.amax.default(x, [0])))


def test_channels_last_input_and_out():
    x = make((2, 3, 4, 5), torch.float32)
    t = ETensor.empty(6, (2, 3, 4, 5), dim_order=(0, 2, 3, 1))
    t.write(to_np(x))
    out = ETensor.empty(6, (2, 3, 1, 1), dim_order=(0, 2, 3, 1))
    call("aten::mean.out", t, [-1, -2], True, None, out)
    assert_close(out.numpy(), to_np(aten.mean.dim(x, [-1, -2], True)))
