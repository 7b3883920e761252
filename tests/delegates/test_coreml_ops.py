"""MIL ops one by one, part 1: elementwise, activations, layout and indexing, reductions.

Each case is a small ML Program built with coremltools' MIL builder, converted
(fp32, iOS18 opset) and run by our interpreter; the oracle is coremltools' own
definition of the op (its constant folding) or, where coremltools cannot fold an op
or folds it wrongly (noted at the case), a torch/numpy reference. See coreml_mil.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.delegates.coreml_mil import A, B, BOOL, I32, IMG, P, U, X, T, _R, mb, run_case, torch


UNARY_OPS = ["abs", "ceil", "cos", "cosh", "exp", "exp2", "floor", "round", "sign", "sin",
             "sinh", "square", "tan", "tanh", "relu", "relu6", "sigmoid", "softsign",
             "softplus", "erf"]
CASES = {f"unary_{op}": (lambda x, op=op: getattr(mb, op)(x=x), {"x": A}, None)
         for op in UNARY_OPS}
CASES["unary_silu"] = (lambda x: mb.silu(x=x), {"x": A}, lambda x: x / (1 + np.exp(-x)))
CASES.update({f"unary_{op}": (lambda x, op=op: getattr(mb, op)(x=x), {"x": U}, None)
              for op in ("acos", "asin", "atan", "atanh")})
CASES.update({f"unary_{op}": (lambda x, op=op: getattr(mb, op)(x=x), {"x": P}, None)
              for op in ("sqrt", "rsqrt", "log", "inverse")})
CASES.update({f"binary_{op}": (lambda x, y, op=op: getattr(mb, op)(x=x, y=y),
                               {"x": A, "y": B[:1]}, None)
              for op in ("add", "sub", "mul", "real_div", "maximum", "minimum", "equal",
                         "not_equal", "greater", "greater_equal", "less", "less_equal")})
CASES.update({
    "binary_floor_div": (lambda x, y: mb.floor_div(x=x, y=y), {"x": A, "y": P}, None),
    "binary_mod": (lambda x, y: mb.mod(x=x, y=y), {"x": A, "y": P}, None),
    "binary_pow": (lambda x, y: mb.pow(x=x, y=y), {"x": P, "y": B}, None),
    "int_floor_div": (lambda x: mb.floor_div(x=x, y=np.int32(3)), {"x": I32}, None),
    "logical": (lambda x, y: mb.logical_xor(x=mb.logical_and(x=x, y=y), y=mb.logical_or(
        x=mb.logical_not(x=x), y=y)), {"x": BOOL, "y": BOOL[::-1].copy()}, None),
    "select": (lambda c, a, b: mb.select(cond=c, a=a, b=b), {"c": BOOL, "a": A, "b": B}, None),
    "clip": (lambda x: mb.clip(x=x, alpha=-0.5, beta=0.7), {"x": A}, None),
    "threshold": (lambda x: mb.threshold(x=x, alpha=0.3), {"x": A}, None),
    "cast_int32": (lambda x: mb.cast(x=mb.mul(x=x, y=3.0), dtype="int32"), {"x": A}, None),
    "cast_bool": (lambda x: mb.cast(x=x, dtype="bool"), {"x": I32}, None),
    "cast_fp16": (lambda x: mb.cast(x=mb.cast(x=x, dtype="fp16"), dtype="fp32"), {"x": A}, None),
    "gelu_exact": (lambda x: mb.gelu(x=x), {"x": A}, None),
    "gelu_tanh": (lambda x: mb.gelu(x=x, mode="TANH_APPROXIMATION"), {"x": A}, None),
    "gelu_sigmoid": (lambda x: mb.gelu(x=x, mode="SIGMOID_APPROXIMATION"), {"x": A}, None),
    "elu": (lambda x: mb.elu(x=x, alpha=0.7), {"x": A}, None),
    "leaky_relu": (lambda x: mb.leaky_relu(x=x, alpha=0.1), {"x": A}, None),
    "linear_activation": (lambda x: mb.linear_activation(x=x, alpha=2.0, beta=-1.0), {"x": A},
                          None),
    "scaled_tanh": (lambda x: mb.scaled_tanh(x=x, alpha=2.0, beta=0.5), {"x": A}, None),
    "sigmoid_hard": (lambda x: mb.sigmoid_hard(x=x, alpha=0.2, beta=0.5), {"x": A}, None),
    "clamped_relu": (lambda x: mb.clamped_relu(x=x, alpha=0.1, beta=0.8), {"x": A}, None),
    "thresholded_relu": (lambda x: mb.thresholded_relu(x=x, alpha=0.2), {"x": A}, None),
    "prelu": (lambda x: mb.prelu(x=x, alpha=np.array([0.1, 0.2, 0.3], np.float32)),
              {"x": X[:, :, :, :]}, lambda x: np.where(x > 0, x, x * np.array(
                  [0.1, 0.2, 0.3], np.float32).reshape(1, 3, 1, 1))),
    "softplus_parametric": (lambda x: mb.softplus_parametric(
        x=x, alpha=np.array([1.0, 2.0, 0.5], np.float32), beta=np.array([0.5, 1.0, 2.0],
                                                                         np.float32)),
        {"x": X}, None),
    "softmax": (lambda x: mb.softmax(x=x, axis=1), {"x": X}, None),
})
CASES.update({
    "reshape": (lambda x: mb.reshape(x=x, shape=[6, -1, 0]), {"x": X.reshape(2, 3, 20)}, None),
    "transpose": (lambda x: mb.transpose(x=x, perm=[2, 0, 3, 1]), {"x": X}, None),
    "expand_dims": (lambda x: mb.expand_dims(x=x, axes=[0, -1]), {"x": A}, None),
    "squeeze": (lambda x: mb.squeeze(x=x, axes=[1]), {"x": X[:, :1]}, None),
    "concat": (lambda a, b: mb.concat(values=[a, b, a], axis=-1), {"a": A, "b": B}, None),
    # (coremltools folds concat ignoring interleave: MIL doc's definition as reference)
    "concat_interleave": (lambda a, b: mb.concat(values=[a, b], axis=0, interleave=True),
                          {"a": A, "b": B},
                          lambda a, b: np.stack([a, b], axis=1).reshape(6, 4)),
    "stack": (lambda a, b: mb.stack(values=[a, b], axis=1), {"a": A, "b": B}, None),
    "split_sizes": (lambda x: mb.split(x=x, split_sizes=[1, 3, 1], axis=-1), {"x": X}, None),
    "split_num": (lambda x: mb.split(x=x, num_splits=2, axis=2), {"x": X}, None),
    "tile": (lambda x: mb.tile(x=x, reps=[2, 1, 3]), {"x": X[0]}, None),
    "slice_by_index_masks": (lambda x: mb.slice_by_index(
        x=x, begin=[1, 0, 3, -1], end=[2, 2, 0, -6], stride=[1, 1, -1, -2],
        begin_mask=[False, True, False, False], end_mask=[False, False, True, False],
        squeeze_mask=[True, False, False, False]), {"x": X}, None),
    "slice_by_size": (lambda x: mb.slice_by_size(x=x, begin=[0, 1, 1, 0], size=[1, -1, 2, 3]),
                      {"x": X}, None),
    "slice_update": (lambda x, u: mb.slice_update(x=x, update=u, begin=[0, 1], end=[3, 4],
                                                  stride=[2, 2]), {"x": A, "u": B[:2, :2]},
                     lambda x, u: _slice_update(x, u)),
    "gather_int16_negative": (lambda x, i: mb.gather(x=x, indices=i, axis=1),
                              {"x": A, "i": np.array([[3, -1], [0, 2]], np.int16)},
                              lambda x, i: np.take(x, np.where(i < 0, i + 4, i), axis=1)),
    "gather_uint16": (lambda x, i: mb.gather(x=x, indices=i, axis=0),
                      {"x": A, "i": np.array([2, 0, 1, 1], np.uint16)},
                      lambda x, i: x[i.astype(np.int64)]),
    "gather_batch_dims": (lambda x, i: mb.gather(x=x, indices=i, axis=1, batch_dims=1),
                          {"x": A, "i": np.array([[0, 3], [1, 1], [2, 0]], np.int32)}, None),
    "gather_along_axis": (lambda x, i: mb.gather_along_axis(x=x, indices=i, axis=1),
                          {"x": A, "i": np.array([[0, 3], [1, 1], [2, 0]], np.int32)}, None),
    "gather_nd": (lambda x, i: mb.gather_nd(x=x, indices=i),
                  {"x": X[0], "i": np.array([[0, 1], [2, 3]], np.int32)},
                  lambda x, i: x[tuple(i.T)]),
    "scatter_add": (lambda d, i, u: mb.scatter(data=d, indices=i, updates=u, axis=0, mode="add"),
                    {"d": A, "i": np.array([2, 0, 2], np.int32), "u": B},
                    lambda d, i, u: _scatter(d, i, u, np.add)),
    "scatter_update": (lambda d, i, u: mb.scatter(data=d, indices=i, updates=u, axis=1,
                                                  mode="update"),
                       {"d": A, "i": np.array([3, 0], np.int32), "u": B[:, :2]},
                       lambda d, i, u: _scatter(d.T, i, u.T, None).T),
    "scatter_along_axis": (lambda d, i, u: mb.scatter_along_axis(data=d, indices=i, updates=u,
                                                                 axis=1, mode="max"),
                           {"d": A, "i": np.array([[0, 3], [1, 1], [2, 0]], np.int32),
                            "u": B[:, :2]}, lambda d, i, u: _scatter_axis1(d, i, u)),
    "scatter_nd": (lambda d, i, u: mb.scatter_nd(data=d, indices=i, updates=u, mode="mul"),
                   {"d": A, "i": np.array([[0, 1], [2, 3]], np.int32),
                    "u": np.array([2.0, -1.0], np.float32)},
                   lambda d, i, u: _scatter_nd_mul(d, i, u)),
    "shape": (lambda x: mb.shape(x=x), {"x": X}, lambda x: np.array(x.shape, np.int32)),
    "range_1d": (lambda x: mb.range_1d(start=1, end=mb.reduce_max(x=x), step=2),
                 {"x": np.array([9, 3], np.int32)}, lambda x: np.arange(1, 9, 2, dtype=np.int32)),
    "pad_constant": (lambda x: mb.pad(x=x, pad=[1, 2, 0, 3], constant_val=1.5), {"x": A}, None),
    "pad_reflect": (lambda x: mb.pad(x=x, pad=[1, 2, 2, 1], mode="reflect"), {"x": A}, None),
    "pad_replicate": (lambda x: mb.pad(x=x, pad=[1, 2], mode="replicate"), {"x": A}, None),
    "reverse": (lambda x: mb.reverse(x=x, axes=[0, 2]), {"x": X}, None),
    "reverse_sequence": (lambda x: mb.reverse_sequence(x=x, lengths=[2, 4, 1], seq_axis=1,
                                                       batch_axis=0), {"x": A},
                         lambda x: _rev_seq(x, [2, 4, 1])),
    "band_part": (lambda x: mb.band_part(x=x, lower=1, upper=0), {"x": A}, None),
    # (coremltools' own folding of an exclusive cumsum is broken: numpy reference)
    "cumsum_exclusive_reverse": (lambda x: mb.cumsum(x=x, axis=1, exclusive=True,
                                                     reverse=True), {"x": A},
                                 lambda x: np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x),
    "cumsum": (lambda x: mb.cumsum(x=x, axis=0), {"x": A}, None),
    "argsort": (lambda x: mb.argsort(x=x, axis=1, ascending=True), {"x": A}, None),
    "topk": (lambda x: mb.topk(x=x, k=2, axis=1), {"x": A}, None),
    "one_hot": (lambda i: mb.one_hot(indices=i, one_hot_vector_size=5, axis=0),
                {"i": np.array([0, 4, 2], np.int32)},
                lambda i: np.eye(5, dtype=np.float32)[:, i]),
    "non_zero": (lambda x: mb.non_zero(x=x), {"x": I32},
                 lambda x: np.argwhere(x).astype(np.int32)),
    "depth_to_space": (lambda x: mb.depth_to_space(x=x, block_size=2),
                       {"x": _R.standard_normal((1, 8, 2, 3)).astype(np.float32)},
                       lambda x: _d2s(x, 2)),
    "space_to_depth": (lambda x: mb.space_to_depth(x=x, block_size=2),
                       {"x": _R.standard_normal((1, 2, 4, 6)).astype(np.float32)},
                       lambda x: _s2d(x, 2)),
    "pixel_shuffle": (lambda x: mb.pixel_shuffle(x=x, upscale_factor=2),
                      {"x": _R.standard_normal((1, 8, 2, 3)).astype(np.float32)},
                      lambda x: torch.nn.functional.pixel_shuffle(T(x), 2).numpy()),
    "pixel_unshuffle": (lambda x: mb.pixel_unshuffle(x=x, downscale_factor=np.uint32(2)),
                        {"x": _R.standard_normal((1, 2, 4, 6)).astype(np.float32)},
                        lambda x: torch.nn.functional.pixel_unshuffle(T(x), 2).numpy()),
    "space_to_batch": (lambda x: mb.space_to_batch(x=x, block_shape=[2, 2],
                                                   paddings=[[0, 0], [1, 1]]),
                       {"x": _R.standard_normal((1, 2, 4, 2)).astype(np.float32)},
                       lambda x: _s2b(x, 2, 2, [[0, 0], [1, 1]])),
    "batch_to_space": (lambda x: mb.batch_to_space(x=x, block_shape=[2, 2],
                                                   crops=[[0, 0], [1, 1]]),
                       {"x": _R.standard_normal((4, 2, 2, 2)).astype(np.float32)},
                       lambda x: _b2s(x, 2, 2, [[0, 0], [1, 1]])),
    "sliding_windows": (lambda x: mb.sliding_windows(x=x, axis=1, size=2, stride=2),
                        {"x": A}, lambda x: x.reshape(3, 2, 2)),
    "flatten2d": (lambda x: mb.flatten2d(x=x, axis=2), {"x": X}, None),
    "fill_like": (lambda x: mb.fill_like(ref_tensor=x, value=2.5), {"x": A},
                  lambda x: np.full(x.shape, 2.5, np.float32)),
    "crop": (lambda x: mb.crop(x=x, crop_height=[1, 2], crop_width=[0, 3]), {"x": IMG},
             lambda x: x[..., 1:-2, :-3]),
})
CASES.update({f"{op}": (lambda x, op=op: getattr(mb, op)(x=x, axes=[1, -1], keep_dims=op[-1] in
                                                         "xn"), {"x": P.reshape(3, 2, 2)}, None)
              for op in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
                         "reduce_l1_norm", "reduce_l2_norm", "reduce_sum_square",
                         "reduce_log_sum", "reduce_log_sum_exp")})
CASES.update({
    "reduce_argmax": (lambda x: mb.reduce_argmax(x=x, axis=1, keep_dims=True), {"x": A}, None),
    "reduce_argmin": (lambda x: mb.reduce_argmin(x=x, axis=0), {"x": A}, None),
})


def _scatter(d, i, u, f):
    y = d.copy()
    for k, j in enumerate(i):
        y[j] = u[k] if f is None else f(y[j], u[k])
    return y


def _scatter_axis1(d, i, u):  # mode max
    y = d.copy()
    for r in range(i.shape[0]):
        for c in range(i.shape[1]):
            y[r, i[r, c]] = max(y[r, i[r, c]], u[r, c])
    return y


def _scatter_nd_mul(d, i, u):
    y = d.copy()
    for k, idx in enumerate(i):
        y[tuple(idx)] *= u[k]
    return y


def _d2s(x, b):  # TF DepthToSpace (DCR) in NCHW
    n, c, h, w = x.shape
    k = c // (b * b)
    y = np.zeros((n, k, h * b, w * b), x.dtype)
    for i in range(b):
        for j in range(b):
            y[:, :, i::b, j::b] = x[:, (i * b + j) * k:(i * b + j + 1) * k]
    return y


def _s2d(x, b):
    n, c, h, w = x.shape
    y = np.zeros((n, c * b * b, h // b, w // b), x.dtype)
    for i in range(b):
        for j in range(b):
            y[:, (i * b + j) * c:(i * b + j + 1) * c] = x[:, :, i::b, j::b]
    return y


def _s2b(x, bh, bw, p):  # TF SpaceToBatch: out[(i * bw + j) * N + n] = padded[n, :, i::bh, j::bw]
    xp = np.pad(x, [(0, 0), (0, 0), tuple(p[0]), tuple(p[1])])
    n = x.shape[0]
    return np.concatenate([xp[:, :, i::bh, j::bw] for i in range(bh) for j in range(bw)])[
        [(i * bw + j) * n + k for i in range(bh) for j in range(bw) for k in range(n)]]


def _b2s(x, bh, bw, c):
    nb, ch, h, w = x.shape
    n = nb // (bh * bw)
    y = np.zeros((n, ch, h * bh, w * bw), x.dtype)
    for i in range(bh):
        for j in range(bw):
            y[:, :, i::bh, j::bw] = x[(i * bw + j) * n:(i * bw + j + 1) * n]
    return y[:, :, c[0][0]:h * bh - c[0][1], c[1][0]:w * bw - c[1][1]]


def _slice_update(x, u):
    y = x.copy()
    y[0:3:2, 1:4:2] = u
    return y


def _rev_seq(x, lengths):
    y = x.copy()
    for b, n in enumerate(lengths):
        y[b, :n] = x[b, :n][::-1]
    return y


@pytest.mark.parametrize("name", sorted(CASES))
def test_mil_op(name):
    run_case(CASES, name)


def test_op_coverage():
    """Every op the CoreMLPartitioner emitted for the test models, and the MIL opset beyond."""
    from pyruntime.delegates.coreml.families import load_families
    from pyruntime.delegates.coreml.ops import OPS

    load_families()
    models = {"add", "cast", "clip", "concat", "const", "constexpr_affine_dequantize",
              "constexpr_blockwise_shift_scale", "conv", "expand_dims", "gather", "gelu",
              "greater_equal", "layer_norm", "linear", "matmul", "max_pool", "mul",
              "read_state", "reduce_mean", "relu", "reshape", "rsqrt",
              "scaled_dot_product_attention", "select", "silu", "slice_by_index",
              "slice_update", "softmax", "squeeze", "stack", "sub", "tile", "transpose",
              "write_state"}
    assert models - {"const"} <= set(OPS)
    assert len(OPS) >= 140, len(OPS)
