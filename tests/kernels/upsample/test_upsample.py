import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests.kernels.helpers import assert_close, bound_out, call, static_out, to_np

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 2e-2,
       torch.uint8: 1}


def _rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def _check(out, want, dtype):
    if dtype == torch.uint8:  # ATen's uint8 path uses fixed-point weights: allow off-by-one
        got, exp = out.numpy(), to_np(want)
        assert got.shape == exp.shape and got.dtype == exp.dtype
        assert np.abs(got.astype(np.int64) - exp.astype(np.int64)).max(initial=0) <= 1
        return
    assert_close(out.numpy(), to_np(want), rtol=TOL[dtype], atol=TOL[dtype])


# (input shape, output_size, scale_factors)
SIZES = [
    ((1, 2, 4, 5), [8, 10], None), ((2, 1, 5, 3), [7, 4], None), ((1, 3, 6, 6), [3, 2], None),
    ((1, 1, 3, 4), None, [2.0, 3.0]), ((1, 2, 5, 7), None, [1.5, 0.7]),
    ((1, 1, 4, 4), [4, 4], None),
    ((1, 2, 7, 3), None, [2.3, 1.9]), ((0, 2, 3, 3), [5, 5], None), ((1, 1, 1, 1), [3, 2], None),
]


@pytest.mark.parametrize("shape,size,scales", SIZES)
@pytest.mark.parametrize("dtype", FLOATS + [torch.uint8])
def test_upsample_nearest2d(shape, size, scales, dtype):
    x = _rand(shape, dtype)
    want = torch.ops.aten.upsample_nearest2d.vec(x, size, scales)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::upsample_nearest2d.vec_out", to_np(x), size, scales, out)
    assert_close(out.numpy(), to_np(want), rtol=0, atol=0)


@pytest.mark.parametrize("shape,size,scales", SIZES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", FLOATS + [torch.uint8])
def test_upsample_bilinear2d(shape, size, scales, align_corners, dtype):
    x = _rand(shape, dtype)
    want = torch.ops.aten.upsample_bilinear2d.vec(x, size, align_corners, scales)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::upsample_bilinear2d.vec_out", to_np(x), size, align_corners, scales, out)
    _check(out, want, dtype)


@pytest.mark.parametrize("shape,size,scales", [
    ((1, 2, 8, 9), [3, 4], (None, None)), ((1, 2, 5, 5), [9, 12], (None, None)),
    ((2, 1, 12, 6), [5, 6], (None, None)), ((1, 1, 10, 10), [4, 3], (2.5, 3.0)),
    ((1, 1, 7, 7), [1, 1], (None, None)),
])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.uint8])
def test_upsample_bilinear2d_aa(shape, size, scales, align_corners, dtype):
    x = _rand(shape, dtype)
    want = torch.ops.aten._upsample_bilinear2d_aa(x, size, align_corners, *scales)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::_upsample_bilinear2d_aa.out", to_np(x), size, align_corners, *scales, out)
    _check(out, want, dtype)


def test_upsample_dynamic_out_and_bad_args():
    x = _rand((1, 2, 3, 3), torch.float32)
    out = bound_out((1, 2, 10, 10), np.float32)
    call("aten::upsample_nearest2d.vec_out", to_np(x), [6, 9], None, out)
    assert out.shape == (1, 2, 6, 9)
    with pytest.raises(ExecuTorchError, match="output_size"):
        call("aten::upsample_nearest2d.vec_out", to_np(x), [6, 9], [2.0, 3.0], out)
    with pytest.raises(ExecuTorchError, match="input"):
        call("aten::upsample_bilinear2d.vec_out", to_np(x)[0], [6, 9], False, None, out)


