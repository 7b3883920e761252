"""Compiled elementwise kernels: binary arithmetic, unary math, activations.

Same-dtype float32/float64 (and int32/int64 for add/sub/mul/max/min/relu)
with broadcasting; anything else stays on the reference kernel. The inner
loops are flat when shapes match (or one operand is a scalar) and strided
N-d otherwise.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext import Dynamism, from_numpy_dtype
from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_STRIDES
from pyruntime.kernels.fast.broadcast import bcast_dim, bcast_size, index_offset, next_index
from pyruntime.kernels.fast.deferred import carray, njit, overload, types
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_F32, ST_F64, ST_I32,
                             ST_I64, SPLIT_WHOLE, bits_to_f64, descs, flat, is_contiguous, lazy,
                             ptr_like, resize_like, resize_to, same_shape)
from pyruntime.kernels.fast.fastmath import (exp_fast, gelu_fast, gelu_tanh_fast, sigmoid_fast,
                                             silu_fast, tanh_fast)
from pyruntime.kernels.libm import (E_EXP, E_SIGMOID, E_SILU, c_exp, c_gelu, c_gelu_tanh,
                                    c_sigmoid, c_tanh, expf_map, gelu_map)

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
INTS = (np.dtype(np.int32), np.dtype(np.int64))

# ---- binary ----------------------------------------------------------------------
B_ADD, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN = range(6)


@njit(inline="always")
def _bin(op, x, y, alpha):
    if op == B_ADD:
        return x + alpha * y
    if op == B_SUB:
        return x - alpha * y
    if op == B_MUL:
        return x * y
    if op == B_DIV:
        return x / y
    if op == B_MAX:
        return x if x > y or x != x else y
    return x if x < y or x != x else y


def _vector_loops(m):
    """Whether ``_rows`` gives ``m``'s dtype loops of their own per op (numba only)."""
    raise NotImplementedError


@overload(_vector_loops, inline="always")
def _vector_loops_ov(m):
    # float32 only (what models run): each such loop is vectorized code to compile, and
    # compiling them for every dtype made this kernel compile for minutes
    ok = m == types.float32
    return lambda m: ok


@njit(inline="always")
def _unit_rows(op, x, ox, y, oy, jb, z, oz, n, alpha):
    if jb == 1:
        for j in range(n):
            z[oz + j] = _bin(op, x[ox + j], y[oy + j], alpha)
    else:
        yv = y[oy]
        for j in range(n):
            z[oz + j] = _bin(op, x[ox + j], yv, alpha)


@njit
def _rows(op, x, ox, ja, y, oy, jb, z, oz, jo, n, alpha):
    """z[oz + j*jo] = x[ox + j*ja] op y[oy + j*jb] for j < n, through typed pointers (no
    wraparound checks). For float32 with unit strides (or a broadcast right scalar,
    stride 0) and 16 or more elements, add/sub/mul/div each get a loop with the op a
    constant, which vectorizes; the rest run one loop that tests the op per element."""
    if n >= 16 and jo == 1 and ja == 1 and jb <= 1 and _vector_loops(alpha):
        if op == B_ADD:
            _unit_rows(B_ADD, x, ox, y, oy, jb, z, oz, n, alpha)
            return
        if op == B_SUB:
            _unit_rows(B_SUB, x, ox, y, oy, jb, z, oz, n, alpha)
            return
        if op == B_MUL:
            _unit_rows(B_MUL, x, ox, y, oy, jb, z, oz, n, alpha)
            return
        if op == B_DIV:
            _unit_rows(B_DIV, x, ox, y, oy, jb, z, oz, n, alpha)
            return
    for j in range(n):
        z[oz + j * jo] = _bin(op, x[ox + j * ja], y[oy + j * jb], alpha)


@njit(inline="always")
def _flat(op, x, y, jb, z, n, alpha):
    """z = x op y over ``n`` contiguous elements, ``y`` whole (jb 1) or one element (0)."""
    if n == 1:  # one element (dispatch-bound programs): no call, no loop
        z[D_DATA] = _bin(op, x[D_DATA], y[D_DATA], alpha)
    elif n > 1:
        _rows(op, x, 0, 1, y, 0, jb, z, 0, 1, n, alpha)


