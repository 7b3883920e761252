"""The int4 linear kernels of math="fast" XNNPACK delegates (kernels.quantized.typed_qb4w)
against their numpy reference, and the reference's quantization against XNNPACK's rules.

The kernel's integers are exact and its float operations are the reference's in the same
order, so the two agree bit for bit. The oracle for the whole path is ExecuTorch running
the same 8da4w program (tests/llm/test_generate.py: logits within the math="fast" bound).
"""
from __future__ import annotations

import ctypes
import os
import types

import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from pyruntime.cython_ext.desc import DescTable
from pyruntime.delegates.xnnpack import qb4w
from pyruntime.kernels.fast.context import BindContext
from pyruntime.kernels.quantized import typed_qb4w as q
from tests.child import run_json

RNG = np.random.default_rng(7)


def _linear(n, k, gs, bias, inp=0, out=1):
    w = RNG.integers(-8, 8, (n, k)).astype(np.int8)
    s = q.bf16_to_f32((RNG.random((n, k // gs)).astype(np.float32) * 0.02 + 1e-3)
                      .view(np.uint32) >> 16)
    b = RNG.standard_normal(n).astype(np.float32) if bias else None
    return qb4w.Linear(inp, out, w, s, b, gs)


def _run(lins, args, rows_cap=None):
    """Bind ``lins`` (a fake handle) over ``args`` and run the compiled entry once:
    (status, explain)."""
    tensors = [a for a in args if isinstance(a, ETensor)]
    table = DescTable(tensors, [t.storage for t in tensors])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(tensors)}, [], math="fast")
    h = types.SimpleNamespace(qb4w=[(lin, qb4w._tiles(q, lin))
                                    for lin in lins])
    r = qb4w.bind(h, ctx, args)
    fn, block, explain = r[0], r[1], r[-1]
    status = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fn)(block)
    for i, t in enumerate(tensors):  # the kernel's resizes, back into the ETensors
        table.pull(i, t)
    return status, explain


def _tensor(a, cap=None):
    if cap is None:
        return ETensor.from_array(np.ascontiguousarray(a))
    t = ETensor.empty(from_numpy_dtype(a.dtype), cap, dynamism=Dynamism.DYNAMIC_BOUND)
    t.resize(a.shape)
    t.numpy()[...] = a
    return t


@pytest.mark.parametrize("n,k,gs,rows,bias", [
    (8, 32, 32, 1, False), (16, 64, 32, 1, True), (24, 96, 32, 3, True),
    (32, 256, 64, 2, False), (64, 128, 128, 5, True), (8, 8, 4, 1, True),
    (16, 288, 96, 2, True)])
@pytest.mark.parametrize("nibbles", [False, True])
def test_matches_reference(n, k, gs, rows, bias, nibbles, monkeypatch):
    """int8 weight tiles, and 4-bit ones (what a large matrix gets): the same bits."""
    monkeypatch.setattr(q, "NIBBLE_WEIGHTS", 0 if nibbles else 1 << 40)
    lin = _linear(n, k, gs, bias)
    x = (RNG.standard_normal((1, rows, k)) * 3).astype(np.float32)
    out = ETensor.empty(from_numpy_dtype(np.float32), (1, 255, n),
                        dynamism=Dynamism.DYNAMIC_BOUND)
    xt = _tensor(x, (1, 255, k))
    status, _ = _run([lin], [xt, out])
    assert status == 0
    want = q.reference(x, lin.weight, lin.scales, lin.bias, gs)
    assert out.shape == (1, rows, n)
    np.testing.assert_array_equal(out.numpy(), want)


