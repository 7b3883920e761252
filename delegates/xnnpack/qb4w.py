"""XNNPACK delegates of 8da4w linears, run by pyruntime's own kernels under ``math="fast"``.

ExecuTorch lowers a linear with int8 dynamically quantized activations and 4-bit
blockwise weights (``8da4w``) to an XNNPACK subgraph of ``Convert`` (fp32 -> qdint8, one
scale per row) and ``FullyConnected`` (qdint8 x qbint4 -> fp32). Such a graph is
recognized here (``linears``) and, on the fast tier with ``math="fast"``, bound to
``kernels.quantized.typed_qb4w`` instead of the XNNPACK runtime: the same integers,
float rounding in another order (that module's doc). Any other graph, node, flag,
output clamp or value type declines, and XNNPACK runs it as before.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.xnnpack.blob import BACKEND, XnnBlob, constant_bytes
from pyruntime.delegates.xnnpack.graph import EXTERNAL_INPUT, EXTERNAL_OUTPUT, block_scale_bits
from pyruntime.delegates.xnnpack.schema import XNODE_TYPES

_F32, _QDINT8, _QBINT4 = 1, 9, 10  # XNN datatypes as serialized
_PER_TOKEN, _PER_GROUP = 3, 4  # quant_params union members
_NO_ID = 0xFFFFFFFF


@dataclass
class Linear:
    """One FullyConnected of the graph, in the kernel's terms. Its input and output are
    external values (``input`` / ``output``: their external ids) or values of the graph
    (None): the output of linear ``source`` of the graph's list, and an output another
    linear reads."""
    input: int | None
    output: int | None
    weight: np.ndarray | None  # [n, k] int8 in [-8, 7] (None once packed into tiles)
    scales: np.ndarray | None  # [n, k // group] float32 (the same)
    bias: np.ndarray | None  # [n] float32
    group: int
    source: int = -1  # the linear whose output is this one's input (-1: an external input)
    lo: float = -math.inf  # the output clamp
    hi: float = math.inf

    def __post_init__(self):
        self.n, self.k = self.weight.shape  # (kept when the weights are dropped for their tiles)


@dataclass
class _Value:
    datatype: int
    dims: tuple
    flags: int
    external: int
    quant: tuple  # (union code, params) or (0, None)
    constant: int  # constant buffer index (0: none)


def _values(g) -> dict:
    out = {}
    for v in g.xvalues or []:
        code, m = v.xvalue_union
        if m is None:
            return {}
        tv, qp = (m, (0, None)) if code == 1 else (m.tensor_value, m.quant_params or (0, None))
        if tv is None or getattr(tv, "dq_datatype", 0):
            return {}
        out[tv.id_out] = _Value(tv.datatype, tuple(tv.dims or ()), tv.flags, tv.external_id, qp,
                                tv.constant_buffer_idx)
    return out


def linears(xb: XnnBlob, named_data) -> list[Linear] | None:
    """The graph's linears when it holds nothing but per-row dynamic quantization
    (``Convert``) of fp32 values feeding qbint4 FullyConnected nodes with fp32 outputs
    (no flags; output channels a multiple of 8, a block size a multiple of 4): each
    Convert reads an external input or a FullyConnected's output; every external output
    is a FullyConnected's. Else None."""
    from pyruntime.kernels.quantized.typed_qb4w import TILE, bf16_to_f32, unpack_int4

    g = xb.graph
    vals = _values(g)
    if not vals or not g.xnodes:
        return None
    quantized = {}  # qdint8 value id -> the fp32 value id it quantizes
    made = {}  # fp32 value id -> index of the linear that writes it
    out = []
    for i, node in enumerate(g.xnodes):
        code, n = node.xnode_union
        name = XNODE_TYPES.get(code, ("?",))[0]
        if n is None or getattr(n, "flags", 0):
            return None
        mm = node.output_min_max
        lo, hi = (-math.inf, math.inf) if mm is None else (mm.output_min, mm.output_max)
        if name == "Convert":
            a, b = vals.get(n.input_id), vals.get(n.output_id)
            if a is None or b is None or a.datatype != _F32 or mm is not None \
                    or not (a.flags == EXTERNAL_INPUT or n.input_id in made) \
                    or b.datatype != _QDINT8 or b.quant[0] != _PER_TOKEN or b.flags \
                    or b.quant[1].num_nonbatch_dims != 1 or a.dims != b.dims:
                return None
            quantized[n.output_id] = n.input_id
        elif name == "FullyConnected":
            x, w, y = vals.get(n.input1_id), vals.get(n.filter_id), vals.get(n.output_id)
            if n.input1_id not in quantized or w is None or y is None or w.flags \
                    or w.datatype != _QBINT4 or w.quant[0] != _PER_GROUP or len(w.dims) != 2 \
                    or y.datatype != _F32 or y.flags not in (0, EXTERNAL_OUTPUT) or y.constant \
                    or n.output_id in made or not w.constant or not lo <= hi:
                return None
            q = w.quant[1]
            N, K = w.dims
            gs = q.group_size
            if q.channel_dim != 0 or N % TILE or gs <= 0 or gs % 4 or K % gs \
                    or x.dims[-1:] != (K,) or y.dims[-1:] != (N,) \
                    or x.dims[:-1] != y.dims[:-1]:
                return None
            where = f"{BACKEND} node {i} (FullyConnected) filter"
            data = constant_bytes(xb, w.constant, named_data, where)
            if data is None or len(data) < N * K // 2:
                return None
            scales = bf16_to_f32(block_scale_bits(xb, named_data, q, N * K // gs, where)
                                 [:N * K // gs]).reshape(N, K // gs)
            bias = None
            if n.bias_id != _NO_ID:
                bv = vals.get(n.bias_id)
                if bv is None or bv.datatype != _F32 or bv.dims != (N,) or not bv.constant \
                        or bv.flags:
                    return None
                raw = constant_bytes(xb, bv.constant, named_data, f"{BACKEND} node {i} bias")
                if raw is None or len(raw) < 4 * N:
                    return None
                bias = np.frombuffer(raw[:4 * N].tobytes(), np.float32)
            src = quantized[n.input1_id]
            v = vals[src]
            out.append(Linear(v.external if v.flags == EXTERNAL_INPUT else None,
                              y.external if y.flags == EXTERNAL_OUTPUT else None,
                              unpack_int4(data, N, K), scales, bias, gs,
                              made.get(src, -1), lo, hi))
            made[n.output_id] = len(out) - 1
        else:
            return None
    produced = {lin.output for lin in out if lin.output is not None}
    outputs = {v.external for v in vals.values() if v.flags == EXTERNAL_OUTPUT}
    if not out or produced != outputs:
        return None
    return out


def _fp32_rows(t, k) -> bool:
    return isinstance(t, ETensor) and t.dtype == np.float32 and t.ndim >= 1 \
        and t.shape[-1] == k and t.is_contiguous()


def _tiles(q, lin: Linear):
    """(weights, block sums, scales, 4-bit?) in the kernel's layout: int8 weight tiles, or
    4-bit ones from ``NIBBLE_WEIGHTS`` weights on."""
    wt, ws, st = q.pack_tiles(lin.weight, lin.scales)
    nib = lin.n * lin.k >= q.NIBBLE_WEIGHTS
    return (q.nibble_tiles(wt) if nib else wt), ws, st, nib


def bind(h, ctx, args):
    """The compiled entry running handle ``h``'s linears on our kernels, ``(*call,
    explain)`` (``call``: (fn, block), or split into parts over the output channels,
    ``BindContext.bind_split``, when no linear reads another's output), or None (not
    such a graph, or arguments it does not model)."""
    from pyruntime.kernels.quantized import typed_qb4w as q

    packed = getattr(h, "qb4w", None)
    if packed is None:
        lins = linears(h.blob, h.named_data) if h.blob is not None else None
        packed = h.qb4w = [] if lins is None else [(lin, _tiles(q, lin)) for lin in lins]
        for lin, _ in packed:  # the tiles hold them now
            lin.weight = lin.scales = None
    if not packed:
        return None
    rows = 1
    for lin, _ in packed:
        n, k = lin.n, lin.k
        x = None if lin.input is None else args[lin.input]
        y = None if lin.output is None else args[lin.output]
        if (x is not None and not _fp32_rows(x, k)) or (y is not None and (
                not _fp32_rows(y, n) or y.storage is None or not y.storage.flags.writeable)):
            return None
        if x is not None:
            rows = max(rows, max(x.capacity, x.numel) // k)
    compiled = q.kernel()  # (KernelNotReady: the plan runs the call meanwhile, binds later)
    s = np.zeros(q.HEAD + q.REC * len(packed), np.int64)
    s[q.S_LEN], s[q.S_COUNT], s[q.S_ROWS], s[q.S_FAILED] = len(s), len(packed), rows, -1
    scratch = {}  # input -> its quantized rows, 1 / scales, zero points: quantized once a call
    outbuf = {}  # linear -> its internal output buffer (rows x n float32)
    for i, (lin, (wt, ws, st, nib)) in enumerate(packed):
        r = q.HEAD + q.REC * i
        n, k = lin.n, lin.k
        key = ("in", lin.input) if lin.input is not None else ("made", lin.source)
        s[r + q.R_FIRST] = key not in scratch
        if key not in scratch:
            scratch[key] = (ctx.buffer(rows * k), ctx.buffer(4 * rows), ctx.buffer(4 * rows))
        s[r + q.R_XD], s[r + q.R_INV], s[r + q.R_ZU] = scratch[key]
        root = i
        while packed[root][0].input is None:
            root = packed[root][0].source
        s[r + q.R_ROOT] = root
        if lin.input is not None:
            s[r + q.R_IN] = ctx.desc(args[lin.input])
        else:
            src = packed[lin.source][0]
            s[r + q.R_SRC] = lin.source
            s[r + q.R_IN] = 0 if src.output is None else ctx.desc(args[src.output])
            s[r + q.R_INBUF] = outbuf.get(lin.source, 0)
        if lin.output is not None:
            s[r + q.R_OUT] = ctx.desc(args[lin.output])
        else:
            s[r + q.R_OUTBUF] = outbuf[i] = ctx.buffer(4 * rows * n)
        s[r + q.R_W], s[r + q.R_WS], s[r + q.R_SC] = wt.ctypes.data, ws.ctypes.data, \
            st.ctypes.data
        s[r + q.R_BIAS] = 0 if lin.bias is None else lin.bias.ctypes.data
        s[r + q.R_LO], s[r + q.R_HI] = ctx.f64(lin.lo), ctx.f64(lin.hi)
        s[r + q.R_N], s[r + q.R_K], s[r + q.R_GS] = n, k, lin.group
        s[r + q.R_NIB] = nib
    ctx.scratch += [s, packed]
    a = int(s.ctypes.data)
    tiles = min(lin.n for lin, _ in packed) // q.TILE
    n = min(ctx.threads, tiles)
    if n > 1 and all(lin.input is not None for lin, _ in packed):
        # parts over every linear's output tiles (typed_qb4w.qb4w_linears)
        call = ctx.bind_split(compiled, [a, 0, 0], [[a, k, n] for k in range(n)],
                              [a, q.PART_PREP, n])
    else:
        call = ctx.bind(compiled, [a, 0, 0])
    ctx.pick_fast()
    return (*call, lambda status: explain(s, packed, status))


_WHY = {1: "its input's last dimension is not the weight's {k} input channels",
        2: "its input has more rows than when the method was loaded ({rows})",
        3: "its output cannot be resized to the input's rows x {n}",
        4: "a tensor has no data"}


def explain(s: np.ndarray, packed, status: int) -> str:
    from pyruntime.kernels.quantized import typed_qb4w as q

    i, why = int(s[q.S_FAILED]), int(s[q.S_WHY])
    if not 0 <= i < len(packed):
        return f"{BACKEND} (math=\"fast\" int4 linears): status {status}"
    lin = packed[i][0]
    n, k = lin.n, lin.k
    msg = _WHY.get(why, "status {status}").format(k=k, n=n, rows=int(s[q.S_ROWS]),
                                                   status=status)
    src = f"input {lin.input}" if lin.input is not None else f"linear {lin.source}'s output"
    dst = f"output {lin.output}" if lin.output is not None else "an internal value"
    return (f"{BACKEND} (math=\"fast\" int4 linears): linear {i} ({src} -> {dst}, "
            f"[{n}, {k}] weight): {msg}")