@pytest.mark.parametrize("shape,r", [((1, 8, 3, 2), 2), ((2, 9, 2, 2), 3), ((18, 2, 3), 3),
                                     ((2, 3, 4, 2, 2), 1), ((0, 4, 2, 2), 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_pixel_shuffle(shape, r, dtype):
    x = _rand(shape, torch.float32) > 0 if dtype == torch.bool else _rand(shape, torch.float32)
    x = x.to(dtype)
    want = torch.ops.aten.pixel_shuffle(x, r)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::pixel_shuffle.out", to_np(x), r, out)
    assert_close(out.numpy(), to_np(want), rtol=0, atol=0)
    # and back again (ATen returns empty inputs unchanged from pixel_unshuffle; we reshape)
    back = static_out(tuple(x.shape), to_np(x).dtype)
    call("aten::pixel_unshuffle.out", out.numpy(), r, back)
    assert_close(back.numpy(), to_np(x), rtol=0, atol=0)


@pytest.mark.parametrize("shape,r", [((1, 2, 4, 6), 2), ((3, 6, 9), 3)])
def test_pixel_unshuffle(shape, r):
    x = _rand(shape, torch.float32)
    want = torch.ops.aten.pixel_unshuffle(x, r)
    out = static_out(tuple(want.shape), np.float32)
    call("aten::pixel_unshuffle.out", to_np(x), r, out)
    assert_close(out.numpy(), to_np(want), rtol=0, atol=0)


def test_pixel_shuffle_bad_channels_raises():
    with pytest.raises(ExecuTorchError, match="self"):
        call("aten::pixel_shuffle.out", np.zeros((1, 6, 2, 2), np.float32), 2,
             static_out((1, 1, 4, 4), np.float32))


@pytest.mark.parametrize("interp", [0, 1, 2])
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sampler_2d(interp, padding, align_corners, dtype):
    x = _rand((2, 3, 5, 6), dtype)
    # Coordinates well outside [-1, 1] exercise padding; exact pixel centres exercise ties.
    grid = (torch.rand((2, 4, 7, 2), generator=torch.Generator().manual_seed(1)) * 3.2 - 1.6)
    grid[0, 0, :3] = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])
    grid = grid.to(dtype)
    want = torch.ops.aten.grid_sampler_2d(x, grid, interp, padding, align_corners)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::grid_sampler_2d.out", to_np(x), to_np(grid), interp, padding, align_corners, out)
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    assert_close(out.numpy(), to_np(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_grid_sampler_2d_half(dtype):
    x = _rand((1, 2, 4, 4), dtype)
    grid = (torch.rand((1, 3, 3, 2), generator=torch.Generator().manual_seed(2)) * 2 - 1).to(dtype)
    want = torch.ops.aten.grid_sampler_2d(x, grid, 0, 0, False)
    out = static_out(tuple(want.shape), to_np(want).dtype)
    call("aten::grid_sampler_2d.out", to_np(x), to_np(grid), 0, 0, False, out)
    assert_close(out.numpy(), to_np(want), rtol=TOL[dtype] * 5, atol=TOL[dtype] * 5)


# ---- uint8: ATen's fixed-point path, bit for bit --------------------------------------------

def _u8_case(rng, aa):
    n, c = int(rng.integers(1, 3)), int(rng.choice([1, 2, 3, 4, 5, 7]))
    h, w = (int(v) for v in rng.integers(1, 40, 2))
    oh, ow = (int(v) for v in rng.integers(1, 60, 2))
    ac, cl, use_scales = (bool(b) for b in rng.integers(0, 2, 3))
    scales = (float(rng.choice([0.3, 0.77, 1.5, 2.0, 3.0])),
              float(rng.choice([0.5, 1.3, 1.7, 2.0]))) if use_scales else (None, None)
    if use_scales and not aa:  # vec overload: the sizes come from the scales
        oh, ow = int(h * scales[0]), int(w * scales[1])
        if oh < 1 or ow < 1:
            oh, ow, scales = max(oh, 1), max(ow, 1), (None, None)
    if c > 4 and ow == 1 and not cl:  # ATen's generic uint8 kernel is wrong there (see below)
        ow = 2
        scales = scales if aa else (None, None)
    x = torch.from_numpy(rng.integers(0, 256, (n, c, h, w)).astype(np.uint8))
    if rng.random() < 0.2:  # saturated images exercise the clamping
        x = (x > 127).to(torch.uint8) * 255
    if cl:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, [oh, ow], ac, scales


def _u8_run(x, size, ac, scales, aa):
    if aa:
        want = torch.ops.aten._upsample_bilinear2d_aa(x, size, ac, *scales)
        args = [size, ac, *scales]
        name = "aten::_upsample_bilinear2d_aa.out"
    elif scales[0] is not None:
        want = torch.ops.aten.upsample_bilinear2d.vec(x, None, ac, list(scales))
        args = [None, ac, list(scales)]
        name = "aten::upsample_bilinear2d.vec_out"
    else:
        want = torch.ops.aten.upsample_bilinear2d.vec(x, size, ac, None)
        args = [size, ac, None]
        name = "aten::upsample_bilinear2d.vec_out"
    out = static_out(tuple(want.shape), np.uint8)
    call(name, to_np(x), *args, out)
    return out.numpy(), want.contiguous().numpy()


@pytest.mark.parametrize("aa", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_upsample_bilinear2d_uint8_exact(aa, seed):
    rng = np.random.default_rng(100 + seed + 10 * aa)
    for _ in range(25):
        x, size, ac, scales = _u8_case(rng, aa)
        got, want = _u8_run(x, size, ac, scales, aa)
        np.testing.assert_array_equal(got, want, err_msg=f"{x.shape} -> {size} ac={ac} "
                                                         f"scales={scales}")


@pytest.mark.parametrize("shape,size", [((1, 3, 300, 257), [7, 5]), ((1, 2, 5, 600), [3, 2]),
                                        ((2, 3, 64, 64), [224, 224]), ((1, 4, 1, 1), [5, 7]),
                                        ((1, 1, 2, 2), [100, 1]), ((1, 3, 9, 9), [9, 9])])
@pytest.mark.parametrize("aa", [False, True])
@pytest.mark.parametrize("align_corners", [False, True])
def test_upsample_bilinear2d_uint8_extremes(shape, size, aa, align_corners):
    x = torch.from_numpy(np.random.default_rng(3).integers(0, 256, shape).astype(np.uint8))
    got, want = _u8_run(x, size, align_corners, (None, None), aa)
    np.testing.assert_array_equal(got, want)


def test_upsample_bilinear2d_uint8_width_one_many_channels():
    # With more than 4 channels in contiguous layout ATen's generic uint8 kernel gives every
    # output row of a width-1 output row 0's value (a TensorIterator stride bug); we compute
    # each row, as ATen's own kernel does for the same image split into <= 4 channels.
    x = torch.from_numpy(np.random.default_rng(4).integers(0, 256, (1, 6, 7, 5))
                         .astype(np.uint8))
    for aa in (False, True):
        got, _ = _u8_run(x, [4, 1], False, (None, None), aa)
        parts = [_u8_run(x[:, i:i + 3], [4, 1], False, (None, None), aa)[1] for i in (0, 3)]
        np.testing.assert_array_equal(got, np.concatenate(parts, axis=1))
        assert not (got == got[:, :, :1]).all()  # rows do differ
