"""Our GLSL compute shaders (``shaders/*.comp``) compiled to SPIR-V with ``glslc``, once.

A variant is a shader name plus ``-D`` defines (storage types, op codes). Its SPIR-V
is cached on disk under ``$PYRUNTIME_CACHE/vulkan`` (default ``~/.cache/pyruntime/vulkan``),
keyed by the hash of the shader source, the shared header and the defines, so an
edited shader recompiles and an unchanged one never does; a process that finds every
variant it needs in the cache does not need ``glslc`` at all.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.memo import Memo

SHADER_DIR = Path(__file__).resolve().parent / "shaders"
COMMON = "common.glsl"  # included by every shader (#include "common.glsl")
GLSLC_HINT = ("install glslc (Debian/Ubuntu: apt-get install glslc; or the Vulkan SDK), "
              "or point $PYRUNTIME_GLSLC at it")
_compiled = Memo()  # (name, defines) -> SPIR-V, once per process


def cache_dir() -> Path:
    root = os.environ.get("PYRUNTIME_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyruntime")
    return Path(root) / "vulkan"


def glslc_path() -> str | None:
    import shutil

    env = os.environ.get("PYRUNTIME_GLSLC")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    return shutil.which("glslc")


def source(name: str) -> str:
    path = SHADER_DIR / f"{name}.comp"
    try:
        return path.read_text()
    except OSError as e:
        raise ExecuTorchError(ErrorCode.NotFound,
                              f"VulkanBackend: shader {name!r} is missing ({path}): {e}") from e


def _key(name: str, defines: tuple) -> str:
    h = hashlib.sha256()
    h.update(source(name).encode())
    h.update((SHADER_DIR / COMMON).read_bytes())
    h.update(repr(defines).encode())
    return h.hexdigest()[:32]


def spirv(name: str, defines: tuple = ()) -> bytes:
    """SPIR-V words of shader ``name`` with ``defines`` (tuple of (macro, value))."""
    return _compiled.get((name, defines), lambda: _compile(name, defines))


def _compile(name: str, defines: tuple) -> bytes:
    import subprocess  # (only when a variant is not cached yet)
    import tempfile

    out = cache_dir() / f"{name}-{_key(name, defines)}.spv"
    try:
        return out.read_bytes()
    except OSError:
        pass
    glslc = glslc_path()
    if glslc is None:
        raise ExecuTorchError(ErrorCode.NotFound,
                              f"VulkanBackend: shader {name!r} is not compiled yet and glslc "
                              f"was not found: {GLSLC_HINT}")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".spv", dir=out.parent)
    os.close(fd)
    cmd = [glslc, "-fshader-stage=compute", "--target-env=vulkan1.1", "-O", "-I",
           str(SHADER_DIR)] + [f"-D{m}={v}" for m, v in defines] + \
        [str(SHADER_DIR / f"{name}.comp"), "-o", tmp]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise ExecuTorchError(ErrorCode.Internal,
                                  f"VulkanBackend: glslc failed on {name}.comp {dict(defines)}: "
                                  f"{(r.stderr or r.stdout).strip()[:2000]}")
        code = Path(tmp).read_bytes()
        os.replace(tmp, out)
        return code
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def shader_names() -> list[str]:
    return sorted(p.stem for p in SHADER_DIR.glob("*.comp"))
