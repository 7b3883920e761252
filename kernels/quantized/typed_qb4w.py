"""Linear layers with int8 activations quantized per row at run time and int4 weights
quantized per block (XNNPACK's "qd8-f32-qb4w" fully connected), for ``math="fast"``.

An 8da4w program's linears are XNNPACK delegates (``Convert`` fp32 -> qdint8, then
``FullyConnected`` with a qbint4 weight): two XNNPACK operators per linear, each a
thread-pool dispatch for a few microseconds of work; on the bench Llama at threads=1,
17 calls took 280 of a decode step's 350 us. ``delegates.xnnpack.qb4w`` runs such a delegate on
these kernels instead when a method loads with ``math="fast"``.

The arithmetic, per row x of K floats and output channel n:

* the row's quantization, as XNNPACK computes it (``xnn_qd8_asymmetric_quantization_params``
  and the f32 -> qs8 convert): rmin = min(0, min x), rmax = max(0, max x), scale =
  255 / (rmax - rmin) (1 when equal), zero point z from whichever end loses less,
  clamped to [-128, 127] and rounded to nearest even; q = clamp(rint(x * scale) + z,
  -128, 127), all in float32. The integers are XNNPACK's on every CPU;
* per block b of ``gs`` inputs, the exact integer d_b = sum (q_k - z) * w_nk (w in
  [-8, 7]), as sum (q_k + 128) w_nk - (z + 128) sum w_nk: unsigned x signed byte pairs
  (``pmaddubsw`` where the target has AVX2) added in 16-bit lanes, then 32-bit ones,
  eight output channels per vector (``_tile_dot``);
* y_n = (sum_b float(d_b) * s_nb) * (1 / scale) + bias_n, in that order, no FMA, then
  clamped to the node's output range: the same float operations on every CPU. XNNPACK
  instead adds -z * sum w_k * s_nb as a float term and may fuse its multiply-adds, so
  the two differ by float rounding (relative 1e-7 of the block sums), not in the
  integers.

``reference`` is the numpy form of the same arithmetic.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from pyruntime.cython_ext.abi import D_DATA, D_NDIM, D_NUMEL, D_SIZES
from pyruntime.kernels.fast.deferred import carray, cgutils, intrinsic, njit, types
from pyruntime.kernels.fast.nb import INVALID_ARGUMENT, NOT_SUPPORTED, OK, SPLIT_WHOLE, \
    bits_to_f64, desc, lazy, ptr_like, resize_to

TILE = 8  # output channels per weight tile (one 256-bit vector of int32 lanes)

# ---- numpy: weight layout and the reference ------------------------------------------------


def unpack_int4(nibbles: np.ndarray, n: int, k: int) -> np.ndarray:
    """XNNPACK's qbint4 weight bytes (``[n, k]`` nibbles, element i of the flat order in
    byte i >> 1, the low nibble for even i, zero point 8) as int8 values in [-8, 7]."""
    b = np.asarray(nibbles, np.uint8)[: (n * k + 1) // 2]
    v = np.empty(b.size * 2, np.int8)
    v[0::2] = (b & 0xF).astype(np.int8) - 8
    v[1::2] = (b >> 4).astype(np.int8) - 8
    return v[: n * k].reshape(n, k)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def pack_tiles(w: np.ndarray, scales: np.ndarray):
    """(weights, block sums, scales) in the kernel's layout, per tile of TILE output
    channels: the weights as [k // 4][TILE][4] int8 (the quads ``pmaddubsw`` multiplies
    and ``pmaddwd`` adds), each block's weight sum per channel as [block][TILE] int32,
    the block scales as [block][TILE] float32. ``w``: [n, k] int8; ``scales``: [n, k // gs]."""
    n, k = w.shape
    nb = scales.shape[1]
    t = n // TILE
    wt = np.ascontiguousarray(w.reshape(t, TILE, k // 4, 4).transpose(0, 2, 1, 3))
    sums = w.astype(np.int32).reshape(t, TILE, nb, k // nb).sum(-1).transpose(0, 2, 1)
    st = np.ascontiguousarray(scales.astype(np.float32).reshape(t, TILE, nb).transpose(0, 2, 1))
    return wt.reshape(-1), np.ascontiguousarray(sums, np.int32).reshape(-1), st.reshape(-1)


def nibble_tiles(wt: np.ndarray) -> np.ndarray:
    """``pack_tiles``' int8 weights at 4 bits each, for ``_tile_dot4``: per quad of 32
    values v, byte j = (v[j] + 8) | (v[j + 16] + 8) << 4."""
    q = wt.reshape(-1, 32).astype(np.int16) + 8
    return (q[:, :16] | q[:, 16:] << 4).astype(np.uint8).reshape(-1)


def quant_params(row: np.ndarray):
    """(multiplier, zero point, 1 / multiplier) of one float32 row, as XNNPACK computes
    them."""
    f = np.float32
    rows = row[~np.isnan(row)]
    rmin = min(f(0), f(rows.min())) if rows.size else f(0)
    rmax = max(f(0), f(rows.max())) if rows.size else f(0)
    with np.errstate(over="ignore", invalid="ignore"):
        scale = f(1) if rmin == rmax else f(f(255) / f(rmax - rmin))
        dmin, dmax = f(rmin * scale), f(rmax * scale)
    zp = f(f(-128) - dmin) if f(f(-128) + dmin) + f(f(127) + dmax) > 0 else f(f(127) - dmax)
    zp = zp if f(-128) < zp else f(-128)  # (b < a) ? a : b, NaN -> -128
    zp = f(127) if f(127) < zp else zp
    return scale, int(np.rint(zp)), f(f(1) / scale)


def reference(x: np.ndarray, w: np.ndarray, scales: np.ndarray, bias, gs: int,
              lo=-np.inf, hi=np.inf) -> np.ndarray:
    """y = x @ dequantized(w).T as the kernel computes it; x [..., k] float32, w [n, k]
    int8, scales [n, k // gs] float32, bias [n] or None, then clamped to [lo, hi]."""
    n, k = w.shape
    rows = np.asarray(x, np.float32).reshape(-1, k)
    out = np.empty((rows.shape[0], n), np.float32)
    for t, row in enumerate(rows):
        scale, zp, inv = quant_params(row)
        with np.errstate(invalid="ignore", over="ignore"):
            v = row * scale
        v = np.where(np.isnan(v), np.float32(32767), v)  # (AVX2's min(NaN, 32767))
        q = np.clip(np.rint(np.minimum(v, np.float32(32767))) + zp, -128, 127)
        d = (q - zp).astype(np.int64)
        blocks = (w.astype(np.int64) * d).reshape(n, k // gs, gs).sum(-1)
        acc = np.zeros(n, np.float32)
        for b in range(k // gs):
            acc = acc + blocks[:, b].astype(np.float32) * scales[:, b].astype(np.float32)
        y = acc * inv
        y = y if bias is None else y + np.asarray(bias, np.float32)
        y = np.where(np.float32(lo) < y, y, np.float32(lo))
        out[t] = np.where(np.float32(hi) < y, np.float32(hi), y)
    return out.reshape(*np.shape(x)[:-1], n)


# ---- the tile kernel: eight output channels of one row --------------------------------------


def _has_avx2() -> bool:
    from pyruntime.kernels.fast import objcache

    return "+avx2" in objcache._magic()[2].split(",")


def _tile_dot_of(nibbles):
    """``_tile_dot`` over int8 weight quads (32 bytes each), or with ``nibbles`` over
    ``nibble_tiles``' 4-bit ones (16 bytes each: half the memory traffic, four more
    vector operations per quad to unpack)."""
    @intrinsic
    def tile_dot(typingctx, pw, pu, pws, psc, nb, qpb, zu, pout, inv):
        return _tile_dot_sig(nibbles)
    return tile_dot


def _tile_dot_sig(nibbles):
    """out[0:8] = (sum over blocks b < nb of float(d_b) * sc[b][0:8]) * inv, with the
    exact int32 d_b = sum (u_k - zu) w_k over the block's ``qpb`` quads of inputs: quad j
    of block b is the four uint8 u = q + 128 at ``pu`` + 4 (b qpb + j), times the TILE x 4
    int8 weights at ``pw`` + 32 (b qpb + j); zu = z + 128, so d_b = sum u w - zu * (the
    block's weight sum, at ``pws``). u w pairs (``pmaddubsw``, at most 255 * 8 * 2 = 4080)
    add up in 16-bit lanes for eight quads at most (32640 < 32767: never saturated), then
    in 32-bit lanes (``pmaddwd`` with ones). Float multiply then add, never fused."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64,
                     types.int64, types.int64, types.int64, types.float32)
    v16i8 = ir.VectorType(ir.IntType(8), 16)

    def codegen(context, builder, signature, args):
        pw_, pu_, pws_, psc_, nb_, qpb_, zu_, pout_, inv_ = args
        i8, i16, i32, i64, f32 = (ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64),
                                  ir.FloatType())
        v32i8, v16i16, v32i16 = ir.VectorType(i8, 32), ir.VectorType(i16, 16), \
            ir.VectorType(i16, 32)
        v8i32, v16i32, v8f32 = ir.VectorType(i32, 8), ir.VectorType(i32, 16), \
            ir.VectorType(f32, 8)
        W = builder.inttoptr(pw_, (v16i8 if nibbles else v32i8).as_pointer())
        U = builder.inttoptr(pu_, i32.as_pointer())
        WS = builder.inttoptr(pws_, v8i32.as_pointer())
        S = builder.inttoptr(psc_, v8f32.as_pointer())
        O = builder.inttoptr(pout_, v8f32.as_pointer())

        def splat(vty, v):
            m = ir.Constant(ir.VectorType(i32, vty.count), [ir.Constant(i32, 0)] * vty.count)
            return builder.shuffle_vector(builder.insert_element(
                ir.Constant(vty, ir.Undefined), v, ir.Constant(i32, 0)),
                ir.Constant(vty, ir.Undefined), m)

        def lanes(n, start):
            return ir.Constant(ir.VectorType(i32, n), [ir.Constant(i32, start + 2 * i)
                                                       for i in range(n)])
        if _has_avx2():
            mod = builder.module
            maddubs = cgutils.get_or_insert_function(
                mod, ir.FunctionType(v16i16, [v32i8, v32i8]), "llvm.x86.avx2.pmadd.ub.sw")
            maddwd = cgutils.get_or_insert_function(
                mod, ir.FunctionType(v8i32, [v16i16, v16i16]), "llvm.x86.avx2.pmadd.wd")

            def pairs8(u, w):  # u unsigned, w signed: no saturation at these magnitudes
                return builder.call(maddubs, [u, w])

            def pairs16(a):
                return builder.call(maddwd, [a, ir.Constant(v16i16, [ir.Constant(i16, 1)] * 16)])
        else:  # the same sums in plain vector IR
            def pairs8(u, w):
                m = builder.mul(builder.zext(u, v32i16), builder.sext(w, v32i16))
                und = ir.Constant(v32i16, ir.Undefined)
                return builder.add(builder.shuffle_vector(m, und, lanes(16, 0)),
                                   builder.shuffle_vector(m, und, lanes(16, 1)))

            def pairs16(a):
                e = builder.sext(a, v16i32)
                und = ir.Constant(v16i32, ir.Undefined)
                return builder.add(builder.shuffle_vector(e, und, lanes(8, 0)),
                                   builder.shuffle_vector(e, und, lanes(8, 1)))
        zero16 = ir.Constant(v16i16, [ir.Constant(i16, 0)] * 16)
        accf = cgutils.alloca_once(builder, v8f32)
        acc32 = cgutils.alloca_once(builder, v8i32)
        acc16 = cgutils.alloca_once(builder, v16i16)
        builder.store(ir.Constant(v8f32, [ir.Constant(f32, 0.0)] * 8), accf)
        zus = splat(v8i32, builder.trunc(zu_, i32))
        eight = ir.Constant(i64, 8)
        chunks = builder.sdiv(builder.add(qpb_, ir.Constant(i64, 7)), eight)
        with cgutils.for_range(builder, nb_) as lb:
            builder.store(ir.Constant(v8i32, [ir.Constant(i32, 0)] * 8), acc32)
            base = builder.mul(lb.index, qpb_)
            with cgutils.for_range(builder, chunks) as lc:
                c0 = builder.mul(lc.index, eight)
                rest = builder.sub(qpb_, c0)
                cnt = builder.select(builder.icmp_signed("<", rest, eight), rest, eight)
                first = builder.add(base, c0)

                def quad(idx, acc):
                    u = builder.bitcast(splat(v8i32, builder.load(builder.gep(U, [idx]),
                                                                  align=1)), v32i8)
                    w = builder.load(builder.gep(W, [idx]), align=1)
                    if nibbles:  # byte j: weights j and j + 16 of the quad, each + 8
                        lo = builder.and_(w, ir.Constant(v16i8, [ir.Constant(i8, 15)] * 16))
                        hi = builder.lshr(w, ir.Constant(v16i8, [ir.Constant(i8, 4)] * 16))
                        w = builder.sub(builder.shuffle_vector(lo, hi, ir.Constant(
                            ir.VectorType(i32, 32), [ir.Constant(i32, j) for j in range(32)])),
                            ir.Constant(v32i8, [ir.Constant(i8, 8)] * 32))
                    return builder.add(acc, pairs8(u, w))
                with builder.if_else(builder.icmp_signed("==", cnt, eight)) as (full, part):
                    with full:  # eight quads, unrolled (a loop's overhead was half the time)
                        acc = zero16
                        for j in range(8):
                            acc = quad(builder.add(first, ir.Constant(i64, j)), acc)
                        builder.store(acc, acc16)
                    with part:
                        builder.store(zero16, acc16)
                        with cgutils.for_range(builder, cnt) as lj:
                            builder.store(quad(builder.add(first, lj.index),
                                               builder.load(acc16)), acc16)
                builder.store(builder.add(builder.load(acc32), pairs16(builder.load(acc16))),
                              acc32)
            ws = builder.load(builder.gep(WS, [lb.index]), align=4)
            d = builder.sub(builder.load(acc32), builder.mul(zus, ws))
            sc = builder.load(builder.gep(S, [lb.index]), align=4)
            builder.store(builder.fadd(builder.load(accf),
                                       builder.fmul(builder.sitofp(d, v8f32), sc)), accf)
        builder.store(builder.fmul(builder.load(accf), splat(v8f32, inv_)), O, align=4)
        return context.get_dummy_value()

    return sig, codegen


_tile_dot = _tile_dot_of(False)
_tile_dot4 = _tile_dot_of(True)


# ---- the rows' quantization ------------------------------------------------------------------

_F0, _F1 = np.float32(0), np.float32(1)
_QMIN, _QMAX, _QRANGE = np.float32(-128), np.float32(127), np.float32(255)
_U8 = np.float32(128)


@njit
def quantize_rows(xa, T, K, ua, ia, za):
    """Rows t < T of the float32 [T, K] at ``xa``, quantized as XNNPACK quantizes them
    (module doc): u = q + 128 as uint8 at ``ua`` [T, K], per row 1 / scale at ``ia``
    (float32) and z + 128 at ``za`` (int32). A NaN product maps to q = 127, as XNNPACK's
    AVX2 convert does."""
    x = ptr_like(xa, _F0)
    u = ptr_like(ua, np.uint8(0))
    inv = ptr_like(ia, _F0)
    zs = ptr_like(za, np.int32(0))
    for t in range(T):
        b = t * K
        mn, mx = _F0, _F0  # min(0, min x) and max(0, max x)
        for k in range(K):
            v = x[b + k]
            mn = v if v < mn else mn
            mx = v if v > mx else mx
        scale = _F1 if mn == mx else _QRANGE / (mx - mn)
        dmin, dmax = mn * scale, mx * scale
        zf = (_QMIN - dmin) if (_QMIN + dmin) + (_QMAX + dmax) > _F0 else (_QMAX - dmax)
        zf = zf if _QMIN < zf else _QMIN  # XNNPACK's max and min on x86 (NaN -> -128)
        zf = _QMAX if _QMAX < zf else zf
        z = np.rint(zf)
        inv[t] = _F1 / scale
        zs[t] = np.int32(z) + 128
        lo, hi = _QMIN - z, _QMAX - z  # q - z stays in [lo, hi]
        off = z + _U8  # q - z + off = q + 128
        for k in range(K):
            v = np.rint(x[b + k] * scale)
            v = v if v <= hi else hi  # (NaN -> hi, as XNNPACK's AVX2 convert)
            v = lo if v < lo else v
            u[b + k] = np.uint8(v + off)


# ---- the compiled entry -----------------------------------------------------------------------

# state array (int64 words): a header, then one record per linear, in the graph's order
S_LEN, S_COUNT, S_ROWS, S_FAILED, S_WHY = range(5)
S_SIZES = 8  # 8 words: an out's sizes while it is resized
HEAD = 16
R_IN, R_SRC, R_INBUF, R_OUT, R_OUTBUF, R_ROOT, R_W, R_WS, R_SC, R_BIAS, R_LO, R_HI, R_N, R_K, \
    R_GS, R_T, R_XD, R_INV, R_ZU, R_FIRST, R_NIB = range(21)
REC = 21
# R_IN: the input's descriptor, or 0 when another linear of the graph makes it: linear R_SRC,
# into R_INBUF (an internal value: rows x K float32 the binder allocated). R_OUT: the
# output's descriptor, or 0 for an internal value at R_OUTBUF. R_ROOT: the linear whose
# input descriptor gives this one's leading dimensions (itself, or its chain's first).
# R_LO, R_HI: the output clamp (float64 bits). R_T: rows this call. R_XD, R_INV, R_ZU: the
# input's quantized rows, 1 / scales and zero points + 128 (one scratch per input);
# R_FIRST: 1 for the first linear of its input, which quantizes it. R_NIB: 1 when the
# weights are ``nibble_tiles`` (a large matrix: the kernel is then bound by memory).
# why a call failed (S_WHY), for ``explain``
WHY_SHAPE, WHY_ROWS, WHY_RESIZE, WHY_DATA = 1, 2, 3, 4
# the argument block: [state, part, parts]. parts 0: the whole call, linear by linear;
# else (a graph whose linears all read its inputs) part -1 checks, resizes and quantizes
# every input (or, below SPLIT_MACS multiply-adds, does the whole call and returns
# SPLIT_WHOLE), and part k < parts computes its share of every linear's output tiles,
# for every row (the same operations whichever thread runs them)
PART_PREP = -1
SPLIT_MACS = 1 << 17
# weights from which a matrix is kept at 4 bits (``nibble_tiles``): past the caches the int8
# tiles are bound by memory. One thread here, a matrix read over and over: int8 51 GMAC/s in
# L2, 44 at 4 MB, 23 at 16 MB, 19 at 64 MB; 4-bit 33-35 up to 16 MB, 25 at 64 MB. A model
# with 4 MB matrices streams all of its weights from memory each token: 4 bits there
NIBBLE_WEIGHTS = 1 << 22


@njit
def _fail(s, i, why, code):
    s[S_FAILED] = i
    s[S_WHY] = why
    return code


@njit
def _prepare(s, i):
    """Check linear ``i``'s tensors, resize its output, quantize its input (if first);
    its rows in R_T. A status."""
    r = HEAD + REC * i
    N, K = s[r + R_N], s[r + R_K]
    if s[r + R_IN] != 0:
        x = desc(s[r + R_IN])
        nd = x[D_NDIM]
        if nd < 1 or nd > 8 or x[D_SIZES + nd - 1] != K:
            return _fail(s, i, WHY_SHAPE, INVALID_ARGUMENT)
        T = x[D_NUMEL] // K
        if x[D_DATA] == 0 and T:
            return _fail(s, i, WHY_DATA, INVALID_ARGUMENT)
        src = x[D_DATA]
    else:
        T = s[HEAD + REC * s[r + R_SRC] + R_T]
        src = s[r + R_INBUF]
    if T > s[S_ROWS]:
        return _fail(s, i, WHY_ROWS, NOT_SUPPORTED)
    s[r + R_T] = T
    if s[r + R_OUT] != 0:
        root = desc(s[HEAD + REC * s[r + R_ROOT] + R_IN])
        nd = root[D_NDIM]
        for j in range(nd - 1):
            s[S_SIZES + j] = root[D_SIZES + j]
        s[S_SIZES + nd - 1] = N
        o = desc(s[r + R_OUT])
        if resize_to(o, s[S_SIZES:S_SIZES + nd], nd) != OK:
            return _fail(s, i, WHY_RESIZE, INVALID_ARGUMENT)
        if o[D_DATA] == 0 and T:
            return _fail(s, i, WHY_DATA, INVALID_ARGUMENT)
    if T and s[r + R_FIRST]:
        quantize_rows(src, T, K, s[r + R_XD], s[r + R_INV], s[r + R_ZU])
    return OK


@njit
def _compute(s, i, part, parts):
    """Output tiles [n * part / parts, n * (part + 1) / parts) of linear ``i``'s n tiles,
    every row, bias and clamp included."""
    r = HEAD + REC * i
    T, N, K, gs = s[r + R_T], s[r + R_N], s[r + R_K], s[r + R_GS]
    if T == 0:
        return
    inv = ptr_like(s[r + R_INV], _F0)
    zu = ptr_like(s[r + R_ZU], np.int32(0))
    tiles = N // TILE
    q0, q1 = tiles * part // parts, tiles * (part + 1) // parts
    out = desc(s[r + R_OUT])[D_DATA] if s[r + R_OUT] != 0 else s[r + R_OUTBUF]
    of = ptr_like(out, _F0)
    nb, qpb = K // gs, gs // 4
    lo, hi = np.float32(bits_to_f64(s[r + R_LO])), np.float32(bits_to_f64(s[r + R_HI]))
    clamp = lo > -np.inf or hi < np.inf
    nib = s[r + R_NIB]
    for t in range(T):
        ut = s[r + R_XD] + t * K
        for q in range(q0, q1):
            if nib:
                _tile_dot4(s[r + R_W] + q * K * TILE // 2, ut, s[r + R_WS] + 4 * q * nb * TILE,
                           s[r + R_SC] + 4 * q * nb * TILE, nb, qpb, zu[t],
                           out + 4 * (t * N + q * TILE), inv[t])
            else:
                _tile_dot(s[r + R_W] + q * K * TILE, ut, s[r + R_WS] + 4 * q * nb * TILE,
                          s[r + R_SC] + 4 * q * nb * TILE, nb, qpb, zu[t],
                          out + 4 * (t * N + q * TILE), inv[t])
        if s[r + R_BIAS] != 0:
            bias = ptr_like(s[r + R_BIAS], _F0)
            for n in range(q0 * TILE, q1 * TILE):
                of[t * N + n] += bias[n]
        if clamp:  # XNNPACK's order: the lower bound, then the upper
            for n in range(q0 * TILE, q1 * TILE):
                v = of[t * N + n]
                v = v if lo < v else lo
                of[t * N + n] = hi if hi < v else v


def qb4w_linears(block):
    b = carray(block, 3)
    s = carray(ptr_like(b[0], np.int64(0)), HEAD)
    s = carray(ptr_like(b[0], np.int64(0)), s[S_LEN])
    part, parts = b[1], b[2]
    n = s[S_COUNT]
    if parts == 0:
        for i in range(n):
            st = _prepare(s, i)
            if st != OK:
                return st
            _compute(s, i, 0, 1)
        return OK
    if part == PART_PREP:
        macs = 0
        for i in range(n):
            st = _prepare(s, i)
            if st != OK:
                return st
            r = HEAD + REC * i
            macs += s[r + R_T] * s[r + R_N] * s[r + R_K]
        if macs >= SPLIT_MACS:
            return OK
        for i in range(n):
            _compute(s, i, 0, 1)
        return SPLIT_WHOLE
    for i in range(n):
        _compute(s, i, part, parts)
    return OK


def kernel():
    """The compiled ``qb4w_linears`` (``kernels.fast.jit.lazy``: KernelNotReady while a
    background compile makes it)."""
    return lazy(qb4w_linears)
