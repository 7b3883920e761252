"""Indexing kernels against torch.ops.aten."""
import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ETensor, ExecuTorchError, from_numpy_dtype
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

aten = torch.ops.aten

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.int8, torch.uint8, torch.bool]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -20, 20, shape, generator=g).to(dtype)


def et(a):
    """An ETensor holding a torch tensor / numpy array (rank 0 kept); lists map element-wise."""
    if isinstance(a, (list, tuple)):
        return [et(e) for e in a]
    if isinstance(a, torch.Tensor):
        a = to_np(a)
    if not isinstance(a, np.ndarray):
        return a
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape)
    t.write(a)
    return t


def check(name, args, want, outs=1):
    wants = want if outs > 1 else (want,)
    ts = [static_out(tuple(w.shape), to_np(w).dtype) for w in wants]
    call(name, *[et(a) for a in args], *ts)
    for t, w in zip(ts, wants):
        assert_close(t.numpy(), to_np(w), rtol=0, atol=0)


# ---- index.Tensor -------------------------------------------------------------------------

def _idx(*vals):
    return [None if v is None else torch.as_tensor(v) for v in vals]


X = (3, 4, 5)
INDEX_CASES = [
    _idx([0, 2, -1]),                                   # one index, leading
    _idx(None, [1, 3]),                                 # after a slice
    _idx(None, None, [[0, 4], [1, 2]]),                 # 2-d index, last dim
    _idx([0, 1], [2, 3]),                               # adjacent pair
    _idx([[0], [2]], [1, 3, 0]),                        # broadcasting pair
    _idx(None, [0, 1], [2, 3]),                         # adjacent after slice: dims stay in place
    _idx([0, 2], None, [1, 4]),                         # non-adjacent: dims go first
    _idx([1], None, torch.tensor(3)),                   # 0-d index, non-adjacent
    _idx(torch.tensor([True, False, True])),            # bool mask, one dim
    _idx(None, torch.tensor([1, 0, 0, 1], dtype=torch.uint8).bool()),
    _idx(torch.rand(3, 4, generator=torch.Generator().manual_seed(1)) > 0.5),  # 2-d mask
    _idx(torch.tensor([True, False, True]), None, [0, 4]),  # mask + non-adjacent int index
    _idx(torch.zeros(3, dtype=torch.bool)),             # empty selection
    _idx(torch.tensor([], dtype=torch.int64)),          # empty index
    _idx([0, 1], [1, 2], [3, 4]),                       # all dims
    _idx(torch.tensor([0, 2], dtype=torch.int32)),      # int32 index
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(INDEX_CASES)))
def test_index(case, dtype):
    x = make(X, dtype)
    ind = INDEX_CASES[case]
    check("aten::index.Tensor_out", [x, ind], aten.index.Tensor(x, ind))


def test_index_uint8_mask_and_dynamic_out():
    x = make((4, 3), torch.float32)
    m = torch.tensor([1, 0, 1, 1], dtype=torch.uint8)
    want = x[m.bool()]
    out = bound_out((4, 3), np.float32)
    call("aten::index.Tensor_out", et(x), [et(m)], out)
    assert_close(out.numpy(), to_np(want))


def test_index_errors():
    x = et(np.zeros((3, 4), np.float32))
    with pytest.raises(ExecuTorchError, match="out of range"):
        call("aten::index.Tensor_out", x, [et(np.array([3]))], bound_out((3, 4), np.float32))
    with pytest.raises(ExecuTorchError, match="too many"):
        call("aten::index.Tensor_out", x, [None, None, et(np.array([0]))], bound_out((3, 4), np.float32))
    with pytest.raises(ExecuTorchError, match="float"):
        call("aten::index.Tensor_out", x, [et(np.array([0.0]))], bound_out((3, 4), np.float32))
    with pytest.raises(ExecuTorchError, match="mask"):
        call("aten::index.Tensor_out", x, [et(np.array([True, False]))], bound_out((3, 4), np.float32))


# ---- index_put ------------------------------------------------------------------------------

PUT_CASES = [
    (_idx([0, 2]), (2, 4, 5)),
    (_idx([0, 2]), (5,)),                       # broadcast values
    (_idx(None, [1, 3]), (3, 2, 5)),
    (_idx([0, 2], None, [1, 4]), (2, 4)),      # non-adjacent
    (_idx(torch.tensor([True, False, True])), (1, 4, 5)),
    (_idx([1, 1, 2], [0, 0, 3]), (3, 5)),      # duplicates (accumulate sums them)
    (_idx([0, 1], [2, 3], [4, 0]), ()),        # scalar value
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32,
                                   torch.bool])
