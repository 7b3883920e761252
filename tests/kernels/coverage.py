"""Operator coverage: the operators ExecuTorch ships, swept over dtypes on both tiers.

``executorch_ops()`` lists every operator of ExecuTorch's kernel libraries
(spec 7.2 portable, 7.3 quantized, 7.4 LLM custom ops, 7.5 prim ops). The
sweep (``sweep()``, needs torch; imported lazily) builds a sample case for each
op and dtype from the op's torch schema (plus the override tables below),
runs torch, our reference kernel and, where one exists, the compiled binder,
and classifies each cell:

* ``reference``: our reference kernel matches torch;
* ``compiled``: additionally the compiled kernel accepts the case and matches;
* ``torch-rejects``: torch refuses the dtype (not applicable);
* ``missing``: no kernel, or it fails or mismatches;
* ``untested``: no sample case for this op/dtype yet.

``python -m tests.kernels.coverage --out docs/COVERAGE.md`` writes the table.

>>> libs = executorch_ops()
>>> len(libs["portable"]), "executorch_prim::add.Scalar" in libs["prim"]
(209, True)
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

_DEBUG = bool(os.environ.get("COVERAGE_DEBUG"))

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64"]

PORTABLE = """
_adaptive_avg_pool2d.out _cdist_forward.out _conj_physical.out _log_softmax.out
_native_batch_norm_legit.out _native_batch_norm_legit.no_stats_out
_native_batch_norm_legit_no_training.out _pdist_forward.out _softmax.out
_to_copy.out abs.out acos.out acosh.out add.out add.Scalar_out addmm.out
alias_copy.out amax.out amin.out any.all_out any.dims_out any.out arange.out
arange.start_out argmax.out argmin.out as_strided_copy.out asin.out asinh.out
atan.out atan2.out atanh.out avg_pool2d.out bitwise_and.Scalar_out
bitwise_and.Tensor_out bitwise_not.out bitwise_or.Scalar_out
bitwise_or.Tensor_out bitwise_xor.Scalar_out bitwise_xor.Tensor_out
bitwise_left_shift.Tensor_out bitwise_left_shift.Tensor_Scalar_out
bitwise_right_shift.Tensor_out bitwise_right_shift.Tensor_Scalar_out bmm.out
cat.out ceil.out clamp.out clamp.Tensor_out clone.out constant_pad_nd.out
convolution.out convolution_backward.out copy.out copy_ cos.out cosh.out
cumsum.out detach_copy.out diagonal_copy.out div.out div.Scalar_mode_out
div.Scalar_out div.out_mode embedding.out empty.out eq.Scalar_out eq.Tensor_out
elu.out erf.out exp.out expand_copy.out expm1.out fill.Scalar_out fill.Tensor_out
flip.out floor.out floor_divide.out fmod.Tensor_out fmod.Scalar_out full.out
full_like.out gather.out ge.Scalar_out ge.Tensor_out gelu.out glu.out
grid_sampler_2d.out gt.Scalar_out gt.Tensor_out hardtanh.out index.Tensor_out
index_put.out index_put_ index_select.out isinf.out isnan.out le.Scalar_out
le.Tensor_out leaky_relu.out lift_fresh_copy.out log.out log10.out log1p.out
log2.out logical_and.out logical_not.out logical_or.out logical_xor.out logit.out
lt.Scalar_out lt.Tensor_out masked_fill.Scalar_out masked_scatter.out
masked_select.out max.dim_max max.unary_out maximum.out
max_pool2d_with_indices.out max_pool2d_with_indices_backward.grad_input mean.out
mean.dtype_out min.dim_min min.unary_out minimum.out mm.out mul.out
mul.Scalar_out narrow_copy.out native_dropout.out native_group_norm.out
native_layer_norm.out ne.Scalar_out ne.Tensor_out neg.out nonzero.out ones.out
permute_copy.out pixel_shuffle.out pixel_unshuffle.out pow.Scalar_out
pow.Tensor_Scalar_out pow.Tensor_Tensor_out prod.int_out prod.out rand.out
randn.out reciprocal.out relu.out remainder.Tensor_out remainder.Scalar_out
repeat.out repeat_interleave.Tensor_out reflection_pad1d.out
reflection_pad2d.out reflection_pad3d.out replication_pad1d.out
replication_pad2d.out replication_pad3d.out roll.out round.out rsqrt.out
rsub.Scalar_out scalar_tensor.out scatter.src_out scatter.value_out
scatter_add.out select_copy.int_out select_scatter.out sigmoid.out sign.out
sin.out sinh.out slice_copy.Tensor_out slice_scatter.out split_copy.Tensor_out
split_with_sizes_copy.out sqrt.out squeeze_copy.dim_out squeeze_copy.dims_out
stack.out sub.out sub.Scalar_out sum.IntList_out t_copy.out tan.out tanh.out
topk.values transpose_copy.int_out tril.out trunc.out unbind_copy.int_out
unfold_copy.out unsqueeze_copy.out upsample_bilinear2d.vec_out
_upsample_bilinear2d_aa.out upsample_nearest2d.vec_out var.correction_out
var_mean.correction_out var.out view_as_real_copy.out view_copy.out
where.self_out zeros.out
et_copy::_h2d_copy.out et_copy::_d2h_copy.out dim_order_ops::_empty_dim_order.out
dim_order_ops::_to_dim_order_copy.out dim_order_ops::_clone_dim_order.out
"""

QUANTIZED = """
add.out choose_qparams.Tensor_out dequantize_per_tensor.out
dequantize_per_tensor.Tensor_out quantize_per_channel.out
dequantize_per_channel.out embedding_byte.out embedding_byte.dtype_out
embedding_2bit.out embedding_2bit.dtype_out embedding_4bit.out
embedding_4bit.dtype_out mixed_mm.out mixed_linear.out quantize_per_tensor.out
quantize_per_tensor.Tensor_out choose_qparams_per_token_asymmetric.out
quantize_per_token.out dequantize_per_token.out
"""

LLM = """
llama::sdpa_with_kv_cache.out llama::custom_sdpa.out llama::custom_quantized_sdpa.out
llama::update_cache.out llama::update_cache_with_indices.out llama::gated_delta_rule.out
llama::channelwise_gated_delta_rule.out llama::fast_hadamard_transform.out
llama::quantized_moe_ffn.out llama::fallback.out preprocess::tile_crop.out
"""

PRIM = (["aten::sym_size.int", "aten::sym_numel", "aten::_local_scalar_dense"]
        + [f"executorch_prim::{n}.Scalar" for n in (
            "add sub mul floordiv truediv eq gt lt ge le neg sym_not sym_ite sym_max sym_min "
            "sym_float sym_int mod ceil round trunc").split()]
        + ["executorch_prim::floordiv.int", "executorch_prim::mod.int",
           "executorch_prim::et_copy_index.tensor", "executorch_prim::et_view.default"])


def _names(text: str, ns: str) -> list[str]:
    return [n if "::" in n else f"{ns}::{n}" for n in text.split()]


def executorch_ops() -> dict[str, list[str]]:
    """The operators ExecuTorch ships, by library (spec section 7)."""
    return {
        "portable": _names(PORTABLE, "aten"),
        "quantized": _names(QUANTIZED, "quantized_decomposed"),
        "llm": _names(LLM, "llama"),
        "prim": list(PRIM),
    }


def all_ops() -> list[str]:
    seen: dict[str, None] = {}
    for names in executorch_ops().values():
        for n in names:
            seen.setdefault(n, None)
    return list(seen)


# --------------------------------------------------------------------------------------------
# Sample cases.  A tensor spec in the override tables is a tuple:
#   ("t", shape)        random tensor of the swept dtype
#   ("i", shape, hi)    int64 indices in [0, hi)
#   ("b", shape)        random bool mask
#   ("f", shape)        float32 tensor (fixed dtype)
#   ("pos", shape)      positive values of the swept dtype
# Other values are passed through (Python scalars/lists/None); a dtype name string
# in a ScalarType slot is given as ("dtype", name) (None = the swept dtype).

T23 = ("t", (2, 3))
T4 = ("t", (1, 2, 4, 4))

ARG_DEFAULTS = {  # by schema argument name, for required non-tensor args
    "dim": 1, "dims": [1], "dim0": 0, "dim1": 1, "keepdim": False, "size": [2, 3],
    "sizes": [2, 3], "start": 0, "end": 3, "step": 1, "other": 2, "alpha": 2, "value": 2,
    "fill_value": 3, "exponent": 2, "self_scalar": 2, "kernel_size": [2, 2], "stride": [2, 2],
    "padding": [0, 0], "dilation": [1, 1], "ceil_mode": False, "output_size": [2, 2],
    "repeats": [2, 1], "shifts": [1], "split_size": 1, "split_sizes": [1, 2], "index_int": 0,
    "p": 0.5, "train": True, "eps": 1e-5, "momentum": 0.1, "correction": 1, "unbiased": True,
    "upscale_factor": 2, "downscale_factor": 2, "diagonal": 0, "k": 2, "largest": True,
    "sorted": True, "approximate": "none", "negative_slope": 0.01, "min_val": -0.5,
    "max_val": 0.5, "rounding_mode": "trunc", "accumulate": False, "non_blocking": False,
    "offset": 0, "length": 2, "scale": 1.0, "input_scale": 1.0, "training": False,
}

OVERRIDES: dict[str, dict] = {
    "aten::_adaptive_avg_pool2d.out": {"self": T4, "output_size": [2, 2]},
    "aten::avg_pool2d.out": {"self": T4},
    "aten::max_pool2d_with_indices.out": {"self": T4},
    "aten::max_pool2d_with_indices_backward.grad_input": {
        "grad_output": ("t", (1, 2, 2, 2)), "self": T4, "indices": ("i", (1, 2, 2, 2), 4),
        "kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0], "dilation": [1, 1]},
    "aten::_cdist_forward.out": {"x1": ("t", (3, 4)), "x2": ("t", (2, 4)), "p": 2.0},
    "aten::_pdist_forward.out": {"self": ("t", (3, 4)), "p": 2.0},
    "aten::_native_batch_norm_legit.out": {"input": ("t", (2, 3, 4)), "weight": ("t", (3,)),
                                           "bias": ("t", (3,)), "running_mean": ("t", (3,)),
                                           "running_var": ("pos", (3,))},
    "aten::_native_batch_norm_legit.no_stats_out": {"input": ("t", (2, 3, 4)),
                                                    "weight": ("t", (3,)), "bias": ("t", (3,)),
                                                    "training": True},
    "aten::_native_batch_norm_legit_no_training.out": {
        "input": ("t", (2, 3, 4)), "weight": ("t", (3,)), "bias": ("t", (3,)),
        "running_mean": ("t", (3,)), "running_var": ("pos", (3,))},
    "aten::native_group_norm.out": {"input": ("t", (2, 4, 3)), "weight": ("t", (4,)),
                                    "bias": ("t", (4,)), "N": 2, "C": 4, "HxW": 3, "group": 2},
    "aten::native_layer_norm.out": {"input": T23, "normalized_shape": [3],
                                    "weight": ("t", (3,)), "bias": ("t", (3,))},
    "aten::_softmax.out": {"half_to_float": False},
    "aten::_log_softmax.out": {"half_to_float": False},
    "aten::addmm.out": {"self": ("t", (3,)), "mat1": T23, "mat2": ("t", (3, 3))},
    "aten::mm.out": {"self": T23, "mat2": ("t", (3, 4))},
    "aten::bmm.out": {"self": ("t", (2, 2, 3)), "mat2": ("t", (2, 3, 4))},
    "aten::as_strided_copy.out": {"size": [3, 2], "stride": [1, 3]},
    "aten::arange.out": {"end": 5},
    "aten::arange.start_out": {"start": 1, "end": 6},
    "aten::convolution.out": {"input": T4, "weight": ("t", (3, 2, 3, 3)), "bias": ("t", (3,)),
                              "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
                              "transposed": False, "output_padding": [0, 0], "groups": 1},
    "aten::cumsum.out": {"dim": 1},
    "aten::diagonal_copy.out": {"offset": 0, "dim1": 0, "dim2": 1},
    "aten::embedding.out": {"weight": ("t", (5, 3)), "indices": ("i", (2, 2), 5)},
    "aten::expand_copy.out": {"self": ("t", (3, 1)), "size": [3, 4]},
    "aten::flip.out": {"dims": [0, 1]},
    "aten::gather.out": {"index": ("i", (2, 2), 3)},
    "aten::glu.out": {"self": ("t", (2, 4)), "dim": 1},
    "aten::grid_sampler_2d.out": {"input": T4, "grid": ("t", (1, 3, 3, 2)),
                                  "interpolation_mode": 0, "padding_mode": 0,
                                  "align_corners": False},
    "aten::index.Tensor_out": {"indices": [("i", (2,), 2)]},
    "aten::index_put.out": {"indices": [("i", (2,), 2)], "values": ("t", (2, 3))},
    "aten::index_put_": {"indices": [("i", (2,), 2)], "values": ("t", (2, 3))},
    "aten::index_select.out": {"index": ("i", (2,), 3)},
    "aten::masked_fill.Scalar_out": {"mask": ("b", (2, 3))},
    "aten::masked_scatter.out": {"mask": ("b", (2, 3)), "source": ("t", (6,))},
    "aten::masked_select.out": {"mask": ("b", (2, 3))},
    "aten::narrow_copy.out": {"dim": 1, "start": 0, "length": 2},
    "aten::pixel_shuffle.out": {"self": ("t", (1, 4, 2, 2))},
    "aten::pixel_unshuffle.out": {"self": ("t", (1, 1, 4, 4))},
    "aten::pow.Scalar_out": {"self": 2},
    "aten::reflection_pad1d.out": {"self": ("t", (1, 2, 4)), "padding": [1, 2]},
    "aten::reflection_pad2d.out": {"self": T4, "padding": [1, 2, 1, 0]},
    "aten::reflection_pad3d.out": {"self": ("t", (1, 2, 3, 3, 3)), "padding": [1, 1, 1, 0, 0, 1]},
    "aten::replication_pad1d.out": {"self": ("t", (1, 2, 4)), "padding": [1, 2]},
    "aten::replication_pad2d.out": {"self": T4, "padding": [1, 2, 1, 0]},
    "aten::replication_pad3d.out": {"self": ("t", (1, 2, 3, 3, 3)),
                                    "padding": [1, 1, 1, 0, 0, 1]},
    "aten::constant_pad_nd.out": {"pad": [1, 2], "value": 0},
    "aten::permute_copy.out": {"dims": [1, 0]},
    "aten::repeat_interleave.Tensor_out": {"repeats": ("i", (3,), 3)},
    "aten::roll.out": {"shifts": [1], "dims": [1]},
    "aten::scalar_tensor.out": {"s": 3},
    "aten::scatter.src_out": {"index": ("i", (2, 2), 2), "src": T23, "dim": 0},
    "aten::scatter.value_out": {"index": ("i", (2, 2), 2), "dim": 0},
    "aten::scatter_add.out": {"index": ("i", (2, 2), 2), "src": T23, "dim": 0},
    "aten::select_copy.int_out": {"dim": 1, "index": 1},
    "aten::select_scatter.out": {"src": ("t", (2,)), "dim": 1, "index": 1},
    "aten::slice_copy.Tensor_out": {"dim": 1, "start": 0, "end": 2, "step": 1},
    "aten::slice_scatter.out": {"src": ("t", (2, 2)), "dim": 1, "start": 0, "end": 2},
    "aten::split_copy.Tensor_out": {"split_size": 1, "dim": 1, "out": ("outlist", [(2, 1)] * 3)},
    "aten::split_with_sizes_copy.out": {"split_sizes": [1, 2], "dim": 1,
                                        "out": ("outlist", [(2, 1), (2, 2)])},
    "aten::unbind_copy.int_out": {"dim": 1, "out": ("outlist", [(2,)] * 3)},
    "aten::squeeze_copy.dim_out": {"self": ("t", (2, 1, 3)), "dim": 1},
    "aten::squeeze_copy.dims_out": {"self": ("t", (2, 1, 3)), "dim": [1]},
    "aten::sum.IntList_out": {"dim": [1]},
    "aten::amax.out": {"dim": [1]},
    "aten::amin.out": {"dim": [1]},
    "aten::any.dims_out": {"dim": [1]},
    "aten::mean.out": {"dim": [1]},
    "aten::var.out": {"dim": [1]},
    "aten::var.correction_out": {"dim": [1]},
    "aten::var_mean.correction_out": {"dim": [1]},
    "aten::topk.values": {"k": 2, "dim": 1},
    "aten::unfold_copy.out": {"dimension": 1, "size": 2, "step": 1},
    "aten::unsqueeze_copy.out": {"dim": 1},
    "aten::transpose_copy.int_out": {"dim0": 0, "dim1": 1},
    "aten::upsample_bilinear2d.vec_out": {"input": T4, "output_size": [6, 6],
                                          "align_corners": False, "scale_factors": None},
    "aten::_upsample_bilinear2d_aa.out": {"self": T4, "output_size": [6, 6],
                                          "align_corners": False},
    "aten::upsample_nearest2d.vec_out": {"input": T4, "output_size": [6, 6],
                                         "scale_factors": None},
    "aten::view_copy.out": {"size": [3, 2]},
    # complex input: the real dtype column is the complex type's component (float32 -> complex64)
    "aten::view_as_real_copy.out": {"self": ("cplx", (2, 3))},
    "aten::view_as_complex_copy.out": {"self": ("t", (2, 3, 2))},
    "aten::_fft_r2c.out": {"self": T23, "dim": [1], "normalization": 0, "onesided": True},
    "aten::_fft_c2r.out": {"self": ("cplx", (2, 3)), "dim": [1], "normalization": 2,
                           "last_dim_size": 4},
    "aten::_fft_c2c.out": {"self": ("cplx", (2, 3)), "dim": [1], "normalization": 1,
                           "forward": True},
    "aten::where.self_out": {"condition": ("b", (2, 3))},
    "aten::repeat.out": {"repeats": [2, 1]},
    "aten::convolution_backward.out": {
        "grad_output": ("t", (1, 3, 4, 4)), "input": T4, "weight": ("t", (3, 2, 3, 3)),
        "bias_sizes": [3], "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
        "transposed": False, "output_padding": [0, 0], "groups": 1,
        "output_mask": [True, True, True]},
    "aten::fill.Tensor_out": {"value": ("t", ())},
    "aten::clamp.Tensor_out": {"min": ("t", (1, 3)), "max": None},
    "aten::clamp.out": {"min": -1, "max": 1},
    "aten::hardtanh.out": {"min_val": -0.5, "max_val": 0.5},
    "aten::prod.int_out": {"dim": 1},
    "aten::max.dim_max": {"dim": 1},
    "aten::min.dim_min": {"dim": 1},
    "aten::argmax.out": {"dim": 1},
    "aten::argmin.out": {"dim": 1},
    "aten::mean.dtype_out": {"dtype": None},
    "aten::tril.out": {"diagonal": 0},
    "aten::linspace.out": {"start": 0, "end": 3, "steps": 5},
    "aten::logspace.out": {"start": 0, "end": 2, "steps": 5},
    "aten::round.decimals_out": {"decimals": 1},
    "dim_order_ops::_to_dim_order_copy.out": {"dim_order": [0, 1]},
    "dim_order_ops::_clone_dim_order.out": {"dim_order": [0, 1]},
}



def _qrange(dt):
    """(quant_min, quant_max) of integer dtype ``dt`` (else uint8's; torch then rejects)."""
    import numpy as np
    if dt in ("uint8", "int8", "int16", "int32"):
        i = np.iinfo(dt)
        return int(max(i.min, -(2 ** 15))), int(min(i.max, 2 ** 15 - 1))
    return 0, 255


def _qmin(dt):
    return _qrange(dt)[0]


def _qmax(dt):
    return _qrange(dt)[1]


_SC = ("c", 0.1, "float64")
_ZP = ("c", 3, "int64")
_DQ = {"input": T23, "quant_min": _qmin, "quant_max": _qmax, "dtype": ("dtype", None)}
OVERRIDES.update({
    # swept dtype = the float input for quantize ops, the quantized input for dequantize ops
    "quantized_decomposed::quantize_per_tensor.out": {
        "scale": 0.1, "zero_point": 3, "quant_min": 0, "quant_max": 255,
        "dtype": ("dtype", "uint8")},
    "quantized_decomposed::quantize_per_tensor.Tensor_out": {
        "scale": _SC, "zero_point": _ZP, "quant_min": 0, "quant_max": 255,
        "dtype": ("dtype", "uint8")},
    "quantized_decomposed::dequantize_per_tensor.out": {**_DQ, "scale": 0.1, "zero_point": 3},
    "quantized_decomposed::dequantize_per_tensor.Tensor_out": {**_DQ, "scale": _SC,
                                                               "zero_point": _ZP},
    "quantized_decomposed::quantize_per_channel.out": {
        "scales": ("c", [0.1, 0.2], "float64"), "zero_points": ("c", [1, 2], "int64"), "axis": 0,
        "quant_min": -128, "quant_max": 127, "dtype": ("dtype", "int8")},
    "quantized_decomposed::dequantize_per_channel.out": {
        **_DQ, "scales": ("c", [0.1, 0.2], "float64"), "zero_points": ("c", [1, 2], "int64"),
        "axis": 0},
    "quantized_decomposed::choose_qparams.Tensor_out": {
        "quant_min": 0, "quant_max": 255, "eps": 1e-5, "dtype": ("dtype", "uint8")},
    "quantized_decomposed::choose_qparams_per_token_asymmetric.out": {"dtype": ("dtype", "int8")},
    "quantized_decomposed::quantize_per_token.out": {
        "scales": ("c", [[0.1], [0.2]], "float32"), "zero_points": ("c", [[1], [2]], "int64"),
        "quant_min": -128, "quant_max": 127, "dtype": ("dtype", "int8")},
    "quantized_decomposed::dequantize_per_token.out": {
        **_DQ, "scales": ("c", [[0.1], [0.2]], "float32"),
        "zero_points": ("c", [[1], [2]], "int64"),
        "output_dtype": ("dtype", "float32")},
    "quantized_decomposed::add.out": {
        "a": T23, "b": T23, "a_scale": 0.1, "a_zero_point": 1, "b_scale": 0.2, "b_zero_point": 2,
        "out_scale": 0.3, "out_zero_point": 1, "a_quant_min": _qmin, "a_quant_max": _qmax,
        "b_quant_min": _qmin, "b_quant_max": _qmax, "out_quant_min": _qmin,
        "out_quant_max": _qmax},
    "quantized_decomposed::mixed_mm.out": {"input": ("t", (2, 4)), "weight": ("q8", (4, 3)),
                                           "weight_scales": ("pos", (4,)),
                                           "weight_zero_points": None},
    "quantized_decomposed::mixed_linear.out": {"input": ("t", (2, 4)), "weight": ("q8", (3, 4)),
                                               "weight_scales": ("pos", (3,)),
                                               "weight_zero_points": None},
    # llama ops: float inputs, [batch, seq, heads, head_dim]
    "llama::sdpa_with_kv_cache.out": {
        "query": ("t", (1, 1, 2, 4)), "key": ("t", (1, 1, 2, 4)), "value": ("t", (1, 1, 2, 4)),
        "key_cache": ("t", (1, 4, 2, 4)), "value_cache": ("t", (1, 4, 2, 4)),
        "start_pos": 1, "seq_len": 1},
    "llama::custom_sdpa.out": {
        "query": ("t", (1, 2, 2, 4)), "key": ("t", (1, 2, 2, 4)), "value": ("t", (1, 2, 2, 4)),
        "start_pos": 0, "is_causal": True},
    "llama::update_cache.out": {"value": ("t", (1, 1, 2, 4)), "cache": ("t", (1, 4, 2, 4)),
                                "start_pos": 1},
    "llama::update_cache_with_indices.out": {
        "value": ("t", (1, 1, 2, 4)), "cache": ("t", (1, 4, 2, 4)), "start_pos": 0,
        "indices": ("i", (1, 1), 4)},
    "llama::fast_hadamard_transform.out": {"mat": ("t", (2, 4))},
    # per-token qparams [B, S, H, 1]; int8 column: quantized q/k/v, float columns: plain SDPA
    "llama::custom_quantized_sdpa.out": {
        "query": ("t", (1, 2, 2, 4)), "key": ("t", (1, 3, 2, 4)), "value": ("t", (1, 3, 2, 4)),
        "start_pos": 1, "is_causal": True, "q_zero_points": ("q8", (1, 2, 2, 1)),
        "k_zero_points": ("q8", (1, 3, 2, 1)), "v_zero_points": ("q8", (1, 3, 2, 1)),
        "q_scales": ("c", [[[[0.05]] * 2] * 2], "float32"),
        "k_scales": ("c", [[[[0.04]] * 2] * 3], "float32"),
        "v_scales": ("c", [[[[0.03]] * 2] * 3], "float32")},
    "llama::quantized_moe_ffn.out": {
        "x": ("t", (3, 32)), "gate_weight": ("f", (4, 32)), "expert_bias": ("f", (4,)),
        "packed_w13": lambda dt: _moe_packed(64, 32), "packed_w2": lambda dt: _moe_packed(32, 32),
        "num_activated_experts": 2, "num_experts": 4, "hidden_dim": 32, "dim": 32,
        "group_size": 32, "weight_nbit": 4, "score_func": "sigmoid", "route_scale": 2.5},
    "preprocess::tile_crop.out": {"input": ("t", (3, 4, 6)), "tile_size": 2},
})
for _n in ("gated_delta_rule", "channelwise_gated_delta_rule"):  # one token: the C++ decode route
    OVERRIDES[f"llama::{_n}.out"] = {
        "query": ("t", (1, 2, 1, 4)), "key": ("t", (1, 1, 1, 4)), "value": ("t", (1, 1, 1, 5)),
        "decay": ("pos", (1, 1, 1, 4)), "beta": ("t", (1, 1, 1)),
        "initial_state": ("t", (1, 1, 4, 5))}


def _moe_packed(n, k, experts=4, group=32):
    """[experts, bytes] torchao-packed int4 [n, k] weights (kernels/llm/reference_extra.py): a 64-byte
    header, then per 8 rows and group: random nibbles, eight 0.02 scales, eight (unused) sums."""
    import numpy as np
    import torch
    blocks = (n + 7) // 8 * (k // group)
    vals = np.random.default_rng(n * k).integers(0, 256, (experts, blocks, group * 4))
    scales = np.full((experts, blocks, 8), 0.02, np.float32).view(np.uint8)
    body = np.concatenate([vals.astype(np.uint8), scales, np.zeros_like(scales)], axis=2)
    head = np.zeros((experts, 64), np.uint8)
    return torch.from_numpy(np.concatenate([head, body.reshape(experts, -1)], axis=1))
for _bits, _cols in ((8, 4), (4, 2), (2, 1)):
    _n = "byte" if _bits == 8 else f"{_bits}bit"
    for _ov in ("out", "dtype_out"):
        OVERRIDES[f"quantized_decomposed::embedding_{_n}.{_ov}"] = {
            # 8-bit: swept dtype = the weight's; 4/2-bit (packed uint8): swept dtype = the scales'
            "weight": T23 if _bits == 8 else ("u8", (5, _cols)),
            "weight_scales": ("c", [0.5, 0.25], "float32") if _bits == 8 else ("pos", (5,)),
            "weight_zero_points": None,
            "weight_quant_min": _qmin if _bits == 8 else -(2 ** (_bits - 1)),
            "weight_quant_max": _qmax if _bits == 8 else 2 ** (_bits - 1) - 1,
            "indices": ("i", (3,), 2 if _bits == 8 else 5)}
        if _ov == "dtype_out":
            OVERRIDES[f"quantized_decomposed::embedding_{_n}.{_ov}"]["dtype"] = ("dtype", "float32")

# Non-aten ops whose torch implementation accepts dtypes that ExecuTorch's own kernel refuses
# (or, for llama ops, whose torch binding logs an error and returns garbage instead of raising):
# the dtypes ExecuTorch's kernel accepts; other cells are "torch-rejects" (not applicable).
ET_DTYPES = {
    "quantized_decomposed::choose_qparams.Tensor_out": {"float32"},
    "quantized_decomposed::choose_qparams_per_token_asymmetric.out": {"float32"},
    "quantized_decomposed::quantize_per_token.out": {"float16", "bfloat16", "float32", "float64"},
    "quantized_decomposed::dequantize_per_token.out": {"uint8", "int8", "int16", "int32"},
    "quantized_decomposed::add.out": {"uint8"},
    "quantized_decomposed::mixed_mm.out": {"float16", "bfloat16", "float32"},
    "quantized_decomposed::mixed_linear.out": {"float16", "bfloat16", "float32"},
    "llama::sdpa_with_kv_cache.out": {"float16", "bfloat16", "float32"},
    "llama::custom_sdpa.out": {"float16", "bfloat16", "float32"},
    "llama::fast_hadamard_transform.out": {"float16", "float32", "float64"},
    "llama::custom_quantized_sdpa.out": {"int8", "float16", "bfloat16", "float32"},
    "llama::gated_delta_rule.out": {"float32"},
    "llama::channelwise_gated_delta_rule.out": {"float32"},
    "llama::quantized_moe_ffn.out": {"float32"},
}

# Ops whose out tensor is a placeholder (the result is the mutated input): out checked by shape.
OUT_UNSPECIFIED = {"llama::update_cache.out", "llama::update_cache_with_indices.out"}


def _q_add(a, a_scale, a_zero_point, a_quant_min, a_quant_max, b, b_scale, b_zero_point,
           b_quant_min, b_quant_max, out_scale, out_zero_point, out_quant_min, out_quant_max):
    import torch
    x = ((a.float() - a_zero_point) * a_scale) + ((b.float() - b_zero_point) * b_scale)
    q = torch.round(x / out_scale) + out_zero_point
    return torch.clamp(q, out_quant_min, out_quant_max).to(a.dtype)


def _mixed_mm(input, weight, weight_scales, weight_zero_points):
    w = weight.float() * weight_scales.float()[:, None]
    return (input.float() @ w).to(input.dtype)


def _mixed_linear(input, weight, weight_scales, weight_zero_points, dtype=None):
    w = weight.float() * weight_scales.float()[:, None]
    return (input.float() @ w.T).to(dtype or input.dtype)


def _custom_quantized_sdpa(query, *args):
    """ExecuTorch's C++ kernel through its out variant (the functional one allocates a float32
    out, which the kernel rejects for float16/bfloat16 queries)."""
    import torch
    dt = torch.float32 if query.dtype == torch.int8 else query.dtype
    out = torch.empty(query.shape, dtype=dt)
    return torch.ops.llama.custom_quantized_sdpa.out(query, *args, out=out)


def _tile_crop(input, tile_size):
    """The C++ kernel through its out variant (the functional one allocates a wrong out)."""
    import torch
    c, h, w = input.shape
    out = torch.empty(h // tile_size * (w // tile_size), c, tile_size, tile_size, dtype=input.dtype)
    return torch.ops.preprocess.tile_crop.out(input, tile_size, out=out)


# Ops torch registers without a CPU kernel: a short torch expression is the reference.
CUSTOM_TORCH = {"quantized_decomposed::add.out": _q_add,
                "llama::custom_quantized_sdpa.out": _custom_quantized_sdpa,
                "preprocess::tile_crop.out": _tile_crop,
                "quantized_decomposed::mixed_mm.out": _mixed_mm,
                "quantized_decomposed::mixed_linear.out": _mixed_linear}


class _CustomOp:
    def __init__(self, op, fn):
        self._schema = op._schema
        self._fn = fn

    def __call__(self, *args, **kw):
        return self._fn(*args, **kw)


# Ops checked against torch's functional overload even though torch has an out overload
# (llama's torch out kernels are ExecuTorch's C++ ones, which do not resize torch outs).
FORCE_FUNCTIONAL = {"llama::sdpa_with_kv_cache.out", "llama::custom_sdpa.out",
                    "llama::update_cache.out", "llama::update_cache_with_indices.out",
                    "llama::fast_hadamard_transform.out", "llama::custom_quantized_sdpa.out",
                    "llama::gated_delta_rule.out", "llama::channelwise_gated_delta_rule.out",
                    "llama::quantized_moe_ffn.out", "llama::fallback.out",
                    "preprocess::tile_crop.out"}
FORCE_FUNCTIONAL |= {f"quantized_decomposed::embedding_{n}.{ov}" for n in ("byte", "2bit", "4bit")
                     for ov in ("out", "dtype_out")}

# Ops whose output values are random or uninitialised: compare shape/dtype only.
SHAPE_ONLY = {"aten::rand.out", "aten::randn.out", "aten::empty.out", "aten::native_dropout.out",
              "dim_order_ops::_empty_dim_order.out"}

# Ops whose torch reference is not ``torch.ops.<ns>.<op>``: name -> torch op path.
TORCH_ALIASES = {"et_copy::_h2d_copy.out": "aten::alias_copy.out",
                 "et_copy::_d2h_copy.out": "aten::alias_copy.out",
                 # torch's own _empty_dim_order.out rejects its out= argument
                 "dim_order_ops::_empty_dim_order.out": "aten::empty.out"}

# Prim/scalar ops: (args, expected) sample cases, run once (dtype-independent).
PRIM_CASES = {
    "executorch_prim::add.Scalar": ((3, 4), 7), "executorch_prim::sub.Scalar": ((3, 4), -1),
    "executorch_prim::mul.Scalar": ((3, 4), 12),
    "executorch_prim::floordiv.Scalar": ((-7, 2), -4),
    "executorch_prim::floordiv.int": ((-7, 2), -3),  # C semantics (spec 4.11)
    "executorch_prim::truediv.Scalar": ((7, 2), 3.5), "executorch_prim::eq.Scalar": ((3, 3), True),
    "executorch_prim::gt.Scalar": ((3, 4), False), "executorch_prim::lt.Scalar": ((3, 4), True),
    "executorch_prim::ge.Scalar": ((4, 4), True), "executorch_prim::le.Scalar": ((5, 4), False),
    "executorch_prim::neg.Scalar": ((3,), -3), "executorch_prim::sym_not.Scalar": ((True,), False),
    "executorch_prim::sym_ite.Scalar": ((False, 1, 2), 2),
    "executorch_prim::sym_max.Scalar": ((3, 5), 5), "executorch_prim::sym_min.Scalar": ((3, 5), 3),
    "executorch_prim::sym_float.Scalar": ((3,), 3.0),
    "executorch_prim::sym_int.Scalar": ((3.7,), 3),
    "executorch_prim::mod.Scalar": ((-7, 3), -1), "executorch_prim::mod.int": ((-7, 3), -1),
    "executorch_prim::ceil.Scalar": ((2.1,), 3), "executorch_prim::round.Scalar": ((2.5,), 2),
    "executorch_prim::trunc.Scalar": ((-2.7,), -2),
}


def _prim_tensor_cases():
    """Tensor-valued prim ops: name -> () -> None (raises AssertionError on mismatch)."""
    import numpy as np
    from tests.kernels.helpers import (bound_out, call, call_fast_prim,
                                       run_fast_prim_tensor_op, static_out)

    a = np.arange(6, dtype=np.float32).reshape(2, 3)

    def sym_size():
        for f in (call, call_fast_prim):
            assert f("aten::sym_size.int", a, 1) == 3 and f("aten::sym_size.int", a, -2) == 2

    def sym_numel():
        assert call("aten::sym_numel", a) == 6 == call_fast_prim("aten::sym_numel", a)

    def local_scalar():
        for f in (call, call_fast_prim):
            got = f("aten::_local_scalar_dense", np.array(2.5, np.float64))
            assert got == 2.5 and isinstance(got, float), got
            got = f("aten::_local_scalar_dense", np.array(7, np.int64))
            assert got == 7 and isinstance(got, int), got

    def copy_index():
        dst = bound_out((3, 3), np.float32)
        call("executorch_prim::et_copy_index.tensor", dst, a[0], 0)
        call("executorch_prim::et_copy_index.tensor", dst, a[1], 1)
        np.testing.assert_array_equal(dst.numpy()[:2], a)
        # compiled: the index arrives through a value record
        got = run_fast_prim_tensor_op("executorch_prim::et_copy_index.tensor", a)
        np.testing.assert_array_equal(got, a)

    def view():
        out = static_out((3, 2), np.float32)
        call("executorch_prim::et_view.default", a, [3, -1], out)
        np.testing.assert_array_equal(out.numpy(), a.reshape(3, 2))
        got = run_fast_prim_tensor_op("executorch_prim::et_view.default", a)
        np.testing.assert_array_equal(got, a.reshape(3, 2))

    return {"aten::sym_size.int": sym_size, "aten::sym_numel": sym_numel,
            "aten::_local_scalar_dense": local_scalar,
            "executorch_prim::et_copy_index.tensor": copy_index,
            "executorch_prim::et_view.default": view}


@dataclass
class Cell:
    status: str
    reason: str = ""


@dataclass
class Row:
    op: str
    library: str
    cells: dict = field(default_factory=dict)  # dtype -> Cell; prim rows use key "scalar"
    registered: bool = True
    compiled_binder: bool = False


class _TorchRejects(Exception):
    pass


class _Untested(Exception):
    pass


def _np_dtype(name):
    import ml_dtypes
    import numpy as np
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _torch_dtype(name):
    import torch
    return getattr(torch, name)


def _rand(kind, shape, dt, rng):
    """A torch tensor per the spec tuple kind."""
    import numpy as np
    import torch
    if kind == "b" or (kind in ("t", "pos") and dt == "bool"):
        return torch.from_numpy(np.asarray(rng.random(shape) < 0.5))
    if kind == "f":
        return torch.from_numpy(np.asarray(rng.standard_normal(shape), np.float32))
    tdt = _torch_dtype(dt)
    if dt.startswith(("float", "bfloat")):
        a = rng.standard_normal(shape)
        if kind == "pos":
            a = np.abs(a) + 0.5
        return torch.from_numpy(np.asarray(a, np.float64)).to(tdt)
    lo = 0 if dt == "uint8" else -5
    a = rng.integers(lo if kind != "pos" else 1, 6, shape)
    a = np.where(a == 0, 1, a)  # nonzero: integer division by zero is an error in torch
    return torch.from_numpy(np.asarray(a, np.int64)).to(tdt)


def _materialize(spec, dt, rng):
    import numpy as np
    import torch
    if callable(spec):
        spec = spec(dt)
    if isinstance(spec, tuple) and spec and spec[0] in ("t", "b", "f", "pos"):
        return _rand(spec[0], spec[1], dt, rng)
    if isinstance(spec, tuple) and spec and spec[0] == "i":
        return torch.from_numpy(np.asarray(rng.integers(0, spec[2], spec[1]), np.int64))
    if isinstance(spec, tuple) and spec and spec[0] == "cplx":
        cd = {"float32": torch.complex64, "float64": torch.complex128}.get(dt)
        if cd is None:
            return _rand("t", spec[1], dt, rng)  # torch rejects non-complex input
        return torch.complex(_rand("t", spec[1], dt, rng), _rand("t", spec[1], dt, rng)).to(cd)
    if isinstance(spec, tuple) and spec and spec[0] == "u8":
        return torch.from_numpy(np.asarray(rng.integers(0, 256, spec[1]), np.uint8))
    if isinstance(spec, tuple) and spec and spec[0] == "q8":
        return torch.from_numpy(np.asarray(rng.integers(-5, 6, spec[1]), np.int8))
    if isinstance(spec, tuple) and spec and spec[0] == "c":
        return torch.tensor(spec[1], dtype=_torch_dtype(spec[2]))
    if isinstance(spec, tuple) and spec and spec[0] == "dtype":
        return _torch_dtype(spec[1] or dt)
    if isinstance(spec, list):
        return [_materialize(s, dt, rng) for s in spec]
    return spec


_FUNCTIONAL = {"out": "default", "Tensor_out": "tensor", "dtype_out": "dtype"}


@dataclass
class _Arg:
    name: str
    kwarg_only: bool
    is_write: bool
    is_out: bool
    type: str = ""
    default: object = None
    has_default: bool = False


def _resolve_torch_op(name):
    """(torch op, functional): the op's torch reference; functional=True when torch only has
    the functional overload (our outs then receive its returned tensors)."""
    import torch
    name = TORCH_ALIASES.get(name, name)
    ns, rest = name.split("::")
    op, _, ov = rest.partition(".")
    if ns == "dim_order_ops":
        import executorch.exir.passes.dim_order_ops_registry  # noqa: F401
    if ns == "quantized_decomposed":
        import torch.ao.quantization.fx._decomposed  # noqa: F401
        try:
            import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401
        except Exception:  # noqa: BLE001
            pass
    if ns in ("llama", "preprocess"):
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    packet = getattr(getattr(torch.ops, ns), op)
    ov = ov or "default"
    if (ov not in packet.overloads() or name in FORCE_FUNCTIONAL) and ov in _FUNCTIONAL:
        fop = getattr(packet, _FUNCTIONAL[ov])
        if name in CUSTOM_TORCH:
            fop = _CustomOp(fop, CUSTOM_TORCH[name])
        return fop, True
    return getattr(packet, ov), False


def _args_of(op, functional):
    args = []
    for a in op._schema.arguments:
        w = a.alias_info is not None and a.alias_info.is_write
        args.append(_Arg(a.name, a.kwarg_only, w, a.kwarg_only and w, str(a.type),
                         a.default_value if a.has_default_value() else None,
                         a.has_default_value()))
    if functional:
        n = len(op._schema.returns)
        args += [_Arg(f"out{i}" if n > 1 else "out", True, True, True, "Tensor") for i in range(n)]
    return args


def _build_case(name, args, dt, rng):
    """Values in schema order: torch tensors/values and ("out", i, spec) slots."""
    ov = OVERRIDES.get(name, {})
    if ov is None:
        raise _Untested("no sample case (needs a hand-written case)")
    vals = []
    nout = 0
    for a in args:
        tk = a.type
        if a.is_out:
            vals.append(("out", nout, ov.get(a.name, "out")))
            nout += 1
            continue
        if a.name in ov:
            v = _materialize(ov[a.name], dt, rng)
        elif tk == "Tensor":
            v = _materialize(T23, dt, rng)
        elif tk == "List[Tensor]":
            v = [_materialize(T23, dt, rng), _materialize(T23, dt, rng)]
        elif a.has_default:
            v = a.default
        elif tk.startswith("Optional"):
            v = None
        elif a.name in ARG_DEFAULTS:
            v = ARG_DEFAULTS[a.name]
            if tk == "List[int]" and not isinstance(v, list):
                v = [v]
        else:
            raise _Untested(f"no value for required argument {a.name}: {tk}")
        vals.append(v)
    return vals


OUT_DTYPE_TRIES = ("same", "bool", "int64", "float32", "mixed32", "mixedbool", "complex")
_COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}


def _make_outs(spec, dt, attempt, idx):
    import torch
    if attempt == "same":
        d = dt
    elif attempt == "complex":  # view_as_complex, r2c: the complex type of the swept dtype
        d = _COMPLEX_OF.get(dt, dt)
    elif attempt in ("mixed32", "mixedbool"):
        d = dt if idx == 0 else ("float32" if attempt == "mixed32" else "bool")
    else:
        d = attempt
    if isinstance(spec, tuple) and spec[0] == "outlist":
        return [torch.empty(sh, dtype=_torch_dtype(d)) for sh in spec[1]]
    return torch.empty(0, dtype=_torch_dtype(d))


def _run_torch(op, args, vals, dt, functional):
    """Run torch: the values with torch's outs (and mutated inputs), or raise _TorchRejects."""
    import torch
    last = None
    for attempt in (OUT_DTYPE_TRIES if not functional else ("functional",)):
        tv = []
        for a, v in zip(args, vals):
            if isinstance(v, tuple) and v and v[0] == "out":
                if functional:
                    tv.append(None)
                    continue
                d = "int64" if "indic" in a.name or a.name == "max_values" else None
                tv.append(_make_outs(v[2], d or dt, "same" if d else attempt, v[1]))
            elif isinstance(v, torch.Tensor):
                tv.append(v.clone())
            elif isinstance(v, list):
                tv.append([e.clone() if isinstance(e, torch.Tensor) else e for e in v])
            else:
                tv.append(v)
        pos = [v for a, v in zip(args, tv) if not a.kwarg_only]
        kw = {a.name: v for a, v in zip(args, tv) if a.kwarg_only and not (functional and a.is_out)}
        try:
            res = op(*pos, **kw)
        except Exception as e:  # noqa: BLE001 - torch refusing the case
            last = e
            continue
        if functional:
            res = list(res) if isinstance(res, (tuple, list)) else [res]
            it = iter(res)
            tv = [next(it) if a.is_out else v for a, v in zip(args, tv)]
        return tv
    raise _TorchRejects(_short(last))


def _short(e) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return (f"{type(e).__name__}: " + " ".join(lines))[:200]


def _to_ours(v):
    """A torch value as a kernel value: tensors -> numpy, dtypes -> ScalarType codes."""
    import torch
    from tests.kernels.helpers import to_np
    if isinstance(v, torch.Tensor):
        return to_np(v)
    if isinstance(v, torch.dtype):
        from pyruntime.cython_ext import from_numpy_dtype
        return int(from_numpy_dtype(to_np(torch.empty(0, dtype=v)).dtype))
    if isinstance(v, list):
        return [_to_ours(e) for e in v]
    return v


def _etensorize(vals):
    from tests.kernels.helpers import as_value
    return [as_value(v) for v in vals]


def _compare(ours, want, dt, shape_only):
    """Compare ETensor ``ours`` with numpy ``want`` (tolerance from the output and input dtypes)."""
    from tests.kernels.helpers import assert_close
    got = ours.numpy()
    if shape_only:
        assert got.shape == want.shape and got.dtype == want.dtype, \
            f"shape/dtype {got.shape}/{got.dtype} != {want.shape}/{want.dtype}"
        return
    tols = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-5, "float64": 1e-7}
    tol = tols.get(got.dtype.name, 0)
    if tol:  # the inputs' precision bounds the result's too
        tol = max(tol, tols.get(dt, 0))
    assert_close(got, want, rtol=tol, atol=tol)


