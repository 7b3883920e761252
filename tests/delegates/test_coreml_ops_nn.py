"""MIL ops one by one, part 2: linear algebra, convolution, pooling, normalization,
attention, resizing, recurrent layers, weight decompression, quantization and states.

Same harness as part 1 (coreml_mil.py); most of these ops are not folded by
coremltools, so each case names a torch or numpy reference.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.delegates.coreml_mil import (A, B, IMG, P, SEQ, X, CompiledFunction, Directory, T,
                                        _R, ct, load_program, mb, run_case, torch, types)

CASES: dict = {}


def _conv_ref(x, w, stride=1, padding=0, dilation=1, groups=1, pad=None):
    t = T(x)
    if pad is not None:
        t = torch.nn.functional.pad(t, pad)
    f = {3: torch.nn.functional.conv1d, 4: torch.nn.functional.conv2d,
         5: torch.nn.functional.conv3d}[x.ndim]
    return f(t, T(w), None, stride, padding, dilation, groups).numpy()


W = _R.standard_normal((6, 2, 3, 3)).astype(np.float32)
CASES.update({
    "linear": (lambda x: mb.linear(x=x, weight=B, bias=np.arange(3, dtype=np.float32)),
               {"x": X[..., :4]}, lambda x: x @ B.T + np.arange(3, dtype=np.float32)),
    "matmul_transpose": (lambda x, y: mb.matmul(x=x, y=y, transpose_x=True, transpose_y=True),
                         {"x": X[0], "y": np.ascontiguousarray(X[1, :, :2, :4])},
                         lambda x, y: np.swapaxes(x, -1, -2) @ np.swapaxes(y, -1, -2)),
    "einsum": (lambda a, b: mb.einsum(values=(a, b), equation="nchw,nwhr->nchr"),
               {"a": X, "b": _R.standard_normal((2, 5, 4, 3)).astype(np.float32)},
               lambda a, b: np.einsum("nchw,nwhr->nchr", a, b)),
    "conv_same_groups": (lambda x: mb.conv(x=x, weight=W, strides=[2, 1], pad_type="same",
                                           groups=2), {"x": IMG},
                         lambda x: _conv_ref(x, W, (2, 1), groups=2, pad=(1, 1, 1, 1))),
    "conv_same_lower": (lambda x: mb.conv(x=x, weight=W[:, :, :2, :2], strides=[1, 1],
                                          pad_type="same_lower", groups=2), {"x": IMG},
                        lambda x: _conv_ref(x, W[:, :, :2, :2], groups=2, pad=(1, 0, 1, 0))),
    "conv_custom_dilated": (lambda x: mb.conv(x=x, weight=W, pad_type="custom",
                                              pad=[2, 0, 1, 3], dilations=[2, 1], groups=2,
                                              bias=np.ones(6, np.float32)), {"x": IMG},
                            lambda x: _conv_ref(x, W, dilation=(2, 1), groups=2,
                                                pad=(1, 3, 2, 0)) + 1),
    "conv1d_valid": (lambda x: mb.conv(x=x, weight=W[:, :, 0], strides=[2], pad_type="valid"),
                     {"x": IMG[:, :2, 0]}, lambda x: _conv_ref(x, W[:, :, 0], 2)),
    "conv_transpose": (lambda x: mb.conv_transpose(x=x, weight=W[:4], strides=[2, 2],
                                                   pad=[1, 1, 0, 1], pad_type="custom"),
                       {"x": IMG}, lambda x: torch.nn.functional.conv_transpose2d(
                           T(x), T(W[:4]), stride=2).numpy()[:, :, 1:-1, 0:-1]),
    "max_pool_ceil": (lambda x: mb.max_pool(x=x, kernel_sizes=[3, 2], strides=[2, 2],
                                            pad_type="valid", ceil_mode=True), {"x": IMG},
                      lambda x: torch.nn.functional.max_pool2d(T(x), (3, 2), 2,
                                                               ceil_mode=True).numpy()),
    "max_pool_same": (lambda x: mb.max_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2],
                                            pad_type="same"), {"x": IMG},
                      lambda x: torch.nn.functional.max_pool2d(
                          torch.nn.functional.pad(T(x), (0, 1, 0, 1), value=-math.inf),
                          2).numpy()),
    "avg_pool_exclude": (lambda x: mb.avg_pool(x=x, kernel_sizes=[3, 3], strides=[2, 2],
                                               pad_type="custom", pad=[1, 1, 1, 1],
                                               exclude_padding_from_average=True), {"x": IMG},
                         lambda x: torch.nn.functional.avg_pool2d(
                             T(x), 3, 2, 1, count_include_pad=False).numpy()),
    "avg_pool_include": (lambda x: mb.avg_pool(x=x, kernel_sizes=[3, 3], strides=[2, 2],
                                               pad_type="custom", pad=[1, 1, 1, 1]), {"x": IMG},
                         lambda x: torch.nn.functional.avg_pool2d(T(x), 3, 2, 1).numpy()),
    "l2_pool": (lambda x: mb.l2_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2],
                                     pad_type="valid"), {"x": IMG},
                lambda x: torch.nn.functional.lp_pool2d(T(x), 2, 2).numpy()),
    "batch_norm": (lambda x: mb.batch_norm(x=x, mean=A[0], variance=P[0], gamma=B[0], beta=A[1],
                                           epsilon=1e-3), {"x": IMG},
                   lambda x: torch.nn.functional.batch_norm(T(x), T(A[0]), T(P[0]), T(B[0]),
                                                            T(A[1]), eps=1e-3).numpy()),
    "instance_norm": (lambda x: mb.instance_norm(x=x, gamma=B[0], beta=A[1]), {"x": IMG},
                      lambda x: torch.nn.functional.instance_norm(
                          T(x), weight=T(B[0]), bias=T(A[1])).numpy()),
    "layer_norm_trailing": (lambda x: mb.layer_norm(x=x, axes=[-2, -1], gamma=A, beta=B,
                                                    epsilon=1e-5), {"x": X[..., :3, :4]},
                            lambda x: torch.nn.functional.layer_norm(T(x), (3, 4), T(A),
                                                                     T(B)).numpy()),
    "layer_norm_middle": (lambda x: mb.layer_norm(x=x, axes=[1]), {"x": X},
                          lambda x: torch.nn.functional.layer_norm(
                              T(x).transpose(1, 3), (3,)).transpose(1, 3).numpy()),
    "l2_norm": (lambda x: mb.l2_norm(x=x, epsilon=1e-6), {"x": X},
                lambda x: x / np.sqrt(np.sum(x * x, axis=(1, 2, 3), keepdims=True))),
    "local_response_norm": (lambda x: mb.local_response_norm(x=x, size=3), {"x": IMG},
                            lambda x: torch.nn.functional.local_response_norm(
                                T(x), 3, 1e-4, 0.75, 1.0).numpy()),
    "sdpa_bool_mask": (lambda q, k, v, m: mb.scaled_dot_product_attention(
        query=q, key=k, value=v, attn_mask=m), {"q": SEQ, "k": SEQ[..., ::-1, :].copy(),
                                                "v": SEQ * 2, "m": np.tril(np.ones((5, 5),
                                                                                   bool))},
        lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(
            T(q), T(k), T(v), T(m)).numpy()),
    "sdpa_float_mask": (lambda q, k, v, m: mb.scaled_dot_product_attention(
        query=q, key=k, value=v, attn_mask=m), {"q": SEQ, "k": SEQ * 0.5, "v": SEQ,
                                                "m": _R.standard_normal((5, 5)).astype(
                                                    np.float32)},
        lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(
            T(q), T(k), T(v), T(m)).numpy()),
    "upsample_bilinear_align": (lambda x: mb.upsample_bilinear(
        x=x, scale_factor_height=2, scale_factor_width=3, align_corners=True), {"x": IMG},
        lambda x: torch.nn.functional.interpolate(T(x), scale_factor=(2, 3), mode="bilinear",
                                                  align_corners=True).numpy()),
    "upsample_bilinear_half": (lambda x: mb.upsample_bilinear(
        x=x, scale_factor_height=2, scale_factor_width=2, align_corners=False,
        half_pixel_centers=True), {"x": IMG},
        lambda x: torch.nn.functional.interpolate(T(x), scale_factor=2, mode="bilinear",
                                                  align_corners=False).numpy()),
    "upsample_nearest": (lambda x: mb.upsample_nearest_neighbor(
        x=x, scale_factor_height=2, scale_factor_width=3), {"x": IMG},
        lambda x: np.repeat(np.repeat(x, 2, 2), 3, 3)),
    "resize_nearest": (lambda x: mb.resize_nearest_neighbor(
        x=x, target_size_height=14, target_size_width=18), {"x": IMG},
        lambda x: np.repeat(np.repeat(x, 2, 2), 2, 3)),
    "resize_bilinear_align": (lambda x: mb.resize_bilinear(
        x=x, target_size_height=10, target_size_width=5, sampling_mode="ALIGN_CORNERS"),
        {"x": IMG}, lambda x: torch.nn.functional.interpolate(
            T(x), size=(10, 5), mode="bilinear", align_corners=True).numpy()),
})

# weight ops (iOS16/17/18): constants only, so the whole case folds; the reference is numpy
Q8 = _R.integers(-128, 128, (4, 6)).astype(np.int8)
SCALE = _R.uniform(0.01, 0.1, (4, 1)).astype(np.float32)
MASK = _R.integers(0, 2, (4, 6)).astype(np.uint8)


def _const_case(build, ref):
    return (lambda x: mb.add(x=x, y=build()), {"x": np.zeros((4, 6), np.float32)},
            lambda x: ref())


CASES.update({
    "constexpr_affine_dequantize": _const_case(
        lambda: mb.constexpr_affine_dequantize(quantized_data=Q8, zero_point=np.int8(3),
                                               scale=SCALE[:, 0], axis=0),
        lambda: (Q8.astype(np.float32) - 3) * SCALE),
    "constexpr_blockwise_shift_scale": _const_case(
        lambda: mb.constexpr_blockwise_shift_scale(data=Q8, scale=SCALE.repeat(2, axis=1),
                                                   offset=np.full((4, 2), 2, np.int8)),
        lambda: (Q8.astype(np.float32) - 2) * SCALE),
    "constexpr_lut_to_dense": _const_case(
        lambda: mb.constexpr_lut_to_dense(
            indices=MASK.astype(types.nptype_from_builtin(types.uint1)),
            lut=np.array([[[[-1.0], [2.0]]], [[[0.5], [4.0]]]], np.float32)),
        lambda: np.where(MASK.astype(bool), np.array([[2.0], [2.0], [4.0], [4.0]], np.float32),
                         np.array([[-1.0], [-1.0], [0.5], [0.5]], np.float32))),
    "constexpr_sparse_to_dense": _const_case(
        lambda: mb.constexpr_sparse_to_dense(
            nonzero_data=np.arange(int(MASK.sum()), dtype=np.float32),
            mask=MASK.astype(types.nptype_from_builtin(types.uint1))),
        lambda: _sparse(MASK)),
    "constexpr_cast": (lambda x: mb.add(x=x, y=mb.cast(x=mb.const(val=A.astype(np.float16)),
                                                      dtype="fp32")),
                       {"x": np.zeros((3, 4), np.float32)},
                       lambda x: A.astype(np.float16).astype(np.float32)),
    "quantize_dequantize": (
        lambda x: mb.dequantize(input=mb.quantize(input=x, scale=np.float32(0.25),
                                                  zero_point=np.int8(2), output_dtype="int8"),
                                scale=np.float32(0.25), zero_point=np.int8(2)),
     {"x": A}, lambda x: (np.clip(np.rint(x / 0.25 + 2), -128, 127) - 2) * 0.25),
})


torch.manual_seed(0)
_LSTM = torch.nn.LSTM(4, 3, bidirectional=True).eval()


def _ifoz(w):  # torch's gate order (i, f, g, o) -> MIL's (i, f, o, z)
    i, f, g, o = np.split(w.detach().numpy(), 4)
    return np.concatenate([i, f, o, g])


def _lstm_params(suffix=""):
    L = _LSTM
    return (_ifoz(getattr(L, "weight_ih_l0" + suffix)), _ifoz(getattr(L, "weight_hh_l0" + suffix)),
            _ifoz(getattr(L, "bias_ih_l0" + suffix) + getattr(L, "bias_hh_l0" + suffix)))


def _lstm_ref(x, h, c):
    with torch.no_grad():
        out, (hn, cn) = _LSTM(T(x), (T(h).reshape(1, 2, 2, 3).permute(2, 0, 1, 3).reshape(2, 2, 3)
                                     .contiguous(), T(c).reshape(1, 2, 2, 3).permute(
                                         2, 0, 1, 3).reshape(2, 2, 3).contiguous()))
    return out.numpy(), hn.permute(1, 0, 2).reshape(2, 6).numpy(), \
        cn.permute(1, 0, 2).reshape(2, 6).numpy()


SEQX = _R.standard_normal((5, 2, 4)).astype(np.float32)
H0 = _R.standard_normal((2, 6)).astype(np.float32)
GRID = _R.uniform(-1.1, 1.1, (1, 3, 5, 2)).astype(np.float32)
CASES.update({
    "lstm_bidirectional": (lambda x, h, c: mb.lstm(
        x=x, initial_h=h, initial_c=c, weight_ih=_lstm_params()[0], weight_hh=_lstm_params()[1],
        bias=_lstm_params()[2], weight_ih_back=_lstm_params("_reverse")[0],
        weight_hh_back=_lstm_params("_reverse")[1], bias_back=_lstm_params("_reverse")[2],
        direction="bidirectional", output_sequence=True),
        {"x": SEQX, "h": H0, "c": H0[::-1].copy()}, _lstm_ref),
    "rnn": (lambda x, h: mb.rnn(x=x, initial_h=h, weight_ih=B, weight_hh=A[:, :3],
                                bias=A[0, :3], output_sequence=True),
            {"x": SEQX, "h": H0[:, :3]}, lambda x, h: _rnn_ref(x, h)),
    "resample_bilinear": (lambda x, g: mb.resample(
        x=x, coordinates=g, sampling_mode="bilinear", padding_mode="border", padding_value=0.0,
        coordinates_mode="normalized_minus_one_to_one", align_corners=False),
        {"x": IMG[:, :, :4, :4], "g": GRID}, lambda x, g: torch.nn.functional.grid_sample(
            T(x), T(g), "bilinear", "border", align_corners=False).numpy()),
    "resample_unnormalized": (lambda x, g: mb.resample(
        x=x, coordinates=mb.mul(x=mb.add(x=g, y=1.0), y=1.5), sampling_mode="nearest",
        padding_mode="constant", padding_value=0.0, coordinates_mode="unnormalized",
        align_corners=True), {"x": IMG[:, :, :4, :4], "g": GRID},
        lambda x, g: torch.nn.functional.grid_sample(T(x), T(g), "nearest", "zeros",
                                                     align_corners=True).numpy()),
    "constexpr_lut_to_sparse": _const_case(
        lambda: mb.constexpr_sparse_to_dense(
            nonzero_data=mb.constexpr_lut_to_sparse(
                indices_mask=MASK.astype(types.nptype_from_builtin(types.uint1)),
                indices_nonzero_data=np.ones(int(MASK.sum()),
                                             types.nptype_from_builtin(types.uint1)),
                lut=np.array([[[[-1.0], [2.0]]]], np.float32))[1],
            mask=MASK.astype(types.nptype_from_builtin(types.uint1))),
        lambda: np.where(MASK.astype(bool), 2.0, 0.0).astype(np.float32)),
    "constexpr_sparse_blockwise_shift_scale": _const_case(
        lambda: mb.constexpr_sparse_to_dense(
            nonzero_data=mb.constexpr_sparse_blockwise_shift_scale(
                data_mask=MASK.astype(types.nptype_from_builtin(types.uint1)),
                nonzero_data=Q8[MASK.astype(bool)], scale=SCALE)[1],
            mask=MASK.astype(types.nptype_from_builtin(types.uint1))),
        lambda: np.where(MASK.astype(bool), Q8 * SCALE, 0).astype(np.float32)),
})


def _rnn_ref(x, h):
    out = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ B.T + h @ A[:, :3].T + A[0, :3])
        out.append(h)
    return np.stack(out), h


def _sparse(mask):
    out = np.zeros(mask.shape, np.float32)
    out[mask.astype(bool)] = np.arange(int(mask.sum()), dtype=np.float32)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_mil_op(name):
    run_case(CASES, name)


def test_state_ops_keep_values_between_runs():
    """read_state / write_state on a state input (iOS18): the interpreter's state store."""
    @mb.program(input_specs=[mb.StateTensorSpec((2, 3), dtype=types.fp16),
                             mb.TensorSpec((2, 3), dtype=types.fp16)],
                opset_version=ct.target.iOS18)
    def prog(kv, x):  # (a state named "state" would be renamed by the converter)
        new = mb.add(x=mb.read_state(input=kv), y=x)
        mb.coreml_update_state(state=kv, value=new)
        return mb.mul(x=new, y=np.float16(2))

    model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                       skip_model_load=True)
    d = Directory()
    d.files["m/model.mlmodel"] = np.frombuffer(model.get_spec().SerializeToString(), np.uint8)
    cf = CompiledFunction(load_program(d, "m/model.mlmodel").functions["main"])
    states = cf.new_states()
    name = cf.input_vars[0].name
    x = np.ones((2, 3), np.float16)
    assert np.array_equal(cf.run({name: x}, states)[0], 2 * x)
    assert np.array_equal(cf.run({name: x}, states)[0], 4 * x)
    assert np.array_equal(next(iter(states.values())), 2 * x)
