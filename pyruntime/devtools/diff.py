"""Per-instruction comparison of two ETDumps: find the first operator that diverges.

``diff`` re-runs a program on the inputs with an ``EventTracer`` (our run is the
reference) and compares every instruction's logged outputs with another dump's
debug events: one recorded on a device by the C++ runtime, by another runtime,
or by pyruntime itself on another tier or another version of the ``.pte``. A
delegated region compares at its boundaries (the DelegateCall's arguments),
and inside where both dumps hold the delegate's node values.

A tensor is within tolerance when ``max|other - ref| <= atol + rtol * max|ref|``
(NaN equals NaN, infinities must match); integer and bool tensors with the
default tolerances must be equal. SNR is ``10 log10(sum ref^2 / sum err^2)`` dB.

>>> from pyruntime.devtools import diff
>>> # report = diff("model.pte", [[x]], "device.etdp", "device.bin")
>>> # print(report.table()); report.first_divergence; report.to_json()
"""
from __future__ import annotations

import difflib
import math
from dataclasses import asdict, dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.devtools.etdump import ETDump, ProfileEvent, _read_file

ATOL, RTOL = 1e-4, 1e-3


@dataclass
class Row:
    """One compared instruction (or delegate node) of one execute."""

    run: int
    chain: int
    instruction: int
    op: str
    delegate_id: object
    values: int
    max_abs_err: float
    snr_db: float
    ok: bool
    note: str = ""

    @property
    def label(self) -> str:
        s = f"{self.instruction}" if not self.chain else f"{self.chain}:{self.instruction}"
        return s if self.delegate_id is None else f"{s}/{self.delegate_id}"


class DiffReport:
    """The rows of a comparison; ``ok`` when every compared value is within tolerance."""

    def __init__(self, rows, atol, rtol, missing=0):
        self.rows, self.atol, self.rtol, self.missing = rows, atol, rtol, missing

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def first_divergence(self) -> Row | None:
        return next((r for r in self.rows if not r.ok), None)

    def table(self) -> str:
        """The per-instruction table and a verdict line."""
        runs = len({r.run for r in self.rows})
        w = min(60, max([len(r.op) for r in self.rows] + [10]))
        head = f"{'run ' if runs > 1 else ''}{'instr':>8}  {'op':<{w}} {'n':>2}  " \
               f"{'max abs err':>11}  {'SNR dB':>7}  status"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            snr = "inf" if math.isinf(r.snr_db) else f"{r.snr_db:.1f}"
            status = "ok" if r.ok else "DIVERGED"
            lines.append(f"{f'{r.run:>3} ' if runs > 1 else ''}{r.label:>8}  {r.op[:w]:<{w}} "
                         f"{r.values:>2}  {r.max_abs_err:>11.3e}  {snr:>7}  {status}"
                         f"{'  ' + r.note if r.note else ''}")
        lines.append(self.summary())
        return "\n".join(lines)

    def summary(self) -> str:
        n = len(self.rows)
        extra = f"; {self.missing} not in the other dump" if self.missing else ""
        f = self.first_divergence
        if f is None:
            return f"all {n} compared within atol={self.atol:g}, rtol={self.rtol:g}{extra}"
        bad = sum(not r.ok for r in self.rows)
        return (f"first divergence: run {f.run} instruction {f.label} ({f.op}): max abs err "
                f"{f.max_abs_err:.3e}{', ' + f.note if f.note else ''}; {bad} of {n} compared "
                f"diverge (atol={self.atol:g}, rtol={self.rtol:g}){extra}")

    def to_json(self) -> dict:
        def row(r):
            d = asdict(r)
            d["snr_db"] = None if math.isinf(r.snr_db) or math.isnan(r.snr_db) else r.snr_db
            d["max_abs_err"] = None if math.isnan(r.max_abs_err) else r.max_abs_err
            return d
        f = self.first_divergence
        return {"ok": self.ok, "atol": self.atol, "rtol": self.rtol, "missing": self.missing,
                "first_divergence": None if f is None else row(f),
                "rows": [row(r) for r in self.rows]}

    def plot(self, path) -> None:
        """Per-instruction max abs error (log scale), divergences in red."""
        from pyruntime.devtools.plots import plot_diff
        plot_diff(self, path)


# ---- comparing values ----------------------------------------------------------------
def compare_values(ref, other, atol=ATOL, rtol=RTOL) -> tuple[float, float, bool, str]:
    """(max abs err, SNR dB, within tolerance, note) of two logged values."""
    if isinstance(ref, list) or isinstance(other, list):
        if not (isinstance(ref, list) and isinstance(other, list)) or len(ref) != len(other):
            return math.nan, -math.inf, False, "tensor list lengths differ"
        res = [compare_values(a, b, atol, rtol) for a, b in zip(ref, other)]
        if not res:
            return 0.0, math.inf, True, ""
        err = max(r[0] for r in res)
        return err, min(r[1] for r in res), all(r[2] for r in res), \
            next((r[3] for r in res if r[3]), "")
    if not isinstance(ref, np.ndarray) or not isinstance(other, np.ndarray):
        same = ref == other
        return (0.0 if same else math.nan), (math.inf if same else -math.inf), bool(same), \
            "" if same else f"{ref!r} vs {other!r}"
    if ref.shape != other.shape:
        return math.nan, -math.inf, False, f"shape {list(other.shape)}, expected {list(ref.shape)}"
    if ref.dtype != other.dtype:
        return math.nan, -math.inf, False, f"dtype {other.dtype}, expected {ref.dtype}"
    if ref.size == 0:
        return 0.0, math.inf, True, ""
    a, b = ref.astype(np.float64), other.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(a - b))
    err = np.where(np.isnan(err), np.inf, err)
    finite = np.isfinite(a)
    scale = float(np.max(np.abs(a[finite]))) if finite.any() else 0.0
    max_err = float(err.max())
    noise = float(np.sum(np.square(err[finite & np.isfinite(err)])))
    signal = float(np.sum(np.square(a[finite])))
    if max_err == 0.0:
        snr = math.inf
    elif noise == 0.0 or not np.isfinite(max_err):
        snr = -math.inf
    else:
        snr = 10 * math.log10(signal / noise) if signal > 0 else -math.inf
    return max_err, snr, bool(max_err <= atol + rtol * scale), ""


