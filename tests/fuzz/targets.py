"""Fuzz targets: which real bytes are mutated, and how a mutated copy is used.

A target has sources (programs made by ExecuTorch's exporter: the cached test
fixtures), a mutator (the whole program, or only the bytes of a delegate
payload inside it) and a runner (load on a tier, then execute every method).
``run_case`` returns the outcome: ``ran``, ``loaded`` (inputs too large to
run), ``rejected`` (ExecuTorchError). Anything else escaping is a finding.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from tests.fuzz.mutators import mutate_inputs, mutate_program, mutate_region

MAX_INPUT_BYTES = 1 << 24


@dataclass(frozen=True)
class Target:
    name: str
    fixtures: tuple  # ("programs" | "xnnpack", fixture name) pairs
    tier: str
    region: str | None = None  # "delegate": only the first delegate payload; "inputs": the
    # program stays intact and the inputs given to execute are mutated
    description: str = ""
    case_timeout: float = 60.0  # seconds before a case counts as a hang
    env: tuple = ()  # (name, value) pairs set while a case runs


# Dynamic shapes (mlp_dynamic), control flow (cond: jumps and moves), a KV cache
# (llama_kv: mutable buffers, index_put), quantized ops (quant_cnn), plain (mlp).
_PROGRAMS = tuple(("programs", n) for n in ("mlp", "cond", "mlp_dynamic", "llama_kv",
                                            "quant_cnn"))
TARGETS = {t.name: t for t in (
    Target("reference", _PROGRAMS, "reference",
           description="whole-program mutations, reference tier"),
    Target("fast", _PROGRAMS, "fast",
           description="whole-program mutations, compiled tier (GIL released, raw pointers)"),
    # another dtype or flag can select a kernel variant no test compiled yet: a cold
    # compile, minutes on a busy machine, is not a hang
    Target("semantic", _PROGRAMS, "fast", region="plan", case_timeout=900.0,
           description="parsed plans edited: schema-valid values that do not fit each other"),
    Target("inputs", _PROGRAMS + (("xnnpack", "mlp_dynamic"),), "fast", region="inputs",
           description="hostile execute() inputs: wrong shapes, ranks, dtypes, extreme values"),
    Target("etdump", (("programs", "mlp"), ("programs", "cond")), "reference", region="etdump",
           description="ETDump files (.etdp) our tracer wrote, read back with their buffer"),
    Target("bundled", (("programs", "mlp"), ("programs", "mlp_dynamic")), "reference",
           region="bundled", description="bundled programs (.bpte), loaded and verified"),
    Target("xnnpack", (("xnnpack", "mlp"), ("xnnpack", "partial"), ("xnnpack", "quant_cnn"),
                       ("xnnpack", "zoo")), "fast", region="delegate",
           description="XNNPACK delegate payloads (XH00 header, XNNGraph, constants)"),
    Target("coreml", (("coreml", "mlp"), ("coreml", "cnn_bn"), ("coreml", "llama_kv_int8"),
                      ("coreml", "mlp_multi")), "reference", region="delegate",
           description="CoreML delegate payloads (flattened directory, ML Program protobuf, "
                       "MIL blob weights, CMJR references) run by the MIL interpreter"),
    # Qualcomm's own parsers and simulator crash on some corrupted context binaries (as
    # under ExecuTorch's runtime): each new binary is opened in a child process first
    Target("qnn", (("qnn", "mlp_int8"), ("qnn", "cnn_bn_fp16"), ("qnn", "mlp_u8_io"),
                   ("qnn", "two_methods")), "reference", region="delegate",
           env=(("PYRUNTIME_QNN_VERIFY", "1"), ("PYRUNTIME_QNN_VERIFY_TIMEOUT", "20")),
           description="QNN delegate payloads (header, context binary) on the HTP simulator"),
    # the same cases with every QNN call in a worker process (delegates/qnn/isolated.py): a
    # binary that crashes the library must come back as an ExecuTorchError
    Target("qnn_isolated", (("qnn", "mlp_int8"), ("qnn", "cnn_bn_fp16"), ("qnn", "mlp_u8_io"),
                            ("qnn", "two_methods")), "reference", region="delegate",
           env=(("PYRUNTIME_QNN_ISOLATE", "1"), ("PYRUNTIME_QNN_ISOLATE_TIMEOUT", "20")),
           description="QNN delegate payloads, every QNN call in a worker process"),
    Target("ethosu", (("ethosu", "mlp_u55"), ("ethosu", "cnn_u55"), ("ethosu", "mlp_u85"),
                      ("ethosu", "cnn_u85")), "reference",
           region="delegate",
           description="Ethos-U delegate payloads (vela_bin_stream blocks, COP1 driver header, "
                       "U55 and U85 register command streams, MLW and fast-decoder weights) "
                       "run on our NPU model"),
    Target("native", (("native", "cnn_bn"), ("native", "attention"), ("native", "zoo2"),
                      ("native", "mlp_dynamic")), "fast", region="delegate",
           description="NativeBackend delegate payloads (NPTG fx graphs: named arguments, "
                       "value references, tensor metadata) run on the portable kernels"),
    Target("mlx", (("mlx", "cnn_bn"), ("mlx", "attention"), ("mlx", "zoo"), ("mlx", "state")),
           "fast", region="delegate",
           description="MLX delegate payloads (MLX0 header, MLXGraph slots and instruction "
                       "chains) run with MLX's semantics in numpy"),
    Target("vulkan", (("vulkan", "mlp"), ("vulkan", "cnn_bn"), ("vulkan", "quant_cnn"),
                      ("vulkan", "llama_kv")), "fast", region="delegate",
           description="Vulkan delegate payloads (VH00 header, VkGraph) run on a Vulkan "
                       "device (lavapipe)"),
)}
# The harness's own check (tests/test_fuzz.py): case 3 mod 7 aborts the process,
# 5 mod 7 raises a non-ExecuTorchError, 6 mod 7 never returns, the rest are
# rejected. Not run by default.
SELFTEST = Target("selftest", (), "reference", description="harness self-test")


@dataclass
class Source:
    data: bytes
    inputs: list
    region: tuple | None  # (start, end) of the bytes to mutate, or None for all


def get_target(name: str) -> Target:
    return SELFTEST if name == "selftest" else TARGETS[name]


def _fixture(kind: str, name: str):
    if kind == "programs":
        from tests.programs.fixtures import get_fixture
    elif kind == "coreml":
        from tests.delegates.coreml_fixtures import get_fixture
    elif kind == "qnn":
        from tests.delegates.qnn_fixtures import get_fixture
    elif kind == "vulkan":
        from tests.delegates.vulkan_fixtures import get_fixture
    elif kind == "ethosu":
        from tests.delegates.ethosu_fixtures import get_fixture
    elif kind in ("native", "mlx"):
        from tests.delegates.graph_fixtures import get_fixture

        return get_fixture(name, kind)
    else:
        from tests.delegates.xnnpack_fixtures import get_fixture
    return get_fixture(name)


def _delegate_region(data: bytes) -> tuple:
    from pyruntime import Program

    prog = Program(data)
    plan = prog._pte.program.execution_plan[0]
    blob = prog._pte.delegate_blob(plan.delegates[0].processed, "fuzz source")
    raw = bytes(np.asarray(blob).reshape(-1).view(np.uint8))
    start = data.find(raw)
    if start < 0:
        raise RuntimeError("delegate payload not found in the program bytes")
    return start, start + len(raw)


def load_sources(target: Target) -> list:
    if target is SELFTEST:
        return [Source(b"", [], None)]
    out = []
    for kind, name in target.fixtures:
        fx = _fixture(kind, name)
        data = fx.pte_path.read_bytes()
        if target.region == "etdump":
            out.append(_etdump_source(data, fx.calls))
            continue
        if target.region == "bundled":
            from pyruntime.exporter.bundled import serialize_bundled_program

            cases = [(c, e) for c, e in zip(fx.calls, fx.expected)]
            out.append(Source(serialize_bundled_program(data, {fx.method: cases}), [], None))
            continue
        region = _delegate_region(data) if target.region == "delegate" else None
        out.append(Source(data, fx.calls[0], region))
    return out


def _etdump_source(pte: bytes, calls) -> Source:
    """A dump of every call of the program, with intermediates; the debug buffer rides
    along as the source's one "input"."""
    from pyruntime import Program
    from pyruntime.devtools import EventTracer

    tracer = EventTracer()
    m = tracer.load_method(Program(pte), tier="reference")
    for c in calls:
        m.execute(c)
    dump = tracer.etdump()
    return Source(dump.to_bytes(), [dump.debug_buffer], None)


