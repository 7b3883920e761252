import numpy as np
import pytest
import torch

from cython_ext import ExecuTorchError
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
