"""kernels/libm.py's ``expf_map`` and ``gelu_map``: glibc's ``expf`` (and sigmoid, SiLU, a
shifted exp on it) and the exact GELU (glibc's ``erff`` on its two rational branches) in
loops that vectorize, with the C library's bits.

The reference is the C library itself, called from compiled code per element
(``test_libm.py`` checks those calls are libm's). Where ``kernels.libm_variant`` finds no
glibc build it recognises, the maps call the C library, and the comparisons hold
trivially; on this project's Linux hosts (glibc 2.36) the probes must find them.

Every float32 was compared once (``python -m tests.kernels.test_libm_maps``, about a
minute): no difference in either expf build (the FMA one, and the plain one that glibc
picks with ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-FMA,-AVX2``), nor in GELU. The tests sweep
every 61st bit pattern, so every exponent and sign, with vector bodies and remainders of
every length.
"""
from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pyruntime.kernels import libm, libm_variant
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.libm import E_EXP, E_SIGMOID, E_SILU, expf, expf_map, gelu_map, geluf
from tests.child import repo_env

_GLIBC = platform.libc_ver()
_VERSION = tuple(int(p) for p in _GLIBC[1].split(".")[:2]) if _GLIBC[0] == "glibc" else ()
_KNOWN = sys.platform.startswith("linux") and _VERSION >= (2, 27)
E_GELU = 9  # (these tests' code for gelu_map)


@njit
def _mapped(op, x, z, shift):
    if op == E_GELU:
        gelu_map(x, z)
    else:
        expf_map(op, x, z, shift)


@njit
def _reference(op, x, z, shift):
    """The same op with the C library's expf or erff, one call per element."""
    one = np.float32(1.0)
    for i in range(x.size):
        if op == E_GELU:
            z[i] = geluf(x[i])
        elif op == E_EXP:
            z[i] = expf(x[i] - shift)
        elif op == E_SIGMOID:
            z[i] = one / (one + expf(-x[i]))
        else:
            z[i] = np.float32(np.float64(x[i]) / (1.0 + np.float64(expf(-x[i]))))


@njit
def _sweep(op, lo, hi, step, chunk):
    """Bit patterns lo, lo + step, ... below hi through ``op``'s map and the C library:
    (how many differ, the first that does or -1)."""
    x = np.empty(chunk, np.float32)
    xb = x.view(np.uint32)
    a = np.empty(chunk, np.float32)
    b = np.empty(chunk, np.float32)
    bad, first = 0, -1
    zero = np.float32(0.0)
    i = lo
    while i < hi:
        n = min(chunk, (hi - i + step - 1) // step)
        for k in range(n):
            xb[k] = np.uint32(i + k * step)
        _mapped(op, x[:n], a[:n], zero)
        _reference(op, x[:n], b[:n], zero)
        ab, bb = a.view(np.uint32), b.view(np.uint32)
        for k in range(n):
            if ab[k] != bb[k]:
                if first < 0:
                    first = i + k * step
                bad += 1
        i += n * step
    return bad, first


def _bits(a):
    return a.view(np.uint32)


def _inputs():
    rng = np.random.default_rng(11)
    rand_bits = rng.integers(0, 2**32, 1 << 18, dtype=np.uint64).astype(np.uint32)
    probe = np.array([row[0] for row in libm_variant.PROBE], np.uint32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.72, 88.73, -103.97, -103.28,
                        -104.0, 1e-40, -1e-40, 1e30, -1e30], np.float32)
    return np.concatenate([rand_bits.view(np.float32), probe.view(np.float32), special,
                           (rng.standard_normal(1 << 16) * 20).astype(np.float32)])


def test_probe_finds_a_glibc_build():
    if not _KNOWN:
        pytest.skip(f"the C library here is {_GLIBC or sys.platform}, not glibc 2.27+: "
                    "expf_map calls it per element")
    assert libm_variant.expf_variant() in libm_variant.VARIANTS
    assert libm.EXPF_VARIANT == libm_variant.expf_variant()