@pytest.mark.parametrize("case", range(len(PUT_CASES)))
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(case, dtype, accumulate):
    ind, vshape = PUT_CASES[case]
    if not accumulate and case == 5:
        ind = _idx([1, 0, 2], [0, 1, 3])  # without accumulate duplicates are unordered
    if accumulate and dtype == torch.bool:
        return
    x, v = make(X, dtype), make(vshape, dtype, seed=3)
    want = aten.index_put.default(x, ind, v, accumulate)
    check("aten::index_put.out", [x, ind, v, accumulate], want)
    t = et(x)
    assert call("aten::index_put_", t, et(ind), et(v), accumulate) is None
    assert_close(t.numpy(), to_np(want), rtol=0, atol=0)


# ---- index_select / gather / scatter --------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim,index", [
    ((3, 4, 5), 0, [2, 0, 2]), ((3, 4, 5), -1, [4, 1]), ((3, 4, 5), 1, []),
    ((6,), 0, [5, 0, 3, 3]), ((), 0, [0]), ((), -1, 0), ((3, 4), 1, 2), ((0, 4), 1, [1, 3]),
])
def test_index_select(shape, dim, index, dtype):
    x, i = make(shape, dtype), torch.tensor(index, dtype=torch.int64)
    check("aten::index_select.out", [x, dim, i], aten.index_select.default(x, dim, i))
    check("aten::index_select.out", [x, dim, i.int()], aten.index_select.default(x, dim, i.int()))


def test_index_select_out_of_range():
    with pytest.raises(ExecuTorchError, match="out of bounds"):
        call("aten::index_select.out", et(np.zeros((2, 3))), 1, et(np.array([-1])),
             static_out((2, 1), np.float64))


GATHER_CASES = [((3, 4, 5), 0, (2, 4, 5)), ((3, 4, 5), -1, (3, 4, 7)), ((3, 4, 5), 1, (2, 3, 1)),
                ((6,), 0, (9,)), ((), 0, ()), ((3, 4), 1, (3, 0))]


def _index_for(shape, dim, ishape, seed=0):
    n = shape[dim] if shape else 1
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, ishape, generator=g)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim,ishape", GATHER_CASES)
def test_gather(shape, dim, ishape, dtype):
    x, i = make(shape, dtype), _index_for(shape, dim, ishape)
    check("aten::gather.out", [x, dim, i, False], aten.gather.default(x, dim, i))


def _unique_index(shape, dim, ishape, seed=0):
    """Index with no repeats along ``dim`` (scatter without add is unordered on repeats)."""
    if not shape:
        return torch.tensor(0)
    dim %= len(shape)
    g = torch.Generator().manual_seed(seed)
    k = ishape[dim]
    rest = [s for j, s in enumerate(ishape) if j != dim]
    rows = [torch.randperm(shape[dim], generator=g)[:k] for _ in range(int(np.prod(rest)))]
    flat = torch.stack(rows) if rows else torch.zeros((0, k), dtype=torch.int64)
    return flat.reshape(*rest, k).movedim(-1, dim).contiguous()


SCATTER_CASES = [((3, 4, 5), 0, (2, 4, 5)), ((3, 4, 5), -1, (3, 2, 3)), ((3, 4, 5), 1, (2, 3, 1)),
                 ((6,), 0, (4,)), ((), 0, ()), ((3, 4), 1, (3, 0))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int8,
                                   torch.bool])
@pytest.mark.parametrize("shape,dim,ishape", SCATTER_CASES)
def test_scatter(shape, dim, ishape, dtype):
    x = make(shape, dtype)
    i = _unique_index(shape, dim, ishape)
    src = make(tuple(s + 1 for s in ishape), dtype, seed=5)  # src may be larger than index
    check("aten::scatter.src_out", [x, dim, i, src], aten.scatter.src(x, dim, i, src))
    val = True if dtype == torch.bool else (2.5 if dtype.is_floating_point else 7)
    check("aten::scatter.value_out", [x, dim, i, val], aten.scatter.value(x, dim, i, val))
    if dtype != torch.bool:
        ir = _index_for(shape, dim, ishape, seed=2)  # repeats accumulate
        want = aten.scatter_add.default(x, dim, ir, src)
        out = static_out(tuple(want.shape), to_np(want).dtype)
        call("aten::scatter_add.out", et(x), dim, et(ir), et(src), out)
        r = 2e-3 if dtype == torch.float16 else 1e-6  # half rounds after every add, in any order
        assert_close(out.numpy(), to_np(want), rtol=r, atol=r)


