"""Profiles from an ETDump: Chrome trace events (Perfetto, chrome://tracing) and a
per-operator time table.

Works on any dump: ours (``EventTracer``) or one a C++ runtime wrote. One
trace slice per instruction (named after its op; kernels, delegate calls and
control instructions), nested in its ``Method::execute``; events a delegate
logged from inside (XNNPACK's per-operator timings in a C++ dump) nest in
their delegate call. Executes are laid end to end on one track.

>>> from pyruntime.devtools import ETDump, chrome_trace, op_times, format_op_times
>>> # dump = ETDump.load("run.etdp")
>>> # json.dump(chrome_trace(dump), open("trace.json", "w"))   # open in ui.perfetto.dev
>>> # print(format_op_times(op_times(dump)))
"""
from __future__ import annotations

from dataclasses import dataclass

from pyruntime.devtools.etdump import ProfileEvent

_CLOSING = {"OPERATOR_CALL": "kernel", "DELEGATE_CALL": "delegate call", "JF_CALL": "control",
            "MOVE_CALL": "control", "FREE_CALL": "control"}


def _short(name: str) -> str:
    for prefix in ("native_call_", "aten::"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def _instruction_slices(run, ops=None) -> list:
    """(name, category, start, end, args) per executed instruction (an instruction run
    several times by a loop gives several slices) and per delegate-internal event."""
    out, pending = [], None
    for e in run.events:
        if not isinstance(e, ProfileEvent) or e.chain_index < 0 or e.name == "Method::step":
            continue
        key = (e.chain_index, e.instruction_id)
        args = {"chain": e.chain_index, "instruction": e.instruction_id}
        if e.name is None or e.delegate_debug_id_int != -1:  # logged inside a delegate
            if e.delegate_debug_id_int != -1:
                args["delegate_debug_id"] = e.delegate_debug_id_int
            did = e.name or e.delegate_debug_id_str or str(e.delegate_debug_id_int)
            out.append((did, "delegate", e.start_time, e.end_time, args))
        elif e.name in _CLOSING:
            name = ops.get(key) if ops else None
            if name is None:
                name = pending[1] if pending and pending[0] == key else e.name
            out.append((_short(name), _CLOSING[e.name], e.start_time, e.end_time, args))
            pending = None
        else:  # native_call_<op> (or a custom kernel's own name), before its OPERATOR_CALL
            pending = (key, e.name)
    return out


def chrome_trace(dump, ops=None, title: str = "pyruntime") -> dict:
    """The dump as a Chrome trace event document (``{"traceEvents": [...]}``).

    ``ops`` maps ``(chain, instruction)`` to names shown instead of the event names.
    """
    events = [{"ph": "M", "pid": 1, "tid": 1, "name": "process_name", "args": {"name": title}},
              {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "execute"}}]
    starts = [e.start_time for r in dump.runs for e in r.events if isinstance(e, ProfileEvent)]
    t0 = min(starts, default=0)
    us = lambda t: (t - t0) / 1000.0  # noqa: E731  ns ticks -> microseconds

    def slice_(name, cat, start, end, args):
        events.append({"ph": "X", "pid": 1, "tid": 1, "name": name, "cat": cat, "ts": us(start),
                       "dur": max(end - start, 0) / 1000.0, "args": args})

    k = 0
    for r in dump.runs:
        if r.name != "Execute":
            for e in r.profile_events:
                slice_(e.name or "?", "load", e.start_time, e.end_time, {})
            continue
        for e in r.profile_events:
            if e.name == "Method::execute":
                slice_(f"execute #{k}", "execute", e.start_time, e.end_time, {"run": k})
        for name, cat, start, end, args in _instruction_slices(r, ops):
            slice_(name, cat, start, end, {**args, "run": k})
        k += 1
    return {"traceEvents": events, "displayTimeUnit": "ms"}


@dataclass
class OpTime:
    op: str
    calls: int
    total_ms: float
    percent: float

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.calls if self.calls else 0.0


def op_times(dump, ops=None) -> list[OpTime]:
    """Time per operator over every execute of the dump, largest first."""
    acc: dict[str, list] = {}
    for r in dump.executions:
        for name, cat, start, end, _ in _instruction_slices(r, ops):
            if cat == "delegate":
                continue  # inside a delegate call: already counted in it
            a = acc.setdefault(name, [0, 0])
            a[0] += 1
            a[1] += end - start
    total = sum(v[1] for v in acc.values()) or 1
    rows = [OpTime(op, n, t / 1e6, 100.0 * t / total) for op, (n, t) in acc.items()]
    return sorted(rows, key=lambda r: -r.total_ms)


def format_op_times(rows: list[OpTime]) -> str:
    head = f"{'op':<48} {'calls':>6} {'total ms':>10} {'mean ms':>9} {'%':>6}"
    lines = [head, "-" * len(head)]
    lines += [f"{r.op[:48]:<48} {r.calls:>6} {r.total_ms:>10.3f} {r.mean_ms:>9.4f} "
              f"{r.percent:>6.1f}" for r in rows]
    total = sum(r.total_ms for r in rows)
    lines.append(f"{'total':<48} {sum(r.calls for r in rows):>6} {total:>10.3f}")
    return "\n".join(lines)
