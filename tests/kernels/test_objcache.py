"""The object cache (kernels/fast/objcache.py): a new process links its kernels' machine
code with llvmlite alone, runs the same bits as Numba's cached functions, and a damaged,
foreign or unlinkable object is set aside for Numba's path, never linked."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

import numpy as np
import pytest

from pyruntime.kernels.fast import jit, objcache
from tests import parts
from tests.child import run_json
from tests.programs.small_programs import small_program

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not objcache.enabled(),
                                reason=parts.not_applicable("the object cache is ELF (Linux) only"))


@pytest.fixture(autouse=True)
def _no_shipped_kernels(monkeypatch):
    """These tests are about the user's cache: the package's shipped kernels (which a load
    would take before Numba's path writes any object) are off, here and in the children."""
    monkeypatch.setenv("PYRUNTIME_SHIPPED", "0")

_CHILD = """
import hashlib, json, sys
import numpy as np
import pyruntime
from pyruntime.kernels.fast import jit
prog = pyruntime.Runtime.get().load_program(sys.argv[1])
m = prog.load_method("forward")
x = np.linspace(-3, 3, 8, dtype=np.float32).reshape(2, 4)
outs = m.execute([x])
print(json.dumps({
    "kinds": sorted({type(c).__name__ for c in jit._COMPILED.values()}),
    "out": hashlib.sha256(b"".join(np.ascontiguousarray(o).tobytes() for o in outs)).hexdigest(),
    "compiled": m._fast.compiled,
    # Numba imports its array-math registry when it compiles or loads a function itself
    "numba_loaded_a_function": "numba.np.arraymath" in sys.modules,
    "numba_imported": "numba" in sys.modules,
}))
"""


def _child(pte, **env):
    return run_json(_CHILD, pte, env={"PYRUNTIME_COMPILE": "sync", **env}, timeout=1800)


def test_a_new_process_links_its_kernels_from_objects_bit_for_bit():
    pte, _ = small_program("linear_relu")
    numba_path = _child(pte, PYRUNTIME_OBJECT_CACHE="0")
    assert numba_path["kinds"] == ["CFunc"] and numba_path["numba_loaded_a_function"]
    _child(pte)  # writes any object the cache lacks
    linked = _child(pte)
    assert linked["kinds"] == ["ObjectKernel"], linked
    # the kernel modules' Numba objects stay placeholders (kernels.fast.deferred)
    assert not linked["numba_loaded_a_function"] and not linked["numba_imported"]
    assert linked["compiled"] == numba_path["compiled"] > 0
    assert linked["out"] == numba_path["out"]


@pytest.fixture
def conj_object():
    """(kernel body, its object file) with a freshly written object."""
    from pyruntime.kernels.complex.typed import conj_kernel

    path = objcache.path_for(conj_kernel)
    path.unlink(missing_ok=True)
    jit.compile_kernel(conj_kernel)  # from Numba's cache or compiled: the object is written
    assert path.exists()
    return conj_kernel, path


def test_a_kernel_from_its_object_is_the_one_numba_serves(conj_object, monkeypatch):
    from pyruntime.cython_ext import ETensor, ScalarType
    from tests.kernels.helpers import call_fast

    fn, path = conj_object
    linked = objcache.load(fn)
    assert isinstance(linked, objcache.ObjectKernel) and linked.address
    assert linked.symbol.startswith("cfunc.") and "conj_kernel" in linked.symbol
    numba_fn = jit._load_numba_cached(fn)
    assert type(numba_fn).__name__ == "CFunc" and numba_fn.address != linked.address
    pairs = np.random.default_rng(1).standard_normal((4, 7, 2)).astype(np.float32)
    pairs[0, :3] = [[np.nan, -0.0], [np.inf, -np.inf], [0.0, np.nan]]
    z = pairs.view(np.complex64)[..., 0].copy()
    outs = []
    for kernel in (linked, numba_fn):
        monkeypatch.setitem(jit._COMPILED, fn, kernel)  # what this binder's lazy() returns
        out = ETensor.empty(ScalarType.COMPLEX64, (4, 7))
        assert call_fast("aten::_conj_physical.out", z, out) == 0
        outs.append(out.numpy().view(np.uint8).copy())
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("damage", ["flip", "truncate", "header", "symbol", "empty"])
def test_a_damaged_object_is_discarded_and_numba_serves(conj_object, damage):
    fn, path = conj_object
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-100] ^= 0x40
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "header":
        data[:4] = b"XXXX"
    elif damage == "symbol":  # a sound object that does not define the named symbol
        head, sym, rest = bytes(data).split(b"\n", 2)
        data = bytearray(b"\n".join([head, sym + b"_gone", rest]))
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    assert objcache.load(fn) is None
    assert not path.exists()  # set aside: the next Numba load writes a good one
    served = jit.load_cached(fn)
    assert type(served).__name__ == "CFunc" and served.address
    assert path.exists() and objcache.load(fn) is not None


