"""Numba building blocks for compiled kernels over the descriptor ABI.

``desc(addr)`` views a descriptor row; ``flat(d, marker)`` views its data as
a typed 1-D array (``marker`` is a zero of the element type, e.g.
``np.float32(0)``, so one generic body compiles per dtype); ``resize_to``
applies ExecuTorch's resize rules to an out descriptor and recomputes its
strides from its dim order. Every kernel is a ``cfunc`` ``int64(int64*)``
returning an ExecuTorch error code.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numba
import numpy as np
from numba import carray, cfunc, njit, types
from numba.extending import intrinsic


def _cache_dir() -> str:
    """Numba's on-disk cache, keyed by a hash of every compiled-kernel source file.

    Numba invalidates a cached function only when *its own* file changes, but
    our kernels inline helpers from other files (this one, the copy engine);
    keying the folder on all of them means an edited helper can never be
    served stale machine code. It also keeps the cache out of site-packages.
    """
    here = Path(__file__).resolve().parent
    h = hashlib.sha256(numba.__version__.encode())
    for f in sorted(here.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    root = os.environ.get("PYRUNTIME_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyruntime")
    return os.path.join(root, "numba", h.hexdigest()[:16])


if not os.environ.get("NUMBA_CACHE_DIR"):
    numba.config.CACHE_DIR = _cache_dir()

KERNEL_SIG = types.int64(types.CPointer(types.int64))

OK = 0
NOT_SUPPORTED = 0x10
INVALID_ARGUMENT = 0x12

# ScalarType codes a kernel dispatches on at run time.
ST_U8, ST_I8, ST_I16, ST_I32, ST_I64, ST_F16, ST_F32, ST_F64, ST_BOOL = 0, 1, 2, 3, 4, 5, 6, 7, 11


@intrinsic
def ptr_like(typingctx, addr, marker):
    """int64 address -> pointer to ``marker``'s type (LLVM inttoptr)."""
    ptrty = types.CPointer(marker)
    sig = ptrty(types.int64, marker)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(ptrty))

    return sig, codegen


@intrinsic
def bits_to_f64(typingctx, word):
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return sig, codegen


@njit(inline="always")
def desc(addr):
    return carray(ptr_like(addr, np.int64(0)), 64)


@njit(inline="always")
def flat(d, marker):
    return carray(ptr_like(d[0], marker), max(d[3], 1))


@njit(inline="always")
def flat_cap(d, marker):
    """The data as a typed 1-D array of the tensor's capacity."""
    return carray(ptr_like(d[0], marker), max(d[4], 1))


@njit(inline="always")
def is_contiguous(d):
    if d[3] == 0:
        return True  # no elements: any layout is contiguous
    nd = d[2]
    s = 1
    for i in range(nd - 1, -1, -1):
        if d[8 + i] != 1 and d[24 + i] != s:
            return False
        s *= d[8 + i]
    return True


@njit(inline="always")
def set_strides(d):
    nd = d[2]
    s = 1
    for k in range(nd - 1, -1, -1):
        dim = d[40 + k]
        d[24 + dim] = s
        sz = d[8 + dim]
        s *= sz if sz != 0 else 1


@njit(inline="always")
def resize_to(d, sizes, nd):
    """Resize out descriptor ``d`` to ``sizes[:nd]``; returns a status code."""
    if nd != d[2]:
        return NOT_SUPPORTED
    same = True
    numel = 1
    for i in range(nd):
        numel *= sizes[i]
        if d[8 + i] != sizes[i]:
            same = False
    if same:
        return OK
    if d[5] == 0 or numel > d[4]:
        return NOT_SUPPORTED
    for i in range(nd):
        d[8 + i] = sizes[i]
    d[3] = numel
    set_strides(d)
    return OK


@njit(inline="always")
def same_shape(a, b):
    nd = a[2]
    if nd != b[2]:
        return False
    for i in range(nd):
        if a[8 + i] != b[8 + i]:
            return False
    return True


@njit(inline="always")
def resize_like(d, src):
    """Resize ``d`` to ``src``'s sizes without allocating (the common, hot case)."""
    if same_shape(d, src):
        return OK
    nd = src[2]
    if nd != d[2] or d[5] == 0 or src[3] > d[4]:
        return NOT_SUPPORTED
    for i in range(nd):
        d[8 + i] = src[8 + i]
    d[3] = src[3]
    set_strides(d)
    return OK


def compile_kernel(py_fn):
    """cfunc for a module-level kernel body; Numba caches it on disk."""
    # error_model="numpy": x / 0.0 gives inf/nan as in ATen instead of raising
    # (a Python exception cannot be raised from a kernel running without the GIL).
    return cfunc(KERNEL_SIG, nopython=True, nogil=True, cache=True, error_model="numpy")(py_fn)


_COMPILED: dict = {}


def lazy(py_fn):
    """Compile ``py_fn`` on first use (binders call ``lazy(fn)``)."""
    c = _COMPILED.get(py_fn)
    if c is None:
        c = _COMPILED[py_fn] = compile_kernel(py_fn)
    return c


@njit(inline="always")
def sum_seg(z, b, n):
    """float64 sum of z[b:b+n] in four partial sums: no serial dependency chain, so it
    vectorizes; for statistics whose summation order does not matter."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    i = 0
    while i + 4 <= n:
        s0 += z[np.uint64(b + i)]
        s1 += z[np.uint64(b + i + 1)]
        s2 += z[np.uint64(b + i + 2)]
        s3 += z[np.uint64(b + i + 3)]
        i += 4
    while i < n:
        s0 += z[np.uint64(b + i)]
        i += 1
    return (s0 + s1) + (s2 + s3)
