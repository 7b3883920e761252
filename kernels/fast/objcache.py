"""Compiled kernels kept as object code and linked with llvmlite alone.

Loading a kernel from Numba's own cache costs a process about 0.8 s the first time:
Numba builds its typing and lowering registries and unpickles the compile result
before it can hand back an address, though a kernel needs none of that to run.
So whenever Numba compiles a kernel (or loads it from its cache), the kernel's
machine code (the ELF object Numba made for its JIT) is also written here, beside
Numba's files for the kernel's module, and a later process links that object into
an MCJIT engine of its own: about 2 ms a kernel.

The object is the very code Numba would run, so results are the same bit for bit.
An entry is keyed like Numba's (the module's source key, see ``kernels.fast._cache``,
which covers Numba's version) and by the CPU it was compiled for (target triple,
CPU name, feature string: Numba's own ``magic_tuple``), so no other CPU ever links
it. Before linking, the file's hash is checked, its ELF symbol table read (every
offset checked) and each symbol it needs looked up; anything short of that sends the
caller back to Numba's path: a bad file costs time, never a crash. Each kernel gets
an engine of its own, so one object never sees another's symbols.

ELF only (Linux); elsewhere ``load`` returns None and Numba's cache is used.
``PYRUNTIME_OBJECT_CACHE=0`` turns the object cache off.
"""
from __future__ import annotations

import hashlib
import os
import struct
import sys
import threading
from pathlib import Path

_HEADER = b"PYRTOBJ1\n"
_lock = threading.Lock()
_engines: list = []  # every engine stays alive as long as the process: its code is in use
_state: dict = {}


class ObjectKernel:
    """A kernel linked from the object cache: what binders need of a Numba ``cfunc``."""

    _cache_hits = 1  # as a cfunc read from Numba's cache says (kernels.fast.background reads it)

    def __init__(self, name: str, symbol: str, address: int):
        self.__name__ = name
        self.symbol = symbol
        self.address = address

    def __repr__(self):
        return f"<ObjectKernel {self.__name__} at {self.address:#x}>"


def enabled() -> bool:
    return sys.platform.startswith("linux") and os.environ.get("PYRUNTIME_OBJECT_CACHE") != "0"


def _magic() -> tuple:
    """What Numba's JIT compiles for here (``CPUCodegen.magic_tuple``): the process's
    triple, the CPU's name and LLVM's feature string, read as Numba's config reads them
    (``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES``, ``NUMBA_ENABLE_AVX``) but without
    importing it; from Numba itself when a ``.numba_config.yaml`` may set them or a
    variable does not parse."""
    m = _state.get("magic")
    if m is None:
        import llvmlite.binding as llvm

        target = None if os.path.isfile(".numba_config.yaml") else _target_from_env(llvm)
        if target is None:
            from numba.core import config
            from numba.core.codegen import get_host_cpu_features

            target = (config.CPU_NAME or llvm.get_host_cpu_name(),
                      config.CPU_FEATURES if config.CPU_FEATURES is not None
                      else get_host_cpu_features())
        m = _state["magic"] = (llvm.get_process_triple(),) + tuple(target)
    return m


# CPUs Numba compiles without AVX by default (numba.core.config's avx_default)
_NO_AVX_CPUS = frozenset({"corei7-avx", "core-avx-i", "sandybridge", "ivybridge", "nocona"})


def _target_from_env(llvm):
    """(CPU name, features) as Numba's config and ``get_host_cpu_features`` give them, or
    None when a variable does not parse (Numba's own reading then decides)."""
    env = os.environ
    cpu = env.get("NUMBA_CPU_NAME")
    name = cpu or llvm.get_host_cpu_name()
    if "NUMBA_CPU_FEATURES" in env:
        return name, env["NUMBA_CPU_FEATURES"]
    if str(cpu).lower() == "generic":
        return name, ""
    try:
        avx = int(env["NUMBA_ENABLE_AVX"]) if "NUMBA_ENABLE_AVX" in env \
            else _os_avx() and name not in _NO_AVX_CPUS
    except ValueError:
        return None
    try:
        feats = llvm.get_host_cpu_features()
    except RuntimeError:
        return name, ""
    if not avx:
        for k in feats:
            if k.startswith("avx"):
                feats[k] = False
    return name, feats.flatten()


def _os_avx() -> bool:
    """Numba's ``_os_supports_avx``: on x86 Linux, 'avx' among /proc/cpuinfo's flags."""
    import platform

    if not sys.platform.startswith("linux") \
            or platform.machine() not in ("i386", "i586", "i686", "x86_64"):
        return True
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                head, _, body = line.partition(":")
                if head.strip() == "flags":
                    return "avx" in body.split()
    except OSError:
        return True
    return False


def path_for(py_fn, magic: tuple | None = None, root=None) -> Path | None:
    """Where the object of the kernel body ``py_fn`` lives (None: not a project kernel),
    under the cache (or ``root``: the shipped kernels, ``kernels.fast.shipped``)."""
    from pyruntime.kernels.fast._cache import CACHED_DIRS, ROOT, cache_name, cache_root, source_key

    try:
        src = Path(py_fn.__code__.co_filename).resolve()
        # kernels/ and the delegates' compiled entries: Numba caches them by this key too
        if not any(src.is_relative_to(ROOT / d) for d in CACHED_DIRS):
            return None
    except (AttributeError, OSError, ValueError):
        return None
    tag = hashlib.sha256(repr(magic or _magic()).encode()).hexdigest()[:16]
    return Path(root or cache_root()) / f"{cache_name(src)}-{source_key(src)}" / \
        f"{py_fn.__name__}.{tag}.o"