def _run_cell(name, op, functional, dt, rng, binder):
    import numpy as np
    import torch
    from pyruntime.cython_ext import ETensor
    from tests.kernels.helpers import call, call_fast, static_out, to_np
    if name in ET_DTYPES and dt not in ET_DTYPES[name]:
        return Cell("torch-rejects", "ExecuTorch's kernel accepts only "
                    + ", ".join(sorted(ET_DTYPES[name])))
    args = _args_of(op, functional)
    try:
        vals = _build_case(name, args, dt, rng)
    except _Untested as e:
        return Cell("untested", str(e))
    try:
        tv = _run_torch(op, args, vals, dt, functional)
    except _TorchRejects as e:
        return Cell("torch-rejects", str(e))
    shape_only = name in SHAPE_ONLY

    def build():
        ours, checks = [], []
        for a, v0, v in zip(args, vals, tv):
            if isinstance(v0, tuple) and v0 and v0[0] == "out":
                if isinstance(v, list):
                    o = [static_out(tuple(e.shape), to_np(e).dtype) for e in v]
                    checks += [(e, t, False) for e, t in zip(o, v)]
                else:
                    o = static_out(tuple(v.shape), to_np(v).dtype)
                    checks.append((o, v, name in OUT_UNSPECIFIED))
                ours.append(o)
            elif a.is_write and isinstance(v0, torch.Tensor):
                o = ETensor.from_array(np.ascontiguousarray(to_np(v0)).copy())
                checks.append((o, v, False))
                ours.append(o)
            else:
                ours.append(_to_ours(v0))
        return _etensorize(ours), checks

    ours, checks = build()
    try:
        call(name, *ours)
        for o, t, loose in checks:
            _compare(o, to_np(t), dt, shape_only or loose)
    except AssertionError as e:
        return Cell("missing", "mismatch: " + _short(e).replace("AssertionError: ", ""))
    except Exception as e:  # noqa: BLE001
        return Cell("missing", _short(e))
    if binder is None:
        return Cell("reference")
    ours2, checks2 = build()
    try:
        status = call_fast(name, *ours2)
    except Exception as e:  # noqa: BLE001
        return Cell("missing", "compiled binder raised: " + _short(e))
    if status is None:
        return Cell("reference")
    if status != 0:
        return Cell("missing", f"compiled kernel returned status {status}")
    try:
        for (o2, _, _), (o, _, loose) in zip(checks2, checks):
            _compare(o2, o.numpy(), dt, shape_only or loose)
    except AssertionError as e:
        return Cell("missing", "compiled mismatch: " + _short(e).replace("AssertionError: ", ""))
    return Cell("compiled")


