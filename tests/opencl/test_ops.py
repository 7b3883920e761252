"""Each OpenCL kernel against the op's reference kernel on the same inputs: bit for bit
where the contract says so (IEEE arithmetic, selects, ordered sums, the quantize
rounding), edge values included (NaN, signed zeros, infinities, out-of-range
quantization); the device's transcendentals within a stated tolerance."""
from __future__ import annotations

import numpy as np
import pytest

from tests.opencl.helpers import device_or_skip, run_both, run_device, run_reference, same_bits

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


# ---- indexing, copies, casts, extremes, upsampling, LLM ops ------------------------------
I64 = np.int64


def test_embedding_and_index_gather_exact():
    w = _rand(20, 10, 6)
    _check("aten::embedding.out", [w, np.array([[3, 0], [9, 3]], I64), -1, False, False],
           [((2, 2, 6), F32)])
    x = _rand(21, 4, 5, 6)
    cases = [  # (indices, out shape): adjacent in place, apart in front, negative, int32
        ([None, np.array([4, -1, 0], I64)], (4, 3, 6)),
        ([np.array([[1], [3]], I64), None, np.array([0, 5, -6], np.int32)], (2, 3, 5)),
        ([None, np.array([[0, 1]], I64), np.array([[2], [3]], I64)], (4, 2, 2)),
        ([np.array([-4], I64)], (1, 5, 6)),
    ]
    for idx, shape in cases:
        _check("aten::index.Tensor_out", [x, idx], [(shape, F32)])


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_repeats_in_order(accumulate):
    x = _rand(22, 3, 4, 5)
    idx = [None, np.array([1, 3, 1, -1], I64)]
    v = _rand(23, 3, 4, 5)
    _check("aten::index_put.out", [x, idx, v, accumulate], [((3, 4, 5), F32)])
    # values broadcast over the indexed shape, indices in front of a slice
    idx = [np.array([0, 2, 0], I64), None, np.array([4, 4, 1], I64)]
    _check("aten::index_put.out", [x, idx, _rand(24, 4), accumulate], [((3, 4, 5), F32)])


@pytest.mark.parametrize("name,args,shape", [
    ("aten::embedding.out", [np.zeros((5, 3), F32), np.array([1, 5], I64), -1, False, False],
     (2, 3)),
    ("aten::embedding.out", [np.zeros((5, 3), F32), np.array([-1], I64), -1, False, False],
     (1, 3)),
    ("aten::index.Tensor_out", [np.zeros((5, 3), F32), [np.array([-6], I64)]], (1, 3)),
    ("aten::index_put.out", [np.zeros((5, 3), F32), [None, np.array([3], I64)],
                             np.ones(1, F32), False], (5, 3)),
])
def test_index_out_of_range_sets_the_flag(name, args, shape):
    got, flagged = run_device(name, args, [(shape, F32)])
    assert flagged is not None and "out of range" in flagged
    with pytest.raises(Exception, match="out of|out-of"):
        run_reference(name, args, [(shape, F32)])


def test_copy_inplace_broadcast_unfold_view_as_real():
    dst, src = _rand(25, 3, 4), _rand(26, 4)
    (got,), flagged = run_device("aten::copy_", [dst, src, False], [], read=(0,))
    assert flagged is None and same_bits(got, np.broadcast_to(src, (3, 4)))
    (got,), _ = run_device("aten::copy_", [dst, np.arange(4, dtype=I64), False], [],
                           read=(0,))
    assert same_bits(got, np.broadcast_to(np.arange(4, dtype=F32), (3, 4)))
    x = _rand(27, 2, 37)
    _check("aten::unfold_copy.out", [x, -1, 8, 5], [((2, 6, 8), F32)])
    c = (_rand(28, 3, 4) + 1j * _rand(29, 3, 4)).astype(np.complex64)
    _check("aten::view_as_real_copy.out", [c], [((3, 4, 2), F32)])


@pytest.mark.parametrize("src,dst", [(I64, F32), (np.bool_, F32), (F32, np.bool_),
                                     (np.int32, I64), (I64, np.int32), (F32, np.float64)])
