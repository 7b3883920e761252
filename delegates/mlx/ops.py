"""What each MLX instruction node computes, in numpy, with MLX's semantics (channels-last
convolutions, ``take`` with a scalar index dropping the axis, ``axes=[]`` reducing all).

``OPS`` maps a node table name to ``fn(node, ctx)``: ``ctx.t(tid)`` reads a tensor slot,
``ctx.iv(IntOrVid)`` an int, ``ctx.set(tid, array)`` writes. A node type missing here
is refused at load (backend.py). gelu and erf run the portable kernels (libm's erf, as
ExecuTorch's), the rest is plain numpy in the inputs' dtype.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.numpy_math import sdpa, softmax
from pyruntime.kernels.conv.reference import conv_nd, conv_transpose_nd
from pyruntime.kernels.registry import get_kernel


def _portable(name: str, x: np.ndarray, *args) -> np.ndarray:
    """Run a portable out-variant kernel on one array (and scalar args) into a new array."""
    a = np.ascontiguousarray(x)
    out = ETensor.from_array(np.empty_like(a))
    k = get_kernel(name)
    full = [ETensor.from_array(a), *args, out]
    k.fn(*(full if k.arity is None else full[:k.arity]))
    return out.numpy().copy()


MAX_ELEMENTS = 1 << 31  # a node may not make a bigger tensor (a corrupt shape, not a model)


def _sized(shape) -> list:
    shape = [int(d) for d in shape]
    n = int(np.prod([max(d, 0) for d in shape], dtype=np.float64))
    if any(d < 0 for d in shape) or n > MAX_ELEMENTS:
        raise ExecuTorchError(ErrorCode.InvalidProgram,
                              f"a node makes a tensor of shape {shape} ({n} elements; at most "
                              f"{MAX_ELEMENTS})")
    return shape


def _unary(fn):
    return lambda n, c: c.set(n.out, fn(c.t(n.x)))


def _binary(fn):
    def run(n, c):
        a, b = c.t(n.a), c.t(n.b)
        c.set(n.out, np.asarray(fn(a, b)).astype(np.result_type(a, b), copy=False))
    return run


def _compare(fn):
    return lambda n, c: c.set(n.out, fn(c.t(n.a), c.t(n.b)))


def _axes(axes, ndim):
    return None if not axes else tuple(a % ndim for a in axes)


def _reduce(fn):
    def run(n, c):
        x = c.t(n.x)
        c.set(n.out, np.asarray(fn(x, axis=_axes(n.axes, x.ndim),
                                   keepdims=bool(n.keepdims))).astype(x.dtype, copy=False))
    return run


def _addmm(n, c):
    a, b = c.t(n.mat1), c.t(n.mat2)
    y = np.matmul(a, b)
    if n.alpha != 1.0:
        y = y * a.dtype.type(n.alpha)
    if n.bias is not None:
        bias = c.t(n.bias)
        y = y + (bias if n.beta == 1.0 else bias * a.dtype.type(n.beta))
    c.set(n.out, y.astype(a.dtype, copy=False))


def _conv(x, w, stride, padding, dilation, groups):
    """MLX's conv: x [N, *spatial, C_in], w [C_out, *K, C_in / groups] -> [N, *out, C_out],
    on the portable reference convolution (kernels/conv/reference.py) in channels-first layout."""
    nd = x.ndim - 2
    _sized([x.shape[0], x.shape[-1]] + [x.shape[1 + i] + 2 * padding[i] for i in range(nd)])
    y = conv_nd(np.moveaxis(x, -1, 1), np.moveaxis(w, -1, 1), stride, padding, dilation, groups)
    return np.moveaxis(y, 1, -1).astype(x.dtype, copy=False)


def _conv_transpose(x, w, stride, padding, dilation, output_padding, groups):
    """MLX's transposed conv: x [N, *spatial, C_in], w [C_out, *K, C_in / groups], on the
    portable reference (kernels/conv/reference.py), whose weights are [C_in, C_out / groups, *K]."""
    nd = x.ndim - 2
    k = w.shape[1:1 + nd]
    cin_g, cout = w.shape[-1], w.shape[0]
    _sized([x.shape[0], cout] + [(x.shape[1 + i] - 1) * stride[i] + dilation[i] * (k[i] - 1) + 1
                                 + output_padding[i] for i in range(nd)])
    wg = w.reshape((groups, cout // groups) + tuple(k) + (cin_g,))
    wt = np.moveaxis(wg, -1, 1).reshape((groups * cin_g, cout // groups) + tuple(k))
    y = conv_transpose_nd(np.moveaxis(x, -1, 1), wt, stride, padding, dilation, output_padding,
                          groups)
    return np.moveaxis(y, 1, -1).astype(x.dtype, copy=False)


def _conv_transpose2d(n, c):
    c.set(n.out, _conv_transpose(c.t(n.x), c.t(n.w), (n.stride_h, n.stride_w),
                                 (n.padding_h, n.padding_w), (n.dilation_h, n.dilation_w),
                                 (n.output_padding_h, n.output_padding_w), n.groups))


def _conv2d(n, c):
    c.set(n.out, _conv(c.t(n.x), c.t(n.w), (n.stride_h, n.stride_w), (n.padding_h, n.padding_w),
                       (n.dilation_h, n.dilation_w), n.groups))


def _conv1d(n, c):
    c.set(n.out, _conv(c.t(n.x), c.t(n.w), (n.stride,), (n.padding,), (n.dilation,), n.groups))


def _layer_norm(n, c):
    x = c.t(n.x)
    xf = x.astype(np.float32)
    mean = xf.mean(-1, keepdims=True)
    var = ((xf - mean) ** 2).mean(-1, keepdims=True)
    y = (xf - mean) / np.sqrt(var + np.float32(n.eps))
    if n.weight is not None:
        y = y * c.t(n.weight)
    if n.bias is not None:
        y = y + c.t(n.bias)
    c.set(n.out, y.astype(x.dtype, copy=False))


def _rms_norm(n, c):
    x = c.t(n.x)
    xf = x.astype(np.float32)
    y = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + np.float32(n.eps))
    if n.weight is not None:
        y = y * c.t(n.weight)
    c.set(n.out, y.astype(x.dtype, copy=False))


def _gelu(n, c):
    approx = n.approximate or "none"
    if approx not in ("none", "tanh"):
        raise ExecuTorchError(ErrorCode.NotSupported, f"gelu approximate={approx!r}")
    c.set(n.out, _portable("aten::gelu.out", c.t(n.x), approx))


def _take(n, c):
    x, idx = c.t(n.x), n.index
    if idx.kind == 2:
        i = c.t(idx.tid)
    elif idx.kind == 1:
        i = int(c.v(idx.vid))
    else:
        i = int(idx.literal)
    axis = n.axis % x.ndim
    if np.ndim(i) == 0 and not -x.shape[axis] <= i < x.shape[axis]:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"take: index {i} out of range for axis {axis} of size "
                              f"{x.shape[axis]}")
    c.set(n.out, np.take(x, i, axis=axis))


def _slice(n, c):
    x = c.t(n.x)
    axis = c.iv(n.axis) % x.ndim
    sl = [slice(None)] * x.ndim
    sl[axis] = slice(c.iv(n.start), c.iv(n.stop), n.step or 1)
    c.set(n.out, x[tuple(sl)])


def _sdpa(n, c):
    mask = c.t(n.mask) if n.mask is not None else None
    c.set(n.out, sdpa(c.t(n.q), c.t(n.k), c.t(n.v), mask, 0.0, bool(n.causal), n.scale))


def _where(n, c):
    x, y = c.t(n.x), c.t(n.y)
    c.set(n.out, np.where(c.t(n.condition), x, y).astype(np.result_type(x, y), copy=False))


def _broadcast_to(n, c):
    """A -1 in the target shape keeps the input's size there (aligned from the right)."""
    x = c.t(n.x)
    shape = [c.iv(s) for s in n.shape]
    lead = len(shape) - x.ndim
    shape = [x.shape[i - lead] if v == -1 and i >= lead else v for i, v in enumerate(shape)]
    c.set(n.out, np.broadcast_to(x, shape))


