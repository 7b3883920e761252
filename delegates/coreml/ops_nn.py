"""Neural-network MIL ops: linear, matmul, conv, pooling, normalization, attention, resizing.

Accumulating ops (linear, matmul, einsum, conv, conv_transpose, attention)
multiply in float32 through BLAS and round once: Core ML's fp16 kernels
accumulate in wider precision, in an order of their own, so reproducing
ExecuTorch's portable summation order (kernels/linalg.ordered_matmul) would
cost much and match nothing. Softmax, layer norm, batch norm, nearest
upsampling, pixel shuffle, grid sampling and cumsum run pyruntime's reference
kernels; pooling is one strided slice per kernel tap.

MIL conventions: ``linear``'s weight is [D_out, D_in]; ``conv``'s weight is
[C_out, C_in/groups, *K] and ``conv_transpose``'s [C_in, C_out/groups, *K];
``pad`` lists (begin, end) per spatial dim; ``pad_type`` "same" puts the odd
pixel at the end, "same_lower" at the beginning.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pyruntime.delegates.coreml.ops import (axes_of, call_kernel, fval, ilist, ival, mil_op, op_error)


@mil_op("linear")
def linear(x, weight, bias=None):
    x, w = np.asarray(x), np.asarray(weight)
    if w.ndim != 2 or x.shape[-1:] != w.shape[1:]:
        raise op_error(f"linear: x {list(x.shape)} and weight {list(w.shape)} (MIL's weight "
                       "layout is [D_out, D_in])")
    y = np.matmul(x, w.T)
    return y if bias is None else y + bias


@mil_op("matmul")
def matmul(x, y, transpose_x=False, transpose_y=False):
    x, y = np.asarray(x), np.asarray(y)
    if bool(transpose_x) and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    if bool(transpose_y) and y.ndim >= 2:
        y = np.swapaxes(y, -1, -2)
    try:
        return np.matmul(x, y)
    except ValueError as e:
        raise op_error(f"matmul: {e}") from None


@mil_op("einsum")
def einsum(values, equation):
    try:
        return np.einsum(str(equation), *values, optimize=True)
    except ValueError as e:
        raise op_error(f"einsum {equation!r}: {e}") from None


# ---- convolution and pooling ------------------------------------------------------------
def _pads(pad_type, pad, sp, k, s, d) -> list:
    """(begin, end) per spatial dim for MIL's pad types."""
    n = len(sp)
    if pad_type == "valid":
        return [(0, 0)] * n
    if pad_type == "custom":
        p = ilist(pad) if pad is not None else [0] * 2 * n
        if len(p) != 2 * n or min(p, default=0) < 0:
            raise op_error(f"pad {p} for {n} spatial dims")
        return [(p[2 * i], p[2 * i + 1]) for i in range(n)]
    if pad_type in ("same", "same_lower"):
        out = []
        for i in range(n):
            ek = (k[i] - 1) * d[i] + 1
            total = max(0, s[i] * math.ceil(sp[i] / s[i]) - sp[i] + ek - s[i])
            small = total // 2
            out.append((small, total - small) if pad_type == "same" else (total - small, small))
        return out
    raise op_error(f"unknown pad_type {pad_type!r}")


def _spatial(x, k, strides, dilations):
    n = len(k)
    s = ilist(strides) if strides is not None else [1] * n
    d = ilist(dilations) if dilations is not None else [1] * n
    if len(s) != n or len(d) != n or min(s + d) < 1:
        raise op_error(f"strides {s} / dilations {d} for {n} spatial dims")
    return s, d


def _windows(xp, k, s, d, out_sp):
    """Read-only view (N, C, *out_sp, *k) of the padded input."""
    st = xp.strides
    n = len(k)
    shape = xp.shape[:2] + tuple(out_sp) + tuple(k)
    strides = st[:2] + tuple(st[2 + i] * s[i] for i in range(n)) + \
        tuple(st[2 + i] * d[i] for i in range(n))
    return as_strided(xp, shape, strides, writeable=False)


