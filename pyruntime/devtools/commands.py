"""The devtools subcommands of ``pyruntime`` (``verify``, ``diff``, ``trace``) and the
options they add to ``run`` and ``inspect``.

    pyruntime run model.pte --inputs in.npz --etdump run.etdp --debug-buffer run.bin
    pyruntime verify model.bpte [--rtol R --atol A]
    pyruntime diff model.pte --inputs in.npz --etdump device.etdp --debug-buffer device.bin
    pyruntime trace model.pte --inputs in.npz --out trace.json [--plot ops.png]
    pyruntime inspect model.pte --memory-plot plan.png

Exit codes of ``verify`` and ``diff``: 0 all pass, 1 a case fails / an instruction
diverges, 2 the files could not be used (the error is printed).
"""
from __future__ import annotations

import json
import sys

from pyruntime.cython_ext.errors import ExecuTorchError
from pyruntime.method import TIERS

COMMANDS = ("verify", "diff", "trace")


# ---- options added to existing subcommands ---------------------------------------------
def add_run_arguments(p) -> None:
    p.add_argument("--tier", default="fast", choices=TIERS)
    p.add_argument("--etdump", help="write an ETDump (.etdp) of every execute")
    p.add_argument("--debug-buffer", help="with --etdump: log every instruction's outputs "
                                          "and write their bytes to this file")
    p.add_argument("--debug-buffer-size", type=int, default=None,
                   help="fail (as a device would) if the debug buffer needs more bytes")


def add_inspect_arguments(p) -> None:
    p.add_argument("--memory-plot", metavar="PNG", help="draw the memory plan of each method")
    p.add_argument("--method", default=None, help="with --memory-plot: only this method")


def memory_plots(path, data_path, png, method=None, out=None) -> None:
    out = out or sys.stdout
    from pyruntime.devtools.plots import plot_memory
    from pyruntime.runtime import Runtime

    prog = Runtime.get().load_program(path, data_path=data_path)
    names = [method] if method else prog.method_names
    for i, name in enumerate(names):
        target = png if len(names) == 1 else png.replace(".png", "") + f"_{name}.png"
        plot_memory(prog, name, target)
        out.write(f"wrote memory plan of {name!r} to {target}\n")


def make_tracer(etdump, debug_buffer, debug_buffer_size):
    if not etdump:
        if debug_buffer or debug_buffer_size is not None:
            from pyruntime.cython_ext.errors import ErrorCode
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  "--debug-buffer and --debug-buffer-size need --etdump")
        return None
    from pyruntime.devtools.tracer import EventTracer
    return EventTracer(intermediates=debug_buffer is not None,
                       debug_buffer_size=debug_buffer_size)


# ---- new subcommands -------------------------------------------------------------------
def add_parsers(sub) -> None:
    pv = sub.add_parser("verify", help="run every test case of a bundled program (.bpte)")
    pv.add_argument("file")
    pv.add_argument("--rtol", type=float, default=1e-3)
    pv.add_argument("--atol", type=float, default=1e-5)
    pv.add_argument("--tier", default="fast", choices=TIERS)
    pv.add_argument("--data", help=".ptd external data file")
    pd = sub.add_parser("diff", help="re-run a program and compare every instruction with an "
                                     "ETDump (device, other runtime, other tier)")
    pd.add_argument("file")
    pd.add_argument("--inputs", required=True, help=".npz: set{k}_arg{i} (or arr_0, ...)")
    pd.add_argument("--etdump", required=True)
    pd.add_argument("--debug-buffer", required=True)
    pd.add_argument("--method", default="forward")
    pd.add_argument("--tier", default="fast", choices=TIERS,
                    help="tier of our run (default fast)")
    pd.add_argument("--atol", type=float, default=1e-4)
    pd.add_argument("--rtol", type=float, default=1e-3)
    pd.add_argument("--json", nargs="?", const="-", metavar="FILE",
                    help="print (or write to FILE) the comparison as JSON")
    pd.add_argument("--plot", metavar="PNG", help="bar chart of the error per instruction")
    pd.add_argument("--data", help=".ptd external data file")
    pt = sub.add_parser("trace", help="profile a run: Chrome trace JSON and time per operator")
    pt.add_argument("file")
    pt.add_argument("--inputs", help=".npz: set{k}_arg{i} (or arr_0, ...); default random")
    pt.add_argument("--out", help="write the Chrome trace (Perfetto) JSON here")
    pt.add_argument("--plot", metavar="PNG", help="bar chart of the time per operator")
    pt.add_argument("--etdump", help="also write the ETDump (.etdp)")
    pt.add_argument("--method", default="forward")
    pt.add_argument("--tier", default="fast", choices=TIERS)
    pt.add_argument("--iters", type=int, default=1, help="executes per input set")
    pt.add_argument("--seed", type=int, default=0)
    pt.add_argument("--data", help=".ptd external data file")