def _tile(n, c):
    x = c.t(n.x)
    reps = [c.iv(r) for r in n.reps]
    _sized([x.size] + reps)
    c.set(n.out, np.tile(x, reps))


def _repeat(n, c):
    x = c.t(n.x)
    r = c.iv(n.repeats)
    _sized([x.size, r])
    c.set(n.out, np.repeat(x, r, axis=n.axis))


def _squeeze(n, c):
    x = c.t(n.x)
    c.set(n.out, np.squeeze(x, axis=tuple(d % x.ndim for d in n.dims) if n.dims else None))


def _split(n, c):
    x = c.t(n.x)
    sizes = [c.iv(s) for s in n.sizes or []]
    parts = np.split(x, np.cumsum(sizes)[:-1], axis=n.axis % x.ndim)
    if len(parts) != len(n.outs or []):
        raise ExecuTorchError(ErrorCode.InvalidProgram,
                              f"split into {len(parts)} parts, the node has {len(n.outs or [])} "
                              "outputs")
    for tid, p in zip(n.outs, parts):
        c.set(tid, p)


def _full(n, c):
    v = n.v.literal if not n.v.is_vid else c.v(n.v.vid)
    c.set(n.out, np.full(_sized([c.iv(s) for s in n.shape]), v, to_numpy_dtype(n.scalar_type)))


