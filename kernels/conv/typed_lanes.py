"""Depthwise 3x3 convolutions eight channels at a time, a channel per float32 vector lane
(``kernels.conv.typed_direct`` runs them): what XNNPACK's channel-last layout gives its
depthwise kernels, on NCHW tensors.

Per eight channels of an image, output row by output row:

* the input rows it reads are transposed, just before, into a ring of zero-padded rows of
  [Wp][8] by 8 x 8 blocks in vector registers (``copy_engine._t8x8``): a few KB, in L1
  whatever the plane's size (a small plane is held whole);
* ``_row8`` computes the row, nine vector multiply-adds a position, eight positions at a
  time reading each input vector once (a stride-2 plane reads unit-stride vectors like any
  other), and runs the fused epilogue on the lanes before it stores them;
* the finished positions go back to their planes by 8 x 8 blocks.

Each lane adds its nine products to zero in ExecuTorch's order (a multiply then an add:
the same bits as one plane at a time), or under math="fast" in the same order through
fused multiply-adds. MobileNetV2's depthwise layers at 224: 2.7 ms -> 1.9 ms.
"""
from __future__ import annotations

from llvmlite import ir

from pyruntime.kernels.fast.copy_engine import _t8x8
from pyruntime.kernels.fast.deferred import cgutils, intrinsic, njit, types
from pyruntime.kernels.fast.epilogue_ir import emit_epilogue
from pyruntime.kernels.fast.gemm import has_fma
from pyruntime.kernels.fast.nb import ptr_like

LANES = 8  # channels side by side


def ring_rows(Hp, Wp, dh):
    """Rows in ``planes8``'s ring of padded input rows: an output row's three (an input row
    is made just before the first output row that reads it, into the row no output row
    reads any more), or the whole plane when it fits in 32 KB (the ring never wraps)."""
    return Hp if Hp * Wp * LANES <= 8192 else 2 * dh + 1


ring_rows_nb = njit(inline="always")(ring_rows)


# output elements up to which ``planes8`` keeps the outputs' lanes whole (else a row and
# the seven positions before it, moved to the front after each row)
WHOLE_OUT = 8192


def _scratch_of(rows_of):
    def lanes_scratch(H, W, ph, pw, OH, OW, dh):
        """Scratch elements ``planes8`` needs: a ring of padded input rows (``ring_rows``),
        the taps, the outputs (``WHOLE_OUT``), all channel-last; and 15 to start them at a
        64-byte boundary (``lanes_start``)."""
        outs = OH * OW if OH * OW * LANES <= WHOLE_OUT else OW + LANES
        Wp = W + 2 * pw
        return LANES * (rows_of(H + 2 * ph, Wp, dh) * Wp + 9 + outs) + 15
    return lanes_scratch


lanes_scratch = _scratch_of(ring_rows)
lanes_scratch_nb = njit(inline="always")(_scratch_of(ring_rows_nb))


@njit(inline="always")
def lanes_start(ba, at):
    """The first element at or after ``at`` of the float32 scratch at address ``ba`` on a
    64-byte boundary: every vector ``planes8`` reads or writes in it is then within one
    cache line (a quarter faster than straddling two)."""
    return at + (-(ba + 4 * at) % 64) // 4


def _v8(builder, addr):
    v8 = ir.VectorType(ir.FloatType(), 8)
    return builder.inttoptr(addr, v8.as_pointer())


# ``_row8``'s mode bits
ROW_FMA, ROW_EPILOGUE, ROW_RELU = 1, 2, 4