def test_erff_probe_finds_glibcs():
    if not _KNOWN or _VERSION > (2, 36):
        pytest.skip(f"erff's probe was checked on glibc 2.36, this is {_GLIBC or sys.platform}:"
                    " gelu_map follows whatever it finds")
    assert libm_variant.erff_variant() == "fdlibm"
    with np.errstate(over="ignore"):
        assert libm_variant.classify_erff(lambda v: float(np.float32(math.erf(v)))) is None


def test_probe_rejects_another_expf():
    """A correctly rounded expf (exp in double, rounded once) is not glibc's: the probe
    inputs include ten where glibc rounds the other way."""
    with np.errstate(over="ignore"):
        assert libm_variant.classify(lambda v: float(np.float32(math.exp(v)))) is None
    assert libm_variant.classify(lambda v: v) is None


@pytest.mark.parametrize("op", [E_EXP, E_SIGMOID, E_SILU, E_GELU],
                         ids=["exp", "sigmoid", "silu", "gelu"])
def test_map_has_the_c_library_bits(op):
    x = _inputs()
    shift = np.float32(0.75) if op == E_EXP else np.float32(0.0)
    want = np.empty_like(x)
    with np.errstate(all="ignore"):
        _reference(op, x, want, shift)
        for n in (0, 1, 3, 7, 8, 9, 511, 512, 513, 1029, x.size):  # bodies and remainders
            got = np.full_like(x[:n], np.float32(-7.0))
            _mapped(op, x[:n], got, shift)
            assert np.array_equal(_bits(got), _bits(want[:n])), n
        inplace = x.copy()  # the out tensor may be the input
        _mapped(op, inplace, inplace, shift)
    assert np.array_equal(_bits(inplace), _bits(want))


@pytest.mark.parametrize("op", [E_EXP, E_GELU], ids=["exp", "gelu"])
def test_every_61st_float(op):
    bad, first = _sweep(op, 0, 1 << 32, 61, 1 << 16)
    assert bad == 0, f"{bad} differ from the C library's, first at bits {first:#x}"


_PLAIN_CHILD = textwrap.dedent("""
    from pyruntime.kernels import libm, libm_variant
    from pyruntime.kernels.fast import _cache
    from tests.kernels.test_libm_maps import _sweep
    assert libm_variant.expf_variant() == "plain", libm_variant.expf_variant()
    assert libm.EXPF_VARIANT == "plain"
    bad, first = _sweep(libm.E_EXP, 0, 1 << 32, 61, 1 << 16)
    assert bad == 0, (bad, hex(first))
    print(_cache.source_key(_cache.ROOT / "kernels" / "libm.py"))
""")


def test_plain_build_where_glibc_picks_it():
    """With FMA and AVX2 masked, glibc runs its plain expf: the probe names it, the map
    follows it, and kernels built on expf get another cache key."""
    from pyruntime.kernels.fast import _cache

    if not _KNOWN:
        pytest.skip(f"the C library here is {_GLIBC or sys.platform}, not glibc 2.27+")
    env = dict(repo_env(), GLIBC_TUNABLES="glibc.cpu.hwcaps=-FMA,-AVX2")
    out = subprocess.run([sys.executable, "-c", _PLAIN_CHILD], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    key = _cache.source_key(_cache.ROOT / "kernels" / "libm.py")
    assert (out.stdout.split()[-1] == key) == (libm.EXPF_VARIANT == "plain")


if __name__ == "__main__":  # every float32, in both halves at once, for exp and gelu
    halves = [(0, 1 << 31), (1 << 31, 1 << 32)]
    if len(sys.argv) > 1:
        lo, hi = halves[int(sys.argv[1])]
        for op, name in ((E_EXP, "exp"), (E_GELU, "gelu")):
            print(name, libm_variant.tag(), _sweep(op, lo, hi, 1, 1 << 16))
    else:
        procs = [subprocess.Popen([sys.executable, "-m", "tests.kernels.test_libm_maps",
                                   str(k)], env=os.environ) for k in (0, 1)]
        sys.exit(max(p.wait() for p in procs))
