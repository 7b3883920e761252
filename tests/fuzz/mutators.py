"""Byte mutators: whole programs (header fields, flatbuffer words) and regions inside them.

Each takes the original bytes and a seeded ``random.Random`` and returns new
bytes; the same seed always gives the same mutation.
"""
from __future__ import annotations

import random
import struct

import numpy as np


def mutate_program(data: bytes, rng: random.Random) -> bytes:
    """One of six mutations of a ``.pte``: truncation, bit flips, random bytes in the
    flatbuffer, extended-header fields, an offset-like u32, a small byte nudge."""
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


def mutate_region(data: bytes, start: int, end: int, rng: random.Random) -> bytes:
    """Mutate only ``data[start:end]`` (a delegate payload or one section of a file),
    keeping its length, so the container around it stays valid and the bytes reach
    the parser of the region itself."""
    b = bytearray(data)
    size = end - start
    if size <= 0:
        return bytes(b)
    kind = rng.randrange(5)
    if kind == 0:  # bit flips
        for _ in range(rng.randint(1, 8)):
            b[start + rng.randrange(size)] ^= 1 << rng.randrange(8)
    elif kind == 1:  # a run of random bytes
        i = start + rng.randrange(size)
        for j in range(i, min(i + rng.randint(1, 16), end)):
            b[j] = rng.randrange(256)
    elif kind == 2:  # an aligned u32 (offsets, sizes, ids, enum values)
        i = start + (rng.randrange(max(1, size // 4)) * 4)
        if i + 4 <= end:
            struct.pack_into("<I", b, i, rng.choice((0, 1, 2, 0xFFFFFFFF, 0x7FFFFFFF,
                                                     rng.getrandbits(32), rng.randrange(2 * size))))
    elif kind == 3:  # a field of the first 64 bytes (headers live there)
        i = start + rng.randrange(min(size, 64))
        b[i] = rng.choice((0, 0xFF, (b[i] + 1) % 256, (b[i] - 1) % 256, rng.randrange(256)))
    else:  # small nudge of one byte
        i = start + rng.randrange(size)
        b[i] = (b[i] + rng.choice((-2, -1, 1, 2, 16, 128))) % 256
    return bytes(b)


_HOSTILE_INTS = (0, -1, 1, 2**31 - 1, -2**31, 2**63 - 1, -2**63, 10**9, -10**9)
_HOSTILE_FLOATS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e38, -1e38, 1e-45)


def mutate_inputs(inputs: list, rng: random.Random) -> list:
    """The inputs of a call with one of them made hostile: a wrong shape or rank, another
    dtype, a list or None instead of a tensor, or extreme values (NaN, inf, huge or
    negative integers such as out-of-range token ids and cache positions)."""
    out = [x.copy() if isinstance(x, np.ndarray) else x for x in inputs]
    if not out:
        return out
    i = rng.randrange(len(out))
    x = out[i]
    kind = rng.randrange(7)
    if not isinstance(x, np.ndarray):
        out[i] = rng.choice((None, "x", 1.5, -1, [1, 2], np.zeros(2, np.float32)))
    elif kind == 0:  # another size in one dim (within or past a dynamic bound)
        if x.ndim:
            shape = list(x.shape)
            d = rng.randrange(x.ndim)
            shape[d] = rng.choice((0, 1, max(0, shape[d] - 1), shape[d] + 1, shape[d] * 2))
            out[i] = np.resize(x, shape).astype(x.dtype)
    elif kind == 1:  # another rank
        out[i] = x.reshape(-1) if x.ndim != 1 else x.reshape(1, -1)
    elif kind == 2:  # another dtype
        out[i] = x.astype(rng.choice((np.float64, np.float16, np.int32, np.int64, np.bool_,
                                      np.uint8)))
    elif kind == 3:  # not a tensor at all
        out[i] = rng.choice((None, 3, 2.5, "tensor", [x], x.tolist()))
    elif kind == 4 and x.size:  # extreme values
        flat = x.reshape(-1)
        for _ in range(rng.randint(1, 4)):
            j = rng.randrange(flat.size)
            v = rng.choice(_HOSTILE_FLOATS if flat.dtype.kind == "f" else _HOSTILE_INTS)
            with np.errstate(all="ignore"):
                flat[j] = np.array(v).astype(flat.dtype) if flat.dtype.kind in "fiu" \
                    else not flat[j]
    elif kind == 5:  # a non-contiguous view of the same shape
        if x.ndim:
            out[i] = np.asfortranarray(x) if x.ndim > 1 else np.repeat(x, 2)[::2]
    elif x.size:  # every element extreme
        fill = rng.choice(_HOSTILE_FLOATS if x.dtype.kind == "f" else _HOSTILE_INTS)
        if x.dtype.kind in "fiu":
            with np.errstate(all="ignore"):
                out[i] = np.full(x.shape, fill).astype(x.dtype)
    return out


_HOSTILE_SIZES = (0, 1, 2, 3, 7, 64, 1 << 20, 1 << 31)


def mutate_plan(plan, rng: random.Random) -> None:
    """Edit a parsed execution plan in place, keeping it well-formed for the loader's
    byte-level checks, so that values which fit their op's schema but not each other
    reach the binders and kernels: another value in a call's argument, a hostile Int,
    Double or Bool, an IntList item, a tensor's sizes, dtype or dim order."""
    values = plan.values or []
    calls = [ins.instr_args[1] for chain in plan.chains or [] for ins in chain.instructions or []
             if ins.instr_args[1] is not None and ins.instr_args[1]._kind == "KernelCall"]
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(4)
        if kind == 0 and calls:  # an argument of a call replaced by another value
            call = rng.choice(calls)
            args = list(call.args or [])
            if args:
                args[rng.randrange(len(args))] = rng.randrange(len(values))
                call.args = args
        elif values:
            ev = rng.choice(values)
            code, v = ev.val
            if v is None:
                continue
            k = v._kind
            if k == "Int":
                v.int_val = rng.choice(_HOSTILE_INTS + (2, 3, 4, -2, 16))
            elif k == "Double":
                v.double_val = rng.choice(_HOSTILE_FLOATS)
            elif k == "Bool":
                v.bool_val = not v.bool_val
            elif k in ("IntList", "TensorList", "OptionalTensorList") and v.items:
                items = list(v.items)
                if rng.randrange(2) and len(items) > 1:
                    del items[rng.randrange(len(items))]
                else:
                    items[rng.randrange(len(items))] = rng.randrange(-1, len(values))
                v.items = items
            elif k == "Tensor":
                which = rng.randrange(3)
                if which == 0 and v.sizes:
                    sizes = list(v.sizes)
                    sizes[rng.randrange(len(sizes))] = rng.choice(_HOSTILE_SIZES)
                    v.sizes = sizes
                elif which == 1:
                    v.scalar_type = rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 11, 15))
                elif v.dim_order and len(v.dim_order) > 1:
                    order = list(v.dim_order)
                    rng.shuffle(order)
                    v.dim_order = order