def _full_like(n, c):
    x = c.t(n.x)
    v = n.v.literal if not n.v.is_vid else c.v(n.v.vid)
    dt = x.dtype if n.scalar_type is None else to_numpy_dtype(n.scalar_type)
    c.set(n.out, np.full(x.shape, v, dt))  # (x exists: its size is bounded already)


def _int_op(fn):
    return lambda n, c: c.setv(n.out, int(fn(c.iv(n.a), c.iv(n.b))))


def _floor_div(a, b):
    if b == 0:
        raise ExecuTorchError(ErrorCode.InvalidArgument, "integer division by zero")
    return a // b


def _mod(a, b):
    if b == 0:
        raise ExecuTorchError(ErrorCode.InvalidArgument, "integer modulo by zero")
    return a % b


def _erf(x):
    return _portable("aten::erf.out", x)


def _pad(n, c):
    x = c.t(n.x)
    if (n.mode or "constant") != "constant":
        raise ExecuTorchError(ErrorCode.NotSupported, f"pad mode {n.mode!r}")
    w = [c.iv(p) for p in n.pad_width or []]
    if len(w) != 2 * x.ndim:
        raise ExecuTorchError(ErrorCode.InvalidProgram,
                              f"pad_width has {len(w)} entries for a rank-{x.ndim} tensor")
    _sized([d + a + b for d, a, b in zip(x.shape, w[::2], w[1::2])])
    c.set(n.out, np.pad(x, list(zip(w[::2], w[1::2])), constant_values=n.constant_value))


def _clip(n, c):
    x = c.t(n.x)
    lo = c.t(n.a_min) if n.a_min is not None else None
    hi = c.t(n.a_max) if n.a_max is not None else None
    y = x
    if lo is not None:
        y = np.maximum(y, lo)
    if hi is not None:
        y = np.minimum(y, hi)
    c.set(n.out, np.asarray(y).astype(x.dtype, copy=False))


def _logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    y = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return y if keepdims else np.squeeze(y, axis=axis)


def _var(std):
    def run(n, c):
        x = c.t(n.x)
        f = np.std if std else np.var
        c.set(n.out, np.asarray(f(x, axis=_axes(n.axes, x.ndim), keepdims=bool(n.keepdims),
                                  ddof=n.ddof)).astype(x.dtype, copy=False))
    return run


def _cumsum(n, c):
    x = c.t(n.x)
    axis = n.axis % x.ndim
    y = np.flip(x, axis) if n.reverse else x
    y = np.cumsum(y, axis=axis, dtype=x.dtype)
    if not n.inclusive:
        y = y - (np.flip(x, axis) if n.reverse else x)
    c.set(n.out, np.flip(y, axis) if n.reverse else y)


def _slice_update(n, c):
    dst = np.array(c.t(n.dst), copy=True)
    axis = c.iv(n.axis) % dst.ndim
    sl = [slice(None)] * dst.ndim
    sl[axis] = slice(c.iv(n.start), c.iv(n.stop), n.step or 1)
    dst[tuple(sl)] = c.t(n.update)
    c.set(n.out, dst)