@intrinsic
def _row8(typingctx, p0, p1, p2, c1, step, pw, pout, count, mode, pe, se):
    """``count`` positions of eight float32 lanes at ``pout`` (32 bytes apart), each
    0 + w0 x0 + ... + w8 x8 in that order: tap (ki, kj) of position i at row ki's address
    (``p0``, ``p1``, ``p2``) + i step + kj c1, its weights at ``pw`` + 32 (3 ki + kj) (byte
    addresses). A multiply then an add, or with ``mode & ROW_FMA`` one fused multiply-add a
    tap. With
    ``mode & ROW_EPILOGUE``, then ``channel_epilogue``'s operations on each lane before the
    store, in its order: ((v + cb) - mu) * inv * wc + bc, then relu (``ROW_RELU``) or
    clamp to [lo, hi] (NaN kept by both); the lanes' seven constants as vectors at ``pe``,
    ``se`` bytes apart.

    Where the taps of a row are adjacent vectors (``c1`` 32) and ``step`` is 32 or 64
    (stride 1 or 2), eight positions at a time read each input vector of a row once and add
    it to every position it is a tap of (10 or 17 loads a row instead of 24): each sum still
    takes its taps in order, row by row. Else one position at a time."""
    sig = types.void(*[types.int64] * 11)

    def codegen(context, builder, signature, args):
        p0_, p1_, p2_, c1_, step_, pw_, pout_, count_, mode_, pe_, se_ = args
        rows_in = (p0_, p1_, p2_)
        f32, i64 = ir.FloatType(), ir.IntType(64)
        v8 = ir.VectorType(f32, 8)
        fmav = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(v8, [v8, v8, v8]), "llvm.fma.v8f32")
        zero = ir.Constant(v8, [ir.Constant(f32, 0.0)] * 8)

        def const(v):
            return ir.Constant(i64, v)

        def load(addr):
            return builder.load(_v8(builder, addr), align=4)

        def weight(t):
            return load(builder.add(pw_, const(32 * t)))

        def madd(fused, acc, w, x):
            return builder.call(fmav, [w, x, acc]) if fused \
                else builder.fadd(acc, builder.fmul(w, x))

        def store(acc, first, ep):
            """The epilogue (``ep``: None, "relu", "clamp") on the sums of positions
            first, first + 1, ..., a constant at a time, then the stores."""
            if ep is not None:
                acc = emit_epilogue(
                    builder, acc, lambda k: load(builder.add(pe_, builder.mul(se_, const(k)))),
                    ep == "relu", zero)
            for j, v in enumerate(acc):
                at = builder.add(pout_, builder.mul(builder.add(first, const(j)), const(32)))
                builder.store(v, _v8(builder, at), align=4)

        def streamed(first, k, s, fused, ep):
            """Positions first .. first + k - 1 at stride ``s`` vectors, taps adjacent."""
            at = builder.mul(first, step_)
            acc = [zero] * k
            for ki in range(3):
                row = builder.add(rows_in[ki], at)
                w = [weight(3 * ki + kj) for kj in range(3)]
                for c in range(s * (k - 1) + 3):
                    x = load(builder.add(row, const(32 * c)))
                    for kj in range(3):
                        if (c - kj) % s == 0 and 0 <= (c - kj) // s < k:
                            j = (c - kj) // s
                            acc[j] = madd(fused, acc[j], w[kj], x)
            store(acc, first, ep)

        def singles(first, n, fused, ep):
            w = [weight(t) for t in range(9)]
            offs = [builder.add(rows_in[ki], builder.mul(c1_, const(kj)))
                    for ki in range(3) for kj in range(3)]
            with cgutils.for_range(builder, n) as loop:
                i = builder.add(first, loop.index)
                at = builder.mul(i, step_)
                acc = zero
                for t in range(9):
                    acc = madd(fused, acc, w[t], load(builder.add(at, offs[t])))
                store([acc], i, ep)

        def rows(fused, ep):
            adjacent = builder.icmp_signed("==", c1_, const(32))
            one = builder.and_(adjacent, builder.icmp_signed("==", step_, const(32)))
            two = builder.and_(adjacent, builder.icmp_signed("==", step_, const(64)))
            with builder.if_else(builder.or_(one, two)) as (fast, generic):
                with fast:
                    eights = builder.sdiv(count_, const(8))
                    rest = builder.sub(count_, builder.mul(eights, const(8)))
                    for s, cond in ((1, one), (2, two)):
                        with builder.if_then(cond):
                            with cgutils.for_range(builder, eights) as loop:
                                streamed(builder.mul(loop.index, const(8)), 8, s, fused, ep)
                            first = builder.mul(eights, const(8))
                            four = builder.icmp_signed(">=", rest, const(4))
                            with builder.if_then(four):
                                streamed(first, 4, s, fused, ep)
                            done = builder.select(four, const(4), const(0))
                            singles(builder.add(first, done), builder.sub(rest, done), fused,
                                    ep)
                with generic:
                    singles(const(0), count_, fused, ep)

        def bit(b):
            return builder.icmp_signed("!=", builder.and_(mode_, const(b)), const(0))

        # (without FMA in the target, llvm.fma is a library call an element: not emitted,
        # and the bind never asks for it there)
        def body(fused):
            with builder.if_else(bit(ROW_EPILOGUE)) as (with_ep, plain):
                with with_ep:
                    with builder.if_else(bit(ROW_RELU)) as (relu, clamp):
                        with relu:
                            rows(fused, "relu")
                        with clamp:
                            rows(fused, "clamp")
                with plain:
                    rows(fused, None)

        with builder.if_else(bit(ROW_FMA)) as (then, otherwise):
            with then:
                body(has_fma())
            with otherwise:
                body(False)
        return context.get_dummy_value()

    return sig, codegen