def _run_prim(name):
    from tests.kernels.helpers import call, call_fast_prim
    fn = _prim_tensor_cases().get(name)
    if fn is not None:
        try:
            fn()
        except AssertionError as e:
            return Cell("missing", "mismatch: " + _short(e))
        except Exception as e:  # noqa: BLE001
            return Cell("missing", _short(e))
        return Cell("compiled")  # each case checks both tiers
    case = PRIM_CASES.get(name)
    if case is None:
        return Cell("untested", "no sample case (tensor-valued prim op)")
    args, want = case
    try:
        got = call(name, *args)
    except Exception as e:  # noqa: BLE001
        return Cell("missing", _short(e))
    if got != want or type(got) is not type(want):
        return Cell("missing", f"mismatch: got {got!r}, want {want!r}")
    from pyruntime.kernels.prim.typed import OPS
    if name not in OPS:
        return Cell("reference")
    try:
        got = call_fast_prim(name, *args)
    except Exception as e:  # noqa: BLE001
        return Cell("reference", "compiled prim op failed: " + _short(e))
    if got != want or type(got) is not type(want):
        return Cell("missing", f"compiled mismatch: got {got!r}, want {want!r}")
    return Cell("compiled")


# Registered operators the sweep leaves out, with why and where they are checked instead.
NOT_SWEPT = {"cadence::": "torch's registrations of Cadence's ops are the wheel's reference "
                          "kernels, which read the requantization multiplier with the opposite "
                          "sign (kernels/cadence/reference.py); tests/programs/test_cadence.py checks "
                          "them against the PT2E-converted models bit for bit"}


