"""Fuzz the loader and executor with mutated real programs.

Every case must either load and run, or raise ExecuTorchError: never a crash,
a hang, or another exception type. 10,000 seeded cases over three small
programs made by ExecuTorch's exporter (a plain MLP, a torch.cond program with
jumps and moves, and a dynamic-shape MLP with prim ops).
"""
from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from pyruntime import ExecuTorchError, Program, TensorInfo
from tests.programs.fixtures import get_fixture

SOURCES = ("mlp", "cond", "mlp_dynamic")
CASES = 10_000
CHUNKS = 20
MAX_INPUT_BYTES = 1 << 24


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    n = len(b)
    program_size = struct.unpack_from("<Q", b, 16)[0] if b[8:12] == b"eh00" else n
    program_size = min(program_size, n)
    kind = rng.randrange(6)
    if kind == 0:  # truncation
        return bytes(b[:rng.randrange(n)])
    if kind == 1:  # bit flips anywhere
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 2:  # random bytes inside the flatbuffer
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(program_size)
            for j in range(i, min(i + rng.randint(1, 8), n)):
                b[j] = rng.randrange(256)
    elif kind == 3:  # bad header fields: program size, segment base, segment data size
        if b[8:12] == b"eh00":
            field = rng.choice((16, 24, 32))
            old = struct.unpack_from("<Q", b, field)[0]
            new = rng.choice((0, old + rng.randint(1, 4096), max(0, old - rng.randint(1, 256)),
                              rng.getrandbits(64), n, n + 1))
            struct.pack_into("<Q", b, field, new)
        else:
            b[rng.randrange(8)] = rng.randrange(256)
    elif kind == 4:  # an aligned u32 in the flatbuffer set to an offset-like or huge value
        i = rng.randrange(max(1, program_size // 4)) * 4
        if i + 4 <= n:
            struct.pack_into("<I", b, i, rng.choice((0, 1, 0xFFFFFFFF, rng.getrandbits(32),
                                                     rng.randrange(2 * n))))
    else:  # small integer perturbation of a byte (indices, sizes, enums)
        i = rng.randrange(program_size)
        b[i] = (b[i] + rng.choice((-2, -1, 1, 2, 16, 128))) % 256
    return bytes(b)


def _inputs_for(meta, valid):
    args = []
    for i, info in enumerate(meta.inputs):
        if isinstance(info, TensorInfo):
            if info.nbytes > MAX_INPUT_BYTES:
                return None
            v = valid[i] if i < len(valid) else None
            if isinstance(v, np.ndarray) and v.dtype == info.dtype and v.shape == info.sizes:
                args.append(v)
            else:
                args.append(np.ones(info.sizes, info.dtype))
        else:
            args.append(info.value)
    return args


def _run_case(data: bytes, valid_inputs) -> str:
    try:
        prog = Program(data)
        ran = "loaded"
        for name in prog.method_names:
            meta = prog.metadata(name)
            m = prog.load_method(name, max_planned_bytes=1 << 26, max_instructions=10_000)
            args = _inputs_for(meta, valid_inputs)
            if args is not None:
                m.execute(args)
                ran = "ran"
        return ran
    except ExecuTorchError:
        return "error"


@pytest.fixture(scope="module")
def sources():
    out = []
    for name in SOURCES:
        fx = get_fixture(name)
        out.append((fx.pte_path.read_bytes(), fx.calls[0]))
    return out


def test_unmutated_sources_run(sources):
    for data, inputs in sources:
        assert _run_case(data, inputs) == "ran"


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_fuzz_chunk(sources, chunk):
    per = CASES // CHUNKS
    outcomes = {"error": 0, "loaded": 0, "ran": 0}
    for case in range(chunk * per, (chunk + 1) * per):
        rng = random.Random(case)
        data, inputs = sources[case % len(sources)]
        mutated = _mutate(data, rng)
        try:
            outcomes[_run_case(mutated, inputs)] += 1
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"case {case}: {type(e).__name__} escaped: {e}")
    assert sum(outcomes.values()) == per
    # Mutations hit both fatal and harmless places: some cases must be rejected and
    # some must still run, or the harness is not exercising the loader.
    assert outcomes["error"] > 0 and outcomes["ran"] > 0, outcomes
