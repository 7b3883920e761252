"""``pyruntime`` command line: inspect and run .pte programs.

    pyruntime inspect model.pte
    pyruntime run model.pte --inputs in.npz --out out.npz
    pyruntime run model.pte            # random inputs of the declared shapes
    pyruntime bench model.pte          # pyruntime vs executorch.runtime, same inputs
    pyruntime latency model.pte --rate 500 --vs-executorch   # p50/p99/jitter/misses
    pyruntime run model.pte --inputs in.npz --etdump run.etdp --debug-buffer run.bin
    pyruntime verify model.bpte | diff ... | trace ...   # see pyruntime.devtools.commands
    pyruntime generate model.pte --tokenizer tokenizer.json --prompt TEXT   # see pyruntime.llm
    pyruntime transcribe whisper.pte --tokenizer DIR --audio a.wav --preprocessor pre.pte
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from pyruntime.cython_ext.errors import ExecuTorchError
from pyruntime.instructions import Op
from pyruntime.program import TensorInfo
from pyruntime.runtime import Runtime
from pyruntime.mathmode import MODES, default_math, set_default_math
from pyruntime.method import TIERS


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def inspect_program(path, data_path=None, out=None) -> None:
    out = sys.stdout if out is None else out
    prog = Runtime.get().load_program(path, data_path=data_path)
    w = out.write
    w(f"program: {path}\n")
    w(f"  methods: {', '.join(prog.method_names)}\n")
    w(f"  constant bytes: {prog.constant_bytes} ({_fmt_bytes(prog.constant_bytes)})\n")
    segs = prog.segments
    w(f"  segments: {len(segs)}\n")
    for i, (off, size) in enumerate(segs):
        w(f"    [{i}] offset {off}, {size} bytes\n")
    if prog.named_data_keys:
        w(f"  named data keys: {len(prog.named_data_keys)}\n")
    for name in prog.method_names:
        m = prog.metadata(name)
        w(f"\nmethod {name!r}\n")
        w(f"  inputs ({m.num_inputs()}):\n")
        for i, info in enumerate(m.inputs):
            w(f"    {i}: {info}{_planned(info)}\n")
        w(f"  outputs ({m.num_outputs()}):\n")
        for i, info in enumerate(m.outputs):
            w(f"    {i}: {info}{_planned(info)}\n")
        total = sum(m.planned_buffer_sizes)
        w(f"  planned memory: {total} bytes in {len(m.planned_buffer_sizes)} buffer(s)\n")
        for i, s in enumerate(m.planned_buffer_sizes):
            w(f"    buffer {i + 1}: {s} bytes ({_fmt_bytes(s)})\n")
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(m.instruction_kinds.items()))
        w(f"  instructions: {m.instruction_count} ({kinds})\n")
        if m.backends:
            w(f"  delegates: {', '.join(m.backends)}\n")
            _describe_delegates(prog, name, w)
        w(f"  operators ({len(m.operator_counts)}):\n")
        for op, n in sorted(m.operator_counts.items(), key=lambda kv: (-kv[1], kv[0])):
            w(f"    {n:5d}  {op}\n")


def _describe_delegates(prog, method, w) -> None:
    """Per delegate: its payload size and compile specs, why it cannot run here if it cannot,
    and the ops inside it for backends with a ``describe_payload(payload)`` hook."""
    from collections import Counter

    from pyruntime.delegates import backend_registry

    plan = prog._plan(method)
    for d, bd in enumerate(plan.delegates or []):
        bid = bd.id or ""
        try:
            blob = prog._pte.delegate_blob(bd.processed, f"delegate {d}")
        except ExecuTorchError as e:
            w(f"    [{d}] {bid}: {e}\n")
            continue
        specs = ", ".join(f"{cs.key}={_spec_value(cs.value)}" for cs in bd.compile_specs or [])
        w(f"    [{d}] {bid}: payload {len(blob)} bytes; compile specs: {specs or 'none'}\n")
        why = backend_registry.where_it_runs(bid)
        if why is not None:
            w(f"        not runnable here: {why}\n")
            continue
        backend = backend_registry._backends[bid]
        if not hasattr(backend, "describe_payload"):
            continue
        try:
            ops = backend.describe_payload(blob)
        except ExecuTorchError as e:
            w(f"        {e}\n")
            continue
        w(f"        {len(ops)} ops\n")
        for op, n in sorted(Counter(ops).items(), key=lambda kv: (-kv[1], kv[0])):
            w(f"      {n:5d}  {op}\n")


def _spec_value(value) -> str:
    """A compile spec's value: its text when short and printable, else its size."""
    raw = bytes(value) if value is not None else b""
    try:
        text = raw.decode("utf-8")
        if len(text) <= 48 and text.isprintable():
            return repr(text)
    except UnicodeDecodeError:
        pass
    return f"<{len(raw)} bytes>"