def swept_ops() -> list[str]:
    """ExecuTorch's operator lists, then every other registered operator but NOT_SWEPT's."""
    from pyruntime.kernels.registry import registered_names

    ops = all_ops()
    known = set(ops)
    return ops + [n for n in registered_names() if n not in known
                  and not any(n.startswith(p) for p in NOT_SWEPT)]


def sweep(ops=None, dtypes=DTYPES, seed=0) -> list[Row]:
    """Run the coverage sweep (imports torch); one Row per op."""
    import numpy as np
    import torch  # noqa: F401
    from pyruntime.kernels.fast import get_binder
    from pyruntime.kernels.registry import has_kernel
    libs = executorch_ops()
    lib_of = {}
    for lib, names in libs.items():
        for n in names:
            lib_of.setdefault(n, lib)
    if ops is None:
        ops = swept_ops()
    rows = []
    for name in ops:
        lib = lib_of.get(name, "extra")
        row = Row(name, lib, registered=has_kernel(name))
        binder = get_binder(name) if row.registered else None
        row.compiled_binder = binder is not None
        rows.append(row)
        if lib == "prim":
            row.cells["scalar"] = (_run_prim(name) if row.registered
                                   else Cell("missing", "no reference kernel registered"))
            continue
        if not row.registered:
            for dt in dtypes:
                row.cells[dt] = Cell("missing", "no reference kernel registered")
            continue
        try:
            op, functional = _resolve_torch_op(name)
            op._schema  # noqa: B018
        except Exception as e:  # noqa: BLE001
            for dt in dtypes:
                row.cells[dt] = Cell("untested", "no torch reference op: " + _short(e))
            continue
        for dt in dtypes:
            if _DEBUG:
                print(name, dt, file=sys.stderr, flush=True)
            rng = np.random.default_rng(seed)
            row.cells[dt] = _run_cell(name, op, functional, dt, rng, binder)
        # torch rejecting every dtype means our sample case is wrong, not the dtypes
        tried = [d for d in dtypes if not row.cells[d].reason.startswith("ExecuTorch's kernel")]
        if tried and all(row.cells[d].status == "torch-rejects" for d in tried):
            for dt in tried:
                row.cells[dt] = Cell("untested", "sample case rejected by torch: "
                                     + row.cells[dt].reason)
    return rows


