"""Compiled mm/bmm/addmm/linear against the reference tier (itself tested vs torch): both add
each output's products in ExecuTorch's order, so they agree bit for bit."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from pyruntime.cython_ext.desc import DescTable
from pyruntime.kernels.fast import blas, get_binder
from pyruntime.kernels.fast.context import BindContext
from tests import parts
from tests.kernels.helpers import (assert_close, bound_out, call, call_fast, call_split,
                                  static_out)

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64]


def _rand(shape, dtype):
    return RNG.standard_normal(shape).astype(dtype)


def _transposed(a: np.ndarray) -> ETensor:
    """``a`` as a tensor whose last two dims are stored swapped (dim order ..., n-1, n-2)."""
    nd = a.ndim
    order = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    t = ETensor(from_numpy_dtype(a.dtype), a.shape, dim_order=order)
    t.storage = np.ascontiguousarray(np.swapaxes(a, -1, -2)).reshape(-1).view(np.uint8)
    assert np.array_equal(t.numpy(), a)
    return t


def _check(name, args, out_shape, dtype):
    ref = static_out(out_shape, dtype)
    call(name, *args, ref)
    for out in (static_out(out_shape, dtype), bound_out(tuple(s + 3 for s in out_shape), dtype)):
        status = call_fast(name, *args, out)
        assert status == 0, f"{name}: compiled kernel returned {status}"
        np.testing.assert_array_equal(out.numpy(), ref.numpy(), err_msg=name)


def _constant(a: np.ndarray, transposed=False) -> ETensor:
    """``a`` over read-only storage, as a program's constants are: packed once at bind."""
    t = _transposed(a) if transposed else ETensor.from_array(a.copy())
    t.storage.flags.writeable = False
    return t


