"""The direct convolution loop (one input channel per group: depthwise convolutions, a
1-channel input) and the per-channel epilogue of a fused convolution (``kernels.conv.typed``
runs both; ``bind_fused`` says what the epilogue does).

The direct loop sums each output row over the kernel taps of strided input rows, in
ExecuTorch's order (the taps of one output in row-major order), from a zero-padded copy
of the plane when there is padding: memory-bound, so no gemm.
"""
from __future__ import annotations

from pyruntime.cython_ext.abi import D_DATA, D_NUMEL
from pyruntime.kernels.conv.typed_lanes import (LANES, ROW_EPILOGUE, ROW_FMA, ROW_RELU,
                                                lanes_start, planes8)
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import ptr_like

# what a fused epilogue runs (``bind_fused``'s flags)
EP_BIAS, EP_BN, EP_CLAMP, EP_RELU = 1, 2, 4, 8
# elements between the zero-padded plane and the flat output plane in the scratch: the flat
# 3x3 loop reads up to 15 past the padded plane, and those reads must not overlap its
# writes (LLVM's overlap check would then run the loop scalar)
PAD_GAP = 16


@njit
def channel_epilogue(of, base, L, oc, O, ep, flags):
    """What the fused instructions would do to output channel ``oc``'s ``L`` values at
    ``of[base:]``, in one pass, in their order and types: the conv's bias, batch norm as
    ``_native_batch_norm_legit_no_training`` computes it ((x - mean) * invstd * weight +
    bias), then hardtanh/clamp or relu (NaN passes through both). ``ep`` holds, per
    channel, [bias | mean | invstd | weight | bias | lo | hi] (``bind_fused``); a part
    not fused holds its identity (bias -0.0, batch norm (0, 1, 1, -0.0), bounds -inf/inf:
    exact for every value, -0.0 and NaN included), so one branch-free loop serves all."""
    cb, mu, inv = ep[oc], ep[O + oc], ep[2 * O + oc]
    wc, bc, lo, hi = ep[3 * O + oc], ep[4 * O + oc], ep[5 * O + oc], ep[6 * O + oc]
    if flags & EP_RELU:
        for i in range(L):
            v = ((of[base + i] + cb) - mu) * inv * wc + bc
            of[base + i] = v if v > 0 or v != v else 0
    else:  # the unary kernel's clamp: min(max(v, lo), hi), NaN kept
        for i in range(L):
            v = ((of[base + i] + cb) - mu) * inv * wc + bc
            v = lo if v < lo else v
            of[base + i] = hi if v > hi else v


@njit
def _pad_plane(dst, xp, xb, H, W, ph, pw, borders):
    """Copy one (H, W) input plane into ``dst`` as a zero-padded (H+2ph, W+2pw) plane; the
    zero borders only when ``borders`` (the next planes of a call reuse them)."""
    Wp = W + 2 * pw
    if borders:
        for i in range(ph * Wp):
            dst[i] = 0
            dst[(ph + H) * Wp + i] = 0
        for ih in range(H):
            d = (ph + ih) * Wp
            for j in range(pw):
                dst[d + j] = 0
                dst[d + pw + W + j] = 0
    for ih in range(H):
        d = (ph + ih) * Wp + pw
        s = xb + ih * W
        for j in range(W):
            dst[d + j] = xp[s + j]


