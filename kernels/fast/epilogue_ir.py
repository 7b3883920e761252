"""The fused per-channel epilogue as LLVM IR, on vectors still in registers.

``kernels.conv.typed_direct.channel_epilogue`` says what it computes: the conv's bias,
batch norm as ``_native_batch_norm_legit_no_training`` computes it, then relu or a clamp,
each a separate rounded operation in that order (no fast-math flags: LLVM never fuses or
reorders them), so a kernel that runs it before its stores gives the same bits as the
separate pass over the stored outputs.
"""
from __future__ import annotations

# the clamp's bounds' places in an epilogue's seven constants (``bind_fused``: bias, mean,
# invstd, weight, bias, then the bounds)
EP_LO, EP_HI = 5, 6


def emit_epilogue(builder, values, constant, relu, zero):
    """``values`` (vectors) after the epilogue: ((v + cb) - mu) * inv * wc + bc, then relu
    (``relu`` True: NaN kept, -0.0 -> 0) or min(max(v, lo), hi) (NaN kept). ``constant(k)``
    emits the k-th constant as a vector of the values' type; ``zero``: that type's zero
    vector."""
    ops = (builder.fadd, builder.fsub, builder.fmul, builder.fmul, builder.fadd)
    for k, op in enumerate(ops):
        c = constant(k)
        values = [op(v, c) for v in values]
    if relu:
        return [builder.select(builder.fcmp_unordered(">", v, zero), v, zero) for v in values]
    lo = constant(EP_LO)
    values = [builder.select(builder.fcmp_ordered("<", v, lo), lo, v) for v in values]
    hi = constant(EP_HI)
    return [builder.select(builder.fcmp_ordered(">", v, hi), hi, v) for v in values]
