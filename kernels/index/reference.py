"""Indexing: index/index_put, index_select, gather/scatter, slice/select_scatter, masks, nonzero, embedding.

Advanced indexing maps onto numpy's: an ATen ``Tensor?[]`` becomes a tuple of
``slice(None)`` (for None) and integer arrays, with each bool/uint8 mask
expanded into its ``nonzero()`` arrays. numpy then applies the same rule as
ATen for where the indexed dims go (in place when the advanced indices are
adjacent, in front when a slice separates them).
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.args import wrap_dim
from pyruntime.kernels.registry import register


def _bad(op, msg):
    return ExecuTorchError(ErrorCode.InvalidArgument, f"{op}: {msg}")


def _int_index(op, name, t, n=None):
    """An integer index array; with ``n``, every value must lie in [0, n) as ATen checks."""
    a = t.numpy()
    if a.dtype.kind not in "iu":
        raise _bad(op, f"{name}: expected an int64 or int32 tensor, got {a.dtype}")
    if n is not None and a.size and (a.min() < 0 or a.max() >= n):
        bad = a[(a < 0) | (a >= n)].reshape(-1)[0]
        raise _bad(op, f"{name}: index {bad} is out of bounds for a dim of size {n}")
    return a


def _index_tuple(op, x, indices):
    """numpy index tuple for an ATen ``Tensor?[]`` over ``x``."""
    tup, d = [], 0
    for i, t in enumerate(indices):
        if t is None:
            tup.append(slice(None))
            d += 1
            continue
        a = t.numpy()
        if a.dtype in (np.bool_, np.uint8) and a.ndim == 0:
            tup.append(np.bool_(a))  # a 0-d mask adds (or empties) a leading dim
        elif a.dtype in (np.bool_, np.uint8):
            a = a.astype(bool, copy=False)
            if a.shape != x.shape[d:d + a.ndim]:
                raise _bad(op, f"indices[{i}]: mask of shape {list(a.shape)} does not match "
                               f"dims {d}..{d + a.ndim - 1} of shape {list(x.shape)}")
            tup.extend(np.nonzero(a))
            d += a.ndim
        elif a.dtype.kind in "iu":
            tup.append(a)
            d += 1
        else:
            raise _bad(op, f"indices[{i}]: expected a long, int, bool or byte tensor, got {a.dtype}")
    if d > x.ndim:
        raise _bad(op, f"indices: too many indices for a rank-{x.ndim} tensor")
    return tuple(tup)


def _checked(op, fn):
    try:
        return fn()
    except IndexError as e:
        raise _bad(op, f"index out of range: {e}") from None
    except ValueError as e:
        raise _bad(op, f"shape mismatch: {e}") from None


# ---- index / index_put ------------------------------------------------------------

@register("aten::index.Tensor_out")
def index_tensor_out(self, indices, out):
    x = self.numpy()
    tup = _index_tuple("index.Tensor_out", x, indices)
    out.write(_checked("index.Tensor_out", lambda: x[tup]))


def _put(op, a, indices, values, accumulate):
    """index_put into the array ``a`` in place."""
    tup = _index_tuple(op, a, indices)
    v = values.numpy()
    if accumulate:
        _checked(op, lambda: np.add.at(a, tup, v.astype(a.dtype, copy=False)))
    else:
        def put():
            a[tup] = v
        _checked(op, put)


@register("aten::index_put.out")
def index_put_out(self, indices, values, accumulate, out):
    a = self.numpy().copy()
    _put("index_put.out", a, indices, values, accumulate)
    out.write(a)


@register("aten::index_put_")
def index_put_(self, indices, values, accumulate):
    _put("index_put_", self.numpy(), indices, values, accumulate)


@register("aten::index_select.out")
def index_select_out(self, dim, index, out):
    x = self.numpy()
    ax = wrap_dim("index_select.out", dim, x.ndim)
    idx = _int_index("index_select.out", "index", index, x.shape[ax] if x.ndim else 1)
    if x.ndim == 0:
        out.write(x.reshape(1)[idx.reshape(-1)].reshape(()))
        return
    out.write(np.take(x, idx.reshape(-1), axis=ax))


# ---- gather / scatter ---------------------------------------------------------------

def _grid(op, x, dim, index):
    """Full index tuple addressing ``x`` at ``index`` along ``dim`` (ATen gather/scatter)."""
    ax = wrap_dim(op, dim, x.ndim)
    idx = _int_index(op, "index", index, x.shape[ax] if x.ndim else 1)
    if x.ndim == 0:
        x, idx = x.reshape(1), idx.reshape(-1)
    elif idx.ndim != x.ndim:
        raise _bad(op, f"index: expected rank {x.ndim}, got rank {idx.ndim}")
    for d in range(x.ndim):
        if d != ax and idx.shape[d] > x.shape[d]:
            raise _bad(op, f"index: size {idx.shape[d]} of dim {d} exceeds self's {x.shape[d]}")
    tup = list(np.ogrid[tuple(slice(s) for s in idx.shape)]) if idx.ndim else []
    tup[ax] = idx
    return x, tuple(tup), idx.shape


@register("aten::gather.out")
def gather_out(self, dim, index, sparse_grad, out):
    x, tup, shape = _grid("gather.out", self.numpy(), dim, index)
    out.write(x[tup].reshape(index.shape))


def _scatter(op, self, dim, index, src, add):
    x = self.numpy()
    a, tup, shape = _grid(op, x.copy(), dim, index)
    if isinstance(src, (int, float, bool)):
        v = np.asarray(src)
    else:
        s = src.numpy().reshape(src.shape or (1,))
        if s.ndim != len(shape) or any(i > j for i, j in zip(shape, s.shape)):
            raise _bad(op, f"src: shape {list(src.shape)} is smaller than index {list(index.shape)}")
        v = s[tuple(slice(k) for k in shape)]
    if add:
        np.add.at(a, tup, v.astype(a.dtype, copy=False))
    else:
        a[tup] = v
    return a.reshape(x.shape)


@register("aten::scatter.src_out")
def scatter_src_out(self, dim, index, src, out):
    out.write(_scatter("scatter.src_out", self, dim, index, src, False))


@register("aten::scatter.value_out")
def scatter_value_out(self, dim, index, value, out):
    out.write(_scatter("scatter.value_out", self, dim, index, value, False))


@register("aten::scatter_add.out")
def scatter_add_out(self, dim, index, src, out):
    out.write(_scatter("scatter_add.out", self, dim, index, src, True))


@register("aten::select_scatter.out")
def select_scatter_out(self, src, dim, index, out):
    a = self.numpy().copy()
    ax = wrap_dim("select_scatter.out", dim, a.ndim)
    n = a.shape[ax]
    if not -n <= index < n:
        raise _bad("select_scatter.out", f"index: expected a value in [{-n}, {n - 1}], got {index}")
    sel = (slice(None),) * ax + (index,)
    if a[sel].shape != src.shape:
        raise _bad("select_scatter.out", f"src: expected shape {list(a[sel].shape)}, "
                                         f"got {list(src.shape)}")
    a[sel] = src.numpy()
    out.write(a)


@register("aten::slice_scatter.out")
def slice_scatter_out(self, src, dim, start, end, step, out):
    a = self.numpy().copy()
    ax = wrap_dim("slice_scatter.out", dim, a.ndim)
    if step <= 0:
        raise _bad("slice_scatter.out", f"step: expected a positive value, got {step}")
    sel = (slice(None),) * ax + (slice(start, end, step),)
    if a[sel].shape != src.shape:
        raise _bad("slice_scatter.out", f"src: expected shape {list(a[sel].shape)}, "
                                        f"got {list(src.shape)}")
    a[sel] = src.numpy()
    out.write(a)


# ---- masks / nonzero / embedding ------------------------------------------------------

def _mask(op, mask):
    m = mask.numpy()
    if m.dtype not in (np.bool_, np.uint8):
        raise _bad(op, f"mask: expected a bool tensor, got {m.dtype}")
    return m.astype(bool, copy=False)


@register("aten::masked_scatter.out")
def masked_scatter_out(self, mask, source, out):
    op = "masked_scatter.out"
    x, m = _checked(op, lambda: np.broadcast_arrays(self.numpy(), _mask(op, mask)))
    a = x.copy()
    k = int(np.count_nonzero(m))
    s = source.numpy().reshape(-1)
    if s.size < k:
        raise _bad(op, f"source: expected at least {k} elements, got {s.size}")
    a[m] = s[:k]
    out.write(a)


@register("aten::masked_select.out")
def masked_select_out(self, mask, out):
    op = "masked_select.out"
    x, m = _checked(op, lambda: np.broadcast_arrays(self.numpy(), _mask(op, mask)))
    out.write(x[m])


@register("aten::nonzero.out")
def nonzero_out(self, out):
    out.write(np.argwhere(self.numpy() != 0).astype(np.int64, copy=False))


@register("aten::embedding.out")
def embedding_out(weight, indices, padding_idx, scale_grad_by_freq, sparse, out):
    # padding_idx and scale_grad_by_freq only change the backward pass.
    w = weight.numpy()
    if w.ndim != 2:
        raise _bad("embedding.out", f"weight: expected rank 2, got rank {w.ndim}")
    idx = _int_index("embedding.out", "indices", indices, w.shape[0])
    out.write(np.take(w, idx, axis=0))
