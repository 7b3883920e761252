"""Operator kernels, keyed by exact ExecuTorch op name (``"aten::add.out"``).

One folder per kernel family (``kernels/pool/``, ``kernels/conv/``...) holds the
family's tiers side by side: ``reference*.py`` (numpy, the oracle), ``typed*.py``
(compiled hot paths for the common dtypes), ``generic*.py`` (compiled, any dtype) and
``opencl.py`` (OpenCL C). ``kernels/fast/`` holds what the compiled kernels share
(the compiler and caches, the descriptor access helpers, GEMM), ``kernels/opencl/`` the
OpenCL device and API.

>>> from pyruntime import kernels
>>> "aten::add.out" in kernels.registered_names()
True
"""
from pyruntime.kernels.registry import get_kernel, has_kernel, register, registered_names, Kernel

__all__ = ["get_kernel", "has_kernel", "register", "registered_names", "Kernel", "family_modules"]

_NOT_FAMILIES = {"fast", "opencl"}  # the tiers' shared machinery, not families


def family_modules(tier: str) -> list[str]:
    """Every family module of a tier, as import names: ``"reference"`` (modules named
    ``reference*``), ``"fast"`` (``typed*``, ``generic*`` and ``choose``) or ``"opencl"``.

    >>> "pyruntime.kernels.pool.reference" in family_modules("reference")
    True
    """
    import pkgutil

    prefixes = {"reference": ("reference",), "fast": ("typed", "generic", "choose"),
                "opencl": ("opencl",)}[tier]
    out = []
    for fam in pkgutil.iter_modules(__path__):
        if not fam.ispkg or fam.name in _NOT_FAMILIES:
            continue
        pkg = f"{__name__}.{fam.name}"
        for m in pkgutil.iter_modules([f"{__path__[0]}/{fam.name}"]):
            if m.name.startswith(prefixes):
                out.append(f"{pkg}.{m.name}")
    return sorted(out)
