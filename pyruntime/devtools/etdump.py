"""ETDump: ExecuTorch's record of what a runtime did (``.etdp``, spec section 9.2).

An ``.etdp`` file is a size-prefixed flatbuffer (file id ``ED00``) of runs
(``RunData``: a load block named ``"Default"``, then one ``"Execute"`` block per
execute), each a list of events: profile events (a name, start and end ticks),
debug events (a value an instruction produced) and allocation events. Tensor
payloads live in a separate *debug buffer*; a debug event holds only the
tensor's scalar type, sizes, strides and byte offset into it.

Reading, from a C++ device or from our own ``EventTracer``::

    >>> from pyruntime.devtools import ETDump
    >>> # dump = ETDump.load("device.etdp", debug_buffer="device.bin")
    >>> # run = dump.executions[0]
    >>> # run.instruction_outputs()[(0, 3)]   # chain 0, instruction 3 -> [ndarray, ...]
    >>> # dump.save("copy.etdp", "copy.bin")
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from math import prod

import numpy as np

from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.devtools import fbwriter
from pyruntime.devtools.schemas import ETDUMP_IDENTIFIER, ETDUMP_SCHEMA, VALUE_CODES, \
    VALUE_TYPES
from pyruntime.schema.flatbuf import Reader, read_table

_U64 = 1 << 64


def _signed(v: int) -> int:
    """A chain index stored as u64 (C++ writes chain -1 as 2**64 - 1) as a Python int."""
    return v - _U64 if v >= 1 << 63 else v


@dataclass
class TensorRef:
    """A tensor in the debug buffer: its layout and byte offset (-1 when it has no bytes)."""

    scalar_type: int
    sizes: tuple
    strides: tuple
    offset: int

    def array(self, debug_buffer, where: str = "") -> np.ndarray:
        """A copy of the tensor read from ``debug_buffer`` (checked against its bounds)."""
        try:
            dtype = to_numpy_dtype(self.scalar_type)
        except (ValueError, KeyError):
            raise _bad(f"{where}: unknown scalar type {self.scalar_type}") from None
        sizes = tuple(int(s) for s in self.sizes)
        if any(s < 0 for s in sizes) or len(sizes) > 16:
            raise _bad(f"{where}: sizes {list(sizes)} (negative, or more than 16 dims)")
        n = prod(sizes)
        if n == 0:
            return np.zeros(sizes, dtype)
        if debug_buffer is None:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{where}: the tensor's bytes are in the debug buffer, and "
                                  "none was given")
        strides = tuple(int(s) for s in self.strides) or _contiguous(sizes)
        if len(strides) != len(sizes) or any(s < 0 for s in strides):
            raise _bad(f"{where}: strides {list(strides)} do not fit sizes {list(sizes)}")
        span = (sum((d - 1) * s for d, s in zip(sizes, strides)) + 1) * dtype.itemsize
        end = self.offset + span
        if self.offset < 0 or end > len(debug_buffer):
            raise _bad(f"{where}: tensor {list(sizes)} of {dtype} needs debug-buffer bytes "
                       f"[{self.offset}, {end}), the buffer has {len(debug_buffer)} bytes")
        raw = np.frombuffer(debug_buffer, np.uint8, span, self.offset)
        view = np.ndarray(sizes, dtype, buffer=raw, strides=[s * dtype.itemsize for s in strides])
        return np.array(view, copy=True, order="C")


def _contiguous(sizes) -> tuple:
    out, acc = [], 1
    for s in reversed(sizes):
        out.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(out))


@dataclass
class DebugValue:
    """A logged value: ``kind`` is a ValueType name; ``value`` a Python scalar, a
    ``TensorRef`` or a list of them; ``output`` marks program outputs."""

    kind: str
    value: object = None
    output: bool = False

    def resolve(self, debug_buffer, where: str = ""):
        """The value with tensors read from ``debug_buffer`` (ndarray, list, or scalar)."""
        if self.kind == "Tensor":
            return self.value.array(debug_buffer, where)
        if self.kind == "TensorList":
            return [t.array(debug_buffer, f"{where}[{i}]") for i, t in enumerate(self.value)]
        return self.value


@dataclass
class ProfileEvent:
    name: str | None
    chain_index: int
    instruction_id: int
    start_time: int
    end_time: int
    delegate_debug_id_int: int = -1
    delegate_debug_id_str: str | None = None
    delegate_debug_metadata: bytes | None = None

    @property
    def duration(self) -> int:
        return self.end_time - self.start_time


@dataclass
class DebugEvent:
    chain_index: int
    instruction_id: int
    value: DebugValue
    delegate_debug_id_int: int = -1
    delegate_debug_id_str: str | None = None
    name: str | None = None

    @property
    def delegate_id(self):
        """The delegate debug id (int or str), or None for an instruction's own output."""
        if self.delegate_debug_id_int != -1:
            return self.delegate_debug_id_int
        return self.delegate_debug_id_str