@njit
def direct_conv(buf, x, w, o, N, C, H, W, O, g, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW, zero,
                item, ep, ep_address, flags, p0, p1, fma):
    """One input channel per group: every output row is a sum over the kernel taps of
    strided input rows, read from a zero-padded copy of the plane when there is padding,
    added tap by tap onto the zeroed out. 3x3 kernels (most depthwise convolutions) sum
    their nine taps in registers, left to right: the same sum; float32 depthwise ones
    eight channels at a time (``typed_lanes.planes8``; ``fma``: fused multiply-adds). The
    fused epilogue (if any) runs on each plane as soon as it is done. Output planes
    [p0, p1) of the N * O."""
    pad = ptr_like(buf.ctypes.data, zero)
    Hp = H + 2 * ph
    tmp = ptr_like(buf.ctypes.data + (Hp * (W + 2 * pw) + PAD_GAP if ph or pw else 0) * item,
                   zero)
    if ph or pw:
        for i in range(PAD_GAP):  # (read into lanes that are dropped: finite, not garbage)
            pad[Hp * (W + 2 * pw) + i] = zero
    xp = ptr_like(x[D_DATA], zero)
    wf = ptr_like(w[0], zero)
    of = ptr_like(o[D_DATA], zero)
    og = O // g
    # eight channels at a time in the scratch after the one-plane loop's (so the padded
    # plane's borders, written once, stay)
    lanes = og == 1 and KH == 3 and KW == 3 and item == 4
    mode = (ROW_FMA if fma else 0) | (ROW_EPILOGUE if flags else 0) \
        | (ROW_RELU if flags & EP_RELU else 0)
    base8 = lanes_start(buf.ctypes.data, ((H + 2 * ph) * (W + 2 * pw) + PAD_GAP if ph or pw
                                          else 0) + (H + 2 * ph) * (W + 2 * pw))
    p = p0
    borders = True  # (the first padded plane writes the zero borders)
    fresh = True  # (and the first eight planes theirs)
    while p < p1:
        n, oc = p // O, p % O
        if lanes and oc + LANES <= O:  # (a part holds whole groups: ``_conv_part``)
            planes8(buf, buf.ctypes.data, base8, x[D_DATA], (n * C + oc) * H * W, x[D_NUMEL],
                    H, W, w[0], oc, o[D_DATA], p * OH * OW, ph, pw, sh, sw, dh, dw, OH, OW,
                    zero, ep_address, O, mode, fresh)
            fresh = False
            p += LANES
            continue
        xb = (n * C + oc // og) * H * W
        if ph or pw:
            if oc % og == 0 or borders:
                _pad_plane(pad, xp, xb, H, W, ph, pw, borders)
                borders = False
            src, sb = pad, 0
        else:
            src, sb = xp, xb
        ob = p * OH * OW
        for i in range(ob, ob + OH * OW):
            of[i] = zero
        _direct_plane(src, sb, wf, oc * KH * KW, of, ob, tmp, W + 2 * pw, KH, KW, sh, sw,
                      dh, dw, OH, OW, ph or pw)
        if flags:
            channel_epilogue(of, ob, OH * OW, oc, O, ep, flags)
        p += 1


@njit
def _direct_plane(src, sb, wf, wb, of, ob, tmp, Wp, KH, KW, sh, sw, dh, dw, OH, OW, padded):
    """One output plane of ``direct_conv`` (at ``of[ob:]``, zeroed) from its input plane at
    ``src[sb:]`` (``Wp`` wide) and its taps at ``wf[wb:]``; ``padded``: ``src`` is the
    zero-padded copy, with ``tmp`` right after it."""
    if KH == 3 and KW == 3 and sh == 1 and sw == 1 and OW >= 32:
        # stride 1, rows long enough to vectorize: straight into the out, row by row
        w0, w1, w2 = wf[wb], wf[wb + 1], wf[wb + 2]
        w3, w4, w5 = wf[wb + 3], wf[wb + 4], wf[wb + 5]
        w6, w7, w8 = wf[wb + 6], wf[wb + 7], wf[wb + 8]
        r1, r2 = dh * Wp, 2 * dh * Wp
        for oh in range(OH):
            q0 = sb + oh * Wp
            orow = ob + oh * OW
            for ow in range(OW):
                q = q0 + ow
                of[orow + ow] += (w0 * src[q] + w1 * src[q + dw] + w2 * src[q + 2 * dw]
                                  + w3 * src[q + r1] + w4 * src[q + r1 + dw]
                                  + w5 * src[q + r1 + 2 * dw] + w6 * src[q + r2]
                                  + w7 * src[q + r2 + dw] + w8 * src[q + r2 + 2 * dw])
        return
    if KH == 3 and KW == 3 and sh == 1 and sw == 1:
        # stride 1: the plane as one flat row of Wp-wide rows, so the vector loop runs
        # over OH * Wp positions (not OW); the Wp - OW wrapped columns per row are
        # computed into ``tmp`` and dropped
        w0, w1, w2 = wf[wb], wf[wb + 1], wf[wb + 2]
        w3, w4, w5 = wf[wb + 3], wf[wb + 4], wf[wb + 5]
        w6, w7, w8 = wf[wb + 6], wf[wb + 7], wf[wb + 8]
        r1, r2 = dh * Wp, 2 * dh * Wp
        n = (OH - 1) * Wp + OW
        if padded and Wp >= 7:
            # a whole number of 16-position blocks, so that no scalar remainder loop runs
            # (9 taps an element: a third of a 7x7 plane's time). The extra positions read
            # at most 15 elements past the padded plane (the PAD_GAP zeros after it) and
            # write at most 15 past the last kept one, inside ``tmp``'s Hp * Wp
            n = (n + 15) // 16 * 16
        for p in range(n):
            q = sb + p
            tmp[p] = (w0 * src[q] + w1 * src[q + dw] + w2 * src[q + 2 * dw]
                      + w3 * src[q + r1] + w4 * src[q + r1 + dw]
                      + w5 * src[q + r1 + 2 * dw] + w6 * src[q + r2]
                      + w7 * src[q + r2 + dw] + w8 * src[q + r2 + 2 * dw])
        for oh in range(OH):
            orow = ob + oh * OW
            for ow in range(OW):
                of[orow + ow] += tmp[oh * Wp + ow]
        return
    if KH == 3 and KW == 3:
        w0, w1, w2 = wf[wb], wf[wb + 1], wf[wb + 2]
        w3, w4, w5 = wf[wb + 3], wf[wb + 4], wf[wb + 5]
        w6, w7, w8 = wf[wb + 6], wf[wb + 7], wf[wb + 8]
        for oh in range(OH):
            r0 = sb + oh * sh * Wp
            r1 = r0 + dh * Wp
            r2 = r1 + dh * Wp
            orow = ob + oh * OW
            if sw == 2 and dw == 1:  # literal strides: LLVM vectorizes the even/odd
                for ow in range(OW):  # loads (1.5x the generic loop)
                    c = ow * 2
                    of[orow + ow] += (w0 * src[r0 + c] + w1 * src[r0 + c + 1]
                                      + w2 * src[r0 + c + 2] + w3 * src[r1 + c]
                                      + w4 * src[r1 + c + 1] + w5 * src[r1 + c + 2]
                                      + w6 * src[r2 + c] + w7 * src[r2 + c + 1]
                                      + w8 * src[r2 + c + 2])
                continue
            for ow in range(OW):
                c = ow * sw
                of[orow + ow] += (w0 * src[r0 + c] + w1 * src[r0 + c + dw]
                                  + w2 * src[r0 + c + 2 * dw] + w3 * src[r1 + c]
                                  + w4 * src[r1 + c + dw] + w5 * src[r1 + c + 2 * dw]
                                  + w6 * src[r2 + c] + w7 * src[r2 + c + dw]
                                  + w8 * src[r2 + c + 2 * dw])
        return
    for oh in range(OH):
        orow = ob + oh * OW
        for ki in range(KH):
            r = sb + (oh * sh + ki * dh) * Wp
            for kj in range(KW):
                wv = wf[wb + ki * KW + kj]
                s = r + kj * dw
                if sw == 1:
                    for ow in range(OW):
                        of[orow + ow] += wv * src[s + ow]
                else:
                    for ow in range(OW):
                        of[orow + ow] += wv * src[s + ow * sw]
