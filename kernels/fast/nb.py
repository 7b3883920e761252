"""Numba building blocks for compiled kernels over the descriptor ABI.

``desc(addr)`` views a descriptor row; ``flat(d, marker)`` views its data as
a typed 1-D array (``marker`` is a zero of the element type, e.g.
``np.float32(0)``, so one generic body compiles per dtype); ``resize_to``
applies ExecuTorch's resize rules to an out descriptor and recomputes its
strides from its dim order. Every kernel is a ``cfunc`` ``int64(int64*)``
returning an ExecuTorch error code.
"""
from __future__ import annotations

import numpy as np
from pyruntime.cython_ext.abi import (D_DATA, D_NDIM, D_NUMEL, D_CAP,
                                      D_DYN, D_SIZES, D_STRIDES, D_DIMORDER)
from pyruntime.kernels.fast.deferred import carray, intrinsic, njit, overload, types
from pyruntime.kernels.fast.jit import compile_kernel, lazy  # noqa: F401 - binders' imports

OK = 0
NOT_SUPPORTED = 0x10
INVALID_ARGUMENT = 0x12
# a split kernel's prep call did the whole call itself (too small to split at the run's
# sizes): the loop skips the parts (cython_ext/_loop.pyx)
SPLIT_WHOLE = -1

# ScalarType codes a kernel dispatches on at run time.
ST_U8, ST_I8, ST_I16, ST_I32, ST_I64, ST_F16, ST_F32, ST_F64, ST_BOOL = 0, 1, 2, 3, 4, 5, 6, 7, 11
ST_BF16 = 15


@intrinsic
def ptr_like(typingctx, addr, marker):
    """int64 address -> pointer to ``marker``'s type (LLVM inttoptr)."""
    ptrty = types.CPointer(marker)
    sig = ptrty(types.int64, marker)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(ptrty))

    return sig, codegen


def bitcast(name, src, dst):
    """An intrinsic ``name`` reinterpreting a value of numba type ``src`` (by name, e.g.
    "int64") as ``dst``, bit for bit (LLVM bitcast)."""

    def cast(typingctx, x):
        sig = getattr(types, dst)(getattr(types, src))

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(signature.return_type))

        return sig, codegen

    cast.__name__ = cast.__qualname__ = name
    return intrinsic(cast)


bits_to_f64 = bitcast("bits_to_f64", "int64", "float64")
f64_to_bits = bitcast("f64_to_bits", "float64", "int64")


@njit(inline="always")
def desc(addr):
    return carray(ptr_like(addr, np.int64(0)), 64)


def descs(block, first, count):
    """``(desc(block[first]), ..., desc(block[first + count - 1]))``: a kernel's run of
    tensor arguments in one line (numba only; ``first`` and ``count`` literal ints)::

        x, w, o = descs(block, 1, 3)
    """
    raise NotImplementedError


# not inline="always": with it, custom_quantized_sdpa's kernel gave all-zero outputs (15
# tests failed; the cause inside Numba's IR inlining was not isolated); it runs once a call
@overload(descs)
def _descs(block, first, count):
    if not (isinstance(first, types.IntegerLiteral) and isinstance(count, types.IntegerLiteral)):
        return None  # numba retries with the literal values
    rows = ", ".join(f"desc(block[{first.literal_value + i}])" for i in range(count.literal_value))
    scope = {"desc": desc}
    exec(f"def impl(block, first, count):\n    return ({rows},)\n", scope)
    return scope["impl"]


@njit(inline="always")
def flat(d, marker):
    return carray(ptr_like(d[D_DATA], marker), max(d[D_NUMEL], 1))


@njit(inline="always")
def flat_cap(d, marker):
    """The data as a typed 1-D array of the tensor's capacity."""
    return carray(ptr_like(d[D_DATA], marker), max(d[D_CAP], 1))


@njit(inline="always")
def is_contiguous(d):
    if d[D_NUMEL] == 0:
        return True  # no elements: any layout is contiguous
    nd = d[D_NDIM]
    s = 1
    for i in range(nd - 1, -1, -1):
        if d[D_SIZES + i] != 1 and d[D_STRIDES + i] != s:
            return False
        s *= d[D_SIZES + i]
    return True


@njit(inline="always")
def set_strides(d):
    nd = d[D_NDIM]
    s = 1
    for k in range(nd - 1, -1, -1):
        dim = d[D_DIMORDER + k]
        d[D_STRIDES + dim] = s
        sz = d[D_SIZES + dim]
        s *= sz if sz != 0 else 1