def test_scatter_errors():
    x = et(np.zeros((2, 3), np.float32))
    with pytest.raises(ExecuTorchError, match="out of bounds"):
        call("aten::scatter.value_out", x, 1, et(np.array([[3]])), 1.0, static_out((2, 3), np.float32))
    with pytest.raises(ExecuTorchError, match="rank"):
        call("aten::gather.out", x, 1, et(np.array([0])), False, static_out((1,), np.float32))
    with pytest.raises(ExecuTorchError, match="exceeds"):
        call("aten::gather.out", x, 1, et(np.zeros((3, 1), np.int64)), False, static_out((3, 1), np.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("shape,dim,index", [((3, 4, 5), 0, 1), ((3, 4, 5), -1, -2), ((3, 4), 1, 3),
                                             ((5,), 0, -1)])
def test_select_scatter(shape, dim, index, dtype):
    x = make(shape, dtype)
    src = make(tuple(s for j, s in enumerate(shape) if j != dim % len(shape)), dtype, seed=4)
    check("aten::select_scatter.out", [x, src, dim, index], aten.select_scatter.default(x, src, dim, index))
    with pytest.raises(ExecuTorchError, match="index"):
        call("aten::select_scatter.out", et(x), et(src), dim, shape[dim], static_out(shape, to_np(x).dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool])
@pytest.mark.parametrize("shape,dim,start,end,step", [
    ((6, 4), 0, 1, 5, 2), ((6, 4), 1, None, None, 1), ((6, 4), -1, -3, None, 1), ((6, 4), 0, 2, 100, 3),
    ((6, 4), 0, -100, 2, 1), ((5,), 0, 4, 2, 1), ((3, 8, 2), 1, 0, 8, 4),
])
def test_slice_scatter(shape, dim, start, end, step, dtype):
    x = make(shape, dtype)
    sshape = tuple(x[(slice(None),) * (dim % len(shape)) + (slice(start, end, step),)].shape)
    src = make(sshape, dtype, seed=6)
    want = aten.slice_scatter.default(x, src, dim, start, end, step)
    check("aten::slice_scatter.out", [x, src, dim, start, end, step], want)


def test_slice_scatter_bad_src():
    with pytest.raises(ExecuTorchError, match="src"):
        call("aten::slice_scatter.out", et(np.zeros((4, 2))), et(np.zeros((3, 2))), 0, 0, 2, 1,
             static_out((4, 2), np.float64))


# ---- masks / nonzero / embedding ------------------------------------------------------------

MASK_CASES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (3, 4)), ((), ()), ((0, 4), (4,)), ((5,), ())]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xshape,mshape", MASK_CASES)
def test_masked_select_scatter(xshape, mshape, dtype):
    x, m = make(xshape, dtype), make(mshape, torch.bool, seed=1)
    want = aten.masked_select.default(x, m)
    out = bound_out((max(want.numel(), 1) + 3,), to_np(want).dtype)
    call("aten::masked_select.out", et(x), et(m), out)
    assert_close(out.numpy(), to_np(want), rtol=0, atol=0)
    full = torch.broadcast_shapes(xshape, mshape)
    src = make((int(np.prod(full)) + 2,), dtype, seed=7)
    check("aten::masked_scatter.out", [x, m, src], aten.masked_scatter.default(x, m, src))


def test_masked_scatter_short_source():
    with pytest.raises(ExecuTorchError, match="source"):
        call("aten::masked_scatter.out", et(np.zeros(3)), et(np.ones(3, bool)), et(np.zeros(2)),
             static_out((3,), np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 4), (7,), (), (2, 0, 3), (2, 3, 2)])
def test_nonzero(shape, dtype):
    x = make(shape, dtype)
    want = aten.nonzero.default(x)
    out = bound_out((int(np.prod(shape)) or 1, len(shape)), np.int64)
    call("aten::nonzero.out", et(x), out)
    assert_close(out.numpy(), to_np(want))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("ishape", [(5,), (2, 3), (), (0,)])
@pytest.mark.parametrize("idt", [torch.int64, torch.int32])
def test_embedding(ishape, dtype, idt):
    w = make((10, 4), dtype)
    i = torch.randint(0, 10, ishape, generator=torch.Generator().manual_seed(0)).to(idt)
    for pad in (-1, 3):
        check("aten::embedding.out", [w, i, pad, False, False], aten.embedding.default(w, i, pad))


def test_embedding_out_of_range():
    with pytest.raises(ExecuTorchError, match="out of bounds"):
        call("aten::embedding.out", et(np.zeros((4, 2))), et(np.array([4])), -1, False, False,
             static_out((1, 2), np.float64))
