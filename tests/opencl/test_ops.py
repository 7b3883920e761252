"""Each OpenCL kernel against the op's reference kernel on the same inputs: bit for bit
where the contract says so (IEEE arithmetic, selects, ordered sums, the quantize
rounding), edge values included (NaN, signed zeros, infinities, out-of-range
quantization); the device's transcendentals within a stated tolerance."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opencl.helpers import device_or_skip, run_both, same_bits

F32 = np.float32
EDGES = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.0, -1.0, 6.0, -6.5, 1e-40, 3.5],
                 F32)


@pytest.fixture(autouse=True, scope="module")
def _device():
    device_or_skip()


def _rand(seed, *shape, dtype=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _check(name, args, outs, exact=True, rtol=0.0, atol=0.0):
    got, want = run_both(name, args, outs)
    for i, (g, w) in enumerate(zip(got, want)):
        if exact:
            assert same_bits(g, w), f"{name} out {i}: {g} != {w}"
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{name} out {i}")


@pytest.mark.parametrize("name,extra", [
    ("aten::relu.out", []), ("aten::hardtanh.out", [0.0, 6.0]),
    ("aten::hardtanh.out", [-1.0, 1.0]), ("aten::neg.out", []), ("aten::abs.out", []),
])
def test_selects_and_signs_exact_on_edges(name, extra):
    x = np.concatenate([EDGES, _rand(1, 53)])
    _check(name, [x] + extra, [(x.shape, F32)])


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_nan_and_zero_rules(op):
    a = np.array([np.nan, 1.0, -0.0, 0.0, 2.0, -np.inf], F32)
    b = np.array([1.0, np.nan, 0.0, -0.0, 2.0, 3.0], F32)
    _check(f"aten::{op}.out", [a, b], [(a.shape, F32)])


@pytest.mark.parametrize("name,alpha", [("aten::add.out", 1), ("aten::add.out", 2.5),
                                        ("aten::sub.out", 1), ("aten::sub.out", -0.5)])
def test_add_sub_broadcast_alpha(name, alpha):
    a, b = _rand(2, 3, 1, 5), _rand(3, 4, 5)
    _check(name, [a, b, alpha], [((3, 4, 5), F32)])


@pytest.mark.parametrize("op", ["mul", "div"])
def test_mul_div_broadcast(op):
    a, b = _rand(4, 2, 3, 4), _rand(5, 4)
    b[0] = 0.0
    _check(f"aten::{op}.out", [a, b], [((2, 3, 4), F32)])


def test_scalar_ops_and_int64():
    x = _rand(6, 7, 3)
    _check("aten::mul.Scalar_out", [x, 0.125], [(x.shape, F32)])
    _check("aten::add.Scalar_out", [x, 3, 2], [(x.shape, F32)])
    i = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    _check("aten::add.out", [i, i[:1], 3], [(i.shape, np.int64)])


@pytest.mark.parametrize("name", ["aten::eq.Scalar_out", "aten::gt.Scalar_out",
                                  "aten::le.Scalar_out", "aten::ne.Scalar_out"])
def test_compare_scalar_nan(name):
    _check(name, [EDGES, 1.0], [(EDGES.shape, np.bool_)])


def test_compare_tensor_where_logical_not():
    a, b = _rand(7, 4, 6), _rand(8, 6)
    _check("aten::lt.Tensor_out", [a, b], [(a.shape, np.bool_)])
    c = a > 0
    _check("aten::where.self_out", [c, a, b], [(a.shape, F32)])
    _check("aten::logical_not.out", [c], [(c.shape, np.bool_)])
    _check("aten::logical_not.out", [EDGES], [(EDGES.shape, np.bool_)])


def test_pow_two_is_square():
    x = _rand(9, 40)
    _check("aten::pow.Tensor_Scalar_out", [x, 2], [(x.shape, F32)])


@pytest.mark.parametrize("groups,stride,padding,dilation,bias", [
    (1, [1, 1], [1, 1], [1, 1], True), (2, [2, 2], [1, 0], [1, 1], True),
    (4, [1, 2], [2, 2], [2, 1], False), (1, [3, 3], [0, 0], [1, 1], False)])
def test_conv2d_bit_for_bit(groups, stride, padding, dilation, bias):
    x = _rand(10, 2, 8, 11, 9)
    w = _rand(11, 12, 8 // groups, 3, 3)
    b = _rand(12, 12) if bias else None
    oh = (11 + 2 * padding[0] - dilation[0] * 2 - 1) // stride[0] + 1
    ow = (9 + 2 * padding[1] - dilation[1] * 2 - 1) // stride[1] + 1
    _check("aten::convolution.out", [x, w, b, stride, padding, dilation, False, [0, 0], groups],
           [((2, 12, oh, ow), F32)])


def test_depthwise_and_conv1d_bit_for_bit():
    x = _rand(13, 1, 6, 10, 10)
    w = _rand(14, 6, 1, 3, 3)
    _check("aten::convolution.out", [x, w, _rand(15, 6), [2, 2], [1, 1], [1, 1], False, [0, 0],
                                     6], [((1, 6, 5, 5), F32)])
    x1 = _rand(16, 2, 4, 30)
    w1 = _rand(17, 5, 4, 3)
    _check("aten::convolution.out", [x1, w1, None, [2], [1], [1], False, [0], 1],
           [((2, 5, 15), F32)])


def test_matrix_products_bit_for_bit():
    a, b = _rand(18, 5, 37), _rand(19, 37, 7)
    _check("aten::mm.out", [a, b], [((5, 7), F32)])
    _check("aten::addmm.out", [_rand(20, 7), a, b, 2.0, 0.5], [((5, 7), F32)])
    _check("aten::addmm.out", [_rand(21, 5, 7), a, b, 1, 1], [((5, 7), F32)])
    _check("aten::addmm.out", [_rand(22, 1, 7), a, b, 0, 1], [((5, 7), F32)])
    _check("aten::bmm.out", [_rand(23, 3, 4, 9), _rand(24, 3, 9, 2)], [((3, 4, 2), F32)])
    _check("aten::linear.out", [_rand(25, 2, 3, 9), _rand(26, 6, 9), _rand(27, 6)],
           [((2, 3, 6), F32)])
    d = _rand(28, 4, 5, dtype=np.float64)
    _check("aten::mm.out", [d, d.T.copy()], [((4, 4), np.float64)])


def test_reductions_bit_for_bit():
    x = _rand(29, 3, 4, 5, 6)
    _check("aten::mean.out", [x, [0, 2], True, None], [((1, 4, 1, 6), F32)])
    _check("aten::mean.out", [x, [-1, -2], False, None], [((3, 4), F32)])
    _check("aten::sum.IntList_out", [x, [1], False, None], [((3, 5, 6), F32)])
    _check("aten::sum.IntList_out", [x, None, False, None], [((), F32)])
    z = np.array([[0.0, -0.0], [-0.0, -0.0]], F32)
    _check("aten::sum.IntList_out", [z, [1], False, None], [((2,), F32)])
    _check("aten::any.out", [x > 1.5, 1, False], [((3, 5, 6), np.bool_)])


def test_max_pool_nan_padding_indices():
    x = _rand(30, 2, 3, 9, 8)
    x[0, 0, 4, 4] = np.nan
    x[1, 2, 0, 0] = -np.inf
    _check("aten::max_pool2d_with_indices.out", [x, [3, 3], [2, 2], [1, 1], [1, 1], False],
           [((2, 3, 5, 4), F32), ((2, 3, 5, 4), np.int64)])
    _check("aten::max_pool2d_with_indices.out", [x, [2, 2], [], [0, 0], [1, 1], False],
           [((2, 3, 4, 4), F32), ((2, 3, 4, 4), np.int64)])


def test_batch_norm_bit_for_bit():
    x = _rand(31, 2, 5, 4, 3)
    var = np.abs(_rand(32, 5)) + 0.1
    _check("aten::_native_batch_norm_legit_no_training.out",
           [x, _rand(33, 5), _rand(34, 5), _rand(35, 5), var, 0.1, 1e-5],
           [(x.shape, F32), ((0,), F32), ((0,), F32)])


def test_quantize_dequantize_bit_for_bit_on_edges():
    x = np.concatenate([EDGES, _rand(36, 60) * 40, np.array([1e30, -1e30, 2.5, 3.5], F32)])
    for dtype, lo, hi in ((np.int8, -128, 127), (np.uint8, 0, 255)):
        code = {np.int8: 1, np.uint8: 0}[dtype]
        _check("quantized_decomposed::quantize_per_tensor.out",
               [x, 0.1, 3, lo, hi, code], [(x.shape, dtype)])
    q = np.random.default_rng(37).integers(-128, 128, (4, 3, 2)).astype(np.int8)
    _check("quantized_decomposed::dequantize_per_tensor.out", [q, 0.05, -2, -128, 127, 1, None],
           [(q.shape, F32)])


def test_copies_exact():
    x = _rand(38, 2, 3, 4, 5)
    _check("aten::permute_copy.out", [x, [3, 1, 0, 2]], [((5, 3, 2, 4), F32)])
    _check("aten::slice_copy.Tensor_out", [x, 3, -4, None, 2], [((2, 3, 4, 2), F32)])
    _check("aten::select_copy.int_out", [x, 1, -1], [((2, 4, 5), F32)])
    _check("aten::expand_copy.out", [x[:, :1].copy(), [7, 2, 3, 4, 5], False],
           [((7, 2, 3, 4, 5), F32)])
    _check("aten::cat.out", [[x, x[:, :2].copy()], 1], [((2, 5, 4, 5), F32)])
    _check("aten::split_with_sizes_copy.out", [x, [1, 3], 2], [((2, 3, 1, 5), F32),
                                                               ((2, 3, 3, 5), F32)])
    _check("aten::view_copy.out", [x, [6, 20]], [((6, 20), F32)])
    i = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    _check("aten::permute_copy.out", [i, [2, 0, 1]], [((4, 2, 3), np.int64)])


# The device's exp/tanh/erf against the C library's (PoCL: measured at most 1 ulp on these
# inputs; the bound below is 4 ulp of float32, about 4.8e-7 relative).
@pytest.mark.parametrize("name,extra", [("aten::sigmoid.out", []), ("aten::tanh.out", []),
                                        ("aten::gelu.out", ["none"]), ("aten::exp.out", [])])
def test_transcendentals_within_ulps(name, extra):
    x = _rand(39, 257) * 4
    _check(name, [x] + extra, [(x.shape, F32)], exact=False, rtol=4.8e-7, atol=1e-7)


def test_softmax_and_layer_norm_close():
    x = _rand(40, 3, 4, 17)
    _check("aten::_softmax.out", [x, -1, False], [(x.shape, F32)], exact=False, rtol=1e-6,
           atol=1e-7)
    _check("aten::_softmax.out", [x, 1, False], [(x.shape, F32)], exact=False, rtol=1e-6,
           atol=1e-7)
    _check("aten::native_layer_norm.out", [x, [17], _rand(41, 17), _rand(42, 17), 1e-5],
           [(x.shape, F32), ((3, 4, 1), F32), ((3, 4, 1), F32)], exact=False, rtol=1e-5,
           atol=2e-6)