@njit(inline="always")
def _binary_typed(op, a, b, o, alpha, m, w):
    # hot paths first, without allocating: equal shapes, or a scalar right operand
    if is_contiguous(a) and is_contiguous(b) and (same_shape(a, b) or b[D_NUMEL] == 1) \
            and a[D_NDIM] >= b[D_NDIM]:
        st = resize_like(o, a)
        if st != OK:
            return st
        if is_contiguous(o):
            jb = 0 if b[D_NUMEL] == 1 and not same_shape(a, b) else 1
            _flat(op, ptr_like(a[D_DATA], m), ptr_like(b[D_DATA], m), jb, ptr_like(o[D_DATA], m),
                  o[D_NUMEL], alpha)
            return OK
    return _binary_general(op, a, b, o, alpha, m, w)


@njit
def _binary_general(op, a, b, o, alpha, m, w):
    """Broadcast and strided operands; ``w``: 64 int64 words of scratch (the block's),
    so that no call allocates."""
    nd = o[D_NDIM]
    sizes, sa, sb, idx = w[0:16], w[16:32], w[32:48], w[48:64]
    for i in range(nd):  # broadcast shapes, aligned right
        da, sa[i] = bcast_dim(a, i, nd)
        db, sb[i] = bcast_dim(b, i, nd)
        s = bcast_size(da, db)
        if s < 0:
            return INVALID_ARGUMENT
        sizes[i] = s
    if a[D_NDIM] > nd or b[D_NDIM] > nd:
        return INVALID_ARGUMENT
    st = resize_to(o, sizes, nd)
    if st != OK:
        return st
    x = ptr_like(a[D_DATA], m)
    y = ptr_like(b[D_DATA], m)
    z = ptr_like(o[D_DATA], m)
    n = o[D_NUMEL]
    if n == 0:
        return OK
    fa = a[D_NUMEL] == n and is_contiguous(a)
    fb = b[D_NUMEL] == n and is_contiguous(b)
    if is_contiguous(o) and (fa or a[D_NUMEL] == 1) and (fb or b[D_NUMEL] == 1):
        # flat: each operand whole or one element (stride 0): one call over every element
        _rows(op, x, 0, 1 if fa else 0, y, 0, 1 if fb else 0, z, 0, 1, n, alpha)
        return OK
    if nd == 0:
        z[0] = _bin(op, x[0], y[0], alpha)
        return OK
    # the innermost dim as a tight loop, an N-d counter over the rest
    inner = sizes[nd - 1]
    ja, jb, jo = sa[nd - 1], sb[nd - 1], o[D_STRIDES + nd - 1]
    for i in range(nd):
        idx[i] = 0
    pa = 0
    pb = 0
    po = 0
    for _ in range(n // inner):
        _rows(op, x, pa, ja, y, pb, jb, z, po, jo, inner, alpha)
        for i in range(nd - 2, -1, -1):  # advance the counter over the outer dims
            idx[i] += 1
            pa += sa[i]
            pb += sb[i]
            po += o[D_STRIDES + i]
            if idx[i] < sizes[i]:
                break
            pa -= sa[i] * sizes[i]
            pb -= sb[i] * sizes[i]
            po -= o[D_STRIDES + i] * sizes[i]
            idx[i] = 0
    return OK


def binary_kernel(block):
    op = block[0]
    a, b, o = descs(block, 1, 3)
    dt = o[D_DTYPE]
    alpha = bits_to_f64(block[4])
    w = carray(ptr_like(block[5], np.int64(0)), 64)
    if dt == ST_F32:
        return _binary_typed(op, a, b, o, np.float32(alpha), np.float32(0), w)
    if dt == ST_F64:
        return _binary_typed(op, a, b, o, alpha, np.float64(0), w)
    if dt == ST_I64:
        return _binary_typed(op, a, b, o, np.int64(alpha), np.int64(0), w)
    if dt == ST_I32:
        return _binary_typed(op, a, b, o, np.int32(alpha), np.int32(0), w)
    return NOT_SUPPORTED


# ---- binary, shapes fixed at load --------------------------------------------------
# Operands and out STATIC and contiguous, the out of the left operand's shape, the right
# one of that shape or one element: what ``_binary_typed``'s first path checks on every
# call is true for good, so this kernel only reads the three data addresses (the first
# word of each descriptor row: an input's may move between executes) and runs the same
# loop. Dispatch-bound programs (a chain of one-element ops) spend their time here.
F_N, F_JB, F_DT = 5, 6, 7  # block words after binary_kernel's first five


@njit(inline="always")
def _fixed(block, alpha, m):
    x = ptr_like(ptr_like(block[1], np.int64(0))[0], m)
    y = ptr_like(ptr_like(block[2], np.int64(0))[0], m)
    z = ptr_like(ptr_like(block[3], np.int64(0))[0], m)
    _flat(block[0], x, y, block[F_JB], z, block[F_N], alpha)
    return OK


@njit(inline="always")
def _fixed_any(block):
    dt = block[F_DT]
    alpha = bits_to_f64(block[4])
    if dt == ST_F32:
        return _fixed(block, np.float32(alpha), np.float32(0))
    if dt == ST_F64:
        return _fixed(block, alpha, np.float64(0))
    if dt == ST_I64:
        return _fixed(block, np.int64(alpha), np.int64(0))
    if dt == ST_I32:
        return _fixed(block, np.int32(alpha), np.int32(0))
    return NOT_SUPPORTED


def fixed_binary_kernel(block):
    return _fixed_any(block)


# ---- a run of them, one call ---------------------------------------------------------
# Consecutive instructions bound to ``fixed_binary_kernel`` (``pyruntime.fusion.find_runs``)
# run as one call that walks their blocks in order: each op still reads and writes its own
# tensors, so every out is written as before; what goes is the loop's indirect call and
# Numba's wrapper per op (about half of a one-element op's time). block: the number of
# ops, the index of the op that failed (written on failure), then each op's block address.
R_N, R_FAILED, R_BLOCKS = 0, 1, 2


def fixed_run_kernel(block):
    for i in range(block[R_N]):
        st = _fixed_any(ptr_like(block[R_BLOCKS + i], np.int64(0)))
        if st != OK:
            block[R_FAILED] = i
            return st
    return OK


def bind_fixed_run(ctx, blocks):
    """(fn, block) running the ``fixed_binary_kernel`` blocks ``blocks`` (addresses) in
    order, in one call."""
    return ctx.bind(lazy(fixed_run_kernel), [len(blocks), -1] + list(blocks))


def _fixed_shapes(a, b, out) -> bool:
    return all(t.dynamism == Dynamism.STATIC and t.is_contiguous() for t in (a, b, out)) \
        and tuple(out.shape) == tuple(a.shape) and a.ndim >= b.ndim \
        and (tuple(b.shape) == tuple(a.shape) or b.numel == 1)


def _same_dtype(dtypes, *ts):
    d = ts[0].dtype
    return d in dtypes and all(t.dtype == d for t in ts)


def _bind_binary(ctx, op, a, b, out, alpha=1):
    kinds = FLOATS if op == B_DIV else FLOATS + INTS
    if not _same_dtype(kinds, a, b, out):
        return None
    if out.dtype in INTS and not isinstance(alpha, int):
        return None
    words = [op, ctx.desc(a), ctx.desc(b), ctx.desc(out), ctx.f64(alpha)]
    if _fixed_shapes(a, b, out):
        jb = 0 if b.numel == 1 and tuple(b.shape) != tuple(a.shape) else 1
        return ctx.bind(lazy(fixed_binary_kernel),
                        words + [out.numel, jb, int(from_numpy_dtype(out.dtype))])
    return ctx.bind(lazy(binary_kernel), words + [ctx.buffer(64 * 8)])


def _binary_binder(op):
    if op in (B_ADD, B_SUB):  # schemas with an alpha
        def bind(ctx, self, other, alpha, out):
            return _bind_binary(ctx, op, self, other, out, alpha)
    else:
        def bind(ctx, self, other, out):
            return _bind_binary(ctx, op, self, other, out)
    return bind


# op -> binder (registered with the generic binder behind it by elementwise/choose.py)
BINARY = {f"aten::{_name}.out": _binary_binder(_op) for _name, _op in (
    ("add", B_ADD), ("sub", B_SUB), ("mul", B_MUL), ("div", B_DIV), ("maximum", B_MAX),
    ("minimum", B_MIN))}


# ---- scalar-operand binary ops: the scalar is a 1-element operand baked in the block
S_ADD, S_MUL = 0, 1


@njit(inline="always")
def _scalar_typed(op, a, o, s, alpha, m):
    st = resize_like(o, a)
    if st != OK:
        return st
    if not (is_contiguous(a) and is_contiguous(o)):
        return NOT_SUPPORTED
    x = ptr_like(a[D_DATA], m)
    z = ptr_like(o[D_DATA], m)
    if op == S_ADD:  # a loop per op, so that each vectorizes
        for i in range(o[D_NUMEL]):
            z[i] = x[i] + alpha * s
    else:
        for i in range(o[D_NUMEL]):
            z[i] = x[i] * s
    return OK


def scalar_kernel(block):
    op = block[0]
    a, o = descs(block, 1, 2)
    s = bits_to_f64(block[3])
    alpha = bits_to_f64(block[4])
    if o[D_DTYPE] == ST_F32:
        return _scalar_typed(op, a, o, np.float32(s), np.float32(alpha), np.float32(0))
    if o[D_DTYPE] == ST_F64:
        return _scalar_typed(op, a, o, s, alpha, np.float64(0))
    return NOT_SUPPORTED


def _bind_scalar(ctx, op, a, s, out, alpha=1):
    if not _same_dtype(FLOATS, a, out) or isinstance(s, bool) or not isinstance(
            s, (int, float)) or not a.is_contiguous() or not out.is_contiguous():
        return None
    return ctx.bind(lazy(scalar_kernel),
                    [op, ctx.desc(a), ctx.desc(out), ctx.f64(s), ctx.f64(alpha)])


def bind_add_scalar(ctx, self, other, alpha, out):
    return _bind_scalar(ctx, S_ADD, self, other, out, alpha)


def bind_mul_scalar(ctx, self, other, out):
    return _bind_scalar(ctx, S_MUL, self, other, out)


# ---- unary ------------------------------------------------------------------------
(U_RELU, U_SIGMOID, U_TANH, U_EXP, U_NEG, U_ABS, U_SQRT, U_RSQRT, U_CLAMP, U_GELU,
 U_GELU_TANH, U_SILU) = range(12)
# math="fast" on float32: kernels.fast.fastmath's vectorizing approximations
U_FAST = 12  # op codes from here: U_FAST + the exact op's code
FAST_OPS = frozenset({U_SIGMOID, U_TANH, U_EXP, U_GELU, U_GELU_TANH, U_SILU})


@njit(inline="always")
def _fast_un(op, x):
    if op == U_SIGMOID:
        return sigmoid_fast(x)
    if op == U_TANH:
        return tanh_fast(x)
    if op == U_EXP:
        return exp_fast(x)
    if op == U_GELU:
        return gelu_fast(x)
    if op == U_GELU_TANH:
        return gelu_tanh_fast(x)
    return silu_fast(x)


@njit(inline="always")
def _fast_range(op, x, z):
    """z[i] = op(x[i]) over the whole of ``z``, one loop per op so that each vectorizes.

    The index runs from 0 (callers slice a part's range first): with ``range(i0, i1)``
    Numba's negative-index wraparound keeps LLVM from vectorizing, and the scalar loop's
    branches then cost by the data (a fast gelu over 102400 activations: 1.05 ms in
    the audio encoder against 0.17 ms vectorized)."""
    if op == U_SIGMOID:
        for i in range(z.size):
            z[i] = sigmoid_fast(x[i])
    elif op == U_TANH:
        for i in range(z.size):
            z[i] = tanh_fast(x[i])
    elif op == U_EXP:
        for i in range(z.size):
            z[i] = exp_fast(x[i])
    elif op == U_GELU:
        for i in range(z.size):
            z[i] = gelu_fast(x[i])
    elif op == U_GELU_TANH:
        for i in range(z.size):
            z[i] = gelu_tanh_fast(x[i])
    else:
        for i in range(z.size):
            z[i] = silu_fast(x[i])


@njit(inline="always")
def unary_prep(a, o, part, npart, least):
    """Resizes ``o`` like ``a`` on a whole or prep call: (stop, status, npart, done); on
    ``stop`` the kernel returns ``status``. A prep call (``part`` < 0) stops if the parts
    will run, else does the whole call (``npart`` 0, ``done`` SPLIT_WHOLE)."""
    done = OK
    if npart == 0 or part < 0:
        st = resize_like(o, a)
        if st != OK:
            return True, st, npart, done
        if part < 0:  # the prep call: the whole call too when there are few elements
            if o[D_NUMEL] >= least:
                return True, OK, npart, done
            npart, done = 0, SPLIT_WHOLE
    return False, OK, npart, done


@njit
def _fast_unary(op, a, o, part, npart, least):
    """``_unary_typed`` of a fast-math op (``op`` the exact op's code) on float32."""
    stop, st, npart, done = unary_prep(a, o, part, npart, least)
    if stop:
        return st
    m = np.float32(0)
    x = flat(a, m)
    z = flat(o, m)
    n = o[D_NUMEL]
    if is_contiguous(a) and is_contiguous(o):
        i0, i1 = (n * part // npart, n * (part + 1) // npart) if npart else (0, n)
        _fast_range(op, x[i0:i1], z[i0:i1])
        return done
    if part > 0:  # strided: part 0 does all
        return OK
    idx = np.zeros(16, np.int64)
    for k in range(n):
        z[index_offset(idx, o)] = _fast_un(op, x[index_offset(idx, a)])
        next_index(idx, a)
    return done


@njit(inline="always")
def _un(op, x, lo, hi):
    if op == U_RELU:
        return x if x > 0 or x != x else 0
    if op == U_SIGMOID:  # the C library's, as ExecuTorch (kernels/libm.py)
        return c_sigmoid(x)
    if op == U_TANH:
        return c_tanh(x)
    if op == U_EXP:
        return c_exp(x)
    if op == U_NEG:
        return -x
    if op == U_ABS:
        return abs(x)
    if op == U_SQRT:
        return math.sqrt(x) if x >= 0 else math.nan
    if op == U_RSQRT:
        return 1 / math.sqrt(x) if x >= 0 else math.nan
    if op == U_CLAMP:  # min(max(x, lo), hi) as ExecuTorch: crossed bounds give hi, NaN stays
        x = lo if x < lo else x
        return hi if x > hi else x
    if op == U_GELU:
        return c_gelu(x)
    if op == U_GELU_TANH:
        return c_gelu_tanh(x)
    return x / (1 + math.exp(-x))


def _libm_ops(op, x, z, m):
    """z = op(x) over contiguous arrays through ``libm.expf_map`` / ``libm.gelu_map`` when
    op is built on float32 exp (sigmoid, exp, SiLU) or is the exact GELU: True if it did
    (numba only)."""
    raise NotImplementedError


@overload(_libm_ops)
def _libm_ops_ov(op, x, z, m):
    if m != types.float32:
        return lambda op, x, z, m: False

    def impl(op, x, z, m):
        zero = np.float32(0.0)
        if op == U_SIGMOID:
            expf_map(E_SIGMOID, x, z, zero)
        elif op == U_EXP:
            expf_map(E_EXP, x, z, zero)
        elif op == U_SILU:
            expf_map(E_SILU, x, z, zero)
        elif op == U_GELU:
            gelu_map(x, z)
        else:
            return False
        return True
    return impl


@njit(inline="always")
def _unary_typed(op, a, o, lo, hi, m, part, npart, least):
    stop, st, npart, done = unary_prep(a, o, part, npart, least)
    if stop:
        return st
    x = flat(a, m)
    z = flat(o, m)
    n = o[D_NUMEL]
    if is_contiguous(a) and is_contiguous(o):
        if npart:  # part k of npart: elements [n * k // npart, n * (k + 1) // npart)
            i0, i1 = n * part // npart, n * (part + 1) // npart
            x, z, n, done = x[i0:i1], z[i0:i1], i1 - i0, OK  # (indices from 0: see _fast_range)
        if op == U_CLAMP:  # hardtanh/ReLU6 of every CNN: its own loop, so it vectorizes
            for i in range(n):
                v = x[i]
                v = lo if v < lo else v
                z[i] = hi if v > hi else v
            return done
        if op == U_RELU:
            for i in range(n):
                v = x[i]
                z[i] = v if v > 0 or v != v else 0
            return done
        if op == U_NEG:
            for i in range(n):
                z[i] = -x[i]
            return done
        if _libm_ops(op, x[:n], z[:n], m):
            return done
        for i in range(n):
            z[i] = _un(op, x[i], lo, hi)
        return done
    if part > 0:  # strided: part 0 does all
        return OK
    idx = np.zeros(16, np.int64)
    for k in range(n):
        z[index_offset(idx, o)] = _un(op, x[index_offset(idx, a)], lo, hi)
        next_index(idx, a)
    return done


def unary_kernel(block):
    op = block[0]
    a, o = descs(block, 1, 2)
    lo = bits_to_f64(block[3])
    hi = bits_to_f64(block[4])
    part, npart, least = block[5], block[6], block[7]
    dt = o[D_DTYPE]
    if op >= U_FAST:  # (bound on float32 only)
        return _fast_unary(op - U_FAST, a, o, part, npart, least) if dt == ST_F32 \
            else NOT_SUPPORTED
    if dt == ST_F32:
        return _unary_typed(op, a, o, np.float32(lo), np.float32(hi), np.float32(0), part, npart,
                            least)
    if dt == ST_F64:
        return _unary_typed(op, a, o, lo, hi, np.float64(0), part, npart, least)
    if dt == ST_I64:
        return _unary_typed(op, a, o, np.int64(lo), np.int64(hi), np.int64(0), part, npart,
                            least)
    if dt == ST_I32:
        return _unary_typed(op, a, o, np.int32(lo), np.int32(hi), np.int32(0), part, npart,
                            least)
    return NOT_SUPPORTED


# ops that cost a libm call per element: split into element ranges across threads
# (``BindContext.bind_split``; block words 5, 6, 7: part, parts, and in the prep block the
# elements below which it does the whole call at the run's sizes) from this many elements
_SPLIT = frozenset({U_SIGMOID, U_TANH, U_EXP, U_GELU, U_GELU_TANH, U_SILU})
SPLIT_ELEMS = 1 << 14


def _bind_unary(ctx, op, a, out, lo=0.0, hi=0.0, ints=False):
    if not _same_dtype(FLOATS + (INTS if ints else ()), a, out):
        return None
    split = op in _SPLIT and out.numel >= SPLIT_ELEMS
    if op in FAST_OPS and out.dtype == np.float32 and ctx.pick_fast():
        op += U_FAST
    words = [op, ctx.desc(a), ctx.desc(out), ctx.f64(lo), ctx.f64(hi)]
    n = min(ctx.threads, out.numel) if split else 1
    if n < 2:
        return ctx.bind(lazy(unary_kernel), words + [0, 0, 0])
    return ctx.bind_split(lazy(unary_kernel), words + [0, 0, 0],
                          [words + [k, n, 0] for k in range(n)], words + [-1, n, SPLIT_ELEMS])


def _unary_binder(op, ints=False):
    def bind(ctx, self, out):
        return _bind_unary(ctx, op, self, out, ints=ints)
    return bind


UNARY = {f"aten::{_name}.out": _unary_binder(_op, _ints) for _name, _op, _ints in (
    ("relu", U_RELU, True), ("sigmoid", U_SIGMOID, False), ("tanh", U_TANH, False),
    ("exp", U_EXP, False), ("neg", U_NEG, True), ("abs", U_ABS, True), ("sqrt", U_SQRT, False),
    ("rsqrt", U_RSQRT, False))}


def bounds_ok(lo, hi):
    """Clamp bounds the compiled clamp takes: numbers, not NaN (a NaN bound makes every
    element NaN: left to the reference kernel)."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
               for v in (lo, hi))


def bind_hardtanh(ctx, self, min_val, max_val, out):
    if not bounds_ok(min_val, max_val):
        return None
    return _bind_unary(ctx, U_CLAMP, self, out, min_val, max_val)


def bind_clamp(ctx, self, min, max, out):  # noqa: A002 - schema names
    if not bounds_ok(min, max):
        return None
    return _bind_unary(ctx, U_CLAMP, self, out, min, max)


def bind_gelu(ctx, self, approximate, out):
    op = {"none": U_GELU, "tanh": U_GELU_TANH}.get(approximate or "none")
    return None if op is None else _bind_unary(ctx, op, self, out)