def cli(args, out=None) -> int:
    out = out or sys.stdout
    try:
        return {"verify": _verify, "diff": _diff, "trace": _trace}[args.cmd](args, out)
    except ExecuTorchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _verify(args, out) -> int:
    from pyruntime.devtools.bundled import load_bundled_program

    bp = load_bundled_program(args.file, data_path=args.data)
    results = bp.verify(rtol=args.rtol, atol=args.atol, tier=args.tier)
    for r in results:
        out.write(f"{r}\n")
    failed = sum(not r.passed for r in results)
    out.write(f"{len(results) - failed} of {len(results)} test cases passed "
              f"(rtol={args.rtol:g}, atol={args.atol:g})\n")
    return 1 if failed or not results else 0


def _diff(args, out) -> int:
    from pyruntime.devtools.diff import diff
    from pyruntime.runtime import Runtime

    prog = Runtime.get().load_program(args.file, data_path=args.data)
    report = diff(prog, args.inputs, args.etdump, args.debug_buffer, method=args.method,
                  tier=args.tier, atol=args.atol, rtol=args.rtol)
    if args.json == "-":
        out.write(json.dumps(report.to_json(), indent=1) + "\n")
    else:
        out.write(report.table() + "\n")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report.to_json(), f, indent=1)
    if args.plot:
        report.plot(args.plot)
        if args.json != "-":
            out.write(f"wrote {args.plot}\n")
    return 0 if report.ok else 1


def _trace(args, out) -> int:
    from pyruntime.devtools.trace import chrome_trace, format_op_times, op_times
    from pyruntime.devtools.tracer import EventTracer
    from pyruntime.runtime import Runtime

    prog = Runtime.get().load_program(args.file, data_path=args.data)
    meta = prog.metadata(args.method)
    if args.inputs:
        from pyruntime.devtools.inputs import read_input_sets
        sets = read_input_sets(args.inputs, meta)
    else:
        import numpy as np

        from pyruntime.devtools.inputs import random_inputs
        sets = [random_inputs(meta, np.random.default_rng(args.seed))]
    tracer = EventTracer(intermediates=False)
    m = tracer.load_method(prog, args.method, tier=args.tier)
    for s in sets:
        for _ in range(max(1, args.iters)):
            m.execute(s)
    dump = tracer.etdump()
    ops = {(ins.chain, ins.src_pc): ins.name for ins in m.flat}
    rows = op_times(dump, ops)
    out.write(format_op_times(rows) + "\n")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(chrome_trace(dump, ops, title=f"pyruntime {args.file}"), f)
        out.write(f"wrote {args.out} (open in https://ui.perfetto.dev)\n")
    if args.etdump:
        dump.save(args.etdump)
        out.write(f"wrote {args.etdump}\n")
    if args.plot:
        from pyruntime.devtools.plots import plot_op_times
        plot_op_times(rows, args.plot)
        out.write(f"wrote {args.plot}\n")
    return 0