def inspect_ops(path, data_path=None, out=None) -> None:
    """Per operator of each method: which tier runs each of its calls (compiled or
    reference), or that no kernel exists, decided the way load_method decides it."""
    out = sys.stdout if out is None else out
    from pyruntime.kernels.registry import closest_names, has_kernel

    prog = Runtime.get().load_program(path, data_path=data_path)
    w = out.write
    for name in prog.method_names:
        meta = prog.metadata(name)
        missing = sorted(op for op in meta.operator_counts if not has_kernel(op))
        w(f"method {name!r}: operators by tier (math: {default_math()})\n")
        compiled = {}
        delegated = [0, 0, 0]  # delegate calls: all, compiled entries, on fast-math kernels
        if not missing:
            m = prog.load_method(name, tier="fast")
            fp = m._fast
            kinds = fp.loop.kinds()
            fused_into = {p for _, _, members in fp.fusions for p in members}
            # what the loop runs split into parts (intra-op threads)
            runs = {**fp.calls, **({pc: r for pc, r, _ in fp.fusions} if fp.fused else {})}
            for pc, ins in enumerate(fp.flat):
                if ins.op is Op.KERNEL:
                    c = compiled.setdefault(ins.name, [0, 0, 0, 0, 0, 0, 0])
                    # compiled / reference / folded / fused into a convolution / elided
                    c[6 if pc in fp.elided else 3 if pc in fused_into else
                      {0: 0, 3: 2}.get(kinds[pc], 1)] += 1
                    c[4] += pc not in fused_into and kinds[pc] == 0 and len(runs.get(pc, ())) > 2
                    c[5] += pc in fp.fast_math  # a fast-math kernel (math="fast")
                elif ins.op is Op.DELEGATE:
                    delegated[0] += 1
                    delegated[1] += kinds[pc] == 0
                    delegated[2] += pc in fp.fast_math
        for op, n in sorted(meta.operator_counts.items(), key=lambda kv: (-kv[1], kv[0])):
            if op in missing:
                close = ", ".join(closest_names(op))
                w(f"    {n:5d}  {op}: MISSING (closest: {close or 'none'})\n")
            else:
                fast, ref, folded, fused, split, fm, elided = compiled.get(
                    op, (0, n, 0, 0, 0, 0, 0))
                extra = f" ({fm} with fast math)" if fm else ""
                extra += f", {folded} folded into constant views" if folded else ""
                extra += f", {fused} fused into the convolution before" if fused else ""
                extra += f", {elided} elided (the out a view of the input)" if elided else ""
                extra += f", {split} split over {m.threads} threads" if split else ""
                w(f"    {n:5d}  {op}: {fast} compiled, {ref} reference{extra}\n")
        if delegated[0]:
            own = f" ({delegated[2]} on pyruntime's own kernels with fast math)" \
                if delegated[2] else ""
            w(f"    {delegated[0]:5d}  delegate calls: {delegated[1]} compiled, "
              f"{delegated[0] - delegated[1]} through Python{own}\n")
        if missing:
            w(f"  {len(missing)} operator(s) have no kernel: the method cannot load\n")
        else:
            total = sum(v[0] + v[2] + v[3] + v[6] for v in compiled.values())
            w(f"  {total} of {sum(meta.operator_counts.values())} kernel calls compiled "
              "(or folded, elided or fused away)\n")