def test_rows_of_every_kind():
    """Rows all zero, all positive, all negative, one huge value, denormals (255 / range
    is inf), a NaN: the quantization's edge cases, bit for bit with the reference."""
    k, n = 64, 16
    lin = _linear(n, k, 32, True)
    x = np.stack([np.zeros(k), np.abs(RNG.standard_normal(k)) + 1, -np.abs(RNG.standard_normal(k)),
                  np.r_[1e30, RNG.standard_normal(k - 1)], np.full(k, 1e-40),
                  np.r_[np.full(k // 2, 5.0), np.full(k // 2, -5.0)],
                  np.r_[-1e-40, np.zeros(k - 1)],
                  np.r_[np.nan, RNG.standard_normal(k - 1)]]).astype(np.float32)
    out = np.zeros((x.shape[0], n), np.float32)
    ot = _tensor(out)
    status, _ = _run([lin], [_tensor(x), ot])
    assert status == 0
    np.testing.assert_array_equal(ot.numpy(), q.reference(x, lin.weight, lin.scales,
                                                          lin.bias, 32))


def test_linears_sharing_an_input_and_apart():
    k = 64
    a, b, c = _linear(16, k, 32, False, 0, 2), _linear(8, k, 32, True, 0, 3), \
        _linear(24, 32, 32, True, 1, 4)
    x0 = RNG.standard_normal((2, k)).astype(np.float32)
    x1 = RNG.standard_normal((2, 32)).astype(np.float32)
    outs = [_tensor(np.zeros((2, m), np.float32)) for m in (16, 8, 24)]
    status, _ = _run([a, b, c], [_tensor(x0), _tensor(x1)] + outs)
    assert status == 0
    for lin, x, o in ((a, x0, outs[0]), (b, x0, outs[1]), (c, x1, outs[2])):
        np.testing.assert_array_equal(o.numpy(), q.reference(x, lin.weight, lin.scales,
                                                             lin.bias, lin.group))


def test_bad_shapes_are_named():
    lin = _linear(16, 64, 32, False)
    x = _tensor(np.zeros((1, 2, 64), np.float32), (1, 4, 64))
    out = _tensor(np.zeros((1, 2, 16), np.float32))  # static: cannot take 3 rows
    args = [x, out]
    tensors = args
    table = DescTable(tensors, [t.storage for t in tensors])
    ctx = BindContext(table, {id(t): i for i, t in enumerate(tensors)}, [], math="fast")
    h = types.SimpleNamespace(qb4w=[(lin, qb4w._tiles(q, lin))])
    fn, block, explain = qb4w.bind(h, ctx, args)
    call = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fn)
    assert call(block) == 0
    x.resize((1, 3, 64))
    table.push(0, x)
    status = call(block)
    assert status != 0
    msg = explain(status)
    assert "linear 0" in msg and "[16, 64] weight" in msg and "resized" in msg


def test_quant_params_follow_xnnpack():
    """xnn_qd8_asymmetric_quantization_params on hand-checked rows: the range always
    holds 0, 255 steps over it, the zero point from the end that loses less."""
    f = np.float32
    scale, zp, inv = q.quant_params(np.array([0.0, 2.55], np.float32))
    assert scale == f(255) / f(2.55) and zp == -128 and inv == f(1) / scale
    scale, zp, _ = q.quant_params(np.array([-1.0, 1.0], np.float32))
    assert scale == f(127.5) and zp == 0  # 127.5 - 127.5 = 0: rint keeps 0
    scale, zp, _ = q.quant_params(np.array([-3.0, -1.0], np.float32))
    assert scale == f(85) and zp == 127
    scale, zp, inv = q.quant_params(np.zeros(4, np.float32))  # the max end wins a tie
    assert scale == 1 and zp == 127 and inv == 1
    scale, zp, _ = q.quant_params(np.array([-1e-40, 0.0], np.float32))  # 255 / range: inf
    assert scale == np.inf and zp == -128


def test_unpack_int4_order():
    """Element i of the flat [n, k] order is byte i >> 1's low nibble (even i) or high
    nibble (odd i), minus the zero point 8 (XNNPACK's qb4w packing)."""
    b = np.array([0x10, 0xF8, 0x7A], np.uint8)
    np.testing.assert_array_equal(q.unpack_int4(b, 2, 3),
                                  [[-8, -7, 0], [7, 2, -1]])


def test_a_target_without_avx2_computes_the_same_bits(tmp_path):
    """Where the target has no AVX2 the tile kernel is plain vector IR (no pmaddubsw):
    a child compiling for baseline x86-64 (SSE2) into an empty cache gets the
    reference's bits."""
    child = (
        "import json, numpy as np\n"
        "from pyruntime.kernels.quantized import typed_qb4w as q\n"
        "from tests.kernels.quantized import test_qb4w as t\n"
        "ok = []\n"
        "class MP:\n"
        "    setattr = staticmethod(setattr)\n"
        "for case in [(16, 64, 32, 2, True, False), (8, 288, 96, 1, False, True)]:\n"
        "    t.test_matches_reference(*case, MP)\n"
        "    ok.append(case[0])\n"
        "t.test_rows_of_every_kind()\n"
        "print(json.dumps({'avx2': q._has_avx2(), 'ok': ok}))\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    got = run_json(child, base=base, timeout=600,
                   env={"NUMBA_CPU_NAME": "x86-64",
                        "NUMBA_CPU_FEATURES": "+sse,+sse2,+cx8,+fxsr,+mmx",
                        "PYRUNTIME_CACHE": str(tmp_path), "PYRUNTIME_SHIPPED": "0",
                        "PYRUNTIME_COMPILE": "sync"})
    assert got == {"avx2": False, "ok": [16, 8]}