@njit
def planes8(buf, ba, at, xa, xb, xend, H, W, wa, oc, oa, ob, ph, pw, sh, sw, dh, dw, OH, OW,
            zero, epa, O, mode, first):
    """Eight depthwise 3x3 output planes, channels oc..oc+7 of one image: input planes at
    element ``xb + c H W`` of the float32 input at address ``xa`` (``xend`` elements in
    all), the weight (O, 1, 3, 3) at address ``wa``, outputs at element ``ob + c OH OW`` of
    the output at address ``oa``; ``mode``: ``_row8``'s, its epilogue's constants laid out
    as ``channel_epilogue``'s at address ``epa``. ``buf`` (address ``ba``) from element
    ``at`` (``lanes_start``) holds ``lanes_scratch`` elements: a ring of the padded input
    rows an output row reads, the taps, and the outputs not yet back in their planes, in
    L1 whatever the plane's size. ``first``: the first eight planes of this scratch (a
    plane the ring holds whole keeps its pad columns zero from then on)."""
    Wp = W + 2 * pw
    Hp = H + 2 * ph
    R = ring_rows_nb(Hp, Wp, dh)
    wt = at + R * Wp * LANES
    ot = wt + LANES * 9
    plane = H * W
    n = OH * OW
    whole = n * LANES <= WHOLE_OUT  # the output planes' lanes stay in the scratch whole
    # pad columns to zero: on a ring's every row, and on a narrow plane's (its blocks
    # write into the right pad)
    pads = first or R < Hp or W < LANES
    # the taps as [9][8]: the first eight of each channel by one block, the ninth one at a
    # time
    _t8x8(wa + 4 * 9 * oc, 4 * 9, ba + 4 * wt, 4 * LANES)
    wf = ptr_like(wa, zero)
    for c in range(LANES):
        buf[wt + 8 * LANES + c] = wf[(oc + c) * 9 + 8]
    made, slot = 0, 0  # padded input rows made so far, the ring row of the next
    top = 0  # the ring row of output row oh's first input row
    done = 0  # output positions back in their planes
    pend = 0  # (a ring of outputs) positions at ``ot`` waiting for a whole block
    for oh in range(OH):
        while made <= oh * sh + 2 * dh:
            _ring_row(buf, ba, at + slot * Wp * LANES, xa, xb, xend, made - ph, H, W, pw,
                      plane, zero, pads)
            made += 1
            slot = 0 if slot == R - 1 else slot + 1
        mid = top + dh if top + dh < R else top + dh - R
        low = top + 2 * dh if top + 2 * dh < R else top + 2 * dh - R
        at_out = ot + (oh * OW if whole else pend) * LANES
        _row8(ba + 4 * (at + top * Wp * LANES), ba + 4 * (at + mid * Wp * LANES),
              ba + 4 * (at + low * Wp * LANES), 4 * dw * LANES, 4 * sw * LANES, ba + 4 * wt,
              ba + 4 * at_out, OW, mode, epa + 4 * oc, 4 * O)
        top = top + sh if top + sh < R else top + sh - R
        if whole:
            while done + LANES <= (oh + 1) * OW:
                _t8x8(ba + 4 * (ot + done * LANES), 4 * LANES, oa + 4 * (ob + done), 4 * n)
                done += LANES
        else:
            k, ready = 0, pend + OW
            while k + LANES <= ready:
                _t8x8(ba + 4 * (ot + k * LANES), 4 * LANES, oa + 4 * (ob + done), 4 * n)
                done += LANES
                k += LANES
            for i in range((ready - k) * LANES):  # the rest to the front
                buf[ot + i] = buf[ot + k * LANES + i]
            pend = ready - k
    if whole and done < n and n >= LANES:
        # the last block overlapping the one before (final values again)
        _t8x8(ba + 4 * (ot + (n - LANES) * LANES), 4 * LANES, oa + 4 * (ob + n - LANES),
              4 * n)
    elif done < n:
        of = ptr_like(oa, zero)
        base = ot if not whole else ot + done * LANES
        for c in range(LANES):
            for q in range(n - done):
                of[ob + c * n + done + q] = buf[base + q * LANES + c]


@njit(inline="always")
def _ring_row(buf, ba, d, xa, xb, xend, ih, H, W, pw, plane, zero, pads):
    """Padded input row ``ih`` (of the unpadded plane; zeros outside it) of the eight
    channels at ``buf[d:]``, channel-last: eight columns a block, the last block overlapping
    the one before it (the same values again); its pad columns zeroed if ``pads``. A plane
    narrower than eight with pads as wide as the rest reads into the rows after (inside
    the input) and writes into its right pad (``pads`` then); a narrower one goes one
    element at a time."""
    Wp = W + 2 * pw
    if ih < 0 or ih >= H:
        if pads:
            for i in range(Wp * LANES):
                buf[d + i] = zero
        return
    s = xb + ih * W
    dd = d + pw * LANES
    iw = 0
    while iw < W:
        i0 = iw if iw + LANES <= W or W < LANES else W - LANES
        if s + i0 + (LANES - 1) * plane + LANES <= xend and W + pw >= LANES:
            _t8x8(xa + 4 * (s + i0), 4 * plane, ba + 4 * (dd + i0 * LANES), 4 * LANES)
        else:  # a plane narrower than its pad allows, or the input's end: one at a time
            xp = ptr_like(xa, zero)
            for c in range(LANES):
                for j in range(i0, min(i0 + LANES, W)):
                    buf[dd + j * LANES + c] = xp[s + c * plane + j]
        iw = i0 + LANES
    if pads:
        for j in range(pw * LANES):
            buf[d + j] = zero
            buf[d + (pw + W) * LANES + j] = zero
