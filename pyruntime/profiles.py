"""Device profiles: what an emulated device has, and whether a program fits it.

A profile names a device's planned-memory budget (``max_planned_bytes`` of
``Program.load_method``), the storage for constants and delegate payloads, the
backends its runtime registers, and its thread count. A built-in name or a
small TOML/JSON file selects one::

    # phone.toml
    name = "phone"
    max_planned_bytes = "64 MiB"        # an int, or a size with a unit (B, KiB, MB, ...)
    max_constant_bytes = "200 MiB"      # constants + delegate payloads
    backends = ["XnnpackBackend"]       # omit for "every backend this host has"
    threads = 4

>>> from pyruntime.profiles import get_profile
>>> mcu = get_profile("mcu")
>>> mcu.backends, mcu.threads
((), 1)
>>> # report = mcu.check(program, "forward"); print(report); report.raise_if_unfit()
>>> # method = mcu.load_method(program, "forward")   # fails as on the device
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates import backend_registry

_FIELDS = ("name", "description", "max_planned_bytes", "max_constant_bytes", "backends",
           "threads")
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
          "kib": 2**10, "mib": 2**20, "gib": 2**30}


@dataclass(frozen=True)
class DeviceProfile:
    """One emulated device. ``None`` means "no limit" / "what this host has"."""

    name: str
    max_planned_bytes: int | None = None
    max_constant_bytes: int | None = None
    backends: tuple | None = None  # backend ids the device registers; () = portable only
    threads: int | None = None
    description: str = ""

    def load_kwargs(self) -> dict:
        """The ``Program.load_method`` arguments this profile sets."""
        kw = {"max_planned_bytes": self.max_planned_bytes, "backends": self.backends}
        if self.threads is not None:
            kw["threads"] = self.threads
        return kw

    def check(self, program, methods=None) -> "FitReport":
        """What ``program`` needs against what this device has, read from the file
        only (nothing is loaded or run). ``methods``: a name or list (default: all)."""
        if isinstance(methods, str):
            methods = [methods]
        return FitReport.build(self, program, methods or program.method_names)

    def load_method(self, program, name: str = "forward", tier: str = "fast", **kw):
        """``program.load_method`` as on this device: a missing backend raises NotFound,
        a plan over the memory budget MemoryAllocationFailed, constants and delegate
        payloads over the storage budget OutOfResources, each naming the profile."""
        if self.max_constant_bytes is not None:
            for code, msg in self.check(program, name).problems:
                if code == ErrorCode.OutOfResources:
                    raise ExecuTorchError(code, f"device profile {self.name!r}: {msg}")
        args = {**self.load_kwargs(), **kw}
        try:
            return program.load_method(name, tier=tier, **args)
        except ExecuTorchError as e:
            raise e.with_context(f"device profile {self.name!r}") from e

    def to_dict(self) -> dict:
        d = asdict(self)
        d["backends"] = None if self.backends is None else list(self.backends)
        return d


BUILTIN = {p.name: p for p in (
    DeviceProfile("host", description="this machine: no budgets, every backend it has"),
    DeviceProfile("android-xnnpack", max_planned_bytes=512 * 2**20,
                  max_constant_bytes=2 * 2**30, backends=("XnnpackBackend",), threads=4,
                  description="a phone app with the XNNPACK delegate, 4 big cores"),
    DeviceProfile("android-portable", max_planned_bytes=512 * 2**20,
                  max_constant_bytes=2 * 2**30, backends=(), threads=4,
                  description="a phone app built with portable kernels only, no delegates"),
    DeviceProfile("mcu", max_planned_bytes=512 * 2**10, max_constant_bytes=2 * 2**20,
                  backends=(), threads=1,
                  description="a Cortex-M class MCU: 512 KiB SRAM arena, 2 MiB flash, "
                              "portable kernels"),
)}


def get_profile(spec) -> DeviceProfile:
    """A built-in profile by name (``host``, ``android-xnnpack``, ``android-portable``,
    ``mcu``), a ``.toml``/``.json`` file, or a DeviceProfile (returned as is)."""
    if isinstance(spec, DeviceProfile):
        return spec
    s = os.fspath(spec)
    if s in BUILTIN:
        return BUILTIN[s]
    if not os.path.exists(s):
        raise ExecuTorchError(ErrorCode.NotFound,
                              f"device profile {s!r}: not a built-in name "
                              f"({', '.join(BUILTIN)}) nor an existing .toml/.json file")
    return load_profile(s)


def load_profile(path) -> DeviceProfile:
    """Read a profile file (TOML or JSON, by extension; JSON otherwise)."""
    path = os.fspath(path)
    where = f"device profile file {path!r}"
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".toml"):
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
            data = tomllib.loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw)
    except ImportError as e:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{where}: TOML needs Python 3.11+ or `pip install tomli` ({e})")
    except (OSError, ValueError) as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ExecuTorchError(ErrorCode.InvalidArgument, f"{where}: cannot read: {e}") from e
    return profile_from_dict(data, where, os.path.splitext(os.path.basename(path))[0])


def profile_from_dict(data, where: str = "device profile", default_name: str = "custom"):
    """A profile from a mapping with the file's keys; unknown keys and bad values raise."""
    if not isinstance(data, dict):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{where}: expected a table of settings, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{where}: unknown key(s) {unknown} (known: {', '.join(_FIELDS)})")
    backends = data.get("backends")
    if backends is not None:
        if not isinstance(backends, list) or not all(isinstance(b, str) for b in backends):
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: backends must be a list of backend ids such as "
                                  f"\"XnnpackBackend\", got {backends!r}")
        known = set(backend_registry.known_ids())
        odd = [b for b in backends if b not in known]
        if odd:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: unknown backend id(s) {odd} (known: "
                                  f"{', '.join(sorted(known))})")
        backends = tuple(backends)
    threads = data.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{where}: threads must be a positive integer, got {threads!r}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ExecuTorchError(ErrorCode.InvalidArgument, f"{where}: name must be a string")
    return DeviceProfile(name=name, description=str(data.get("description", "")),
                         max_planned_bytes=parse_bytes(data.get("max_planned_bytes"), where,
                                                       "max_planned_bytes"),
                         max_constant_bytes=parse_bytes(data.get("max_constant_bytes"), where,
                                                        "max_constant_bytes"),
                         backends=backends, threads=threads)


