"""Copy kernels: dtype and dim-order conversions, clone/copy, empty, pads, flip/roll/repeat, tril/triu.

Dtype and layout conversions are all ``out.write``: it casts like ATen's
``out=`` (float -> int truncates toward zero, nonzero -> True) and stores in
the out tensor's own dim order, so a channels-last out gets channels-last bytes.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.dtypes import cast_array
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.kernels.args import wrap_dim
from pyruntime.kernels.registry import register

# torch.memory_format as the emitter serializes it (exir/tensor.py memory_format_enum).
_CONTIGUOUS, _PRESERVE = 0, 1


def _bad(op: str, arg: str, msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"{op}: {arg}: {msg}")


def _dim(op: str, dim: int, ndim: int, arg: str = "dims") -> int:
    return wrap_dim(op, dim, ndim, arg)


def _memory_format(op: str, memory_format) -> None:
    if memory_format not in (None, _CONTIGUOUS, _PRESERVE):
        raise _bad(op, "memory_format",
                   f"expected None, 0 (contiguous) or 1 (preserve), got {memory_format!r}")


def _dim_order(op: str, dim_order, ndim: int, out) -> None:
    if dim_order is None:
        return
    if sorted(dim_order) != list(range(ndim)):
        raise _bad(op, "dim_order", f"expected a permutation of range({ndim}), got {list(dim_order)}")
    if tuple(dim_order) != tuple(out.dim_order):
        raise _bad(op, "out", f"expected an out tensor with dim_order {list(dim_order)}, "
                              f"got {list(out.dim_order)}")


def _broadcast_to(op: str, src: np.ndarray, shape) -> np.ndarray:
    try:
        return np.broadcast_to(src, shape)
    except ValueError:
        raise _bad(op, "src", f"expected a shape broadcastable to {list(shape)}, "
                              f"got {list(src.shape)}") from None


# ---- copies and conversions ---------------------------------------------------------

@register("aten::clone.out")
def clone_out(self, memory_format, out):
    _memory_format("clone", memory_format)
    out.write(self.numpy())


@register("aten::_to_copy.out")
def to_copy_out(self, non_blocking, memory_format, out):
    _memory_format("_to_copy", memory_format)
    out.write(self.numpy())


@register("dim_order_ops::_to_dim_order_copy.out")
def to_dim_order_copy_out(self, non_blocking, dim_order, out):
    _dim_order("_to_dim_order_copy", dim_order, self.ndim, out)
    out.write(self.numpy())


@register("dim_order_ops::_clone_dim_order.out")
def clone_dim_order_out(self, non_blocking, dim_order, out):
    _dim_order("_clone_dim_order", dim_order, self.ndim, out)
    out.write(self.numpy())


@register("et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out")
def device_copy_out(self, out):
    out.write(self.numpy())


@register("aten::copy.out")
def copy_out(self, src, non_blocking, out):
    value = _broadcast_to("copy", src.numpy(), self.shape)
    if out.dtype != self.dtype:  # copy() yields self's dtype; out= then casts again
        value = cast_array(value, self.dtype)
    out.write(value)


@register("aten::copy_")
def copy_(self, src, non_blocking):
    value = _broadcast_to("copy_", src.numpy(), self.shape)
    if self.numel:
        np.copyto(self.numpy(), cast_array(value, self.dtype))


@register("aten::empty.out")
def empty_out(size, memory_format, out):
    _memory_format("empty", memory_format)
    out.resize(size)


@register("dim_order_ops::_empty_dim_order.out")
def empty_dim_order_out(size, dim_order, out):
    _dim_order("_empty_dim_order", dim_order, len(size), out)
    out.resize(size)


# ---- pads ---------------------------------------------------------------------------

@register("aten::constant_pad_nd.out")
def constant_pad_nd_out(self, pad, value, out):
    x = self.numpy()
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise _bad("constant_pad_nd", "pad",
                   f"expected an even length <= {2 * x.ndim}, got {list(pad)}")
    shape, src, dst = list(x.shape), [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for i in range(len(pad) // 2):
        d, lo, hi = x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        n = x.shape[d]
        shape[d] = n + lo + hi
        if shape[d] < 0:
            raise _bad("constant_pad_nd", "pad", f"padding {list(pad)} makes dim {d} negative")
        keep = max(0, n - max(0, -lo) - max(0, -hi))  # negative pads crop
        src[d] = slice(max(0, -lo), max(0, -lo) + keep)
        dst[d] = slice(max(0, lo), max(0, lo) + keep)
    res = np.full(shape, np.array(value).astype(x.dtype), x.dtype)
    res[tuple(dst)] = x[tuple(src)]
    out.write(res)


def _pad_indices(op: str, n: int, lo: int, hi: int, reflect: bool) -> np.ndarray:
    """Input index for each output position along one padded dim (ATen's index maps)."""
    size = n + lo + hi
    if size <= 0:
        raise _bad(op, "padding", f"padding ({lo}, {hi}) of a dim of size {n} leaves no output")
    if reflect and (lo >= n or hi >= n):
        raise _bad(op, "padding", f"expected pads < input size {n}, got ({lo}, {hi})")
    if n == 0:
        raise _bad(op, "self", "expected non-empty padded dims")
    i = np.arange(size) - lo
    if reflect:
        i = np.abs(i)
        return np.where(i >= n, 2 * (n - 1) - i, i)
    return np.clip(i, 0, n - 1)


def _pad(op: str, self, padding, k: int, reflect: bool, out) -> None:
    x = self.numpy()
    if len(padding) != 2 * k:
        raise _bad(op, "padding", f"expected {2 * k} values, got {list(padding)}")
    if x.ndim not in (k + 1, k + 2):
        raise _bad(op, "self", f"expected a tensor of rank {k + 1} or {k + 2}, got rank {x.ndim}")
    for i in range(k):
        d = x.ndim - 1 - i
        x = np.take(x, _pad_indices(op, x.shape[d], padding[2 * i], padding[2 * i + 1], reflect),
                    axis=d)
    out.write(x)


def _pad_kernel(name: str, k: int, reflect: bool):
    @register(f"aten::{name}.out")
    def kernel(self, padding, out):
        _pad(name, self, padding, k, reflect, out)
    kernel.__name__ = f"{name}_out"
    return kernel


for _k in (1, 2, 3):
    _pad_kernel(f"reflection_pad{_k}d", _k, True)
    _pad_kernel(f"replication_pad{_k}d", _k, False)


# ---- rearrangements -----------------------------------------------------------------

@register("aten::flip.out")
def flip_out(self, dims, out):
    x = self.numpy()
    ds = [_dim("flip", d, x.ndim) for d in dims]
    if len(set(ds)) != len(ds):
        raise _bad("flip", "dims", f"expected distinct dims, got {list(dims)}")
    out.write(np.flip(x, tuple(ds)) if x.ndim else x)


@register("aten::roll.out")
def roll_out(self, shifts, dims, out):
    x = self.numpy()
    if not dims:
        if len(shifts) != 1:
            raise _bad("roll", "shifts", f"expected one shift when dims is empty, got {list(shifts)}")
        out.write(np.roll(x.reshape(-1), shifts[0]).reshape(x.shape))
        return
    if len(shifts) != len(dims):
        raise _bad("roll", "shifts", f"expected {len(dims)} shifts, got {list(shifts)}")
    ds = [_dim("roll", d, x.ndim) for d in dims]
    out.write(np.roll(x, list(shifts), axis=ds) if x.ndim else x)


@register("aten::repeat.out")
def repeat_out(self, repeats, out):
    x = self.numpy()
    lead = len(repeats) - x.ndim
    if lead < 0 or any(r < 0 for r in repeats):
        raise _bad("repeat", "repeats",
                   f"expected at least {x.ndim} non-negative repeats, got {list(repeats)}")
    out.write(np.tile(x.reshape((1,) * lead + x.shape), list(repeats)))


@register("aten::repeat_interleave.Tensor_out")
def repeat_interleave_tensor_out(repeats, output_size, out):
    r = repeats.numpy()
    if r.ndim != 1 or r.dtype.kind not in "iu":
        raise _bad("repeat_interleave", "repeats",
                   f"expected a 1-D integer tensor, got {r.dtype}{list(r.shape)}")
    if (r < 0).any():
        raise _bad("repeat_interleave", "repeats", "expected non-negative repeats")
    total = int(r.sum())
    if output_size is not None and output_size != total:
        raise _bad("repeat_interleave", "output_size",
                   f"expected the sum of repeats ({total}), got {output_size}")
    out.write(np.repeat(np.arange(r.size, dtype=r.dtype), r))


def _triangle(op: str, fn, self, diagonal, out) -> None:
    x = self.numpy()
    if x.ndim < 2:
        raise _bad(op, "self", f"expected a tensor of rank >= 2, got rank {x.ndim}")
    out.write(fn(x, diagonal))


@register("aten::tril.out")
def tril_out(self, diagonal, out):
    _triangle("tril", np.tril, self, diagonal, out)


@register("aten::triu.out")
def triu_out(self, diagonal, out):
    _triangle("triu", np.triu, self, diagonal, out)
