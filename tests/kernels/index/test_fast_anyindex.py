"""Compiled any-dtype indexing/scatter/mask/top-k/random kernels (kernels/index/generic*.py,
kernels/creation/generic_rand.py) against the reference tier."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from tests.kernels.helpers import bound_out, call, call_fast, check_compiled, static_out

RNG = np.random.default_rng(0)
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, BF16,
          np.float32, np.float64]
SOME = [np.bool_, np.int8, np.int64, np.float16, BF16, np.float32]


def rand(shape, dtype=np.float32):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.asarray(RNG.random(shape) > 0.5)
    if dt.kind in "iu":
        return np.asarray(RNG.integers(0 if dt.kind == "u" else -9, 10, shape)).astype(dt)
    return np.asarray(RNG.standard_normal(shape)).astype(np.float32).astype(dt)


def tensor(a, dim_order=None):
    """An ETensor holding ``a`` laid out in ``dim_order`` (rank 0 kept)."""
    a = np.asarray(a)
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape, dim_order)
    if a.size:
        t.numpy()[...] = a
    return t


CL = (0, 2, 3, 1)  # channels-last


def idx(values, dtype=np.int64):
    return tensor(np.asarray(values, dtype))


def check(name, args, shape, dtype):
    return check_compiled(name, args, shape, dtype)


def call_ref(name, args, shape, dtype):
    out = static_out(shape, dtype)
    call(name, *args, out)
    return out.numpy()


def fails(name, *args):
    status = call_fast(name, *args)
    assert status is not None and status != 0, status


# ---- gather / scatter ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_dtypes(dtype):
    x = rand((3, 4, 5), dtype)
    for dim in (0, 1, -1):
        d = dim % 3
        ishape = [2, 3, 4]
        index = RNG.integers(0, x.shape[d], ishape)
        got = check("aten::gather.out", [x, dim, idx(index, np.int32), False], tuple(ishape),
                    dtype)
        part = tuple(slice(None) if i == d else slice(s) for i, s in enumerate(ishape))
        assert np.array_equal(got, np.take_along_axis(x[part], index, d))


def test_gather_layouts_and_edges():
    x = rand((2, 3, 4, 5))
    index = RNG.integers(0, 3, (2, 3, 2, 5))
    want = call_ref("aten::gather.out", (x, 1, idx(index), False), (2, 3, 2, 5), np.float32)
    for order in (None, CL):
        out = ETensor.empty(from_numpy_dtype(x.dtype), (2, 3, 2, 5), order)
        assert call_fast("aten::gather.out", tensor(x, CL), 1, idx(index), False, out) == 0
        assert np.array_equal(out.numpy(), want)
    # rank 0, an empty index, a float16 out of a float32 self
    check("aten::gather.out", [np.array(3.5, np.float32), 0, idx(0), False], (), np.float32)
    check("aten::gather.out", [np.array(3.5, np.float32), 0, idx([0, 0]), False], (2,),
          np.float32)
    check("aten::gather.out", [x, 2, idx(np.zeros((2, 3, 0, 5), np.int64)), False], (2, 3, 0, 5),
          np.float32)
    check("aten::gather.out", [x, 0, idx(np.ones((1, 1, 1, 1), np.int64)), False], (1, 1, 1, 1),
          np.float16)
    fails("aten::gather.out", x, 1, idx(np.full((2, 3, 4, 5), 3)), False,
          static_out((2, 3, 4, 5), np.float32))
    fails("aten::gather.out", x, 1, idx(np.full((2, 3, 4, 5), -1)), False,
          static_out((2, 3, 4, 5), np.float32))
    fails("aten::gather.out", x, 1, idx(np.zeros((2, 3, 5, 5), np.int64)), False,
          static_out((2, 3, 5, 5), np.float32))  # index larger than self in dim 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_dtypes(dtype):
    x = rand((4, 5), dtype)
    src = rand((3, 5), dtype)
    for dim in (0, 1):
        index = RNG.integers(0, x.shape[dim], (3, 4))  # duplicates: add order matters
        check("aten::scatter.src_out", [x, dim, idx(index), src], x.shape, dtype)
        check("aten::scatter_add.out", [x, dim, idx(index, np.int32), src], x.shape, dtype)
        for value in (2, -1.5, True):
            check("aten::scatter.value_out", [x, dim, idx(index), value], x.shape, dtype)


def test_scatter_edges():
    x = rand((2, 3, 4, 5))
    src = rand((2, 3, 4, 5))
    index = RNG.integers(0, 4, (2, 2, 3, 5))
    want = call_ref("aten::scatter_add.out", (x, 2, idx(index), src), x.shape, np.float32)
    for order in (None, CL):
        out = ETensor.empty(from_numpy_dtype(x.dtype), x.shape, order)
        assert call_fast("aten::scatter_add.out", tensor(x, CL), 2, idx(index),
                         tensor(src, CL), out) == 0
        assert np.array_equal(out.numpy(), want)
    check("aten::scatter.src_out", [np.array(7, np.int32), 0, idx([0]), np.array([5], np.int32)],
          (), np.int32)
    check("aten::scatter.value_out", [rand((3,), np.uint8), 0, idx([1]), 300], (3,), np.uint8)
    check("aten::scatter.src_out", [x, 0, idx(np.zeros((0, 3, 4, 5), np.int64)), src], x.shape,
          np.float32)
    fails("aten::scatter.src_out", x, 0, idx(np.full((1, 1, 1, 1), 2)), src,
          static_out(x.shape, np.float32))
    fails("aten::scatter.src_out", x, 0, idx(np.zeros((1, 1, 1, 6), np.int64)), src,
          static_out(x.shape, np.float32))
    # a src of another dtype is cast to self's
    check("aten::scatter.src_out", [x, 1, idx(index[:, :, :, :4] % 3), src.astype(np.float64)],
          x.shape, np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_select_slice_scatter(dtype):
    x = rand((4, 5, 6), dtype)
    for dim in (0, 1, -1):
        shape = list(x.shape)
        del shape[dim]
        for index in (0, -1, 2):
            check("aten::select_scatter.out", [x, rand(shape, dtype), dim, index], x.shape,
                  dtype)
        for start, end, step in ((0, None, 1), (1, 4, 2), (-3, None, 1), (None, -1, 3),
                                 (2, 2, 1), (0, 100, 4)):
            n = x.shape[dim]
            cnt = len(range(*slice(start, end, step).indices(n)))
            shape = list(x.shape)
            shape[dim] = cnt
            check("aten::slice_scatter.out", [x, rand(shape, dtype), dim, start, end, step],
                  x.shape, dtype)
    fails("aten::select_scatter.out", x, rand((5, 6), dtype), 0, 4, static_out(x.shape, dtype))
    fails("aten::slice_scatter.out", x, rand((2, 5, 6), dtype), 0, 0, 3, 1,
          static_out(x.shape, dtype))


def test_region_layouts():
    x = rand((2, 3, 4, 5))
    src = rand((2, 3, 2, 5))
    want = call_ref("aten::slice_scatter.out", (x, src, 2, 1, None, 2), x.shape, np.float32)
    for order in (None, CL):
        out = ETensor.empty(from_numpy_dtype(x.dtype), x.shape, order)
        assert call_fast("aten::slice_scatter.out", tensor(x, CL), tensor(src, CL), 2, 1, None,
                         2, out) == 0
        assert np.array_equal(out.numpy(), want)
    check("aten::select_scatter.out", [x, rand((2, 4, 5), np.float64), 1, 1], x.shape, np.float32)


# ---- advanced indexing --------------------------------------------------------------

INDEX_CASES = [  # (self shape, indices builder)
    ((5, 6), lambda: [None, idx([1, -1, 0])]),
    ((5, 6), lambda: [idx([[1, 2]]), idx([[0], [5]], np.int32)]),
    ((3, 4, 5), lambda: [idx([0, 2]), None, idx([1, 4])]),        # not adjacent: dims first
    ((3, 4, 5), lambda: [None, idx([3, 0]), idx([-1, 1])]),
    ((3, 4, 5), lambda: [tensor(rand((3, 4), np.bool_))]),
    ((3, 4, 5), lambda: [None, tensor(rand((4, 5), np.bool_).astype(np.uint8))]),
    ((3, 4, 5), lambda: [tensor(np.array([True, False, True])), None, idx([0, 4])]),
    ((3, 4, 5), lambda: [idx(2), None, idx([1, 2, 3])]),
    ((3, 4, 5), lambda: [idx(2), idx(1)]),
    ((3, 4, 5), lambda: []),
    ((3, 4, 5), lambda: [idx(np.zeros((0,), np.int64))]),
]


def _index_shape(x, indices):
    tup = []
    for t in indices:
        if t is None:
            tup.append(slice(None))
        else:
            a = t.numpy()
            tup.extend(np.nonzero(a) if a.dtype in (np.bool_, np.uint8) else [a])
    return x[tuple(tup)].shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(INDEX_CASES)))
def test_index_tensor(case, dtype):
    shape, build = INDEX_CASES[case]
    x = rand(shape, dtype)
    indices = build()
    check("aten::index.Tensor_out", [x, indices], _index_shape(x, indices), dtype)


@pytest.mark.parametrize("case", range(len(INDEX_CASES)))
def test_index_put(case):
    shape, build = INDEX_CASES[case]
    x = rand(shape, np.float32)
    indices = build()
    rshape = _index_shape(x, indices)
    if not indices:  # ATen refuses an index_put without indices
        assert call_fast("aten::index_put.out", x, indices, x, False, static_out(x.shape,
                                                                                 np.float32)) is None
        return
    for vshape in (rshape, rshape[-1:], ()):
        for acc in (False, True):
            v = rand(vshape, np.float32)
            check("aten::index_put.out", [x, indices, v, acc], x.shape, np.float32)
            ref = tensor(x)
            call("aten::index_put_", ref, indices, v, acc)
            got = tensor(x)
            assert call_fast("aten::index_put_", got, indices, v, acc) == 0
            assert np.array_equal(got.numpy(), ref.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_put_dtypes(dtype):
    x = rand((4, 3), dtype)
    i = idx([0, 2, 0, 3])  # a repeated index: accumulate adds twice, a put keeps the last
    for acc in (False, True):
        check("aten::index_put.out", [x, [i], rand((4, 3), dtype), acc], x.shape, dtype)
        check("aten::index_put.out", [x, [None, idx([2, -3])],
                                      rand((4, 2), np.float64), acc], x.shape, dtype)


def test_index_layouts_conversion_and_bounds():
    x = rand((2, 3, 4, 5))
    i = idx([[2, 0], [1, 1]])
    want = x[:, :, [[2, 0], [1, 1]]]
    for order in (None, (0, 1, 2, 3, 4)):
        out = ETensor.empty(from_numpy_dtype(x.dtype), want.shape, order)
        assert call_fast("aten::index.Tensor_out", tensor(x, CL), [None, None, i], out) == 0
        assert np.array_equal(out.numpy(), want)
    check("aten::index.Tensor_out", [x, [None, idx([0, 2])]], (2, 2, 4, 5), np.float64)
    check("aten::index.Tensor_out", [x, [idx([1]), idx([0, 2])]], (2, 4, 5), np.int32)
    v = rand((2, 3, 4, 5))
    for order in (None, CL):
        ref = static_out(x.shape, np.float32)
        call("aten::index_put.out", x, [None, idx([2, 0])], v[:, :2], True, ref)
        out = ETensor.empty(from_numpy_dtype(x.dtype), x.shape, order)
        assert call_fast("aten::index_put.out", tensor(x, CL), [None, idx([2, 0])],
                         tensor(v[:, :2], CL), True, out) == 0
        assert np.array_equal(out.numpy(), ref.numpy())
    for bad, cap in (([[2], None], (3, 3, 4, 5)), ([None, [-4]], (3, 3, 4, 5)),
                     ([[0], [0], [4]], (3, 5))):
        ind = [None if b is None else idx(b) for b in bad]
        fails("aten::index.Tensor_out", x, ind, bound_out(cap, np.float32))
    fails("aten::index.Tensor_out", x, [tensor(np.ones(3, bool))], bound_out((3, 3, 4, 5),
                                                                           np.float32))
    fails("aten::index_put.out", x, [idx([1, 2])], rand((3, 3, 4, 5)), False,
          static_out(x.shape, np.float32))  # values do not broadcast to (2, 3, 4, 5)
    # a bad index anywhere: nothing is written
    t = tensor(x)
    fails("aten::index_put_", t, [None, idx([0, 1, 2, 3])], np.zeros(5, np.float32), True)
    fails("aten::index_put_", t, [idx([1, -3]), None, idx([[0], [3]])], np.zeros(5, np.float32),
          False)
    assert np.array_equal(t.numpy(), x)


@pytest.mark.parametrize("dtype", SOME)
def test_index_select_and_embedding_generic(dtype):
    x = rand((4, 5), dtype)
    # forms the specialized binders decline: other out dtype, a rank-0 self, strided index
    check("aten::index_select.out", [x, 1, idx([4, 0, 4])], (4, 3), np.float64)
    check("aten::index_select.out", [rand((), dtype), 0, idx([0])], (), dtype)
    check("aten::index_select.out", [rand((), dtype), -1, idx(0)], (), dtype)
    check("aten::embedding.out", [x, idx([[3, 0], [1, 1]]), -1, False, False], (2, 2, 5),
          np.float32)
    i = tensor(np.array([[0, 3], [2, 1]]), (1, 0))
    check("aten::embedding.out", [x, i, -1, False, False], (2, 2, 5), np.float16)
    fails("aten::embedding.out", x, idx([4]), -1, False, False, static_out((1, 5), np.float64))
    fails("aten::index_select.out", x, 0, idx([-1]), static_out((1, 5), np.float64))


def test_dynamic_index_sizes():
    """Index and mask sizes change at run time; one binding serves them all."""
    x = rand((6, 4))
    i = ETensor.empty(from_numpy_dtype(np.int64), (5,), dynamism=Dynamism.DYNAMIC_BOUND)
    m = ETensor.empty(from_numpy_dtype(np.bool_), (6,))
    out = bound_out((6, 4), np.float32)
    from tests.kernels.helpers import bind_fast
    run = bind_fast("aten::index.Tensor_out", x, [i, None], out)
    run_m = bind_fast("aten::index.Tensor_out", x, [m], out)
    for values in ([1, 5, 0], [2], []):
        i.write(np.asarray(values, np.int64))
        assert run() == 0
        assert np.array_equal(out.numpy(), x[values])
        m.write(RNG.random(6) > 0.5)
        assert run_m() == 0
        assert np.array_equal(out.numpy(), x[m.numpy()])


# ---- masks, nonzero, repeat_interleave ----------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_select_scatter(dtype):
    for xs, ms in (((3, 4), (3, 4)), ((3, 4), (4,)), ((1, 4), (3, 1)), ((), ()), ((0, 4), (4,))):
        x = rand(xs, dtype)
        mask = rand(ms, np.bool_)
        b = np.broadcast_arrays(x, mask)
        k = int(np.count_nonzero(b[1]))
        check("aten::masked_select.out", [x, mask], (k,), dtype)
        check("aten::masked_scatter.out", [x, mask, rand((k + 2,), dtype)], b[0].shape, dtype)
    x = rand((2, 3), dtype)
    fails("aten::masked_scatter.out", x, np.ones((2, 3), bool), rand((5,), dtype),
          static_out((2, 3), dtype))


def test_masked_layouts():
    x = rand((2, 3, 4, 5))
    mask = rand((2, 3, 4, 5), np.bool_)
    src = rand((4, 30)).T  # a transposed source
    k = int(mask.sum())
    out = bound_out((120,), np.float32)
    assert call_fast("aten::masked_select.out", tensor(x, CL), tensor(mask, CL), out) == 0
    assert np.array_equal(out.numpy(), x[mask])
    ref = static_out(x.shape, np.float32)
    call("aten::masked_scatter.out", x, mask.astype(np.uint8), src, ref)
    out = ETensor.empty(from_numpy_dtype(x.dtype), x.shape, CL)
    assert call_fast("aten::masked_scatter.out", tensor(x, CL), mask.astype(np.uint8),
                     tensor(src, (1, 0)), out) == 0
    assert np.array_equal(out.numpy(), ref.numpy()) and k > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero(dtype):
    for shape in ((3, 4), (5,), (), (2, 0, 3), (2, 2, 2)):
        x = rand(shape, dtype)
        n = int(np.count_nonzero(x))
        check("aten::nonzero.out", [x], (n, len(shape)), np.int64)
    if np.dtype(dtype).kind == "f" or dtype is BF16:
        x = np.array([0.0, -0.0, np.nan, 1.0], np.float32).astype(dtype)
        assert check("aten::nonzero.out", [x], (2, 1), np.int64).ravel().tolist() == [2, 3]
    out = bound_out((6, 2), np.int64)
    assert call_fast("aten::nonzero.out", tensor(rand((2, 3)), (1, 0)), out) == 0


@pytest.mark.parametrize("rdtype", [np.int64, np.int32])
def test_repeat_interleave(rdtype):
    for reps in ([2, 0, 3], [1], [], [0, 0]):
        r = np.asarray(reps, rdtype)
        for size in (None, int(r.sum())):
            got = check("aten::repeat_interleave.Tensor_out", [r, size], (int(r.sum()),), rdtype)
            assert np.array_equal(got, np.repeat(np.arange(len(reps)), reps))
    check("aten::repeat_interleave.Tensor_out", [np.array([300, 2], rdtype), None], (302,),
          np.int8)
    fails("aten::repeat_interleave.Tensor_out", np.array([1, -1], rdtype), None,
          bound_out((4,), rdtype))
    fails("aten::repeat_interleave.Tensor_out", np.array([1, 2], rdtype), 4,
          bound_out((4,), rdtype))


# ---- topk ---------------------------------------------------------------------------

def _topk_both(x, k, dim, largest, vdtype=None, out_order=None, x_order=None):
    vdtype = vdtype or x.dtype
    shape = list(x.shape)
    if shape:
        shape[dim] = k
    rv, ri = static_out(shape, vdtype), static_out(shape, np.int64)
    call("aten::topk.values", x, k, dim, largest, True, rv, ri)
    cap = [s + 1 for s in shape]
    outs = [(ETensor.empty(from_numpy_dtype(vdtype), shape, out_order),
             ETensor.empty(from_numpy_dtype(np.int64), shape, out_order))]
    if out_order is None:
        outs.append((bound_out(cap, vdtype), bound_out(cap, np.int64)))
    for v, i in outs:
        src = x if x_order is None else tensor(x, x_order)
        assert call_fast("aten::topk.values", src, k, dim, largest, True, v, i) == 0
        assert v.shape == tuple(shape) and i.shape == tuple(shape)
        assert np.array_equal(v.numpy().astype(np.float64), rv.numpy().astype(np.float64),
                              equal_nan=True)
        assert np.array_equal(i.numpy(), ri.numpy())
    return ri.numpy()


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d is not np.bool_])
def test_topk_dtypes(dtype):
    x = rand((4, 7, 3), dtype)  # small integers: many ties
    for dim in (0, 1, -1):
        for largest in (True, False):
            for k in (0, 1, 3):
                _topk_both(x, k, dim, largest)
    _topk_both(x, 7, 1, True)


def test_topk_nan_zero_and_layouts():
    x = np.array([[1.0, np.nan, -0.0, 0.0, np.inf, np.nan, -np.inf, 0.0]], np.float32)
    for largest in (True, False):
        for k in (1, 4, 8):
            _topk_both(x, k, 1, largest)
    assert _topk_both(x, 3, 1, True).tolist() == [[1, 5, 4]]
    assert _topk_both(np.array(2.5), 1, 0, True).tolist() == 0
    y = rand((2, 5, 3, 4))
    _topk_both(y, 2, 1, True, out_order=CL, x_order=CL)
    _topk_both(y, 3, 3, False, x_order=CL)
    _topk_both(rand((2, 0, 3)), 0, 1, True)
    fails("aten::topk.values", y, 6, 1, True, True, bound_out((2, 6, 3, 4), np.float32),
          bound_out((2, 6, 3, 4), np.int64))


# ---- random -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_rand_randn(dtype):
    out = bound_out((100, 200), dtype)
    assert call_fast("aten::rand.out", [80, 250], out) == 0
    u = out.numpy().astype(np.float64)
    assert u.shape == (80, 250) and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    assert len(np.unique(u)) > (200 if np.dtype(dtype).itemsize == 2 else 15000)
    out = static_out((100, 200), dtype)
    assert call_fast("aten::randn.out", [100, 200], out) == 0
    z = out.numpy().astype(np.float64)
    # The stream is unseeded: bounds are 5 standard errors for n = 20000 draws
    # (a false failure about once in 10^6 runs), plus the rounding of 16-bit
    # dtypes, which moves values just below 1.0 onto 1.0.
    n = z.size
    assert abs(z.mean()) < 5 / np.sqrt(n) and abs(z.std() - 1) < 5 / np.sqrt(2 * n)
    inside = 0.6827  # P(|z| < 1) for a normal: a normal, not just mean/variance
    assert abs((np.abs(z) < 1).mean() - inside) < 5 * np.sqrt(inside * (1 - inside) / n) + 0.002
    assert call_fast("aten::randn.out", [2, 3, 0], static_out((2, 3, 0), dtype)) == 0
    assert call_fast("aten::rand.out", [], static_out((), dtype)) == 0


def test_rand_streams_differ():
    a, b = static_out((64,), np.float32), static_out((64,), np.float32)
    from tests.kernels.helpers import bind_fast
    run = bind_fast("aten::rand.out", [64], a)
    assert run() == 0
    first = a.numpy().copy()
    assert run() == 0 and not np.array_equal(first, a.numpy())
    assert call_fast("aten::rand.out", [64], b) == 0 and not np.array_equal(first, b.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_native_dropout(dtype):
    x = rand((3, 4, 5), dtype)
    for p, train in ((0.5, False), (0.0, True), (0.0, None), (0.3, False)):
        rv, rm = static_out(x.shape, dtype), static_out(x.shape, np.bool_)
        call("aten::native_dropout.out", x, p, train, rv, rm)
        v, m = bound_out((4, 5, 6), dtype), bound_out((4, 5, 6), np.bool_)
        assert call_fast("aten::native_dropout.out", x, p, train, v, m) == 0
        assert np.array_equal(v.numpy(), rv.numpy(), equal_nan=True)
        assert np.array_equal(m.numpy(), rm.numpy())
    x = rand((200, 300), dtype)
    for p in (0.25, 1.0):
        v, m = static_out(x.shape, dtype), static_out(x.shape, np.bool_)
        assert call_fast("aten::native_dropout.out", x, p, True, v, m) == 0
        keep = m.numpy()
        assert abs(keep.mean() - (1 - p)) < 0.01
        cd = np.float64 if dtype is np.float64 else np.float32
        scale = cd(0.0 if p == 1 else 1 / (1 - p))
        want = (x.astype(cd) * keep * scale).astype(dtype)
        assert np.array_equal(v.numpy(), want)
    # a transposed input keeps its layout
    xt = tensor(rand((4, 6)), (1, 0))
    v, m = static_out((4, 6), np.float32), static_out((4, 6), np.bool_)
    assert call_fast("aten::native_dropout.out", xt, 0.5, True, v, m) == 0
    assert np.array_equal(v.numpy(), xt.numpy() * m.numpy() * np.float32(2))
