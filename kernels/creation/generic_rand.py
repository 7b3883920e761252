"""Compiled rand, randn and native_dropout (``rand_kernel``) from a splitmix64 stream
seeded at bind time (the distribution, not the reference's stream).
"""
from __future__ import annotations

import math
import os

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NUMEL
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.index_io import ALL, F64, FLOATS, move
from pyruntime.kernels.fast.nb import (OK, ST_F16, ST_F32, ST_F64, bits_to_f64, desc, lazy,
                                       load_f64, offset_of, ptr_like, resize_like, resize_to,
                                       round_to, scratch, store_f64, store_i64)


# ---- random: rand, randn, native_dropout --------------------------------------------
R_RAND, R_RANDN, R_DROPOUT = range(3)
UNIT = np.array([2.0 ** -b for b in range(54)])
RS_SIZES, RS_WORDS = 8, 24
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)


@njit(inline="always")
def _mix(z):
    """splitmix64's output function: 64 random bits of the state ``z``."""
    z = (z ^ (z >> np.uint64(30))) * MIX1
    z = (z ^ (z >> np.uint64(27))) * MIX2
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def _unit(r, bits):
    """Random bits ``r`` as a uniform in [0, 1) on a grid of 2**-bits (``bits`` <= 53), so
    that a narrow float never rounds it up to 1.0."""
    return np.float64(r >> np.uint64(64 - bits)) * UNIT[bits]


@njit
def _random(op, o, a, m, s, block):
    z = s[0]  # the stream's state, kept local (written back at the end)
    if op != R_DROPOUT:
        st = resize_to(o, scratch(block[4], RS_WORDS)[RS_SIZES:], block[8])
        if st != OK:
            return st
        n = o[D_NUMEL]
        ot = o[D_DTYPE]
        bits = 53 if ot == ST_F64 else (11 if ot == ST_F16 else (8 if ot == 15 else 24))
        if op == R_RAND:
            for i in range(n):
                z += GOLDEN
                store_f64(o[D_DATA], ot, i, _unit(_mix(z), bits))
        i = 0
        while op == R_RANDN and i < n:  # Marsaglia's polar method: two normals per accepted pair
            z += GOLDEN
            u = 2.0 * _unit(_mix(z), 53) - 1.0
            z += GOLDEN
            v = 2.0 * _unit(_mix(z), 53) - 1.0
            q = u * u + v * v
            if q >= 1.0 or q == 0.0:
                continue
            f = math.sqrt(-2.0 * math.log(q) / q)
            store_f64(o[D_DATA], ot, i, u * f)
            if i + 1 < n:
                store_f64(o[D_DATA], ot, i + 1, v * f)
            i += 2
        s[0] = z
        return OK
    st = resize_like(o, a)
    if st == OK:
        st = resize_like(m, a)
    if st != OK:
        return st
    keep_p = bits_to_f64(block[5])  # 1 - p
    scale = bits_to_f64(block[6])
    mode = block[7]  # 0 copy (eval, p = 0), 1 float32 compute, 2 float64 compute
    same = block[8]  # same dim order everywhere: storage index = element
    for i in range(a[D_NUMEL]):
        ia = i if same != 0 else offset_of(a, i)
        io = i if same != 0 else offset_of(o, i)
        im = i if same != 0 else offset_of(m, i)
        if mode == 0:
            move(a[D_DATA], a[D_DTYPE], ia, o[D_DATA], o[D_DTYPE], io)
            store_i64(m[D_DATA], m[D_DTYPE], im, 1)
        else:
            z += GOLDEN
            keep = _unit(_mix(z), 53) < keep_p
            v = load_f64(a[D_DATA], a[D_DTYPE], ia) * (1.0 if keep else 0.0) * scale
            store_f64(o[D_DATA], o[D_DTYPE], io, round_to(v, ST_F32 if mode == 1 else ST_F64))
            store_i64(m[D_DATA], m[D_DTYPE], im, np.int64(keep))
    s[0] = z
    return OK


def rand_kernel(block):
    op = block[0]
    o = desc(block[1])
    s = ptr_like(block[4], np.uint64(0))
    if op != R_DROPOUT:
        return _random(op, o, o, o, s, block)
    return _random(op, o, desc(block[3]), desc(block[2]), s, block)


def _seed(ctx, sizes=()):
    """A state buffer: [random seed, 7 spare words, out sizes]."""
    addr = ctx.buffer(RS_WORDS * 8)
    words = ctx.scratch[-1][:RS_WORDS * 8].view(np.int64)
    words[0] = np.frombuffer(os.urandom(8), np.int64)[0]
    words[RS_SIZES:RS_SIZES + len(sizes)] = sizes
    return addr


def _bind_rand(ctx, op, size, out):
    if not isinstance(size, (list, tuple)) or len(size) != out.ndim or len(size) > 16 \
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in size) \
            or out.dtype not in ALL:
        return None
    return ctx.bind(lazy(rand_kernel), [op, ctx.desc(out), 0, 0,
                                        _seed(ctx, [int(s) for s in size]), 0, 0, 0, len(size)])


@register_fast("aten::rand.out")
def bind_rand(ctx, size, out):
    return _bind_rand(ctx, R_RAND, size, out)


@register_fast("aten::randn.out")
def bind_randn(ctx, size, out):
    return _bind_rand(ctx, R_RANDN, size, out)


@register_fast("aten::native_dropout.out")
def bind_native_dropout(ctx, input, p, train, out0, out1):  # noqa: A002 (schema name)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1 \
            or input.dtype not in ALL or out0.dtype not in ALL or out1.dtype not in ALL \
            or out0.ndim != input.ndim or out1.ndim != input.ndim:
        return None
    train = train is not False  # None means training, as in ATen
    if not train or p == 0:
        mode, scale = 0, 1.0  # no element dropped, none scaled: a copy
    elif input.dtype in FLOATS:
        mode = 2 if input.dtype == F64 else 1
        scale = 0.0 if p == 1 else 1.0 / (1 - p)
        if mode == 1:
            scale = float(np.float32(scale))
    else:
        return None  # integer dropout: ATen refuses it
    same = int(input.dim_order == out0.dim_order == out1.dim_order)
    return ctx.bind(lazy(rand_kernel), [R_DROPOUT, ctx.desc(out0), ctx.desc(out1),
                                        ctx.desc(input), _seed(ctx), ctx.f64(1 - p),
                                        ctx.f64(scale), mode, same])