# --------------------------------------------------------------------------------------------
# Markdown.

SYMBOL = {"reference": "R", "compiled": "C", "torch-rejects": "-", "missing": "**MISSING**",
          "untested": "?"}


def summary(rows):
    from collections import Counter
    cells = Counter(c.status for r in rows if r.library != "prim" for c in r.cells.values())
    prim = Counter(c.status for r in rows if r.library == "prim" for c in r.cells.values())
    return cells, prim


def render(rows) -> str:
    cells, prim = summary(rows)
    libs = {}
    for r in rows:
        libs[r.library] = libs.get(r.library, 0) + 1
    out = ["# Operator coverage", "",
           "Generated by `python -m tests.kernels.coverage --out docs/COVERAGE.md` from the kernel",
           "registry and a sweep that runs every operator ExecuTorch ships (spec section 7)",
           "on a generated case per dtype against torch, plus the registered kernels outside",
           "those lists (library `extra`). Do not edit by hand.", "",
           "Legend: `C` compiled tier (and reference) match torch; `R` reference tier matches",
           "torch (no compiled kernel, or the compiled binder declines the case); `-` torch",
           "rejects the dtype, or for a quantized/LLM op ExecuTorch's own kernel does (not",
           "applicable); `**MISSING**` no kernel, or it fails/mismatches;",
           "`?` untested (no sample case yet).", "",
           "## Summary", "",
           f"* operators: {len(rows)} ("
           + ", ".join(f"{k} {v}" for k, v in libs.items()) + ")",
           f"* registered reference kernels: {sum(r.registered for r in rows)}; "
           f"with a compiled binder: {sum(r.compiled_binder for r in rows)} (the "
           f"{sum(r.library == 'prim' for r in rows)} prim ops compile in the loop itself)",
           f"* op x dtype cells ({sum(cells.values())}): "
           + ", ".join(f"{k} {cells.get(k, 0)}" for k in SYMBOL),
           f"* scalar (prim) op cases ({sum(prim.values())}): "
           + ", ".join(f"{k} {prim.get(k, 0)}" for k in SYMBOL if prim.get(k)), ""]
    out += ["## Tensor operators", "",
            "| op | " + " | ".join(DTYPES) + " |",
            "|---|" + "---|" * len(DTYPES)]
    for r in rows:
        if r.library == "prim":
            continue
        out.append(f"| `{r.op}` | "
                   + " | ".join(SYMBOL[r.cells[d].status] if d in r.cells else " " for d in DTYPES)
                   + " |")
    out += ["", "## Prim (scalar) operators", "", "| op | status |", "|---|---|"]
    for r in rows:
        if r.library == "prim":
            out.append(f"| `{r.op}` | {SYMBOL[r.cells['scalar'].status]} |")
    out += ["", "## Missing and untested cells", "",
            "| op | dtypes | status | reason |", "|---|---|---|---|"]
    for r in rows:
        groups: dict = {}
        for d, c in r.cells.items():
            if c.status in ("missing", "untested"):
                groups.setdefault((c.status, c.reason), []).append(d)
        for (st, reason), ds in groups.items():
            dts = "all" if len(ds) == len(DTYPES) else ", ".join(ds)
            reason = reason.replace("|", "\\|").replace("\n", " ")
            out.append(f"| `{r.op}` | {dts} | {st} | {reason} |")
    return "\n".join(out) + "\n"


