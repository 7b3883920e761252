"""Devtools: ETDump in and out, bundled programs, per-instruction diff, traces and plots.

Everything works from a ``.pte`` alone (no ETRecord), on dumps we record and on
dumps a C++ ExecuTorch runtime recorded on a device::

    import pyruntime
    from pyruntime.devtools import EventTracer, ETDump, diff, load_bundled_program

    # record: one "Execute" run per execute, every instruction's outputs
    tracer = EventTracer()                       # EventTracer(intermediates=False): timings only
    method = tracer.load_method(pyruntime.Runtime.get().load_program("model.pte"))
    method.execute([x])
    tracer.save("run.etdp", "run.bin")           # ExecuTorch's Inspector reads these

    # read a device's dump
    dump = ETDump.load("device.etdp", debug_buffer="device.bin")
    dump.executions[0].instruction_outputs()     # {(chain, instruction): [ndarray, ...]}

    # find the first operator where the device diverges from us
    report = diff("model.pte", [[x]], "device.etdp", "device.bin")
    print(report.table()); report.first_divergence

    # bundled programs (.bpte)
    results = load_bundled_program("model.bpte").verify()

    # profiles: Chrome trace JSON (Perfetto) and time per operator
    json.dump(chrome_trace(tracer.etdump()), open("trace.json", "w"))

The same as commands: ``pyruntime run --etdump``, ``verify``, ``diff``, ``trace``,
``inspect --memory-plot`` (see ``pyruntime.devtools.commands``).
"""
from pyruntime.devtools.bundled import BundledProgram, CaseResult, TestCase, load_bundled_program
from pyruntime.devtools.diff import DiffReport, Row, compare_values, diff, diff_dumps
from pyruntime.devtools.etdump import (
    AllocationEvent, DebugEvent, DebugValue, ETDump, ProfileEvent, RunData, TensorRef,
)
from pyruntime.devtools.inputs import read_input_sets, write_output_sets
from pyruntime.devtools.memory import PlannedTensor, memory_plan
from pyruntime.devtools.trace import chrome_trace, format_op_times, op_times
from pyruntime.devtools.tracer import DebugBuffer, EventTracer

__all__ = [
    "EventTracer", "DebugBuffer", "ETDump", "RunData", "ProfileEvent", "DebugEvent",
    "AllocationEvent", "DebugValue", "TensorRef", "diff", "diff_dumps", "DiffReport", "Row",
    "compare_values", "load_bundled_program", "BundledProgram", "TestCase", "CaseResult",
    "chrome_trace", "op_times", "format_op_times", "memory_plan", "PlannedTensor",
    "read_input_sets", "write_output_sets",
]