def prepare(target: Target, source: Source, case: int) -> tuple:
    """Case ``case`` of ``target``: the (mutated) program bytes and the inputs (for the
    ``plan`` target: the original bytes, with the case number appended to the inputs;
    ``run_case`` edits the parsed plan with it)."""
    if not source.data:
        return str(case).encode(), []  # the self-test's "mutation": the case number
    rng = random.Random(case)
    if target.region == "plan":
        return source.data, source.inputs + [("plan-case", case)]
    if target.region == "inputs":
        return source.data, mutate_inputs(source.inputs, rng)
    if target.region in ("etdump", "bundled"):
        if rng.randrange(8) == 0:  # truncated
            return source.data[:rng.randrange(len(source.data))], source.inputs
        return mutate_region(source.data, 0, len(source.data), rng), source.inputs
    if source.region is None:
        return mutate_program(source.data, rng), source.inputs
    return mutate_region(source.data, *source.region, rng), source.inputs


def inputs_for(meta, valid):
    """The fixture's inputs where they still fit the (mutated) signature, else ones."""
    from pyruntime import TensorInfo

    args = []
    for i, info in enumerate(meta.inputs):
        if isinstance(info, TensorInfo):
            if info.nbytes > MAX_INPUT_BYTES:
                return None
            v = valid[i] if i < len(valid) else None
            if isinstance(v, np.ndarray) and v.dtype == info.dtype and v.shape == info.sizes:
                args.append(v.copy())
            else:
                args.append(np.ones(info.sizes, info.dtype))
        else:
            args.append(info.value)
    return args