@mil_op("conv")
def conv(x, weight, bias=None, strides=None, pad_type="valid", pad=None, dilations=None,
         groups=1):
    x, w = np.asarray(x), np.asarray(weight)
    nsp = w.ndim - 2
    if nsp < 1 or x.ndim != w.ndim:
        raise op_error(f"conv: x {list(x.shape)} and weight {list(w.shape)}")
    g = ival(groups)
    k = w.shape[2:]
    s, d = _spatial(x, k, strides, dilations)
    if g < 1 or x.shape[1] != w.shape[1] * g or w.shape[0] % g:
        raise op_error(f"conv: {x.shape[1]} input channels, weight {list(w.shape)}, groups {g}")
    pads = _pads(pad_type, pad, x.shape[2:], k, s, d)
    xp = np.pad(x, [(0, 0), (0, 0)] + pads) if any(a or b for a, b in pads) else x
    out_sp = [(xp.shape[2 + i] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(nsp)]
    if min(out_sp) < 1:
        raise op_error(f"conv: kernel {list(k)} larger than the padded input "
                       f"{list(xp.shape[2:])}")
    n, cg, og, kk, L = x.shape[0], w.shape[1], w.shape[0] // g, int(np.prod(k)), \
        int(np.prod(out_sp))
    win = _windows(np.ascontiguousarray(xp), k, s, d, out_sp)  # N, C, *out, *k
    win = win.reshape((n, g, cg) + tuple(out_sp) + tuple(k))
    perm = (0, 1, 2) + tuple(range(3 + nsp, 3 + 2 * nsp)) + tuple(range(3, 3 + nsp))
    cols = np.ascontiguousarray(win.transpose(perm)).reshape(n, g, cg * kk, L)
    y = np.matmul(w.reshape(g, og, cg * kk), cols).reshape((n, g * og) + tuple(out_sp))
    if bias is not None:
        y = y + np.asarray(bias).reshape((-1,) + (1,) * nsp)
    return y


@mil_op("conv_transpose")
def conv_transpose(x, weight, bias=None, pad=None, output_shape=None, pad_type="valid",
                   strides=None, dilations=None, groups=1):
    x, w = np.asarray(x), np.asarray(weight)
    nsp = w.ndim - 2
    g = ival(groups)
    k = w.shape[2:]
    s, d = _spatial(x, k, strides, dilations)
    n, c = x.shape[:2]
    if g < 1 or c != w.shape[0] or c % g:
        raise op_error(f"conv_transpose: {c} input channels, weight {list(w.shape)}, groups {g}")
    cg, og = c // g, w.shape[1]
    sp = x.shape[2:]
    full = [(sp[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 for i in range(nsp)]
    acc = np.zeros((n, g, og) + tuple(full), np.result_type(x, w))
    xg = x.reshape((n, g, cg) + tuple(sp))
    wg = w.reshape((g, cg, og) + tuple(k))
    for tap in np.ndindex(*k):
        contrib = np.einsum("ngc...,gco->ngo...", xg, wg[(slice(None), slice(None),
                                                            slice(None)) + tap])
        sl = tuple(slice(tap[i] * d[i], tap[i] * d[i] + s[i] * (sp[i] - 1) + 1, s[i])
                   for i in range(nsp))
        acc[(slice(None),) * 3 + sl] += contrib
    acc = acc.reshape((n, g * og) + tuple(full))
    if output_shape is not None:
        want = ilist(output_shape)[-nsp:]
    else:
        want = None
    if pad_type == "custom" or pad_type == "valid":
        pads = _pads(pad_type, pad, sp, k, s, d)
    else:  # same: the output is input * stride; the cut is split like conv's same padding
        tot = [full[i] - sp[i] * s[i] for i in range(nsp)]
        pads = [(t // 2, t - t // 2) if pad_type == "same" else (t - t // 2, t // 2)
                for t in tot]
    sl = []
    for i in range(nsp):
        b, e = pads[i]
        size = full[i] - b - e if want is None else want[i]
        if size < 0:
            raise op_error(f"conv_transpose: output size {size}")
        if b + size > full[i]:  # output_shape asks for more than computed: zero-extend
            acc = np.pad(acc, [(0, 0)] * (2 + i) + [(0, b + size - full[i])] +
                         [(0, 0)] * (nsp - i - 1))
        sl.append(slice(b, b + size))
    y = acc[(slice(None), slice(None)) + tuple(sl)]
    if bias is not None:
        y = y + np.asarray(bias).reshape((-1,) + (1,) * nsp)
    return y


def _pool(x, kernel_sizes, strides, pad_type, pad, ceil_mode, fill):
    """The input padded for every window (explicit pads, then the ceil_mode extension),
    with the explicit pads, the extension and the output size."""
    x = np.asarray(x)
    k = ilist(kernel_sizes)
    nsp = len(k)
    if x.ndim != nsp + 2 or min(k, default=0) < 1:
        raise op_error(f"pool: kernel {k} for input {list(x.shape)}")
    s, _ = _spatial(x, k, strides, None)
    sp = x.shape[2:]
    pads = _pads(pad_type, pad, sp, k, s, [1] * nsp)
    out_sp, extra = [], []
    for i in range(nsp):
        tot = sp[i] + pads[i][0] + pads[i][1]
        if bool(ceil_mode):
            o = (tot - k[i] + s[i] - 1) // s[i] + 1
            if (o - 1) * s[i] >= sp[i] + pads[i][0] and (pads[i][0] or pads[i][1]):
                o -= 1
        else:
            o = (tot - k[i]) // s[i] + 1
        if o < 1:
            raise op_error(f"pool: kernel {k} larger than the padded input")
        out_sp.append(o)
        extra.append(max(0, (o - 1) * s[i] + k[i] - tot))
    widths = [(0, 0), (0, 0)] + [(pads[i][0], pads[i][1] + extra[i]) for i in range(nsp)]
    xp = np.pad(x, widths, constant_values=fill) if any(a or b for a, b in widths) else x
    return xp, pads, extra, out_sp, k, s


def _taps(xp, k, s, out_sp, ufunc):
    """``ufunc``-reduce every window: one strided slice per kernel tap (k ops on the output
    instead of a reduction over a window view: much faster in numpy)."""
    out = None
    for tap in np.ndindex(*k):
        sl = tuple(slice(t, t + st * (o - 1) + 1, st) for t, st, o in zip(tap, s, out_sp))
        v = xp[(slice(None), slice(None)) + sl]
        out = v.copy() if out is None else ufunc(out, v, out=out)
    return out


@mil_op("max_pool")
def max_pool(x, kernel_sizes, strides=None, pad_type="valid", pad=None, ceil_mode=False):
    xp, _, _, out_sp, k, s = _pool(x, kernel_sizes, strides, pad_type, pad, ceil_mode, -np.inf)
    return _taps(xp, k, s, out_sp, np.maximum)  # NaN propagates, as on ATen and Core ML


@mil_op("avg_pool")
def avg_pool(x, kernel_sizes, strides=None, pad_type="valid", pad=None,
             exclude_padding_from_average=False, ceil_mode=False):
    x = np.asarray(x)
    xp, pads, extra, out_sp, k, s = _pool(x, kernel_sizes, strides, pad_type, pad, ceil_mode, 0)
    total = _taps(xp, k, s, out_sp, np.add)
    # divisor per output: the real input pixels (exclude) or input + explicit padding, never
    # the implicit ceil_mode extension
    inc = not bool(exclude_padding_from_average)
    cnt_src = np.zeros((1, 1) + xp.shape[2:], x.dtype)
    cnt_src[(0, 0) + tuple(slice(0, a + n + b) if inc else slice(a, a + n)
                           for (a, b), n in zip(pads, x.shape[2:]))] = 1
    cnt = _taps(cnt_src, k, s, out_sp, np.add)
    return total / np.maximum(cnt, 1)


@mil_op("l2_pool")
def l2_pool(x, kernel_sizes, strides=None, pad_type="valid", pad=None, ceil_mode=False):
    xp, _, _, out_sp, k, s = _pool(np.square(np.asarray(x)), kernel_sizes, strides, pad_type,
                                   pad, ceil_mode, 0)
    return np.sqrt(_taps(xp, k, s, out_sp, np.add))


# ---- normalization ------------------------------------------------------------------------
@mil_op("batch_norm")
def batch_norm(x, mean, variance, gamma=None, beta=None, epsilon=1e-5):
    x = np.ascontiguousarray(x)
    if x.ndim < 2:
        raise op_error(f"batch_norm: input of rank {x.ndim}")
    c = x.shape[1]
    vec = [None if v is None else np.asarray(v, x.dtype).reshape(c) for v in
           (gamma, beta, mean, variance)]
    return call_kernel("aten::_native_batch_norm_legit_no_training.out",
                       [x] + vec + [0.1, fval(epsilon)],
                       [(x.dtype, x.shape), (x.dtype, (0,)), (x.dtype, (0,))])[0]


@mil_op("layer_norm")
def layer_norm(x, axes=None, gamma=None, beta=None, epsilon=1e-5):
    x = np.asarray(x)
    ax = axes_of(axes, x.ndim)
    k = len(ax)
    if k and ax == tuple(range(x.ndim - k, x.ndim)):  # trailing axes: ATen's layer norm
        ns = x.shape[x.ndim - k:]
        w = None if gamma is None else np.asarray(gamma, x.dtype).reshape(ns)
        b = None if beta is None else np.asarray(beta, x.dtype).reshape(ns)
        stat = x.shape[:x.ndim - k] + (1,) * k
        return call_kernel("aten::native_layer_norm.out",
                           [np.ascontiguousarray(x), list(ns), w, b, fval(epsilon)],
                           [(x.dtype, x.shape), (x.dtype, stat), (x.dtype, stat)])[0]
    return _normalized(x, ax, epsilon, gamma, beta,
                       [x.shape[i] if i in ax else 1 for i in range(x.ndim)])


@mil_op("instance_norm")
def instance_norm(x, gamma=None, beta=None, epsilon=1e-5):
    x = np.asarray(x)
    return _normalized(x, tuple(range(2, x.ndim)), epsilon, gamma, beta,
                       (1, -1) + (1,) * (x.ndim - 2))


def _normalized(x, ax, epsilon, gamma, beta, shape):
    """(x - mean) / sqrt(var + epsilon) over axes ``ax``, then times ``gamma`` and plus
    ``beta`` (each reshaped to ``shape``) where given."""
    mean = x.mean(axis=ax, keepdims=True)
    y = (x - mean) / np.sqrt(np.square(x - mean).mean(axis=ax, keepdims=True) + fval(epsilon))
    if gamma is not None:
        y = y * np.asarray(gamma).reshape(shape)
    if beta is not None:
        y = y + np.asarray(beta).reshape(shape)
    return y


@mil_op("l2_norm")
def l2_norm(x, epsilon=1e-6):
    x = np.asarray(x)
    ax = tuple(range(max(x.ndim - 3, 0), x.ndim))  # the last three (or fewer) dims
    return x / np.sqrt(np.maximum(np.sum(np.square(x), axis=ax, keepdims=True), fval(epsilon)))


@mil_op("local_response_norm")
def local_response_norm(x, size, alpha=1e-4, beta=0.75, k=1.0):
    x = np.asarray(x)
    n = ival(size)
    sq = np.square(x)
    half = (n - 1) // 2
    padded = np.pad(sq, [(0, 0), (half, n - 1 - half)] + [(0, 0)] * (x.ndim - 2))
    acc = sum(padded[:, i:i + x.shape[1]] for i in range(n))
    return x / np.power(fval(k) + fval(alpha) / n * acc, fval(beta))


@mil_op("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None):
    q, k, v = np.asarray(query), np.asarray(key), np.asarray(value)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.float32(math.sqrt(q.shape[-1]))
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        scores = np.where(m, scores, -np.inf) if m.dtype == np.bool_ else scores + m
    mx = np.max(scores, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - mx)
        return np.matmul(e / e.sum(axis=-1, keepdims=True), v)


# ---- resizing ------------------------------------------------------------------------------
def _interp_matrix(n_in, n_out, mode, scale=None):
    """(n_out, n_in) two-tap linear weights for MIL's sampling modes."""
    o = np.arange(n_out, dtype=np.float64)
    if mode == "align_corners":
        src = o * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    elif mode == "half_pixel":
        r = 1.0 / scale if scale else n_in / n_out
        src = np.maximum((o + 0.5) * r - 0.5, 0)
    else:  # asymmetric ("DEFAULT"): dst * in / out
        src = o * (1.0 / scale if scale else n_in / n_out)
    i0 = np.clip(np.floor(src).astype(np.int64), 0, n_in - 1)
    lam = np.clip(src - i0, 0, 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    m = np.zeros((n_out, n_in), np.float64)
    np.add.at(m, (np.arange(n_out), i0), 1 - lam)
    np.add.at(m, (np.arange(n_out), i1), lam)
    return m.astype(np.float32)


def _bilinear(x, oh, ow, mode, sh=None, sw=None):
    x = np.asarray(x)
    mh = _interp_matrix(x.shape[-2], oh, mode, sh)
    mw = _interp_matrix(x.shape[-1], ow, mode, sw)
    return np.matmul(np.matmul(mh, x), mw.T)


@mil_op("upsample_bilinear")
def upsample_bilinear(x, scale_factor_height=1, scale_factor_width=1, align_corners=True,
                      half_pixel_centers=None):
    x = np.asarray(x)
    sh, sw = fval(scale_factor_height), fval(scale_factor_width)
    oh, ow = int(math.floor(x.shape[-2] * sh)), int(math.floor(x.shape[-1] * sw))
    half = (not bool(align_corners)) if half_pixel_centers is None else bool(half_pixel_centers)
    mode = "align_corners" if bool(align_corners) else "half_pixel" if half else "asymmetric"
    return _bilinear(x, oh, ow, mode, sh, sw)


@mil_op("upsample_nearest_neighbor")
def upsample_nearest_neighbor(x, scale_factor_height=1, scale_factor_width=1):
    x = np.ascontiguousarray(x)
    sh, sw = fval(scale_factor_height), fval(scale_factor_width)
    if x.ndim != 4:
        rows = np.floor(np.arange(int(x.shape[-2] * sh)) / sh).astype(np.int64)
        cols = np.floor(np.arange(int(x.shape[-1] * sw)) / sw).astype(np.int64)
        return x[..., rows[:, None], cols[None, :]]
    out = (x.shape[0], x.shape[1], int(math.floor(x.shape[2] * sh)),
           int(math.floor(x.shape[3] * sw)))
    return call_kernel("aten::upsample_nearest2d.vec_out", [x, None, [sh, sw]],
                       [(x.dtype, out)])[0]


_SAMPLING = {"STRICT_ALIGN_CORNERS": "align_corners", "ALIGN_CORNERS": "align_corners",
             "UNALIGN_CORNERS": "half_pixel", "DEFAULT": "asymmetric",
             "OFFSET_CORNERS": "half_pixel"}


@mil_op("resize_bilinear")
def resize_bilinear(x, target_size_height=1, target_size_width=1, sampling_mode="DEFAULT"):
    if sampling_mode not in _SAMPLING:
        raise op_error(f"resize_bilinear: unknown sampling_mode {sampling_mode!r}")
    return _bilinear(x, ival(target_size_height), ival(target_size_width),
                     _SAMPLING[sampling_mode])


@mil_op("resize_nearest_neighbor", upcast=False)
def resize_nearest_neighbor(x, target_size_height, target_size_width):
    x = np.asarray(x)
    oh, ow = ival(target_size_height), ival(target_size_width)
    rows = np.minimum((np.arange(oh) * x.shape[-2]) // oh, x.shape[-2] - 1)
    cols = np.minimum((np.arange(ow) * x.shape[-1]) // ow, x.shape[-1] - 1)
    return x[..., rows[:, None], cols[None, :]]


@mil_op("resize")
def resize(x, shape, resized_dims, interpolation_mode="LINEAR", sampling_mode="DEFAULT"):
    x = np.asarray(x)
    nd = ival(resized_dims)
    target = ilist(shape)[-nd:]
    if nd not in (1, 2) or x.ndim < nd:
        raise op_error(f"resize: {nd} resized dims of rank {x.ndim}")
    if interpolation_mode == "NEAREST_NEIGHBOR":
        for i, n_out in enumerate(target):
            ax = x.ndim - nd + i
            n_in = x.shape[ax]
            x = np.take(x, np.minimum((np.arange(n_out) * n_in) // max(n_out, 1), n_in - 1), ax)
        return x
    mode = _SAMPLING.get(sampling_mode)
    if mode is None or interpolation_mode != "LINEAR":
        raise op_error(f"resize: mode {interpolation_mode}/{sampling_mode}")
    for i, n_out in enumerate(target):
        ax = x.ndim - nd + i
        m = _interp_matrix(x.shape[ax], n_out, mode)
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, ax, 0), axes=1), 0, ax)
    return x


_GRID_PAD = {"constant": 0, "border": 1, "reflection": 2}


@mil_op("resample")
def resample(x, coordinates, sampling_mode, padding_mode, padding_value, coordinates_mode,
             align_corners):
    """grid_sample: pyruntime's aten::grid_sampler_2d after normalizing the coordinates."""
    x, c = np.ascontiguousarray(x), np.asarray(coordinates, np.float32)
    ac = bool(align_corners)
    if padding_mode not in _GRID_PAD or sampling_mode not in ("bilinear", "nearest") or \
            (padding_mode == "constant" and fval(padding_value) != 0):
        raise op_error(f"resample: {sampling_mode}/{padding_mode} (padding value "
                       f"{fval(padding_value)}) is not supported")
    size = np.array([x.shape[3], x.shape[2]], np.float32)  # (W, H): coordinates are (x, y)
    if coordinates_mode == "unnormalized":
        c = 2 * c / (size - 1) - 1 if ac else (2 * c + 1) / size - 1
    elif coordinates_mode == "normalized_zero_to_one":
        c = 2 * c - 1
    elif coordinates_mode != "normalized_minus_one_to_one":
        raise op_error(f"resample: unknown coordinates_mode {coordinates_mode!r}")
    mode = 0 if sampling_mode == "bilinear" else 1
    out = (x.shape[0], x.shape[1], c.shape[1], c.shape[2])
    return call_kernel("aten::grid_sampler_2d.out",
                       [x, np.ascontiguousarray(c, x.dtype), mode, _GRID_PAD[padding_mode], ac],
                       [(x.dtype, out)])[0]