@njit(inline="always")
def resize_to(d, sizes, nd):
    """Resize out descriptor ``d`` to ``sizes[:nd]``; returns a status code."""
    if nd != d[D_NDIM]:
        return NOT_SUPPORTED
    same = True
    numel = 1
    for i in range(nd):
        numel *= sizes[i]
        if d[D_SIZES + i] != sizes[i]:
            same = False
    if same:
        return OK
    if d[D_DYN] == 0 or numel > d[D_CAP]:
        return NOT_SUPPORTED
    for i in range(nd):
        d[D_SIZES + i] = sizes[i]
    d[D_NUMEL] = numel
    set_strides(d)
    return OK


@njit(inline="always")
def resize_both(a, b, sizes, nd):
    """Resize out descriptors ``a`` then ``b`` to ``sizes[:nd]``; the first failing status."""
    st = resize_to(a, sizes, nd)
    if st != OK:
        return st
    return resize_to(b, sizes, nd)


@njit(inline="always")
def same_shape(a, b):
    nd = a[D_NDIM]
    if nd != b[D_NDIM]:
        return False
    for i in range(nd):
        if a[D_SIZES + i] != b[D_SIZES + i]:
            return False
    return True


@njit(inline="always")
def resize_like(d, src):
    """Resize ``d`` to ``src``'s sizes without allocating (the common, hot case)."""
    if same_shape(d, src):
        return OK
    nd = src[D_NDIM]
    if nd != d[D_NDIM] or d[D_DYN] == 0 or src[D_NUMEL] > d[D_CAP]:
        return NOT_SUPPORTED
    for i in range(nd):
        d[D_SIZES + i] = src[D_SIZES + i]
    d[D_NUMEL] = src[D_NUMEL]
    set_strides(d)
    return OK


def lane_sum(term):
    """A jitted ``total(z, b, n, c)``: the float64 sum of ``term(z[b + i], c)`` over
    ``i < n`` in four partial sums. No serial dependency chain, so it vectorizes: for sums
    whose order does not matter (statistics, normalizers). ``term`` is jitted."""

    @njit(inline="always")
    def total(z, b, n, c):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        i = 0
        while i + 4 <= n:
            s0 += term(z[np.uint64(b + i)], c)
            s1 += term(z[np.uint64(b + i + 1)], c)
            s2 += term(z[np.uint64(b + i + 2)], c)
            s3 += term(z[np.uint64(b + i + 3)], c)
            i += 4
        while i < n:
            s0 += term(z[np.uint64(b + i)], c)
            i += 1
        return (s0 + s1) + (s2 + s3)

    return total


@njit(inline="always")
def _itself(v, c):
    return v


_sum_seg = lane_sum(_itself)


@njit(inline="always")
def sum_seg(z, b, n):
    """float64 sum of z[b:b+n] in ``lane_sum``'s four partial sums."""
    return _sum_seg(z, b, n, 0)


def cast_like(v, m):
    """``v`` converted to the scalar type of ``m`` (numba only)."""
    raise NotImplementedError


@overload(cast_like, inline="always")
def _cast_like(v, m):
    if m == types.float32:
        return lambda v, m: np.float32(v)
    if m == types.float64:
        return lambda v, m: np.float64(v)
    if m == types.int64:
        if isinstance(v, types.Float):
            return lambda v, m: f64_to_int(np.float64(v))
        return lambda v, m: np.int64(v)
    return None


@njit(inline="always")
def scratch(addr, n):
    """An int64 scratch area of ``n`` words at ``addr`` (a ``ctx.buffer``)."""
    return carray(ptr_like(addr, np.int64(0)), n)


# ---- any dtype: element load/store by run-time scalar type --------------------------
# Kernels written over these compile once and serve every dtype: the value passes
# through float64 (floating ops) or int64 (integer/bool ops). Half and bfloat16 are
# stored as raw uint16 (numba has no float16) and converted bit by bit, rounding to
# nearest even as C++'s c10::Half / c10::BFloat16 do.

f32_from_bits = bitcast("f32_from_bits", "int32", "float32")
f32_to_bits = bitcast("f32_to_bits", "float32", "int32")