@dataclass
class AllocationEvent:
    allocator_id: int
    allocation_size: int


@dataclass
class RunData:
    """One block of events: ``"Default"`` (load) or ``"Execute"`` (one execute)."""

    name: str
    events: list = field(default_factory=list)
    bundled_input_index: int = -1
    allocators: list = field(default_factory=list)
    debug_buffer: object = None  # the dump's buffer, for resolving tensors

    @property
    def profile_events(self) -> list:
        return [e for e in self.events if isinstance(e, ProfileEvent)]

    @property
    def debug_events(self) -> list:
        return [e for e in self.events if isinstance(e, DebugEvent)]

    def instruction_outputs(self) -> dict:
        """``{(chain, instruction): [value, ...]}`` of the instructions' own debug events
        (not program outputs, not inside delegates), tensors read from the buffer."""
        out = {}
        for i, e in enumerate(self.events):
            if isinstance(e, DebugEvent) and e.delegate_id is None and not e.value.output:
                out.setdefault((e.chain_index, e.instruction_id), []).append(
                    e.value.resolve(self.debug_buffer, f"{self.name} event {i}"))
        return out

    def delegate_outputs(self) -> dict:
        """``{(chain, instruction, delegate debug id): [value, ...]}`` logged inside delegates."""
        out = {}
        for i, e in enumerate(self.events):
            if isinstance(e, DebugEvent) and e.delegate_id is not None:
                out.setdefault((e.chain_index, e.instruction_id, e.delegate_id), []).append(
                    e.value.resolve(self.debug_buffer, f"{self.name} event {i}"))
        return out

    def program_outputs(self) -> list:
        return [e.value.resolve(self.debug_buffer, f"{self.name} output {i}")
                for i, e in enumerate(e for e in self.events
                                      if isinstance(e, DebugEvent) and e.value.output)]


class ETDump:
    """A parsed or recorded ETDump and its debug buffer (``bytes`` or None)."""

    def __init__(self, runs=None, debug_buffer=None, version: int = 0):
        self.version = version
        self.runs = list(runs or [])
        self.debug_buffer = debug_buffer
        for r in self.runs:
            r.debug_buffer = debug_buffer

    @property
    def executions(self) -> list:
        """The ``"Execute"`` runs, in order."""
        return [r for r in self.runs if r.name == "Execute"]

    # ---- read ----------------------------------------------------------------------
    @classmethod
    def load(cls, path, debug_buffer=None) -> "ETDump":
        """Parse an ``.etdp`` file; ``debug_buffer`` is a path or bytes (or None)."""
        data = _read_file(path, "ETDump")
        if isinstance(debug_buffer, (str, os.PathLike)):
            debug_buffer = _read_file(debug_buffer, "debug buffer")
        return cls.from_bytes(data, debug_buffer, name=str(path))

    @classmethod
    def from_bytes(cls, data, debug_buffer=None, name: str = "<bytes>") -> "ETDump":
        data = bytes(data)
        what = f"ETDump {name}"
        if len(data) < 12:
            raise _bad(f"{what}: {len(data)} bytes is too short for a size-prefixed flatbuffer")
        size = int.from_bytes(data[:4], "little")
        if size + 4 > len(data) or size < 8:
            raise _bad(f"{what}: the size prefix says {size} bytes follow, the file has "
                       f"{len(data) - 4}")
        if data[8:12] != ETDUMP_IDENTIFIER:
            raise _bad(f"{what}: file identifier {data[8:12]!r} at byte 8, expected "
                       f"{ETDUMP_IDENTIFIER!r} (is this an .etdp file?)")
        r = Reader(memoryview(data)[4:4 + size], ErrorCode.InvalidArgument, what)
        root = read_table(r.root(ETDUMP_IDENTIFIER), "ETDump", ETDUMP_SCHEMA)
        runs = [_run(rd, f"{what} run {i}") for i, rd in enumerate(root.run_data or [])]
        return cls(runs, debug_buffer, root.version)

    # ---- write ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The size-prefixed ``ED00`` flatbuffer, as ExecuTorch's ETDumpGen writes it."""
        obj = {"version": self.version, "run_data": [_run_dict(r) for r in self.runs]}
        return fbwriter.build(ETDUMP_SCHEMA, "ETDump", obj, ETDUMP_IDENTIFIER,
                              size_prefixed=True)

    def save(self, path, debug_buffer_path=None) -> None:
        """Write the dump (and, if a path is given, the debug buffer)."""
        _write_file(path, self.to_bytes())
        if debug_buffer_path is not None:
            _write_file(debug_buffer_path, bytes(self.debug_buffer or b""))

    def __repr__(self):
        names = [r.name for r in self.runs]
        return f"ETDump({len(names)} runs: {names})"


def _bad(msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"malformed {msg}")