def run_case(target: Target, data: bytes, valid_inputs) -> str:
    """Load ``data`` and run each method once; the outcome name (see module doc).
    For the ``inputs`` target, ``valid_inputs`` are passed to execute as they are."""
    if not target.env:
        return _run_case(target, data, valid_inputs)
    import os

    saved = {k: os.environ.get(k) for k, _ in target.env}
    os.environ.update(dict(target.env))
    try:
        return _run_case(target, data, valid_inputs)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_case(target: Target, data: bytes, valid_inputs) -> str:
    from pyruntime import ExecuTorchError, Program

    if target is SELFTEST:
        return _selftest(data)
    if target.region == "etdump":
        return _run_etdump(data, valid_inputs[0])
    if target.region == "bundled":
        return _run_bundled(target, data)
    plan_case = None
    if valid_inputs and isinstance(valid_inputs[-1], tuple) and valid_inputs[-1][0] == "plan-case":
        valid_inputs, plan_case = valid_inputs[:-1], valid_inputs[-1][1]
    try:
        prog = Program(data)
        if plan_case is not None:
            from tests.fuzz.mutators import mutate_plan

            rng = random.Random(plan_case)
            for plan in prog._plans.values():
                mutate_plan(plan, rng)
        ran = "loaded"
        for name in prog.method_names:
            meta = prog.metadata(name)
            m = prog.load_method(name, tier=target.tier, max_planned_bytes=1 << 26,
                                 max_instructions=10_000)
            args = list(valid_inputs) if target.region == "inputs" else \
                inputs_for(meta, valid_inputs)
            if args is not None:
                m.execute(args)
                ran = "ran"
        return ran
    except ExecuTorchError:
        return "rejected"


def _run_etdump(data: bytes, debug_buffer: bytes) -> str:
    from pyruntime import ExecuTorchError
    from pyruntime.devtools import ETDump

    try:
        dump = ETDump.from_bytes(data, debug_buffer)
        for run in dump.runs:
            run.instruction_outputs()
            run.delegate_outputs()
            run.program_outputs()
        dump.to_bytes()
        return "ran"
    except ExecuTorchError:
        return "rejected"


def _run_bundled(target: Target, data: bytes) -> str:
    from pyruntime import ExecuTorchError
    from pyruntime.devtools import load_bundled_program

    try:
        bp = load_bundled_program(data)
        bp.verify(tier=target.tier)  # a failing comparison is a result, not an error
        return "ran"
    except ExecuTorchError:
        return "rejected"


def _selftest(data: bytes) -> str:
    import os

    case = int(data or b"0")
    if case % 7 == 3:
        os.abort()
    if case % 7 == 5:
        raise ValueError(f"self-test exception at case {case}")
    if case % 7 == 6:
        import time

        time.sleep(3600)
    return "rejected"