def inspect_ops_opencl(path, data_path=None, out=None, seed=0) -> None:
    """Per operator of each method: how many of its calls run on the OpenCL device and
    how many on the host (and why), then the bytes one execute (random inputs) copies
    between them."""
    out = sys.stdout if out is None else out
    from collections import Counter

    from pyruntime.devtools.inputs import random_inputs

    prog = Runtime.get().load_program(path, data_path=data_path)
    w = out.write
    for name in prog.method_names:
        m = prog.load_method(name, tier="opencl")
        plan = m._device
        w(f"method {name!r}: operators on {plan.dev.info.name} (tier='opencl')\n")
        per_op = {}
        for p in plan.placement:
            where = "device" if p.where == "device" else \
                f"host ({p.reason}; {plan.host_kernel(p.pc)})"
            per_op.setdefault(p.name, Counter())[where] += 1
        for op, c in sorted(per_op.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
            parts = [f"{c['device']} device"] if c["device"] else []
            parts += [f"{n} {k}" for k, n in sorted(c.items()) if k != "device"]
            w(f"    {sum(c.values()):5d}  {op}: {', '.join(parts)}\n")
        m.execute(random_inputs(prog.metadata(name), np.random.default_rng(seed)))
        st = plan.stats()
        w(f"  {st['on_device']} of {st['on_device'] + st['on_host']} calls on the device; "
          f"constants {st['constant_bytes']} bytes uploaded at load; per execute "
          f"{st['bytes_to_device']} bytes to the device, {st['bytes_to_host']} to the host\n")


def _planned(info) -> str:
    if isinstance(info, TensorInfo):
        return " planned" if info.is_memory_planned else " (caller memory)"
    return ""


def run_program(path, method="forward", inputs=None, out=None, data_path=None, iters=1,
                seed=0, stream=None, tier="fast", etdump=None, debug_buffer=None,
                debug_buffer_size=None) -> list:
    """Run ``method`` on each input set of ``inputs`` (.npz; ``set{k}_arg{i}`` keys for
    several executes, in order) or on random inputs; ``etdump`` records every execute
    (``debug_buffer``: with every instruction's outputs). Returns the last outputs."""
    stream = sys.stdout if stream is None else stream
    from pyruntime.devtools.commands import make_tracer
    from pyruntime.devtools.inputs import random_inputs, read_input_sets, write_output_sets

    t0 = time.perf_counter()
    prog = Runtime.get().load_program(path, data_path=data_path)
    tracer = make_tracer(etdump, debug_buffer, debug_buffer_size)
    m = (tracer.load_method(prog, method, tier=tier) if tracer is not None
         else prog.load_method(method, tier=tier))
    t_load = time.perf_counter() - t0
    meta = prog.metadata(method)
    if inputs:
        sets = read_input_sets(inputs, meta)
    else:
        rng = np.random.default_rng(seed)
        sets = [random_inputs(meta, rng)]
    times, all_outputs = [], []
    for args in sets:
        for _ in range(max(1, iters)):
            t = time.perf_counter()
            outputs = m.execute(args)
            times.append(time.perf_counter() - t)
        all_outputs.append(outputs)
    stream.write(f"loaded {path} method {method!r} in {t_load * 1e3:.2f} ms\n")
    stream.write(f"execute: {np.median(times) * 1e3:.3f} ms (median of {len(times)})\n")
    for k, outputs in enumerate(all_outputs):
        for i, o in enumerate(outputs):
            label = f"set {k} output {i}" if len(all_outputs) > 1 else f"output {i}"
            if isinstance(o, np.ndarray):
                stream.write(f"  {label}: {o.dtype}{list(o.shape)}\n")
            else:
                stream.write(f"  {label}: {o!r}\n")
    if out:
        write_output_sets(out, all_outputs)
        stream.write(f"wrote {out}\n")
    if tracer is not None:
        tracer.save(etdump, debug_buffer)
        stream.write(f"wrote {etdump}" + (f" and {debug_buffer}" if debug_buffer else "") + "\n")
    return all_outputs[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pyruntime", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("inspect", help="methods, inputs/outputs, operators, memory, segments")
    pi.add_argument("file")
    pi.add_argument("--data", help=".ptd external data file")
    pi.add_argument("--ops", action="store_true",
                    help="say which tier (compiled / reference / missing) runs each operator")
    pi.add_argument("--tier", default="fast", choices=("fast", "opencl"),
                    help="with --ops: opencl says which calls run on the device, which on "
                         "the host, and the bytes that cross per execute")
    from pyruntime.devtools import commands as devtools_cli  # verify/diff/trace, run --etdump
    devtools_cli.add_inspect_arguments(pi)
    pr = sub.add_parser("run", help="run a method on inputs from .npz (or random)")
    pr.add_argument("file")
    pr.add_argument("--method", default="forward")
    pr.add_argument("--inputs", help=".npz: arrays in input order (arr_0, arr_1, ...), or "
                                     "set{k}_arg{i} for several executes")
    pr.add_argument("--out", help="write outputs to this .npz")
    pr.add_argument("--data", help=".ptd external data file")
    pr.add_argument("--iters", type=int, default=1)
    pr.add_argument("--seed", type=int, default=0)
    devtools_cli.add_run_arguments(pr)
    devtools_cli.add_parsers(sub)
    pb = sub.add_parser("bench", help="time pyruntime and executorch.runtime side by side")
    pb.add_argument("files", nargs="+")
    pb.add_argument("--method", default="forward")
    pb.add_argument("--tier", default="fast", choices=TIERS)
    pb.add_argument("--rounds", type=int, default=None)
    pb.add_argument("--no-compare", action="store_true", help="do not run executorch.runtime")
    pb.add_argument("--threads", type=int, default=None, help="intra-op threads (default: cores)")
    from pyruntime import batch, latency, serve  # their arguments live with them
    batch.add_parser(sub)
    serve.add_parser(sub)
    latency.add_parser(sub)
    from pyruntime.llm import cli as llm_cli  # `generate`: text from an LLM program
    llm_cli.add_parser(sub)
    from pyruntime.llm import speech_cli  # `transcribe`: text from a speech program
    speech_cli.add_parser(sub)
    from pyruntime import warmup  # `warmup`: compile fast-tier kernels ahead of use
    warmup.add_parser(sub)
    for p in sub.choices.values():  # every command loads a method
        p.add_argument("--math", choices=MODES, default=None,
                       help="exact (default, $PYRUNTIME_MATH): executorch.runtime's numbers bit "
                            "for bit; fast: FMA, reassociated sums, vector transcendentals, "
                            "within 1e-4 x max(1, |ref|)")
    args = ap.parse_args(argv)
    if args.math is not None:  # this process's default, and its workers' (batch, warmup)
        set_default_math(args.math)
        os.environ["PYRUNTIME_MATH"] = args.math
    try:
        if args.cmd == "inspect":
            if args.memory_plot:
                devtools_cli.memory_plots(args.file, args.data, args.memory_plot, args.method)
            elif args.ops and args.tier == "opencl":
                inspect_ops_opencl(args.file, args.data)
            elif args.ops:
                inspect_ops(args.file, args.data)
            else:
                inspect_program(args.file, args.data)
        elif args.cmd in devtools_cli.COMMANDS:
            return devtools_cli.cli(args)
        elif args.cmd == "batch":
            return batch.cli(args)
        elif args.cmd == "serve":
            return serve.cli(args)
        elif args.cmd == "latency":
            return latency.cli(args)
        elif args.cmd == "generate":
            return llm_cli.cli(args)
        elif args.cmd == "transcribe":
            return speech_cli.cli(args)
        elif args.cmd == "warmup":
            return warmup.cli(args)
        elif args.cmd == "bench":
            from pyruntime.bench import bench, report
            for f in args.files:
                report(bench(f, args.method, args.tier, args.rounds, not args.no_compare,
                             threads=args.threads))
        else:
            run_program(args.file, args.method, args.inputs, args.out, args.data, args.iters,
                        args.seed, tier=args.tier, etdump=args.etdump,
                        debug_buffer=args.debug_buffer, debug_buffer_size=args.debug_buffer_size)
    except ExecuTorchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
