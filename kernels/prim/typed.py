"""Compiled prim ops: symbolic-shape arithmetic, tensor metadata, ``et_view``, ``et_copy_index``.

Scalar values live in *records* of two int64 words, ``[tag, payload]``, owned
by the method's fast plan (one per value slot): the tag is the EValue tag
(Double 3, Int 4, Bool 5) and the payload the int64, the float64 bits or 0/1.
A prim kernel reads its operands' records and writes its result's, so a chain
of ``sym_size -> add -> et_view`` runs without Python. The semantics are the
reference kernels' (``kernels/prim/reference.py``, which follow ExecuTorch's C++ prim
ops); any case the reference raises on returns an error code here, and the
loop then reruns the reference kernel for the precise message.

Blocks: ``prim_kernel``: ``[op, out_rec, a, b, c]`` (``a`` is a record, or a
descriptor for the tensor ops; ``b`` is the dim of ``sym_size``);
``view_kernel``: ``[n, out, self, rec_0 .. rec_n-1]``;
``copy_index_kernel``: ``[copy_to, copy_from, index_rec]``.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_DYN, D_SIZES
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, ST_BOOL, bits_to_f64, desc, descs,
                                       elem_size, f64_to_bits, is_float_st, lazy, load_f64,
                                       load_i64, ptr_like, resize_to, set_strides)

T_DOUBLE, T_INT, T_BOOL = 3, 4, 5
INVALID_TYPE = 0x13
I64_MIN = -(1 << 63)

(P_ADD, P_SUB, P_MUL, P_FLOORDIV, P_TRUEDIV, P_FLOORDIV_INT, P_MOD, P_EQ, P_GT, P_LT, P_GE,
 P_LE, P_NEG, P_NOT, P_MAX, P_MIN, P_ITE, P_FLOAT, P_INT, P_CEIL, P_ROUND, P_TRUNC, P_SYM_SIZE,
 P_NUMEL, P_LOCAL_SCALAR) = range(25)

OPS = {
    "executorch_prim::add.Scalar": P_ADD, "executorch_prim::sub.Scalar": P_SUB,
    "executorch_prim::mul.Scalar": P_MUL, "executorch_prim::floordiv.Scalar": P_FLOORDIV,
    "executorch_prim::truediv.Scalar": P_TRUEDIV, "executorch_prim::floordiv.int": P_FLOORDIV_INT,
    "executorch_prim::mod.int": P_MOD, "executorch_prim::mod.Scalar": P_MOD,
    "executorch_prim::eq.Scalar": P_EQ, "executorch_prim::gt.Scalar": P_GT,
    "executorch_prim::lt.Scalar": P_LT, "executorch_prim::ge.Scalar": P_GE,
    "executorch_prim::le.Scalar": P_LE, "executorch_prim::neg.Scalar": P_NEG,
    "executorch_prim::sym_not.Scalar": P_NOT, "executorch_prim::sym_max.Scalar": P_MAX,
    "executorch_prim::sym_min.Scalar": P_MIN, "executorch_prim::sym_ite.Scalar": P_ITE,
    "executorch_prim::sym_float.Scalar": P_FLOAT, "executorch_prim::sym_int.Scalar": P_INT,
    "executorch_prim::ceil.Scalar": P_CEIL, "executorch_prim::round.Scalar": P_ROUND,
    "executorch_prim::trunc.Scalar": P_TRUNC, "aten::sym_size.int": P_SYM_SIZE,
    "aten::sym_numel": P_NUMEL, "aten::_local_scalar_dense": P_LOCAL_SCALAR,
}
TENSOR_OPS = (P_SYM_SIZE, P_NUMEL, P_LOCAL_SCALAR)


@njit(inline="always")
def rec(addr):
    return ptr_like(addr, np.int64(0))


@njit(inline="always")
def put_int(o, v):
    o[0] = T_INT
    o[1] = v


@njit(inline="always")
def put_bool(o, v):
    o[0] = T_BOOL
    o[1] = 1 if v else 0


@njit(inline="always")
def put_double(o, v):
    o[0] = T_DOUBLE
    o[1] = f64_to_bits(v)


@njit(inline="always")
def as_f64(r):
    if r[0] == T_DOUBLE:
        return bits_to_f64(r[1])
    return np.float64(r[1])


@njit(inline="always")
def is_num(r):
    return r[0] == T_INT or r[0] == T_DOUBLE


@njit(inline="always")
def c_div(a, b):
    """C's truncating division (``b != 0``)."""
    if a == I64_MIN and b == -1:
        return a  # wraps, as in two's complement (x86 would trap)
    q = a // b  # floor
    if q < 0 and q * b != a:
        q += 1
    return q