def _object(ir_text: str) -> bytes:
    import llvmlite.binding as llvm

    objcache._setup()
    mod = llvm.parse_assembly(ir_text)
    mod.triple = llvm.get_process_triple()
    tm = llvm.Target.from_triple(mod.triple).create_target_machine(reloc="static")
    return tm.emit_object(mod)


def test_an_object_is_linked_only_when_every_symbol_it_needs_exists():
    good = _object("define i64 @plus_one(i64 %x) {\n  %r = add i64 %x, 1\n  ret i64 %r\n}\n"
                   "declare float @expf(float)\n"
                   "define float @e(float %x) {\n  %r = call float @expf(float %x)\n"
                   "  ret float %r\n}\n")
    defined, undefined = objcache.elf_symbols(good)
    assert {"plus_one", "e"} <= defined and undefined == {"expf"}
    addr = objcache._link(good, "plus_one")
    assert ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addr)(41) == 42
    e = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)(objcache._link(good, "e"))
    libm_expf = ctypes.CDLL(ctypes.util.find_library("m")).expf
    libm_expf.restype, libm_expf.argtypes = ctypes.c_float, [ctypes.c_float]
    assert e(0.3) == libm_expf(0.3)  # the process's libm, as Numba's kernels call it
    missing = _object("declare i64 @pyruntime_no_such_symbol(i64)\n"
                      "define i64 @f(i64 %x) {\n  %r = call i64 @pyruntime_no_such_symbol(i64 %x)\n"
                      "  ret i64 %r\n}\n")
    assert "pyruntime_no_such_symbol" in objcache.elf_symbols(missing)[1]
    assert objcache._link(missing, "f") == 0  # LLVM would abort the process on it


def test_elf_symbols_never_raises_on_malformed_objects():
    good = _object("define i64 @g(i64 %x) {\n  ret i64 %x\n}\n")
    assert objcache.elf_symbols(good) is not None
    rng = np.random.default_rng(0)
    cases = [b"", b"\x7fELF", bytes(64), rng.bytes(4096)]
    cases += [good[:n] for n in range(0, len(good), max(1, len(good) // 64))]
    for _ in range(300):
        b = bytearray(good)
        for k in rng.integers(0, len(b), 4):
            b[k] = int(rng.integers(0, 256))
        cases.append(bytes(b))
    for c in cases:
        got = objcache.elf_symbols(c)
        assert got is None or (isinstance(got[0], set) and isinstance(got[1], set))


def test_objects_are_keyed_by_the_cpu_they_were_compiled_for(conj_object, monkeypatch):
    fn, path = conj_object
    other = (objcache._magic()[0], "some-other-cpu", "+sse2")
    assert objcache.path_for(fn, other) != path
    monkeypatch.setitem(objcache._state, "magic", other)
    assert objcache.load(fn) is None  # not this CPU's object: not even read
    assert path.exists()
    blob = path.read_bytes()
    objcache.save(fn, blob, "sym", objcache._magic()[:2] + ("+avx512f",))
    assert not objcache.path_for(fn, objcache._magic()[:2] + ("+avx512f",)).exists()


def test_the_object_cache_can_be_turned_off(conj_object, monkeypatch):
    fn, _ = conj_object
    assert objcache.load(fn) is not None
    monkeypatch.setenv("PYRUNTIME_OBJECT_CACHE", "0")
    assert objcache.load(fn) is None


@pytest.mark.parametrize("numba_env", [{}, {"NUMBA_CPU_NAME": "haswell"},
                                       {"NUMBA_CPU_NAME": "generic"}, {"NUMBA_ENABLE_AVX": "0"},
                                       {"NUMBA_CPU_NAME": "haswell",
                                        "NUMBA_CPU_FEATURES": "+avx,+avx2,+fma"}])
def test_the_cpu_key_and_c_helpers_are_numbas_without_importing_it(numba_env):
    """The object cache's CPU key (triple, CPU name, features) is what Numba's own JIT
    compiles for, Numba's settings included, read without importing Numba; Numba's C helper
    modules it loads for linking are the very ones Numba uses once it is imported, and
    Numba still compiles."""
    child = (
        "import json, sys\n"
        "from pyruntime.kernels.fast import objcache\n"
        "magic = objcache._magic()\n"
        "objcache._setup()\n"
        "before = 'numba' in sys.modules\n"
        "helper = sys.modules['numba._helperlib']\n"
        "import numba\n"
        "from numba import _helperlib\n"
        "from numba.core.codegen import JITCPUCodegen\n"
        "f = numba.njit(lambda x: x * 2 + 1)\n"
        "print(json.dumps({'before': before, 'same': _helperlib is helper, 'ran': f(20),\n"
        "                  'magic': list(magic) == list(JITCPUCodegen('k').magic_tuple())}))\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    got = run_json(child, base=base, env=numba_env, timeout=300)
    assert got == {"before": False, "same": True, "ran": 41, "magic": True}