def parse_bytes(v, where="", key="size"):
    """``1048576``, ``"1 MiB"``, ``"512KiB"``, ``"2 MB"`` -> bytes; None stays None."""
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)?\s*", v, re.I) \
        if isinstance(v, str) else None
    if m is None:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{where}: {key} must be a byte count or a size such as "
                              f"\"512 KiB\", got {v!r}")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])


def _fmt(n) -> str:
    return "unlimited" if n is None else f"{n:,} bytes"


@dataclass
class FitReport:
    """Whether a program fits a profile: per method planned bytes and delegates,
    the constants, and each problem with the error code loading would raise."""

    profile: DeviceProfile
    constant_bytes: int
    delegate_bytes: int
    methods: dict = field(default_factory=dict)  # name -> (planned bytes, [backend ids])
    problems: list = field(default_factory=list)  # (ErrorCode, message)

    @classmethod
    def build(cls, profile, program, methods):
        blobs = _delegate_payload_bytes(program, methods)
        r = cls(profile, program.constant_bytes, blobs)
        p = profile
        for name in methods:
            meta = program.metadata(name)
            planned = sum(meta.planned_buffer_sizes)
            r.methods[name] = (planned, list(meta.backends))
            if p.max_planned_bytes is not None and planned > p.max_planned_bytes:
                r.problems.append((ErrorCode.MemoryAllocationFailed,
                                   f"method {name!r} needs {planned:,} bytes of planned memory, "
                                   f"over the device's {p.max_planned_bytes:,}"))
            for bid in dict.fromkeys(meta.backends):
                if p.backends is not None and bid not in p.backends:
                    r.problems.append((ErrorCode.NotFound,
                                       f"method {name!r} delegates to {bid!r}, which the device "
                                       f"does not have (its backends: "
                                       f"{', '.join(p.backends) or 'none'})"))
                elif bid not in backend_registry.available():
                    r.problems.append((ErrorCode.NotFound,
                                       f"method {name!r} delegates to {bid!r}, which this host "
                                       "cannot run (see `pyruntime inspect`)"))
        stored = r.constant_bytes + r.delegate_bytes
        if p.max_constant_bytes is not None and stored > p.max_constant_bytes:
            r.problems.append((ErrorCode.OutOfResources,
                               f"constants and delegate payloads take {stored:,} bytes, over "
                               f"the device's {p.max_constant_bytes:,}"))
        return r

    @property
    def fits(self) -> bool:
        return not self.problems

    def raise_if_unfit(self) -> None:
        """Raise the first problem as the ExecuTorchError that loading would raise."""
        if self.problems:
            code, msg = self.problems[0]
            more = f" (and {len(self.problems) - 1} more problem(s))" if len(self.problems) > 1 \
                else ""
            raise ExecuTorchError(code, f"device profile {self.profile.name!r}: {msg}{more}")

    def __str__(self) -> str:
        p = self.profile
        lines = [f"device profile {p.name!r}" + (f" ({p.description})" if p.description else "")]
        for name, (planned, backends) in self.methods.items():
            lines.append(f"  method {name!r}: planned memory {planned:,} bytes "
                         f"(budget {_fmt(p.max_planned_bytes)}); delegates: "
                         f"{', '.join(backends) or 'none'}")
        lines.append(f"  constants {self.constant_bytes:,} bytes + delegate payloads "
                     f"{self.delegate_bytes:,} bytes (budget {_fmt(p.max_constant_bytes)})")
        has = "all this host has" if p.backends is None else ", ".join(p.backends) or "none"
        lines.append(f"  backends on the device: {has}; threads: {p.threads or 'not set (1 per worker)'}")
        lines.append("  fits" if self.fits else
                     "  does NOT fit:\n" + "\n".join(f"    - {m}" for _, m in self.problems))
        return "\n".join(lines)


def _delegate_payload_bytes(program, methods) -> int:
    total = 0
    pte = program._pte
    for name in methods:
        for d, bd in enumerate(program._plan(name).delegates or []):
            total += len(pte.delegate_blob(bd.processed, f"method {name!r} delegate {d}"))
    return total