@njit(inline="always")
def floor_div_double(a, b):
    if b == 0.0:
        return -np.inf if math.copysign(1.0, a) < 0.0 else np.inf
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0.0 and (math.copysign(1.0, b) < 0.0) != (math.copysign(1.0, mod) < 0.0):
        return div - 1.0
    return div


@njit(inline="always")
def to_int64(o, x):
    if not (math.isfinite(x) and -9.223372036854775808e18 <= x < 9.223372036854775808e18):
        return INVALID_ARGUMENT
    put_int(o, np.int64(x))
    return OK


@njit(inline="always")
def compare(op, a, b):
    if op == P_EQ:
        return a == b
    if op == P_GT:
        return a > b
    if op == P_LT:
        return a < b
    if op == P_GE:
        return a >= b
    return a <= b


def prim_kernel(block):
    op = block[0]
    o = rec(block[1])
    if op == P_SYM_SIZE or op == P_NUMEL or op == P_LOCAL_SCALAR:
        d = desc(block[2])
        if op == P_NUMEL:
            put_int(o, d[D_NUMEL])
            return OK
        if op == P_SYM_SIZE:
            nd = d[D_NDIM]
            dim = block[3]
            if dim < -nd or dim >= nd:
                return INVALID_ARGUMENT
            put_int(o, d[D_SIZES + (dim + nd if dim < 0 else dim)])
            return OK
        if d[D_NUMEL] < 1:
            return INVALID_ARGUMENT
        st = d[D_DTYPE]
        if st == ST_BOOL:
            put_bool(o, load_i64(d[D_DATA], st, 0) != 0)
        elif is_float_st(st):
            put_double(o, load_f64(d[D_DATA], st, 0))
        else:
            put_int(o, load_i64(d[D_DATA], st, 0))
        return OK
    a = rec(block[2])
    ta = a[0]
    if op == P_NEG:
        if ta == T_INT:
            put_int(o, np.int64(0) - a[1])
        elif ta == T_DOUBLE:
            put_double(o, -bits_to_f64(a[1]))
        else:
            return INVALID_TYPE
        return OK
    if op == P_NOT:
        if ta != T_BOOL:
            return INVALID_TYPE
        put_bool(o, a[1] == 0)
        return OK
    if op == P_FLOAT:
        if ta == T_DOUBLE:
            put_double(o, bits_to_f64(a[1]))
        elif ta == T_INT or ta == T_BOOL:
            put_double(o, np.float64(a[1]))
        else:
            return INVALID_TYPE
        return OK
    if op == P_INT:
        if ta == T_INT or ta == T_BOOL:
            put_int(o, a[1])
            return OK
        if ta != T_DOUBLE:
            return INVALID_TYPE
        return to_int64(o, np.trunc(bits_to_f64(a[1])))
    if op == P_CEIL or op == P_ROUND or op == P_TRUNC:
        if ta != T_DOUBLE:
            return INVALID_TYPE
        x = bits_to_f64(a[1])
        if not math.isfinite(x):
            return INVALID_ARGUMENT
        if op == P_CEIL:
            return to_int64(o, np.ceil(x))
        if op == P_ROUND:
            return to_int64(o, np.rint(x))  # half to even, as Python's round()
        return to_int64(o, np.trunc(x))
    if op == P_ITE:
        if ta != T_BOOL:
            return INVALID_TYPE
        src = rec(block[3]) if a[1] != 0 else rec(block[4])
        o[0] = src[0]
        o[1] = src[1]
        return OK
    b = rec(block[3])
    tb = b[0]
    both_int = ta == T_INT and tb == T_INT
    both_num = is_num(a) and is_num(b)
    if op == P_ADD or op == P_SUB or op == P_MUL:
        if both_int:
            x, y = a[1], b[1]
            put_int(o, x + y if op == P_ADD else x - y if op == P_SUB else x * y)
        elif both_num:
            x, y = as_f64(a), as_f64(b)
            put_double(o, x + y if op == P_ADD else x - y if op == P_SUB else x * y)
        else:
            return INVALID_TYPE
        return OK
    if op == P_FLOORDIV:
        if both_int:
            if b[1] == 0:
                return INVALID_ARGUMENT
            if a[1] == I64_MIN and b[1] == -1:
                put_int(o, a[1])
            else:
                put_int(o, a[1] // b[1])
        elif both_num:
            put_double(o, floor_div_double(as_f64(a), as_f64(b)))
        else:
            return INVALID_TYPE
        return OK
    if op == P_TRUEDIV:
        if not both_num:
            return INVALID_TYPE
        put_double(o, as_f64(a) / as_f64(b))
        return OK
    if op == P_FLOORDIV_INT or op == P_MOD:
        if not both_int:
            return INVALID_TYPE
        if b[1] == 0:
            return INVALID_ARGUMENT
        q = c_div(a[1], b[1])
        put_int(o, q if op == P_FLOORDIV_INT else a[1] - b[1] * q)
        return OK
    if op == P_MAX or op == P_MIN:
        if not both_int:
            return INVALID_TYPE
        put_int(o, max(a[1], b[1]) if op == P_MAX else min(a[1], b[1]))
        return OK
    # comparisons
    if both_int or (ta == T_BOOL and tb == T_BOOL):
        put_bool(o, compare(op, a[1], b[1]))
    elif both_num:
        put_bool(o, compare(op, as_f64(a), as_f64(b)))
    else:
        return INVALID_TYPE
    return OK


def view_kernel(block):
    n = block[0]
    o, s = descs(block, 1, 2)
    sizes = np.empty(16, np.int64)
    infer = -1
    known = 1
    for i in range(n):
        r = rec(block[3 + i])
        if r[0] != T_INT or r[1] < -1:
            return INVALID_ARGUMENT
        if r[1] == -1:
            if infer >= 0:
                return INVALID_ARGUMENT
            infer = i
            sizes[i] = 1
        else:
            sizes[i] = r[1]
            known *= r[1]
    if infer >= 0:
        if known == 0:
            return INVALID_ARGUMENT
        sizes[infer] = s[D_NUMEL] // known
        known *= sizes[infer]
    if known != s[D_NUMEL]:
        return INVALID_ARGUMENT
    st = resize_to(o, sizes, n)
    if st != OK:
        return st
    o[D_DATA] = s[D_DATA]
    return OK


def copy_index_kernel(block):
    dst, src = descs(block, 0, 2)
    r = rec(block[2])
    if r[0] != T_INT or r[1] < 0:
        return INVALID_ARGUMENT
    index = r[1]
    nd = dst[D_NDIM]
    same_tail = True
    for i in range(1, nd):
        if dst[D_SIZES + i] != src[D_SIZES + i - 1]:
            same_tail = False
    if index > 0 and not same_tail:
        return INVALID_ARGUMENT
    if not (dst[D_DYN] == 0 and dst[D_SIZES] > index and same_tail):
        sizes = np.empty(16, np.int64)
        sizes[0] = index + 1
        for i in range(1, nd):
            sizes[i] = src[D_SIZES + i - 1]
        st = resize_to(dst, sizes, nd)
        if st != OK:
            return st
        set_strides(dst)
    es = elem_size(src[D_DTYPE])
    nbytes = src[D_NUMEL] * es
    dp = ptr_like(dst[D_DATA] + index * nbytes, np.uint8(0))
    sp = ptr_like(src[D_DATA], np.uint8(0))
    for k in range(nbytes):
        dp[k] = sp[k]
    return OK


def bind_scalar(ctx, name, out_rec, arg_refs):
    """Block for a scalar prim op: ``arg_refs`` are record addresses, or for the
    tensor ops (sym_size, sym_numel, _local_scalar_dense) a descriptor address
    (and sym_size's dim as a plain int)."""
    words = [OPS[name], out_rec] + list(arg_refs)
    words += [0] * (5 - len(words))
    return ctx.bind(lazy(prim_kernel), words)


def bind_view(ctx, self, out, size_recs):
    if self.dtype != out.dtype or len(size_recs) != out.ndim or out.ndim > 16:
        return None
    return ctx.bind(lazy(view_kernel),
                    [len(size_recs), ctx.desc(out), ctx.desc(self)] + list(size_recs))


def bind_copy_index(ctx, copy_to, copy_from, index_rec):
    if copy_to.dtype != copy_from.dtype or copy_to.ndim != copy_from.ndim + 1:
        return None
    if not (copy_to.is_contiguous() and copy_from.is_contiguous()):
        return None
    return ctx.bind(lazy(copy_index_kernel), [ctx.desc(copy_to), ctx.desc(copy_from), index_rec])