@njit(inline="always")
def half_to_f32(h):
    """float16 bits -> float32, exactly and branch-light: the 15 low bits moved into a
    float32's exponent/mantissa and scaled by 2**112 (subnormals included)."""
    u = (h & 0x7FFF) << 13
    f = f32_from_bits(np.int32(u)) * np.float32(5.192296858534828e+33)
    if (h & 0x7C00) == 0x7C00:  # inf / NaN
        f = f32_from_bits(np.int32(u | 0x7F800000))
    return -f if (h & 0x8000) != 0 else f


@njit(inline="always")
def f32_to_half(x):
    """float32 -> float16 bits, round to nearest even (as c10::Half from float); selects
    instead of branches, so loops over it vectorize."""
    u = np.int64(f32_to_bits(x)) & 0xFFFFFFFF
    a = u & 0x7FFFFFFF
    nrm = (a - 0x38000000 + 0xFFF + ((a >> 13) & 1)) >> 13
    # below 2**-14: adding 0.5 leaves round(|x| * 2**24) in the mantissa
    sub = (np.int64(f32_to_bits(f32_from_bits(np.int32(a)) + np.float32(0.5)))
           & 0xFFFFFFFF) - 0x3F000000
    h = sub if a < 0x38800000 else nrm
    h = 0x7C00 if a >= 0x477FF000 else h  # 65520 and up round to infinity
    h = 0x7E00 if a > 0x7F800000 else h  # NaN (keeps its sign)
    return ((u >> 16) & 0x8000) | h


@njit(inline="always")
def half_to_f64(h):
    return np.float64(half_to_f32(h))


@njit(inline="always")
def f64_to_half(x):
    return f32_to_half(np.float32(x))  # C++ converts float -> Half: round to float first


@njit(inline="always")
def bf16_to_f64(h):
    return np.float64(f32_from_bits(np.int32(np.uint32(h << 16))))


@njit(inline="always")
def f64_to_bf16(x):
    if x != x:
        return 0x7FC0
    u = np.int64(f32_to_bits(np.float32(x))) & 0xFFFFFFFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


@njit(inline="always")
def round_to(v, st):
    """float64 ``v`` rounded to floating dtype ``st`` and back, exactly (other types: ``v``)."""
    if st == ST_F32:
        return np.float64(np.float32(v))
    if st == ST_F16:
        return half_to_f64(f64_to_half(v))
    if st == ST_BF16:
        return bf16_to_f64(f64_to_bf16(v))
    return v


@njit(inline="always")
def load_f64(addr, st, i):
    """Element ``i`` of the buffer at ``addr`` holding scalar type ``st``, as float64."""
    if st == ST_F32:
        return np.float64(ptr_like(addr, np.float32(0))[i])
    if st == ST_F64:
        return ptr_like(addr, np.float64(0))[i]
    if st == ST_I64:
        return np.float64(ptr_like(addr, np.int64(0))[i])
    if st == ST_I32:
        return np.float64(ptr_like(addr, np.int32(0))[i])
    if st == ST_I16:
        return np.float64(ptr_like(addr, np.int16(0))[i])
    if st == ST_I8:
        return np.float64(ptr_like(addr, np.int8(0))[i])
    if st == ST_U8 or st == ST_BOOL:
        return np.float64(ptr_like(addr, np.uint8(0))[i])
    if st == ST_F16:
        return half_to_f64(np.int64(ptr_like(addr, np.uint16(0))[i]))
    return bf16_to_f64(np.int64(ptr_like(addr, np.uint16(0))[i]))


# Float -> integer as ExecuTorch's C++ kernels compute it on x86 (cvttsd2si), defined
# here on every CPU (LLVM's fptosi is poison out of range): see cython_ext.dtypes.cast_array.
@njit(inline="always")
def f64_to_int(v):
    """float -> int64 truncating toward zero; NaN and out-of-range give INT64_MIN."""
    if v >= -9223372036854775808.0 and v < 9223372036854775808.0:
        return np.int64(v)
    return np.int64(-9223372036854775808)


@njit(inline="always")
def f64_to_i32(v):
    """float -> an integer type of 32 bits or fewer, before its low bits are kept: truncated
    toward zero through int32, NaN and values outside int32 give INT32_MIN."""
    if v > -2147483649.0 and v < 2147483648.0:
        return np.int64(v)
    return np.int64(-2147483648)