def _read_file(path, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ExecuTorchError(ErrorCode.AccessFailed, f"cannot read {what} {path}: {e}") from e


def _write_file(path, data: bytes) -> None:
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise ExecuTorchError(ErrorCode.AccessFailed, f"cannot write {path}: {e}") from e


# ---- flatbuffer nodes -> dataclasses -------------------------------------------------
def _run(rd, where: str) -> RunData:
    events = []
    for i, ev in enumerate(rd.events or []):
        w = f"{where} event {i}"
        set_ = [x for x in (ev.profile_event, ev.allocation_event, ev.debug_event) if x is not None]
        if len(set_) != 1:
            raise _bad(f"{w}: {len(set_)} of profile/allocation/debug event are set, expected 1")
        if ev.profile_event is not None:
            p = ev.profile_event
            meta = p.delegate_debug_metadata
            events.append(ProfileEvent(p.name, p.chain_index, p.instruction_id, p.start_time,
                                       p.end_time, p.delegate_debug_id_int,
                                       p.delegate_debug_id_str,
                                       None if meta is None else bytes(meta)))
        elif ev.allocation_event is not None:
            a = ev.allocation_event
            events.append(AllocationEvent(a.allocator_id, a.allocation_size))
        else:
            d = ev.debug_event
            events.append(DebugEvent(_signed(d.chain_index), d.instruction_id,
                                     _value(d.debug_entry, w), d.delegate_debug_id_int,
                                     d.delegate_debug_id_str, d.name))
    allocators = [a.name for a in rd.allocators or []]
    return RunData(rd.name or "", events, rd.bundled_input_index, allocators)


def _tensor(t) -> TensorRef:
    return TensorRef(t.scalar_type, tuple(t.sizes or ()), tuple(t.strides or ()), t.offset)


def _value(v, where: str) -> DebugValue:
    if v is None:
        return DebugValue("Null")
    kind = VALUE_TYPES.get(v.val)
    if kind is None:
        raise _bad(f"{where}: unknown value type {v.val}")
    member = {"Tensor": v.tensor, "TensorList": v.tensor_list, "Int": v.int_value,
              "Float": v.float_value, "Double": v.double_value, "Bool": v.bool_value}.get(kind)
    if kind not in ("Null", "String") and member is None:
        raise _bad(f"{where}: value of type {kind} without its {kind} table")
    output = bool(v.output is not None and v.output.bool_val)
    if kind == "Tensor":
        return DebugValue(kind, _tensor(member), output)
    if kind == "TensorList":
        return DebugValue(kind, [_tensor(t) for t in member.tensors or []], output)
    val = {"Int": "int_val", "Float": "float_val", "Double": "double_val", "Bool": "bool_val"}
    return DebugValue(kind, getattr(member, val[kind]) if kind in val else None, output)


# ---- dataclasses -> dicts for the writer ---------------------------------------------
def _tensor_dict(t: TensorRef) -> dict:
    return {"scalar_type": t.scalar_type, "sizes": list(t.sizes), "strides": list(t.strides),
            "offset": t.offset}


def _value_dict(v: DebugValue) -> dict:
    d = {"val": VALUE_CODES[v.kind]}
    if v.kind == "Tensor":
        d["tensor"] = _tensor_dict(v.value)
    elif v.kind == "TensorList":
        d["tensor_list"] = {"tensors": [_tensor_dict(t) for t in v.value]}
    elif v.kind == "Int":
        d["int_value"] = {"int_val": int(v.value)}
    elif v.kind == "Float":
        d["float_value"] = {"float_val": float(v.value)}
    elif v.kind == "Double":
        d["double_value"] = {"double_val": float(v.value)}
    elif v.kind == "Bool":
        d["bool_value"] = {"bool_val": bool(v.value)}
    if v.output:
        d["output"] = {"bool_val": True}
    return d


def _event_dict(e) -> dict:
    if isinstance(e, ProfileEvent):
        return {"profile_event": {
            "name": e.name, "chain_index": e.chain_index, "instruction_id": e.instruction_id,
            "delegate_debug_id_int": e.delegate_debug_id_int,
            "delegate_debug_id_str": e.delegate_debug_id_str,
            "delegate_debug_metadata": e.delegate_debug_metadata,
            "start_time": e.start_time, "end_time": e.end_time}}
    if isinstance(e, DebugEvent):
        return {"debug_event": {
            "chain_index": e.chain_index % _U64, "instruction_id": e.instruction_id,
            "debug_entry": _value_dict(e.value), "delegate_debug_id_int": e.delegate_debug_id_int,
            "delegate_debug_id_str": e.delegate_debug_id_str, "name": e.name}}
    return {"allocation_event": {"allocator_id": e.allocator_id,
                                 "allocation_size": e.allocation_size}}


def _run_dict(r: RunData) -> dict:
    return {"name": r.name, "bundled_input_index": r.bundled_input_index,
            "allocators": [{"name": a} for a in r.allocators] or None,
            "events": [_event_dict(e) for e in r.events]}
