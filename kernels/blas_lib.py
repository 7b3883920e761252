"""numpy's OpenBLAS, found without numba: gemm addresses and the thread count.

The compiled tier calls gemm through these addresses (``kernels.fast.blas``);
the runtime's ``threads=`` setting sets OpenBLAS's thread count, which numpy's
own matmul (the reference tier) shares.
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

_SUFFIXES = (("scipy_cblas_", "64_"), ("cblas_", "64_"))
_THREADS = ("scipy_openblas_{}_num_threads64_", "openblas_{}_num_threads64_")

_state = None  # (lib, {np.dtype: address}, set_threads, get_threads) once looked up


def _candidates():
    """Paths of OpenBLAS libraries numpy loaded (first) or ships next to itself, as they
    are needed: the folders are listed only when no loaded one serves (this runs in a
    method's load)."""
    seen = []
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        maps = ""
    for line in maps.splitlines() if "openblas" in maps else ():
        if "openblas" in line:
            p = line.split()[-1]
            base = os.path.basename(p)
            if "openblas" in base and ".so" in base and p not in seen:
                seen.append(p)
                yield p
    root = os.path.dirname(np.__file__)
    for pat in ("../numpy.libs/*openblas*.so*", ".libs/*openblas*.so*"):
        for p in sorted(glob.glob(os.path.join(root, pat))):
            p = os.path.realpath(p)
            if p not in seen:
                seen.append(p)
                yield p


def lookup():
    global _state
    if _state is not None:
        return _state
    _state = (None, {}, None, None)
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pre, suf in _SUFFIXES:
            try:
                s = getattr(lib, f"{pre}sgemm{suf}")
                d = getattr(lib, f"{pre}dgemm{suf}")
            except AttributeError:
                continue
            addrs = {np.dtype(np.float32): ctypes.cast(s, ctypes.c_void_p).value,
                     np.dtype(np.float64): ctypes.cast(d, ctypes.c_void_p).value}
            setter = getter = None
            for name in _THREADS:
                if hasattr(lib, name.format("set")) and hasattr(lib, name.format("get")):
                    setter = getattr(lib, name.format("set"))
                    setter.argtypes, setter.restype = [ctypes.c_int], None
                    getter = getattr(lib, name.format("get"))
                    getter.argtypes, getter.restype = [], ctypes.c_int
                    break
            _state = (lib, addrs, setter, getter)
            return _state
    return _state


def set_blas_threads(n: int) -> bool:
    """Set OpenBLAS's thread count (shared with numpy); False when there is no BLAS."""
    setter = lookup()[2]
    if setter is None:
        return False
    setter(max(1, int(n)))
    return True


def blas_threads() -> int:
    """OpenBLAS's current thread count (0 when there is no BLAS)."""
    getter = lookup()[3]
    return 0 if getter is None else int(getter())