@njit(inline="always")
def store_f64(addr, st, i, v):
    """Store float64 ``v`` as scalar type ``st`` (C++ static_cast semantics)."""
    if st == ST_F32:
        ptr_like(addr, np.float32(0))[i] = np.float32(v)
    elif st == ST_F64:
        ptr_like(addr, np.float64(0))[i] = v
    elif st == ST_BOOL:
        ptr_like(addr, np.uint8(0))[i] = np.uint8(v != 0.0)
    elif st == ST_F16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_half(v))
    elif st == ST_BF16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_bf16(v))
    elif st == ST_I64:
        ptr_like(addr, np.int64(0))[i] = f64_to_int(v)
    else:
        w = f64_to_i32(v)
        if st == ST_I32:
            ptr_like(addr, np.int32(0))[i] = np.int32(w)
        elif st == ST_I16:
            ptr_like(addr, np.int16(0))[i] = np.int16(w)
        elif st == ST_I8:
            ptr_like(addr, np.int8(0))[i] = np.int8(w)
        else:
            ptr_like(addr, np.uint8(0))[i] = np.uint8(w & 0xFF)


# The same loads and stores compiled once and called, not inlined: for call sites off the
# hot path, where inlining the dtype switch at each one multiplies compile time.

@njit
def load_f64_call(addr, st, i):
    """``load_f64``, called."""
    return load_f64(addr, st, i)


@njit
def load_i64_call(addr, st, i):
    """``load_i64``, called."""
    return load_i64(addr, st, i)


@njit
def store_f64_call(addr, st, i, v):
    """``store_f64``, called."""
    store_f64(addr, st, i, v)


@njit
def store_i64_call(addr, st, i, v):
    """``store_i64``, called."""
    store_i64(addr, st, i, v)


@njit(inline="always")
def load_i64(addr, st, i):
    """Element ``i`` as int64 (floats truncate toward zero)."""
    if st == ST_I64:
        return ptr_like(addr, np.int64(0))[i]
    if st == ST_I32:
        return np.int64(ptr_like(addr, np.int32(0))[i])
    if st == ST_I16:
        return np.int64(ptr_like(addr, np.int16(0))[i])
    if st == ST_I8:
        return np.int64(ptr_like(addr, np.int8(0))[i])
    if st == ST_U8 or st == ST_BOOL:
        return np.int64(ptr_like(addr, np.uint8(0))[i])
    return f64_to_int(load_f64(addr, st, i))


@njit(inline="always")
def store_i64(addr, st, i, v):
    """Store int64 ``v`` as scalar type ``st`` (integers wrap, as C++ casts do)."""
    if st == ST_I64:
        ptr_like(addr, np.int64(0))[i] = v
    elif st == ST_I32:
        ptr_like(addr, np.int32(0))[i] = np.int32(v)
    elif st == ST_I16:
        ptr_like(addr, np.int16(0))[i] = np.int16(v)
    elif st == ST_I8:
        ptr_like(addr, np.int8(0))[i] = np.int8(v)
    elif st == ST_U8:
        ptr_like(addr, np.uint8(0))[i] = np.uint8(v & 0xFF)
    elif st == ST_BOOL:
        ptr_like(addr, np.uint8(0))[i] = np.uint8(v != 0)
    elif st == ST_F32:
        ptr_like(addr, np.float32(0))[i] = np.float32(v)
    elif st == ST_F64:
        ptr_like(addr, np.float64(0))[i] = np.float64(v)
    elif st == ST_F16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_half(np.float64(v)))
    else:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_bf16(np.float64(v)))


@njit(inline="always")
def elem_size(st):
    if st == ST_I64 or st == ST_F64:
        return 8
    if st == ST_I32 or st == ST_F32:
        return 4
    if st == ST_I16 or st == ST_F16 or st == ST_BF16:
        return 2
    return 1


@njit(inline="always")
def is_float_st(st):
    return st == ST_F32 or st == ST_F64 or st == ST_F16 or st == ST_BF16


@njit(inline="always")
def offset_in(d, k, nd):
    """Storage offset (in elements) of the ``k``-th index, in row-major order, over the
    first ``nd`` dims of ``d``."""
    off = 0
    for i in range(nd - 1, -1, -1):
        sz = d[D_SIZES + i]
        off += (k % sz) * d[D_STRIDES + i]
        k //= sz
    return off


@njit(inline="always")
def offset_of(d, k):
    """Storage offset (in elements) of the ``k``-th element in row-major logical order."""
    return offset_in(d, k, d[D_NDIM])