def _index_copy(n, c):
    dst = np.array(c.t(n.dst), copy=True)
    idx = c.t(n.indices).astype(np.int64)
    axis = n.axis % dst.ndim
    if idx.size and (idx.min() < -dst.shape[axis] or idx.max() >= dst.shape[axis]):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"index_copy: an index is out of range for axis {axis} of size "
                              f"{dst.shape[axis]}")
    sl = [slice(None)] * dst.ndim
    sl[axis] = idx
    dst[tuple(sl)] = c.t(n.update)
    c.set(n.out, dst)


def _arange(n, c):
    dt = None if n.scalar_type is None else to_numpy_dtype(n.scalar_type)
    start, stop, step = c.iv(n.start), c.iv(n.stop), c.iv(n.step)
    if step == 0:
        raise ExecuTorchError(ErrorCode.InvalidArgument, "arange with step 0")
    _sized([max(0, -(-(stop - start) // step))])
    c.set(n.out, np.arange(start, stop, step, dtype=dt or np.int64))


def _tri(fn):
    return lambda n, c: c.set(n.out, fn(c.t(n.x), k=n.k))


OPS = {
    "NoopNode": lambda n, c: None,
    "IdCopyNode": lambda n, c: c.set(n.out, c.t(n.x).copy()),
    "ContiguousNode": lambda n, c: c.set(n.out, np.ascontiguousarray(c.t(n.x))),
    "TransposeNode": lambda n, c: c.set(n.out, np.transpose(c.t(n.x), n.perm)),
    "ReshapeNode": lambda n, c: c.set(n.out, np.reshape(c.t(n.x), [c.iv(s) for s in n.shape])),
    "BroadcastToNode": _broadcast_to,
    "ExpandDimsNode": lambda n, c: c.set(n.out, np.expand_dims(c.t(n.x), n.axis)),
    "SqueezeNode": _squeeze,
    "ConcatenateNode": lambda n, c: c.set(n.out, np.concatenate([c.t(t) for t in n.tensors],
                                                                 axis=n.axis)),
    "StackNode": lambda n, c: c.set(n.out, np.stack([c.t(t) for t in n.tensors], axis=n.axis)),
    "SplitNode": _split,
    "TileNode": _tile,
    "RepeatNode": _repeat,
    "TakeNode": _take,
    "SliceNode": _slice,
    "PadNode": _pad,
    "AsTypeNode": lambda n, c: c.set(n.out, c.t(n.x).astype(to_numpy_dtype(n.scalar_type))),
    "FullNode": _full,
    "FullLikeNode": _full_like,
    "WhereNode": _where,
    "AddmmNode": _addmm,
    "Conv1DNode": _conv1d,
    "Conv2DNode": _conv2d,
    "ConvTranspose2DNode": _conv_transpose2d,
    "LayerNormNode": _layer_norm,
    "RMSNormNode": _rms_norm,
    "SdpaNode": _sdpa,
    "SoftmaxNode": lambda n, c: c.set(n.out, softmax(c.t(n.x).astype(np.float32), n.axis)
                                      .astype(c.t(n.x).dtype, copy=False)),
    "GeluNode": _gelu,
    "SiluNode": _unary(lambda x: x / (1 + np.exp(-x))),
    "SigmoidNode": _unary(lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)),
    "TanhNode": _unary(np.tanh),
    "ExpNode": _unary(np.exp),
    "LogNode": _unary(np.log),
    "Log2Node": _unary(np.log2),
    "Log10Node": _unary(np.log10),
    "Log1pNode": _unary(np.log1p),
    "Expm1Node": _unary(np.expm1),
    "SqrtNode": _unary(np.sqrt),
    "RsqrtNode": _unary(lambda x: (1 / np.sqrt(x)).astype(x.dtype, copy=False)),
    "ReciprocalNode": _unary(lambda x: (1 / x).astype(x.dtype, copy=False)),
    "SquareNode": _unary(np.square),
    "AbsNode": _unary(np.abs),
    "NegNode": _unary(np.negative),
    "SignNode": _unary(np.sign),
    "FloorNode": _unary(np.floor),
    "CeilNode": _unary(np.ceil),
    "SinNode": _unary(np.sin),
    "CosNode": _unary(np.cos),
    "TanNode": _unary(np.tan),
    "ErfNode": _unary(_erf),
    "ArcsinNode": _unary(np.arcsin),
    "ArccosNode": _unary(np.arccos),
    "ArctanNode": _unary(np.arctan),
    "SinhNode": _unary(np.sinh),
    "CoshNode": _unary(np.cosh),
    "ArcsinhNode": _unary(np.arcsinh),
    "ArccoshNode": _unary(np.arccosh),
    "ArctanhNode": _unary(np.arctanh),
    "BitwiseInvertNode": _unary(np.invert),
    "LogicalNotNode": _unary(np.logical_not),
    "AddNode": _binary(np.add),
    "SubtractNode": _binary(np.subtract),
    "MultiplyNode": _binary(np.multiply),
    "DivideNode": _binary(np.true_divide),
    "MaximumNode": _binary(np.maximum),
    "MinimumNode": _binary(np.minimum),
    "PowerNode": _binary(np.power),
    "Atan2Node": _binary(np.arctan2),
    "LessNode": _compare(np.less),
    "LessEqualNode": _compare(np.less_equal),
    "GreaterNode": _compare(np.greater),
    "GreaterEqualNode": _compare(np.greater_equal),
    "EqualNode": _compare(np.equal),
    "NotEqualNode": _compare(np.not_equal),
    "LogicalAndNode": _compare(np.logical_and),
    "LogicalOrNode": _compare(np.logical_or),
    "BitwiseAndNode": _binary(np.bitwise_and),
    "BitwiseOrNode": _binary(np.bitwise_or),
    "BitwiseXorNode": _binary(np.bitwise_xor),
    "SumNode": _reduce(np.sum),
    "MeanNode": _reduce(np.mean),
    "MaxNode": _reduce(np.max),
    "MinNode": _reduce(np.min),
    "ProdNode": _reduce(np.prod),
    "ArgmaxNode": lambda n, c: c.set(n.out, np.argmax(c.t(n.x), axis=n.axis,
                                                      keepdims=bool(n.keepdims))),
    "ClipNode": _clip,
    "LogSumExpNode": _reduce(_logsumexp),
    "VarNode": _var(False),
    "StdNode": _var(True),
    "AnyNode": lambda n, c: c.set(n.out, np.any(c.t(n.x), axis=_axes(n.axes, c.t(n.x).ndim),
                                                keepdims=bool(n.keepdims))),
    "AllNode": lambda n, c: c.set(n.out, np.all(c.t(n.x), axis=_axes(n.axes, c.t(n.x).ndim),
                                                keepdims=bool(n.keepdims))),
    "ArgminNode": lambda n, c: c.set(n.out, np.argmin(c.t(n.x), axis=n.axis,
                                                      keepdims=bool(n.keepdims))),
    "CumsumNode": _cumsum,
    "FlipNode": lambda n, c: c.set(n.out, np.flip(c.t(n.x), axis=tuple(n.axes or []) or None)),
    "TruncNode": _unary(np.trunc),
    "TriuNode": _tri(np.triu),
    "TrilNode": _tri(np.tril),
    "SortNode": lambda n, c: c.set(n.out, np.sort(c.t(n.x), axis=n.axis, kind="stable")),
    "ArgsortNode": lambda n, c: c.set(n.out, np.argsort(c.t(n.x), axis=n.axis, kind="stable")),
    "TakeAlongAxisNode": lambda n, c: c.set(n.out, np.take_along_axis(
        c.t(n.x), c.t(n.indices).astype(np.int64), axis=n.axis)),
    "SliceUpdateNode": _slice_update,
    "IndexCopyNode": _index_copy,
    "ARangeNode": _arange,
    "RemainderNode": _binary(np.remainder),
    "FloorDivideNode": _binary(np.floor_divide),
    "LogAddExpNode": _binary(np.logaddexp),
    "SymSizeNode": lambda n, c: c.setv(n.out, int(c.t(n.a).shape[n.dim])),
    "ItemIntNode": lambda n, c: c.setv(n.out, int(np.asarray(c.t(n.x)).reshape(-1)[0])),
    "AddIntNode": _int_op(lambda a, b: a + b),
    "SubtractIntNode": _int_op(lambda a, b: a - b),
    "MultiplyIntNode": _int_op(lambda a, b: a * b),
    "FloorDivideIntNode": _int_op(_floor_div),
    "ModIntNode": _int_op(_mod),
}