@pytest.mark.parametrize("m,k,n", [(1, 300, 40), (40, 300, 1), (64, 37, 4), (7, 129, 31),
                                   (5, 64, 200), (33, 65, 17), (1, 33, 64), (1, 65, 300),
                                   (1, 300, 130)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_shapes_and_constant_operands(m, k, n, dtype):
    """Wide, narrow (computed transposed) and odd shapes; a constant mat2 read transposed
    (a linear layer's weight behind a folded permute) is packed at load."""
    a, b, s = _rand((m, k), dtype), _rand((k, n), dtype), _rand((n,), dtype)
    _check("aten::mm.out", [a, b], (m, n), dtype)
    _check("aten::mm.out", [_transposed(a), _transposed(b)], (m, n), dtype)
    _check("aten::addmm.out", [s, a, _constant(b, transposed=True), 1, 1], (m, n), dtype)
    _check("aten::linear.out", [a, _constant(np.ascontiguousarray(b.T)), s], (m, n), dtype)


@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 7, 1), (0, 3, 2), (4, 0, 3), (16, 33, 9)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_mm(m, k, n, dtype):
    a, b = _rand((m, k), dtype), _rand((k, n), dtype)
    _check("aten::mm.out", [a, b], (m, n), dtype)
    _check("aten::mm.out", [_transposed(a), _transposed(b)], (m, n), dtype)


@pytest.mark.parametrize("bs,m,k,n", [(2, 3, 4, 5), (1, 1, 6, 2), (0, 2, 2, 2), (3, 5, 1, 4)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm(bs, m, k, n, dtype):
    a, b = _rand((bs, m, k), dtype), _rand((bs, k, n), dtype)
    _check("aten::bmm.out", [a, b], (bs, m, n), dtype)
    _check("aten::bmm.out", [a, _transposed(b)], (bs, m, n), dtype)


@pytest.mark.parametrize("bias_shape", [(5,), (1, 5), (4, 1), (4, 5), (), (1,)])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_addmm(bias_shape, beta, alpha, dtype):
    s, a, b = _rand(bias_shape, dtype), _rand((4, 6), dtype), _rand((6, 5), dtype)
    if beta == 0:
        s[...] = np.nan  # beta == 0 ignores self, NaN included
    _check("aten::addmm.out", [s, a, b, beta, alpha], (4, 5), dtype)
    _check("aten::addmm.out", [s, a, _transposed(b), beta, alpha], (4, 5), dtype)


@pytest.mark.parametrize("in_shape", [(7,), (3, 7), (2, 3, 7), (0, 7)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_linear(in_shape, bias, dtype):
    x, w = _rand(in_shape, dtype), _rand((4, 7), dtype)
    b = _rand((4,), dtype) if bias else None
    _check("aten::linear.out", [x, w, b], in_shape[:-1] + (4,), dtype)
    _check("aten::linear.out", [x, _transposed(w), b], in_shape[:-1] + (4,), dtype)


@pytest.mark.parametrize("threads", [2, 3])
def test_split_into_row_parts_is_bit_identical(threads, monkeypatch):
    """Intra-op threads: products split into row ranges (odd splits, a batch, a constant B
    packed for a part's rows, bias and alpha/beta on each part's rows) give the one-call
    result bit for bit, into static outs and into bound outs the prep call resizes."""
    from pyruntime.kernels.linalg import typed as linalg

    monkeypatch.setattr(linalg, "SPLIT_MACS", 0)
    dt = np.float32
    for m, k, n in ((7, 33, 5), (40, 20, 3), (3, 50, 64), (97, 64, 96)):
        a, b, s = _rand((m, k), dt), _rand((k, n), dt), _rand((n,), dt)
        cases = [("aten::mm.out", [a, b], (m, n)),
                 ("aten::mm.out", [_transposed(a), b], (m, n)),
                 ("aten::addmm.out", [s, a, _constant(b, transposed=True), 0.5, 2.0], (m, n)),
                 ("aten::addmm.out", [_rand((m, 1), dt), a, b, 1, 1], (m, n)),
                 ("aten::linear.out", [a, _constant(np.ascontiguousarray(b.T)), s], (m, n)),
                 ("aten::linear.out", [a.reshape(1, m, k), _constant(np.ascontiguousarray(b.T)),
                                       None], (1, m, n)),
                 ("aten::bmm.out", [_rand((3, m, k), dt), _rand((3, k, n), dt)], (3, m, n))]
        for name, args, shape in cases:
            ref = static_out(shape, dt)
            call(name, *args, ref)
            for out in (static_out(shape, dt), bound_out(tuple(x + 2 for x in shape), dt)):
                status, parts = call_split(name, *args, out, threads=threads)
                assert status == 0 and parts == min(threads, m), (name, status, parts)
                np.testing.assert_array_equal(out.numpy(), ref.numpy(), err_msg=name)
    # a failing check stops the call before any part runs
    status, parts = call_split("aten::mm.out", a, b, static_out((m, n + 1), dt), threads=threads)
    assert status != 0 and parts == min(threads, m)


@pytest.mark.parametrize("threads", [2, 3])
def test_matrix_vector_products_split_their_columns(threads, monkeypatch):
    """Fewer rows than threads (a classifier's or a decode step's product): the parts take
    whole panels of columns each (a constant B packed once, each part reading its own
    panels; bias and alpha/beta on each part's columns), bit for bit the one-call result."""
    from pyruntime.kernels.linalg import typed as linalg

    monkeypatch.setattr(linalg, "SPLIT_MACS", 0)
    for dt in (np.float32, np.float64):
        nr = 64 // np.dtype(dt).itemsize
        for m, k, n in ((1, 40, 70), (1, 9, 3 * nr), (2, 33, 5 * nr + 3), (1, 64, nr + 1)):
            a, b, s = _rand((m, k), dt), _rand((k, n), dt), _rand((n,), dt)
            cases = [("aten::mm.out", [a, b], (m, n)),
                     ("aten::mm.out", [a, _transposed(b)], (m, n)),
                     ("aten::mm.out", [a, _constant(b)], (m, n)),
                     ("aten::addmm.out", [s, a, _constant(b, transposed=True), 0.5, 2.0], (m, n)),
                     ("aten::addmm.out", [_rand((m, 1), dt), a, b, 1, 1], (m, n)),
                     ("aten::addmm.out", [s, a, b, 0, 3.0], (m, n)),
                     ("aten::linear.out", [a, _constant(np.ascontiguousarray(b.T)), s], (m, n)),
                     ("aten::linear.out", [a.reshape(1, m, k),
                                           _constant(np.ascontiguousarray(b.T)), None],
                      (1, m, n))]
            want = min(threads, -(-n // nr)) if m < threads else min(threads, m)
            for name, args, shape in cases:
                ref = static_out(shape, dt)
                call(name, *args, ref)
                for out in (static_out(shape, dt), bound_out(tuple(x + 2 for x in shape), dt)):
                    status, parts = call_split(name, *args, out, threads=threads)
                    assert status == 0 and parts == want, (name, m, n, status, parts)
                    np.testing.assert_array_equal(out.numpy(), ref.numpy(), err_msg=name)


def test_declines_and_errors():
    a32, b32 = _rand((2, 3), np.float32), _rand((3, 4), np.float32)
    # other dtypes and mixed dtypes are declined by the typed kernel (kernels/linalg/
    # generic.py takes them)
    assert call_fast("aten::mm.out", a32.astype(np.int32), b32.astype(np.int32),
                     static_out((2, 4), np.int32), typed=True) is None
    assert call_fast("aten::mm.out", a32.astype(np.float16), b32.astype(np.float16),
                     static_out((2, 4), np.float16), typed=True) is None
    assert call_fast("aten::mm.out", a32, b32.astype(np.float64),
                     static_out((2, 4), np.float64), typed=True) is None
    # inner sizes that do not match, or a static out of the wrong shape, fail
    assert call_fast("aten::mm.out", a32, a32, static_out((2, 3), np.float32)) != 0
    assert call_fast("aten::mm.out", a32, b32, static_out((4, 2), np.float32)) != 0
    assert call_fast("aten::addmm.out", _rand((3,), np.float32), a32, b32, 1, 1,
                     static_out((2, 4), np.float32)) != 0


def _bind(name, *vals):
    """Bind once (like a method load) and return (run, tensors' table) to run it repeatedly."""
    flat = [v for v in vals if isinstance(v, ETensor)]
    table = DescTable(flat, [t.storage for t in flat])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(flat)}, [])
    fn, block = get_binder(name)(ctx, *vals)
    cf = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fn)

    def run():
        assert ctx.blocks  # ctx owns the argument block and scratch: keep it alive
        for i, t in enumerate(flat):
            table.push(i, t)
        status = cf(block)
        for i, t in enumerate(flat):
            table.pull(i, t)
        return status
    return run


def _bound(a):
    return ETensor.from_array(a, dynamism=Dynamism.DYNAMIC_BOUND)


def test_sizes_are_read_at_run_time():
    """Inputs bound at their upper-bound sizes, then shrunk: the same block computes the rest."""
    x = _bound(_rand((6, 8), np.float32))
    w = ETensor.from_array(_rand((5, 8), np.float32))
    b = ETensor.from_array(_rand((5,), np.float32))
    out = bound_out((6, 5), np.float32)
    run = _bind("aten::linear.out", x, w, b, out)
    for rows in (6, 2, 0, 4):
        x.resize((rows, 8))
        assert run() == 0
        want = x.numpy() @ w.numpy().T + b.numpy()
        assert_close(out.numpy(), want.astype(np.float32), rtol=1e-5, atol=1e-5)
        ref = bound_out((6, 5), np.float32)
        call("aten::linear.out", x, w, b, ref)
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    a, m2 = _bound(_rand((3, 4, 5), np.float32)), _bound(_rand((3, 5, 2), np.float32))
    out = bound_out((3, 4, 2), np.float32)
    run = _bind("aten::bmm.out", a, m2, out)
    a.resize((2, 4, 5))
    m2.resize((2, 5, 2))
    assert run() == 0
    assert out.shape == (2, 4, 2)
    assert_close(out.numpy(), a.numpy() @ m2.numpy(), rtol=1e-5, atol=1e-5)


def test_set_blas_threads():
    """The threads setting still reaches numpy's OpenBLAS (the products above do not use it)."""
    if not blas.available():
        parts.need("blas", "no BLAS library next to numpy")
    before = blas.blas_threads()
    try:
        assert blas.set_blas_threads(1) and blas.blas_threads() == 1
    finally:
        blas.set_blas_threads(before)


def test_split_product_runs_whole_when_the_run_is_small():
    """Split at the bind-time rows (a prompt's), run with one row (a decode step): the prep
    call does the whole product; more rows split again. Same values either way."""
    from pyruntime.cython_ext._loop import Loop

    x = _bound(_rand((200, 64), np.float32))
    w = _constant(_rand((64, 96), np.float32).T.copy())
    b = ETensor.from_array(_rand((96,), np.float32))
    out = bound_out((200, 96), np.float32)
    flat = [x, w, b, out]
    table = DescTable(flat, [t.storage for t in flat])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(flat)}, [], 2)
    r = get_binder("aten::linear.out")(ctx, x, w, b, out)
    assert len(r) == 6 and r[4] == 2
    loop = Loop(1)
    loop.set_kernel(0, *r)
    for rows in (200, 1, 7, 150):
        x.resize((rows, 64))
        for i, t in enumerate(flat):
            table.push(i, t, force=True)
        assert loop.run(None, 10) == 0
        table.pull(3, out)
        ref = bound_out((200, 96), np.float32)
        call("aten::linear.out", x, w, b, ref)
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
