"""Register-blocked matrix product that adds in ExecuTorch's order (the engine of ``ordered``).

Each output still starts at zero and adds its k products one at a time, first to
last, every product rounded before the add (no FMA): only *which* outputs are
computed together changes. A micro-kernel keeps an ``mr x NR`` tile of C in
vector registers (``mr`` <= 6 rows, NR = two AVX vectors: 16 float32 or 8 float64
columns) and walks k in order, so every accumulator is the C++ loop's running sum.
Operands are read from packed panels: A as ``[panel][t][MR]`` (MR = 6 rows per
panel, zero-padded), B as ``[panel][t][NR]``. A constant weight is packed once at
load (``pack_rows_np`` / ``pack_cols_np``); else A is packed per call, and B with
contiguous rows is read in place (other B is packed per call, in column blocks of
``NCB`` that stay in L2). k is cut into blocks of ``KC`` steps so a B panel stays in
L1 (and a block whose B rows would not, in groups of four panels that every A panel
passes in turn); between blocks the partial sum is stored in C and loaded back unchanged
(a float store and load round nothing), so the order holds.

The micro-kernel is LLVM IR built here (``@intrinsic``): vector ``fmul`` then
``fadd`` without fast-math flags, which LLVM never contracts into an FMA.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from pyruntime.kernels.fast.deferred import cgutils, intrinsic, njit, types
from pyruntime.kernels.fast.epilogue_ir import emit_epilogue
from pyruntime.kernels.fast.nb import ptr_like

MR = 6  # rows per A panel (and the largest micro-tile)
KC = 256  # k steps per block: a B panel (KC x NR) is 16 KiB, in L1
NCB = 256  # B columns packed per block (KC x NCB: 256 KiB, in L2)
L1_BYTES = 32768  # B rows of a block up to which the block is passed whole (see ``blocked``)


def nr_of(itemsize):
    """Columns per B panel: 64 bytes (two 256-bit vectors, or one 512-bit)."""
    return 64 // itemsize


def has_fma() -> bool:
    """Whether kernels compile for a target with FMA (else math="fast" keeps the exact
    products: ``llvm.fma`` would be a library call per element there)."""
    from pyruntime.kernels.fast import objcache

    return "+fma" in objcache._magic()[2].split(",")


def wide_vectors() -> bool:
    """Whether kernels compile for a target with AVX-512 (``objcache._magic``: Numba's own
    target, so the object and Numba caches, keyed by it, never mix the two)."""
    from pyruntime.kernels.fast import objcache

    return "+avx512f" in objcache._magic()[2].split(",")


def _microkernel(mr, panels=1):
    """Intrinsic ``mk(pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, marker)``: C[0:mr,
    0:NR] (row stride ldc, element units) = (C if load else 0) + A_panel[0:kc] x B[0:kc,
    0:NR], k in order; B's rows ``ldb`` elements apart (NR: a packed panel). With ``pe``
    not 0, each row r's sums then go through the fused per-channel epilogue
    (``epilogue_ir``) before the store, row r's seven constants at ``pe`` + (r + j * ``eo``)
    elements, j = 0..6, with relu (``relu`` not 0) or the clamp: the caller passes it with
    the last k block only. With ``panels`` > 1 it takes ``mk(pa, pb, ldb, pstride, pc, ldc,
    kc, load, fma, pe, eo, relu, marker)`` and computes C[0:mr, 0:panels*NR] from
    ``panels`` B panels ``pstride`` elements apart, each element the same sum: in one k
    loop (more accumulators in flight: one row, a matrix-vector product, is latency-bound
    on one panel's) when there are registers for them (one row, or 512-bit vectors: 32
    registers, one vector per panel row), else one loop per panel.
    With ``fma`` not 0 (``math="fast"``) on a target with FMA (``has_fma``; elsewhere
    it is ignored) each step is one ``llvm.fma`` (one rounding instead of two; half the
    instructions): a second k loop. Always the intrinsic, never a ``contract`` flag: LLVM
    may or may not honour a flag in each compiled copy, and then a result would depend
    on which kernel variant computed it."""
    def typer(nargs, marker):
        return types.void(*([types.int64] * (nargs - 1)), marker), codegen

    def codegen(context, builder, signature, args):
        if panels == 1:
            pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, _ = args
            pstride = None
        else:
            pa, pb, ldb, pstride, pc, ldc, kc, load, fma, pe, eo, relu, _ = args
        mt = signature.args[-1]
        fty = context.get_value_type(mt)
        # lanes of a 512-bit vector where the target has them (one per panel row: twice
        # the lanes per multiply and add, each lane's sum the same), else of a 256-bit one
        w = (16 if mt == types.float32 else 8) if wide_vectors() else \
            (8 if mt == types.float32 else 4)
        vpp = 64 // (4 if mt == types.float32 else 8) // w  # vectors per panel row
        align = 4 if mt == types.float32 else 8
        vty = ir.VectorType(fty, w)
        i64 = ir.IntType(64)
        i32 = ir.IntType(32)
        fp, vp = fty.as_pointer(), vty.as_pointer()
        A = builder.inttoptr(pa, fp)
        B = builder.inttoptr(pb, fp)
        C = builder.inttoptr(pc, fp)
        zero = ir.Constant(vty, [ir.Constant(fty, 0.0)] * w)
        vfma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vty, [vty, vty, vty]),
            f"llvm.fma.v{w}f{32 if mt == types.float32 else 64}") if has_fma() else None
        undef = ir.Constant(vty, ir.Undefined)
        splat_mask = ir.Constant(ir.VectorType(i32, w), [ir.Constant(i32, 0)] * w)
        together = panels == 1 or mr == 1 or vpp == 1
        for group in ([list(range(panels))] if together else [[q] for q in range(panels)]):
            # vectors of a row: (panel, its place in the panel) for this loop's panels
            vs = [(q, i) for q in group for i in range(vpp)]
            acc = [[cgutils.alloca_once(builder, vty) for _ in vs] for _ in range(mr)]

            def coff(q, i):  # a vector's column: its panel's start, then its place
                return q * vpp * w + i * w

            def cptr(r, q, i):
                off = builder.add(builder.mul(ir.Constant(i64, r), ldc),
                                  ir.Constant(i64, coff(q, i)))
                return builder.bitcast(builder.gep(C, [off]), vp)

            def boff(q, i):  # a vector of a B row: its panel's start, then its place
                o = ir.Constant(i64, i * w)
                return o if q == 0 else builder.add(
                    builder.mul(ir.Constant(i64, q), pstride), o)

            with builder.if_else(builder.icmp_signed("!=", load, ir.Constant(i64, 0))) as (
                    then, otherwise):
                with then:
                    for r in range(mr):
                        for v, (q, i) in enumerate(vs):
                            builder.store(builder.load(cptr(r, q, i), align=align), acc[r][v])
                with otherwise:
                    for r in range(mr):
                        for v in range(len(vs)):
                            builder.store(zero, acc[r][v])
            def k_loop(fused):
                with cgutils.for_range(builder, kc) as loop:
                    t = loop.index
                    bb = builder.mul(t, ldb)
                    bv = [builder.load(builder.bitcast(
                        builder.gep(B, [builder.add(bb, boff(q, i))]), vp), align=align)
                        for q, i in vs]
                    ab = builder.mul(t, ir.Constant(i64, MR))
                    for r in range(mr):
                        a = builder.load(builder.gep(A, [builder.add(ab, ir.Constant(i64, r))]))
                        av = builder.shuffle_vector(
                            builder.insert_element(undef, a, ir.Constant(i32, 0)), undef,
                            splat_mask)
                        for v in range(len(vs)):
                            s = builder.call(vfma, [av, bv[v], builder.load(acc[r][v])]) \
                                if fused else \
                                builder.fadd(builder.load(acc[r][v]), builder.fmul(av, bv[v]))
                            builder.store(s, acc[r][v])

            if vfma is None:
                k_loop(False)
            else:
                with builder.if_else(builder.icmp_signed("!=", fma, ir.Constant(i64, 0))) as (
                        fused, plain):
                    with fused:
                        k_loop(True)
                    with plain:
                        k_loop(False)
            with builder.if_then(builder.icmp_signed("!=", pe, ir.Constant(i64, 0))):
                E = builder.inttoptr(pe, fp)
                with builder.if_else(builder.icmp_signed("!=", relu, ir.Constant(i64, 0))) as (
                        with_relu, with_clamp):
                    for branch, is_relu in ((with_relu, True), (with_clamp, False)):
                        with branch:
                            for r in range(mr):
                                def constant(j, r=r):
                                    at = builder.add(ir.Constant(i64, r),
                                                     builder.mul(ir.Constant(i64, j), eo))
                                    c = builder.load(builder.gep(E, [at]))
                                    return builder.shuffle_vector(
                                        builder.insert_element(undef, c, ir.Constant(i32, 0)),
                                        undef, splat_mask)

                                out = emit_epilogue(builder, [builder.load(a) for a in acc[r]],
                                                    constant, is_relu, zero)
                                for a, v in zip(acc[r], out):
                                    builder.store(v, a)
            for r in range(mr):
                for v, (q, i) in enumerate(vs):
                    builder.store(builder.load(acc[r][v]), cptr(r, q, i), align=align)
        return context.get_dummy_value()

    if panels == 1:
        @intrinsic
        def mk(typingctx, pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, marker):
            return typer(12, marker)
    else:
        @intrinsic
        def mk(typingctx, pa, pb, ldb, pstride, pc, ldc, kc, load, fma, pe, eo, relu, marker):
            return typer(13, marker)
    return mk


_mk1, _mk2, _mk3, _mk4, _mk5, _mk6 = (_microkernel(r) for r in range(1, 7))
_mk1x4 = _microkernel(1, panels=4)  # one row, four panels: 8 accumulators in flight
_mk1x2 = _microkernel(1, panels=2)  # one row, two panels: 4 in flight (256-bit vectors)
_mk6x2 = _microkernel(MR, panels=2)  # a full tile, two panels: 12 with 512-bit vectors
# a full tile, four panels: 24 accumulators with 512-bit vectors (of 32 registers), each A
# element loaded once per four panels; with 256-bit vectors, one loop per panel
_mk6x4 = _microkernel(MR, panels=4)


@njit(inline="always")
def micro_kernel(mr, pa, pb, ldb, pc, ldc, kc, load, zero, fma=0, pe=0, eo=0, relu=0):
    if mr == 6:
        _mk6(pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, zero)
    elif mr == 5:
        _mk5(pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, zero)
    elif mr == 4:
        _mk4(pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, zero)
    elif mr == 3:
        _mk3(pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, zero)
    elif mr == 2:
        _mk2(pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, zero)
    else:
        _mk1(pa, pb, ldb, pc, ldc, kc, load, fma, pe, eo, relu, zero)


# ---- packing -------------------------------------------------------------------------------

@njit
def pack_rows(P, X, rs, cs, m, k):
    """P[ip][t][r] = X[(ip*MR + r)*rs + t*cs]; P, X pointers. A last panel's rows past m are
    left unwritten: a micro-kernel reads only the rows of its tile (a one-row product
    would otherwise write five zeros per element it packs)."""
    for i0 in range(0, m, MR):
        base = i0 * k
        rows = min(MR, m - i0)
        # literal row counts for a full panel and a single row (a matrix-vector product):
        # a loop over a run-time count of rows cost 3.5 ns per k step, 10x the copy
        if rows == MR:
            for t in range(k):
                d = base + t * MR
                s = i0 * rs + t * cs
                for r in range(MR):
                    P[d + r] = X[s + r * rs]
        elif rows == 1:
            s = i0 * rs
            for t in range(k):
                P[base + t * MR] = X[s + t * cs]
        else:
            for t in range(k):
                d = base + t * MR
                for r in range(rows):
                    P[d + r] = X[(i0 + r) * rs + t * cs]


@njit
def pack_cols(P, X, rs, cs, k, n, nr, zero):
    """P[jp][t][c] = X[t*rs + (jp*nr + c)*cs] (columns past n: 0); P, X pointers."""
    for j0 in range(0, n, nr):
        base = j0 * k
        cols = min(nr, n - j0)
        if cs == 1 and cols == 16:  # full panels: literal widths, so each row is two vectors
            for t in range(k):
                d = base + t * 16
                s = t * rs + j0
                for c in range(16):
                    P[d + c] = X[s + c]
        elif cs == 1 and cols == 8 and nr == 8:
            for t in range(k):
                d = base + t * 8
                s = t * rs + j0
                for c in range(8):
                    P[d + c] = X[s + c]
        elif cs == 1:
            for t in range(k):
                d = base + t * nr
                s = t * rs + j0
                for c in range(cols):
                    P[d + c] = X[s + c]
                for c in range(cols, nr):
                    P[d + c] = zero
        else:
            for t0 in range(0, k, 16):  # 16 x nr blocks: both sides stay in cache
                for c in range(cols):
                    s = (j0 + c) * cs
                    for t in range(t0, min(k, t0 + 16)):
                        P[base + t * nr + c] = X[t * rs + s]
                for t in range(t0, min(k, t0 + 16)):
                    for c in range(cols, nr):
                        P[base + t * nr + c] = zero


def pack_rows_np(x):
    """``pack_rows`` of a 2-D array, in numpy (binders: no compile at load)."""
    m, k = x.shape
    mp = -(-m // MR) * MR
    p = np.zeros((mp, k), x.dtype)
    p[:m] = x
    return np.ascontiguousarray(p.reshape(mp // MR, MR, k).transpose(0, 2, 1)).reshape(-1)


def pack_cols_np(x, nr):
    """``pack_cols`` of a 2-D (k x n) array, in numpy."""
    k, n = x.shape
    np_ = -(-n // nr) * nr
    p = np.zeros((k, np_), x.dtype)
    p[:, :n] = x
    return np.ascontiguousarray(p.reshape(k, np_ // nr, nr).transpose(1, 0, 2)).reshape(-1)


# ---- the driver ----------------------------------------------------------------------------

def swapped(m, n, nr):
    """Compute C^T = B^T A^T instead (rows and columns trade places) when that wastes
    clearly fewer lanes (C's columns are cut in tiles of ``nr``, its rows are not padded):
    the swapped product packs B^T and scatters its tiles, so it must win by 15%."""
    return n * -(-m // nr) * 115 < m * -(-n // nr) * 100


swapped_nb = njit(inline="always")(swapped)


def blocked_scratch(m, n, k, packed_a, packed_b, nr):
    """Scratch elements of ``blocked``: A's panels unless given, one B block unless given,
    one edge tile."""
    a = 0 if packed_a else -(-m // MR) * MR * k
    b = 0 if packed_b else k * min(NCB, -(-n // nr) * nr)
    return a + b + MR * nr


@njit
def blocked(m, n, k, pa, ars, acs, pap, pb, brs, bcs, pbp, pc, crs, ccs, S, zero, item,
            fma=0, pe=0, eo=0, relu=0):
    """C (m x n, element strides crs, ccs) = A @ B, every element a running sum in k order
    from zero. A, B by address and element strides, or (``pap``/``pbp`` != 0) already
    packed as ``pack_rows`` / ``pack_cols``. B with contiguous rows is read in place (only
    a last, partial column panel is packed). ``S``: ``blocked_scratch`` elements. ``fma``
    (math="fast"): the micro-kernels fuse each multiply-add. ``pe`` (not 0): row i's sums
    then go through the fused per-channel epilogue before they are stored, its constants
    at ``pe`` + (i + j * ``eo``) elements (see ``_microkernel``)."""
    nr = 64 // item
    if m <= 0 or n <= 0:
        return
    C = ptr_like(pc, zero)
    if k == 0:
        for i in range(m):
            for j in range(n):
                C[i * crs + j * ccs] = zero
        return
    ps = np.int64(S.ctypes.data)
    P = ptr_like(ps, zero)
    off = 0
    if pap == 0:
        pack_rows(P, ptr_like(pa, zero), ars, acs, m, k)
        pap = ps
        off = -(-m // MR) * MR * k
    pbb = ps + off * item  # packed B: one block, or the partial last panel
    # B with contiguous rows is read in place whatever m: packing copied it once more
    # (measured: ResNet-18@224 at threads=1 54-59 -> 54 ms exact, 45-49 -> 42-43 ms fast)
    direct = pbp == 0 and bcs == 1
    nfull = n // nr * nr
    if direct and nfull < n:
        pack_cols(ptr_like(pbb, zero), ptr_like(pb + nfull * item, zero), brs, 1, k, n - nfull,
                  nr, zero)
    if pbp == 0:
        off += k * min(NCB, -(-n // nr) * nr)
    tile = ps + off * item
    T = ptr_like(tile, zero)
    for j0 in range(0, n, NCB):
        nb = min(NCB, n - j0)
        if pbp == 0 and not direct:
            pack_cols(ptr_like(pbb, zero), ptr_like(pb + j0 * bcs * item, zero), brs, bcs, k,
                      nb, nr, zero)
        for t0 in range(0, k, KC):
            kc = min(KC, k - t0)
            load = 1 if t0 > 0 else 0
            last = pe != 0 and t0 + kc >= k
            # B columns in groups of four panels that stay in L1 while every A panel passes
            # them (the A panels, a few KB each, come from L2), when the block's B rows
            # would not stay there: else the whole block at once, so an A panel's tiles
            # write its C rows' columns in a row (measured: MobileNetV2@224's pointwise
            # layers 5.36 -> 5.10 ms; in groups at every k, its 16 -> 96 at 112x112 went
            # 524 -> 736 us)
            gw = 4 * nr if kc * nb * item > L1_BYTES else nb
            jg = 0
            while jg < nb:
                ge = min(nb, jg + gw)
                for i0 in range(0, m, MR):
                    mr = min(MR, m - i0)
                    a = pap + (i0 * k + t0 * MR) * item
                    e = pe + i0 * item if last else 0
                    jj = jg
                    while jj < ge:
                        j = j0 + jj
                        if ccs == 1 and (mr == 1 or mr == MR) and ge - jj >= 2 * nr:
                            # full panels at once: four or two, for one row or a full tile
                            if pbp != 0:
                                b, ldb, pst = pbp + (j * k + t0 * nr) * item, nr, nr * k
                            elif not direct:
                                b, ldb, pst = pbb + (jj * k + t0 * nr) * item, nr, nr * k
                            else:
                                b, ldb, pst = pb + (t0 * brs + j) * item, brs, nr
                            pt = pc + (i0 * crs + j) * item
                            if mr == 1 and ge - jj >= 4 * nr:
                                _mk1x4(a, b, ldb, pst, pt, crs, kc, load, fma, e, eo, relu, zero)
                                jj += 4 * nr
                            elif mr == 1:
                                _mk1x2(a, b, ldb, pst, pt, crs, kc, load, fma, e, eo, relu, zero)
                                jj += 2 * nr
                            elif ge - jj >= 4 * nr:
                                _mk6x4(a, b, ldb, pst, pt, crs, kc, load, fma, e, eo, relu, zero)
                                jj += 4 * nr
                            else:
                                _mk6x2(a, b, ldb, pst, pt, crs, kc, load, fma, e, eo, relu, zero)
                                jj += 2 * nr
                            continue
                        jc = jj  # this panel's column in the block
                        jj += nr
                        nc = min(nr, n - j)
                        if pbp != 0:
                            b, ldb = pbp + (j * k + t0 * nr) * item, nr
                        elif not direct:
                            b, ldb = pbb + (jc * k + t0 * nr) * item, nr
                        elif nc == nr:
                            b, ldb = pb + (t0 * brs + j) * item, brs
                        else:
                            b, ldb = pbb + t0 * nr * item, nr
                        if nc == nr and ccs == 1:
                            micro_kernel(mr, a, b, ldb, pc + (i0 * crs + j) * item, crs, kc,
                                         load, zero, fma, e, eo, relu)
                            continue
                        if load:
                            for r in range(mr):
                                for c in range(nc):
                                    T[r * nr + c] = C[(i0 + r) * crs + (j + c) * ccs]
                        micro_kernel(mr, a, b, ldb, tile, nr, kc, load, zero, fma, e, eo, relu)
                        for r in range(mr):
                            for c in range(nc):
                                C[(i0 + r) * crs + (j + c) * ccs] = T[r * nr + c]
                jg = ge
