"""Single-operator programs exported by ExecuTorch's own exporter (cached like fixtures).

Each case is one torch expression over generated inputs of a chosen dtype
(Half, BFloat16, the integer types, Bool, channels-last), exported with
``to_edge(...).to_executorch()`` so the program holds ExecuTorch's own kernel
call for the op. ``tests/programs/test_single_ops.py`` runs every case in
``executorch.runtime`` and in pyruntime (both tiers) and compares the outputs.

``CASES`` maps a case name to ``(kernel name the program must call, fn,
input specs)``; an input spec is ``(shape, dtype)`` or ``(shape, dtype,
"channels_last")``. Where the edge dialect decomposes the torch op (roll,
tril, stack, unbind, reflection padding, masked_fill, pixel_shuffle, linear
without bias), the kernel named is the one the program actually calls.
"""
from __future__ import annotations

import json
from pathlib import Path

from tests.programs.fixtures import _versions, _write_atomic, cache_dir

VERSION = "1"


def _cases():
    import torch
    import torch.nn.functional as F
    f16, bf16, f32, f64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
    c64, c128 = torch.complex64, torch.complex128
    i8, u8, i16, i32, i64, b = torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, \
        torch.bool
    cl = "channels_last"
    return {
        # elementwise arithmetic, broadcasting and promotion
        "add_f16": ("aten::add.out", lambda x, y: x + y, [((2, 3), f16), ((3,), f16)]),
        "add_bf16_alpha": ("aten::add.out", lambda x, y: torch.add(x, y, alpha=2),
                           [((4, 1), bf16), ((1, 5), bf16)]),
        "mul_i8_wraps": ("aten::mul.out", lambda x, y: x * y, [((3, 4), i8), ((3, 4), i8)]),
        "sub_i64_f32": ("aten::sub.out", lambda x, y: x - y, [((5,), i64), ((5,), f32)]),
        "div_trunc_i32": ("aten::div.out_mode",
                          lambda x, y: torch.div(x, y, rounding_mode="trunc"),
                          [((6,), i32), ((6,), i32, "nonzero")]),
        "floor_divide_i64": ("aten::div.out_mode", lambda x, y: torch.floor_divide(x, y),
                             [((6,), i64), ((6,), i64, "nonzero")]),
        "remainder_f32": ("aten::remainder.Tensor_out", lambda x, y: torch.remainder(x, y),
                          [((7,), f32), ((7,), f32, "nonzero")]),
        "pow_f64": ("aten::pow.Tensor_Tensor_out", lambda x, y: torch.pow(x.abs(), y),
                    [((4,), f64), ((4,), f64)]),
        "atan2_f16": ("aten::atan2.out", torch.atan2, [((3, 3), f16), ((3, 3), f16)]),
        "maximum_bf16": ("aten::maximum.out", torch.maximum, [((2, 4), bf16), ((2, 4), bf16)]),
        "bitwise_and_bool": ("aten::bitwise_and.Tensor_out", torch.bitwise_and,
                             [((8,), b), ((8,), b)]),
        "bitwise_xor_i16": ("aten::bitwise_xor.Tensor_out", torch.bitwise_xor,
                            [((8,), i16), ((8,), i16)]),
        "logical_or_u8": ("aten::logical_or.out", torch.logical_or, [((8,), u8), ((8,), u8)]),
        "eq_i32_scalar": ("aten::eq.Scalar_out", lambda x: x == 2, [((3, 5), i32)]),
        "lt_f16": ("aten::lt.Tensor_out", lambda x, y: x < y, [((4, 4), f16), ((4,), f16)]),
        "where_bf16": ("aten::where.self_out", lambda c, x, y: torch.where(c, x, y),
                       [((3, 4), b), ((3, 4), bf16), ((4,), bf16)]),
        "clamp_i8": ("aten::clamp.out", lambda x: torch.clamp(x, -2, 3), [((10,), i8)]),
        # unary math / activations
        "sin_f16": ("aten::sin.out", torch.sin, [((5, 3), f16)]),
        "exp_bf16": ("aten::exp.out", torch.exp, [((5, 3), bf16)]),
        "sqrt_i32": ("aten::sqrt.out", lambda x: torch.sqrt(x.abs()), [((6,), i32)]),
        "round_f32": ("aten::round.out", torch.round, [((9,), f32)]),
        "sign_i32": ("aten::sign.out", torch.sign, [((9,), i32)]),
        "abs_i8": ("aten::abs.out", torch.abs, [((9,), i8)]),
        "sigmoid_f16": ("aten::sigmoid.out", torch.sigmoid, [((4, 4), f16)]),
        "gelu_tanh_f32": ("aten::gelu.out", lambda x: F.gelu(x, approximate="tanh"),
                          [((4, 4), f32)]),
        "leaky_relu_bf16": ("aten::leaky_relu.out", lambda x: F.leaky_relu(x, 0.1),
                            [((4, 4), bf16)]),
        "isnan_f16": ("aten::isnan.out", torch.isnan, [((6,), f16)]),
        # reductions
        "sum_i32_dim": ("aten::sum.IntList_out", lambda x: x.sum(dim=1), [((3, 4, 2), i32)]),
        "mean_f16": ("aten::mean.out", lambda x: x.mean(dim=-1, keepdim=True), [((3, 8), f16)]),
        "amax_bf16": ("aten::amax.out", lambda x: x.amax(dim=0), [((5, 3), bf16)]),
        "argmax_f32": ("aten::argmax.out", lambda x: x.argmax(dim=1), [((4, 6), f32)]),
        "cumsum_i64": ("aten::cumsum.out", lambda x: x.cumsum(0), [((7,), i64)]),
        "prod_f64": ("aten::prod.int_out", lambda x: x.prod(1), [((3, 4), f64)]),
        "var_f32": ("aten::var.correction_out", lambda x: x.var(dim=1), [((3, 9), f32)]),
        "softmax_f16": ("aten::_softmax.out", lambda x: x.softmax(-1), [((3, 7), f16)]),
        "log_softmax_bf16": ("aten::_log_softmax.out", lambda x: x.log_softmax(0),
                             [((6, 2), bf16)]),
        "topk_f32": ("aten::topk.values", lambda x: tuple(torch.topk(x, 3)), [((2, 8), f32)]),
        "any_dims_bool": ("aten::any.out", lambda x: x.any(dim=1), [((3, 4), b)]),
        # data movement
        "cat_i8": ("aten::cat.out", lambda x, y: torch.cat([x, y], 1), [((2, 3), i8), ((2, 1), i8)]),
        "stack_bool": ("aten::cat.out", lambda x, y: torch.stack([x, y]), [((4,), b), ((4,), b)]),
        "flip_u8": ("aten::flip.out", lambda x: x.flip(0, 2), [((2, 3, 4), u8)]),
        "roll_f16": ("aten::index_select.out", lambda x: x.roll(2, 1), [((3, 5), f16)]),
        "repeat_i16": ("aten::repeat.out", lambda x: x.repeat(2, 3), [((2, 2), i16)]),
        "mul_channels_last": ("aten::mul.out", lambda x, y: x * y,
                              [((1, 3, 4, 5), f32, cl), ((1, 3, 4, 5), f32, cl)]),
        "pad_f16": ("aten::constant_pad_nd.out", lambda x: F.pad(x, (1, 2), value=1.5),
                    [((2, 3), f16)]),
        "reflection_pad2d": ("aten::index.Tensor_out",
                             lambda x: F.pad(x, (1, 1, 2, 0), mode="reflect"),
                             [((1, 2, 4, 4), f32)]),
        "tril_i64": ("aten::where.self_out", lambda x: x.tril(-1), [((4, 4), i64)]),
        "to_half": ("dim_order_ops::_to_dim_order_copy.out", lambda x: x.to(torch.float16),
                    [((5,), f32)]),
        "bf16_to_int": ("dim_order_ops::_to_dim_order_copy.out", lambda x: x.to(torch.int32),
                        [((5,), bf16)]),
        "split_f64": ("aten::split_with_sizes_copy.out", lambda x: torch.split(x, [1, 3], 1),
                      [((2, 4), f64)]),
        "unbind_i32": ("aten::slice_copy.Tensor_out", lambda x: torch.unbind(x, 1),
                       [((2, 3), i32)]),
        "pixel_shuffle_bf16": ("aten::permute_copy.out", lambda x: F.pixel_shuffle(x, 2),
                               [((1, 8, 2, 3), bf16)]),
        # indexing
        "index_select_i16": ("aten::index_select.out",
                             lambda x: x.index_select(0, torch.tensor([2, 0, 2])),
                             [((3, 4), i16)]),
        "gather_f16": ("aten::gather.out",
                       lambda x: x.gather(1, torch.tensor([[0, 2], [1, 1], [2, 0]])),
                       [((3, 3), f16)]),
        "masked_fill_bf16": ("aten::where.self_out", lambda x, m: x.masked_fill(m, -1.0),
                             [((3, 4), bf16), ((4,), b)]),
        "index_i8": ("aten::index.Tensor_out", lambda x: x[torch.tensor([1, 0]), 1:],
                     [((2, 3), i8)]),
        "scatter_add_f32": ("aten::scatter_add.out",
                            lambda x, s: x.scatter_add(0, torch.tensor([[0, 1, 0], [1, 0, 1]]), s),
                            [((2, 3), f32), ((2, 3), f32)]),
        # creation
        "arange_f32": ("aten::arange.start_out",
                       lambda x: x + torch.arange(0.5, 3.0, 0.25), [((10,), f32)]),
        "full_like_i16": ("aten::full_like.out", lambda x: torch.full_like(x, 7) + x,
                          [((3,), i16)]),
        # neural-net ops
        "linear_bf16": ("aten::mm.out", lambda x, w: F.linear(x, w),
                        [((2, 4), bf16), ((3, 4), bf16)]),
        "mm_i32": ("aten::mm.out", torch.mm, [((2, 3), i32), ((3, 4), i32)]),
        "bmm_f16": ("aten::bmm.out", torch.bmm, [((2, 3, 4), f16), ((2, 4, 2), f16)]),
        "conv2d_f16": ("aten::convolution.out", lambda x, w: F.conv2d(x, w, padding=1),
                       [((1, 2, 5, 5), f16), ((3, 2, 3, 3), f16)]),
        "conv2d_cl": ("aten::convolution.out", lambda x, w: F.conv2d(x, w, stride=2),
                      [((1, 3, 6, 6), f32, cl), ((4, 3, 3, 3), f32)]),
        "layer_norm_bf16": ("aten::native_layer_norm.out", lambda x: F.layer_norm(x, (8,)),
                            [((3, 8), bf16)]),
        "group_norm_f16": ("aten::native_group_norm.out", lambda x: F.group_norm(x, 2),
                           [((2, 4, 3), f16)]),
        "avg_pool_f16": ("aten::avg_pool2d.out", lambda x: F.avg_pool2d(x, 2),
                         [((1, 2, 4, 4), f16)]),
        "max_pool_bf16": ("aten::max_pool2d_with_indices.out", lambda x: F.max_pool2d(x, 2),
                          [((1, 2, 4, 4), bf16)]),
        "upsample_nearest_u8": ("aten::upsample_nearest2d.vec_out",
                                lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
                                [((1, 1, 3, 3), u8)]),
        "upsample_bilinear_f32": ("aten::upsample_bilinear2d.vec_out",
                                  lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"),
                                  [((1, 2, 3, 4), f32)]),
        "embedding_f16": ("aten::embedding.out",
                          lambda w: F.embedding(torch.tensor([[0, 3], [2, 2]]), w),
                          [((4, 5), f16)]),
        # FFTs (pocketfft in both) and complex tensors: compared bit for bit (complex outputs
        # always are; EXACT names the real-valued ones)
        "rfft_f32": ("aten::_fft_r2c.out", lambda x: torch.fft.rfft(x), [((3, 400), f32)]),
        "rfft_ortho_f64": ("aten::_fft_r2c.out", lambda x: torch.fft.rfft(x, norm="ortho"),
                           [((2, 64), f64)]),
        "rfft2_f32": ("aten::_fft_r2c.out", lambda x: torch.fft.rfft2(x, norm="forward"),
                      [((2, 6, 10), f32)]),
        "irfft_exact": ("aten::_fft_c2r.out", lambda z: torch.fft.irfft(z, n=30),
                        [((3, 16), c64)]),
        "irfft2_f64_exact": ("aten::_fft_c2r.out", lambda z: torch.fft.irfft2(z, s=(6, 10)),
                             [((2, 6, 6), c128)]),
        "conj_c64": ("aten::_conj_physical.out", torch.conj_physical,
                     [((3, 4), c64)]),
        "view_as_real_c128_exact": ("aten::view_as_real_copy.out",
                                    lambda z: torch.view_as_real(z) + 1, [((5, 3), c128)]),
        # float accumulations of ExecuTorch's portable loops (convolution, addmm): these must
        # agree bit for bit (EXACT). Its mm/bmm/linear call the sgemm its wheel links (edge
        # tiles of its own), so those are not among them.
        "conv2d_grouped_exact": ("aten::convolution.out",
                                 lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1,
                                                          dilation=(1, 2), groups=2),
                                 [((1, 8, 9, 10), f32), ((6, 4, 3, 3), f32), ((6,), f32)]),
        "conv2d_depthwise_exact": ("aten::convolution.out",
                                   lambda x, w, b: F.conv2d(x, w, b, padding=4, dilation=2,
                                                            groups=6),
                                   [((1, 6, 11, 11), f32), ((6, 1, 5, 5), f32), ((6,), f32)]),
        "conv2d_deep_exact": ("aten::convolution.out",
                              lambda x, w: F.conv2d(x, w, padding=1),
                              [((1, 64, 3, 3), f32), ((96, 64, 3, 3), f32)]),
        "conv1d_exact": ("aten::convolution.out", lambda x, w, b: F.conv1d(x, w, b, padding=2),
                         [((2, 16, 40), f32), ((24, 16, 5), f32), ((24,), f32)]),
        "conv_transpose2d_exact": ("aten::convolution.out",
                                   lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                                      output_padding=1),
                                   [((1, 6, 5, 4), f32), ((6, 3, 4, 4), f32), ((3,), f32)]),
        "conv2d_f64_exact": ("aten::convolution.out", lambda x, w: F.conv2d(x, w, stride=2),
                             [((1, 5, 9, 9), f64), ((7, 5, 3, 3), f64)]),
        "addmm_exact": ("aten::addmm.out", lambda c, a, b: torch.addmm(c, a, b),
                        [((40,), f32), ((3, 300), f32), ((300, 40), f32)]),
        "addmm_scaled_exact": ("aten::addmm.out",
                               lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=1.5),
                               [((5, 40), f32), ((5, 70), f32), ((70, 40), f32)]),
        "linear_exact": ("aten::addmm.out", lambda x, w, b: F.linear(x, w, b),
                         [((2, 200), f32), ((9, 200), f32), ((9,), f32)]),
        # transcendental ops: ExecuTorch calls the C library per element (expf on float,
        # Half and BFloat16; exp on double), both tiers call the same functions. Inputs
        # span 1e-4..3e2 in magnitude, with NaN, +-inf, +-0, subnormals and huge values.
        **{f"{op}_{tn}_exact": (f"aten::{op}.out", fn, [((64, 64), t, "wide")])
           for op, fn in (("sigmoid", torch.sigmoid), ("exp", torch.exp),
                          ("tanh", torch.tanh), ("log", torch.log))
           for tn, t in (("f32", f32), ("f16", f16), ("bf16", bf16), ("f64", f64))},
        # the optimized gelu: ATen's gelu formulas, float steps, the C library's erff/tanhf
        "gelu_f32_exact": ("aten::gelu.out", F.gelu, [((64, 64), f32, "wide")]),
        "gelu_tanh_wide_exact": ("aten::gelu.out", lambda x: F.gelu(x, approximate="tanh"),
                                 [((64, 64), f32, "wide")]),
        "gelu_bf16_exact": ("aten::gelu.out", F.gelu, [((64, 64), bf16, "wide")]),
        "gelu_tanh_f16_exact": ("aten::gelu.out", lambda x: F.gelu(x, approximate="tanh"),
                                [((64, 64), f16, "wide")]),
        "gelu_f64_exact": ("aten::gelu.out", F.gelu, [((64, 64), f64, "wide")]),
        # the portable softmax: a running max and sum per row, in order, libm's exp
        "softmax_lastdim_exact": ("aten::_softmax.out", lambda x: x.softmax(-1),
                                  [((6, 40, 33), f32)]),
        "softmax_dim1_exact": ("aten::_softmax.out", lambda x: x.softmax(1),
                               [((3, 50, 7), f32)]),
        "softmax_wide_exact": ("aten::_softmax.out", lambda x: x.softmax(0),
                               [((64, 64), f32, "wide")]),
        "softmax_f64_exact": ("aten::_softmax.out", lambda x: x.softmax(-1), [((8, 45), f64)]),
        "sigmoid_i32_exact": ("aten::sigmoid.out", torch.sigmoid, [((64,), i32)]),
        "exp_i64_exact": ("aten::exp.out", torch.exp, [((64,), i64)]),
    }