def test_dim_order_copy_casts_exact(src, dst):
    x = np.concatenate([EDGES, _rand(30, 9) * 1e3]) if np.dtype(src).kind == "f" else \
        np.array([0, 1, -1, 2**31 + 5, -(2**40) - 3, 16777217], I64).astype(src)
    _check("dim_order_ops::_to_dim_order_copy.out", [x, False, None], [(x.shape, dst)])


def test_int_abs_arange_extremes():
    x = np.array([0, -5, 7, np.iinfo(I64).min, -1], I64)
    _check("aten::abs.out", [x], [(x.shape, I64)])
    _check("aten::arange.start_out", [-64, 2112, 1], [((2176,), I64)])
    _check("aten::arange.start_out", [0.5, 3.0, 0.1], [((25,), F32)])
    y = np.concatenate([_rand(31, 40), [np.inf, -np.inf]]).astype(F32)
    for name in ("aten::max.unary_out", "aten::min.unary_out"):
        _check(name, [y], [((), F32)])
        _check(name, [np.append(y, np.nan).astype(F32)], [((), F32)])
    z = _rand(32, 3, 4, 5)
    _check("aten::amax.out", [z, [0, 2], True], [((1, 4, 1), F32)])
    _check("aten::amin.out", [z, [1], False], [((3, 5), F32)])


@pytest.mark.parametrize("size,scales", [([8, 12], None), (None, [2.0, 2.0]),
                                         (None, [1.5, 2.5]), ([5, 3], None)])
def test_upsample_nearest_and_bilinear_bit_for_bit(size, scales):
    x = np.concatenate([_rand(33, 2 * 3 * 4 * 6 - 4), [np.nan, np.inf, -0.0, 0.0]]) \
        .astype(F32).reshape(2, 3, 4, 6)
    oh, ow = size if size else (int(4 * scales[0]), int(6 * scales[1]))
    _check("aten::upsample_nearest2d.vec_out", [x, size, scales], [((2, 3, oh, ow), F32)])
    for align in (False, True):
        _check("aten::upsample_bilinear2d.vec_out", [x, size, align, scales],
               [((2, 3, oh, ow), F32)])


def test_update_cache_with_a_start_computed_at_run_time():
    from pyruntime.kernels.opencl.api import Late

    cache, v = _rand(34, 1, 8, 2, 4), _rand(35, 1, 3, 2, 4)
    for start in (0, 5):
        (_, got), flagged = run_device("llama::update_cache.out", [v, cache, Late(0)],
                                     [((1,), F32)], values=[start], read=(1,))
        want = cache.copy()
        want[:, start:start + 3] = v
        assert flagged is None and same_bits(got, want)
    _, flagged = run_device("llama::update_cache.out", [v, cache, Late(0)], [((1,), F32)],
                            values=[6], read=(1,))
    assert flagged is not None and "start_pos" in flagged


# measured: at most 4.8e-7 abs over 80 random cases (D=16, 4 mask/causal/start cases):
# scores summed in order on the device, by BLAS on the host; the device's exp
SDPA_ATOL = 1e-6


@pytest.mark.parametrize("causal,masked,start", [(True, False, 0), (True, False, 3),
                                                 (False, False, 2), (False, True, 0)])
def test_custom_sdpa_close_to_reference(causal, masked, start):
    from pyruntime.kernels.opencl.api import Late

    q, k, v = _rand(36, 1, 3, 4, 8), _rand(37, 1, 8, 2, 8), _rand(38, 1, 8, 2, 8)
    mask = np.where(np.random.default_rng(39).random((3, 8)) < 0.3, -np.inf, 0).astype(F32) \
        if masked else None
    args = [q, k, v, start, mask, 0.0, causal, None]
    want = run_reference("llama::custom_sdpa.out", args, [((1, 3, 4, 8), F32)])[0]
    for s in (start, Late(0)):
        (got,), flagged = run_device("llama::custom_sdpa.out", args[:3] + [s] + args[4:],
                                     [((1, 3, 4, 8), F32)], values=[start])
        assert flagged is None
        np.testing.assert_allclose(got, want, rtol=0, atol=SDPA_ATOL)