def rows_to_json(rows) -> str:
    import json
    from dataclasses import asdict
    return json.dumps([asdict(r) for r in rows])


def rows_from_json(text: str) -> list:
    import json
    rows = []
    for d in json.loads(text):
        d["cells"] = {k: Cell(**c) for k, c in d["cells"].items()}
        rows.append(Row(**d))
    return rows


def sweep_isolated(timeout=2700) -> list:
    """``sweep()`` in a fresh interpreter.

    Some torch ops abort the process on inputs they reject once other tests
    have registered ExecuTorch's C++ kernels over them; a clean interpreter
    sees exactly what ``python -m tests.kernels.coverage`` sees. On a fresh
    machine this is also where most compiled kernels first compile (minutes).
    """
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "tests.kernels.coverage", "--json"], cwd=root,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"coverage sweep failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return rows_from_json(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.kernels.coverage",
                                description=__doc__.split("\n")[0])
    p.add_argument("--out", help="write the markdown table here (default: stdout)")
    p.add_argument("--op", action="append", help="only these ops (repeatable)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead")
    ns = p.parse_args(argv)
    import warnings
    warnings.filterwarnings("ignore")
    rows = sweep(ns.op)
    if ns.json:
        print(rows_to_json(rows))
        return
    text = render(rows)
    if ns.out:
        with open(ns.out, "w") as f:
            f.write(text)
        cells, prim = summary(rows)
        print(f"wrote {ns.out}: {len(rows)} ops; cells {dict(cells)}; prim {dict(prim)}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