# ---- pairing instructions ------------------------------------------------------------
def _op_names(run) -> dict:
    """(chain, instruction) -> op name, from a run's profile events."""
    names = {}
    for e in run.events:
        if isinstance(e, ProfileEvent) and e.chain_index >= 0 and e.name \
                and e.name != "OPERATOR_CALL":
            n = e.name[len("native_call_"):] if e.name.startswith("native_call_") else e.name
            names.setdefault((e.chain_index, e.instruction_id), n.split("::")[-1])
    return names


def _pairs(ref_keys, other_keys, ref_ops, other_ops) -> list:
    """Pairs of (ref key, other key): by instruction id when both dumps run the same
    instruction sequence, else aligned on the op-name sequence (another .pte version)."""
    a = [ref_ops.get(k, "?") for k in ref_keys]
    b = [other_ops.get(k, "?") for k in other_keys]
    same = sum(x == y for x, y in zip(a, b))
    if ref_keys == other_keys and (not other_ops or same >= 0.9 * len(a)):
        return list(zip(ref_keys, other_keys))
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    pairs = []
    for blk in sm.get_matching_blocks():
        pairs += [(ref_keys[blk.a + i], other_keys[blk.b + i]) for i in range(blk.size)]
    return pairs


def diff_dumps(ref: ETDump, other: ETDump, ops: dict | None = None, atol=ATOL,
               rtol=RTOL) -> DiffReport:
    """Compare ``other`` against ``ref`` run by run (the ``Execute`` blocks in order).

    ``ops`` maps ``(chain, instruction)`` to op names (default: from ``ref``'s
    profile events).
    """
    runs_a, runs_b = ref.executions, other.executions
    if len(runs_a) != len(runs_b):
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"the dumps hold {len(runs_a)} and {len(runs_b)} executes; "
                              "compare the same number of input sets")
    rows, missing = [], 0
    for k, (ra, rb) in enumerate(zip(runs_a, runs_b)):
        names_a, names_b = _op_names(ra), _op_names(rb)
        shown = {**names_a, **(ops or {})}
        va, vb = ra.instruction_outputs(), rb.instruction_outputs()
        pairs = dict(_pairs(list(va), list(vb), names_a, names_b))
        missing += len(va) - len(pairs)
        da, db = ra.delegate_outputs(), rb.delegate_outputs()
        for key in va:
            if key in pairs:
                rows.append(_row(k, key, None, shown, va[key], vb[pairs[key]], atol, rtol))
            for dk in (d for d in da if d[:2] == key):
                other_key = (*pairs[key][:2], dk[2]) if key in pairs else None
                if other_key in db:
                    rows.append(_row(k, key, dk[2], shown, da[dk], db[other_key], atol, rtol))
    return DiffReport(rows, atol, rtol, missing)


def _row(k, key, delegate_id, names, ref_vals, other_vals, atol, rtol) -> Row:
    op = names.get(key, "?")
    op = op[len("aten::"):] if op.startswith("aten::") else op
    if delegate_id is not None:
        op = f"{op} node"
    if len(ref_vals) != len(other_vals):
        return Row(k, key[0], key[1], op, delegate_id, len(ref_vals), math.nan, -math.inf,
                   False, f"{len(other_vals)} values, expected {len(ref_vals)}")
    err, snr, ok, note = compare_values(ref_vals, other_vals, atol, rtol)
    return Row(k, key[0], key[1], op, delegate_id, len(ref_vals), err, snr, ok, note)


def diff(program, inputs, etdump, debug_buffer=None, *, method: str = "forward",
         tier: str = "fast", atol=ATOL, rtol=RTOL, **load_kwargs) -> DiffReport:
    """Run ``program`` (path or Program) on ``inputs`` (a list of input lists, one per
    execute, or an ``.npz`` path) and compare with ``etdump`` (ETDump or path).

    >>> # report = diff("model.pte", "in.npz", "device.etdp", "device.bin", atol=1e-3)
    >>> # report.ok, report.first_divergence
    """
    from pyruntime.devtools.inputs import read_input_sets
    from pyruntime.devtools.tracer import EventTracer
    from pyruntime.runtime import Runtime

    prog = program if hasattr(program, "load_method") else Runtime.get().load_program(program)
    if not isinstance(etdump, ETDump):
        etdump = ETDump.load(etdump, debug_buffer)
    elif debug_buffer is not None:
        etdump = ETDump(etdump.runs, debug_buffer if isinstance(debug_buffer, (bytes, bytearray))
                        else _read_file(debug_buffer, "debug buffer"), etdump.version)
    if isinstance(inputs, (str, bytes)) or hasattr(inputs, "__fspath__"):
        inputs = read_input_sets(inputs, prog.metadata(method))
    tracer = EventTracer(intermediates=True)
    m = tracer.load_method(prog, method, tier=tier, **load_kwargs)
    for s in inputs:
        m.execute(s)
    ops = {(ins.chain, ins.src_pc): ins.name for ins in m.flat}
    return diff_dumps(tracer.etdump(), etdump, ops, atol, rtol)