CASES = None


def cases() -> dict:
    global CASES
    if CASES is None:
        CASES = _cases()
    return CASES


def make_inputs(name: str) -> list:
    """The case's inputs (deterministic per case name), as torch tensors."""
    import zlib

    import torch
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    out = []
    for spec in cases()[name][2]:
        shape, dtype = spec[0], spec[1]
        flag = spec[2] if len(spec) > 2 else None
        if dtype == torch.bool:
            t = torch.rand(shape, generator=g) > 0.5
        elif dtype.is_complex:
            t = torch.complex(torch.randn(shape, generator=g),
                              torch.randn(shape, generator=g)).to(dtype)
        elif dtype.is_floating_point:
            t = (torch.randn(shape, generator=g) * 2).to(dtype)
        else:
            lo, hi = (0, 12) if dtype == torch.uint8 else (-6, 7)
            t = torch.randint(lo, hi, shape, generator=g, dtype=dtype)
        if flag == "wide":  # magnitudes 1e-4..3e2, then special values
            t = torch.randn(shape, generator=g, dtype=torch.float64) \
                * 10.0 ** (torch.rand(shape, generator=g, dtype=torch.float64) * 6.5 - 4)
            special = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0,
                                    1e-40, -1e-40, 1e30, -1e30, 88.72, -87.33, 20.0, -20.0],
                                   dtype=torch.float64)
            t.view(-1)[:special.numel()] = special
            t = t.to(dtype)
        elif flag == "nonzero":
            t = torch.where(t == 0, torch.ones_like(t), t)
        elif flag == "channels_last":
            t = t.contiguous(memory_format=torch.channels_last)
        out.append(t)
    return out


def _module(fn):
    import torch

    class M(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    return M()


def single_op_program(name: str) -> Path:
    """The case's .pte, exported by ExecuTorch once and cached."""
    import torch
    from executorch.exir import EdgeCompileConfig, to_edge

    d = cache_dir() / "single_ops"
    d.mkdir(parents=True, exist_ok=True)
    pte, key = d / f"{name}.pte", d / f"{name}.key"
    want = json.dumps({"v": VERSION, **_versions()})
    if not (pte.exists() and key.exists() and key.read_text() == want):
        args = tuple(make_inputs(name))
        ep = torch.export.export(_module(cases()[name][1]).eval(), args)
        # complex ops outside core ATen that ExecuTorch has kernels for (view ops as copies)
        config = EdgeCompileConfig(_core_aten_ops_exception_list=[
            torch.ops.aten.view_as_real.default, torch.ops.aten._conj_physical.default])
        buf = to_edge(ep, compile_config=config).to_executorch().buffer
        _write_atomic(pte, lambda f: f.write(buf))
        _write_atomic(key, lambda f: f.write(want.encode()))
    return pte