def save(py_fn, obj: bytes, symbol: str, magic: tuple) -> None:
    """Keep ``obj`` (an ELF object defining ``symbol``) for ``py_fn``; quietly skipped
    where the cache cannot be written or the object was made for another CPU."""
    if not enabled() or magic != _magic():
        return
    path = path_for(py_fn, magic)
    if path is None or path.exists():
        return
    data = b"".join([_HEADER, symbol.encode(), b"\n",
                     hashlib.sha256(obj).hexdigest().encode(), b"\n", obj])
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)  # readers see the whole file or none
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def load(py_fn) -> ObjectKernel | None:
    """The kernel for ``py_fn`` linked from its object, or None (not cached, or not usable)."""
    return load_from(py_fn) if enabled() else None


def load_from(py_fn, root=None, magic: tuple | None = None) -> ObjectKernel | None:
    """``load`` from the cache, or from ``root`` (shipped kernels: never discarded) with
    the objects compiled for ``magic``."""
    path = path_for(py_fn, magic, root)
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    parsed = _unpack(data)
    if parsed is None:
        if root is None:
            _discard(path)
        return None
    symbol, obj = parsed
    address = _link(obj, symbol)
    return None if not address else ObjectKernel(py_fn.__name__, symbol, address)


def _unpack(data: bytes):
    """(symbol, object) from a cache file whose hash and ELF symbol table check out."""
    if not data.startswith(_HEADER):
        return None
    parts = data[len(_HEADER):].split(b"\n", 2)
    if len(parts) != 3:
        return None
    symbol, digest, obj = parts
    if hashlib.sha256(obj).hexdigest().encode() != digest:
        return None
    syms = elf_symbols(obj)
    if syms is None or symbol.decode(errors="replace") not in syms[0]:
        return None
    return symbol.decode(), obj


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _setup():
    """llvmlite's native target and the symbols Numba's code calls, registered once."""
    tm = _state.get("tm")
    if tm is not None:
        return tm
    import builtins

    import llvmlite.binding as llvm

    _helperlib, _dynfunc = _numba_extension("_helperlib"), _numba_extension("_dynfunc")
    _nrt_python = _numba_extension("core.runtime._nrt_python")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # as Numba's own JIT does (numba.core.base._load_global_helpers, nrt.initialize)
    for helpers in (_helperlib.c_helpers, _dynfunc.c_helpers):
        for name, addr in helpers.items():
            llvm.add_symbol("numba_" + name, addr)
    for name, addr in _nrt_python.c_helpers.items():
        llvm.add_symbol(name if name.startswith("_") else "NRT_" + name, addr)
    for obj in vars(builtins).values():
        if isinstance(obj, type) and issubclass(obj, BaseException):
            llvm.add_symbol("PyExc_" + obj.__name__, id(obj))
    llvm.add_symbol("_Py_NoneStruct", id(None))
    tm = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine()
    # the first engine makes the process's own symbols (libc, libm, Python) visible
    _engines.append(llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm))
    _state["tm"] = tm
    return tm


def _numba_extension(name: str):
    """Numba's C extension module ``numba.<name>`` (the C helpers its code calls), loaded
    without importing Numba's package when that is not loaded yet; kept in sys.modules,
    so that Numba, once imported, uses this very module."""
    full = "numba." + name
    mod = sys.modules.get(full)
    if mod is not None or "numba" in sys.modules:
        import importlib

        return mod if mod is not None else importlib.import_module(full)
    import importlib.machinery
    import importlib.util

    spec = importlib.util.find_spec("numba")
    base = Path(spec.origin).parent.joinpath(*name.split("."))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        f = base.with_name(base.name + suffix)
        if f.is_file():
            spec = importlib.util.spec_from_file_location(full, f)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[full] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[full]
                raise
            return mod
    raise ImportError(f"Numba's extension module {full} is not installed")


def _link(obj: bytes, symbol: str) -> int:
    import llvmlite.binding as llvm

    with _lock:
        tm = _setup()
        _, undefined = elf_symbols(obj)
        if any(not llvm.address_of_symbol(s) for s in undefined):
            return 0  # a symbol only Numba's own engine defines: leave it to Numba
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
        address = engine.get_function_address(symbol)
        _engines.append(engine)
        return address


def elf_symbols(obj: bytes):
    """(defined function symbols, undefined symbols) of a little-endian ELF64 relocatable
    object, or None when anything in it is out of bounds or not such an object."""
    try:
        if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
            return None
        shoff, = struct.unpack_from("<Q", obj, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
        if shentsize != 64 or shoff + shnum * 64 > len(obj):
            return None
        sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + 64 * i) for i in range(shnum)]
        defined, undefined = set(), set()
        for sec in sections:
            if sec[1] != 2:  # SHT_SYMTAB
                continue
            off, size, link, entsize = sec[4], sec[5], sec[6], sec[9]
            if entsize != 24 or off + size > len(obj) or link >= shnum:
                return None
            str_off, str_size = sections[link][4], sections[link][5]
            if str_off + str_size > len(obj):
                return None
            for k in range(size // 24):
                name, info, _, shndx = struct.unpack_from("<IBBH", obj, off + 24 * k)
                if not name:
                    continue
                if name >= str_size:
                    return None
                end = obj.find(b"\0", str_off + name, str_off + str_size)
                if end < 0:
                    return None
                text = obj[str_off + name:end].decode(errors="replace")
                if shndx == 0:
                    undefined.add(text)
                elif info & 0xF == 2 and info >> 4 in (1, 2):  # STT_FUNC, global or weak
                    defined.add(text)
        return defined, undefined
    except (struct.error, IndexError):
        return None
