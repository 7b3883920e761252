"""The Ethos-U85's arithmetic where it differs from the Ethos-U55's (``ops.py``).

- Weights: ``weights_u85`` decodes both weight decoders' streams (``WEIGHT_FORMAT``).
- Bias/scale records: their layout follows the accumulator format
  (``weights_u85.unpack_scales_u85``).
- POOL: SUM adds the window and scales by ``OFM_SCALE``; AVERAGE divides the window's sum
  by its count of real elements (padding excluded) with the NPU's reciprocal
  (``ops.pooling_scale``), then applies ``OFM_SCALE``; MIN is MAX's mirror.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode
from pyruntime.delegates.ethosu import weights_u85 as W85
from pyruntime.delegates.ethosu.npu import Operation
from pyruntime.delegates.ethosu.ops import (Executor, _padded, _taps, combine, op_error,
                                            output, pooling_scale, read_fm, scale_values)

_BIG = 1 << 40  # padding for max/min pooling: beyond any accumulator value


class ExecutorU85(Executor):
    def load_weights(self, items) -> None:
        if not items:
            return
        try:
            decoded = W85.decode_streams([raw for _, raw in items],
                                         [W85.layout_of(op, self.arch) for op, _ in items])
        except ImportError as e:
            raise op_error(items[0][0], f"{W85.INSTALL_HINT} ({e})", ErrorCode.NotFound) \
                from None
        except W85.U85WeightError as e:
            op = items[e.item][0] if 0 <= e.item < len(items) else items[0][0]
            wr, spans = op.attrs["weights"]
            where = ", ".join(f"{wl} bytes at {wb:#x}" for wb, wl in spans)
            raise op_error(op, f"{op.attrs['weight_format']} weight stream in region {wr} "
                               f"({where}): {e}") from None
        for (op, raw), w in zip(items, decoded):
            self._w[op.index] = (raw, w)

    def weight_bytes(self, op: Operation, regions):
        """The bytes of ``op``'s weight stream, or one stream per weight decoder (the
        standard format on configurations of several)."""
        wr, spans = op.attrs["weights"]
        raws = [regions[wr][wb:wb + wl].tobytes() for wb, wl in spans]
        return raws[0] if len(raws) == 1 else raws

    def unpack_scales(self, op: Operation, raw: np.ndarray):
        return W85.unpack_scales_u85(raw, op.ofm.dims[2], op.attrs["acc_bits"] == 48)

    def _pool(self, op: Operation, regions) -> None:
        x = read_fm(op.ifm, regions)
        mode = op.attrs["mode"]
        scale, shift = op.attrs["ofm_scale"]
        if mode in ("MAX", "MIN"):
            sign = 1 if mode == "MAX" else -1
            xp = _padded(op, sign * x, -_BIG)
            acc = None
            for _, _, t in _taps(op, xp):
                acc = t.copy() if acc is None else np.maximum(acc, t)
            output(op, sign * acc, scale, shift, regions)
            return
        xp = _padded(op, x, 0)
        acc = np.zeros(op.ofm.dims, np.int64)
        for _, _, t in _taps(op, xp):
            acc += t
        if mode == "AVERAGE":
            ones = _padded(op, np.ones(x.shape[:2] + (1,), np.int64), 0)
            count = np.zeros(op.ofm.dims[:2] + (1,), np.int64)
            for _, _, t in _taps(op, ones):
                count += t
            rscale, rshift = pooling_scale(np.maximum(count, 1))
            acc = scale_values(acc, rscale, rshift, op.attrs["rounding"])
        output(op, acc, scale, shift, regions)

    def _elementwise(self, op: Operation, regions) -> None:
        a_ = op.attrs
        mode = a_["mode"]
        a = read_fm(op.ifm, regions)
        if op.ifm2 is not None:
            b = np.broadcast_to(read_fm(op.ifm2, regions), op.ofm.dims)
        elif mode != "ABS":
            b = np.full(op.ofm.dims, a_["scalar"], np.int64)
        else:
            b = None
        a = np.broadcast_to(a, op.ofm.dims)
        if mode != "MUL":  # MUL's operand scales are 1 (npu_u85 refuses others)
            scales = a_["operand_scales"]
            a = scale_values(a, *scales[0])
            if b is not None:
                b = scale_values(b, *scales[1])
        scale, shift = a_["ofm_scale"]
        output(op, combine(mode, a, b), scale, shift, regions)
