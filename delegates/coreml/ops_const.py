"""Weight-decompression (``constexpr_*``), quantization and state MIL ops.

The ``constexpr_*`` ops take only constants, so the interpreter evaluates them
once when a delegate loads (iOS16 forms, and iOS18's ``compression`` forms
with sub-byte indices and block-wise scales).

``read_state``/``write_state`` (iOS18) act on the handle's state store: one
array per state input of the function, zero-filled when the delegate loads
(as ExecuTorch's CoreML delegate resets them), kept across ``execute`` calls.
"""
from __future__ import annotations

import numpy as np

from pyruntime.delegates.coreml.blobs import unpack_bits
from pyruntime.delegates.coreml.ops import axis_of, cast_to, dtype_of_string, ilist, mil_op, op_error


def _along(p, axis: int, rank: int) -> np.ndarray:
    """A per-axis parameter (scalar or 1-D) shaped to broadcast along ``axis``."""
    p = np.asarray(p)
    if p.ndim == 0:
        return p
    shape = [1] * rank
    shape[axis] = p.size
    return p.reshape(shape)


@mil_op("constexpr_affine_dequantize", upcast=False)
def constexpr_affine_dequantize(quantized_data, zero_point, scale, axis):
    q = np.asarray(quantized_data)
    s = np.asarray(scale)
    ax = axis_of(axis, q.ndim)
    zp = _along(np.asarray(zero_point).astype(np.float32), ax, q.ndim)
    return ((q.astype(np.float32) - zp) * _along(s.astype(np.float32), ax, q.ndim)).astype(s.dtype)


@mil_op("constexpr_cast", upcast=False)
def constexpr_cast(source_val, output_dtype):
    return cast_to(source_val, dtype_of_string(output_dtype))


def _repeat_blocks(p, shape) -> np.ndarray:
    """Expand a block-wise parameter (same rank, each dim dividing ``shape``) to ``shape``."""
    p = np.asarray(p)
    if p.ndim == 0:
        return p
    if p.ndim != len(shape) or any(s % b for s, b in zip(shape, p.shape) if b):
        raise op_error(f"block-wise parameter {list(p.shape)} does not tile {list(shape)}")
    for ax, (s, b) in enumerate(zip(shape, p.shape)):
        if b != s:
            p = np.repeat(p, s // b, axis=ax)
    return p


@mil_op("constexpr_blockwise_shift_scale", upcast=False)
def constexpr_blockwise_shift_scale(data, scale, offset=None):
    d = np.asarray(data)
    s = np.asarray(scale)
    x = d.astype(np.float32)
    if offset is not None:
        x = x - _repeat_blocks(np.asarray(offset).astype(np.float32), d.shape)
    return (x * _repeat_blocks(s.astype(np.float32), d.shape)).astype(s.dtype)


def _lut_dense(indices, lut, vector_axis):
    """iOS18 palettization: ``lut`` [*blocks, palette, vector]; block b_i covers
    shape_i / blocks_i positions of axis i."""
    idx = np.asarray(indices).astype(np.int64)
    lut = np.asarray(lut)
    r = idx.ndim
    if lut.ndim != r + 2 or any(s % b for s, b in zip(idx.shape, lut.shape[:r])):
        raise op_error(f"constexpr_lut_to_dense: lut {list(lut.shape)} for indices "
                       f"{list(idx.shape)}")
    if idx.size and (idx.min() < 0 or idx.max() >= lut.shape[r]):
        raise op_error("constexpr_lut_to_dense: palette index out of range")
    sel = []
    for ax, (s, b) in enumerate(zip(idx.shape, lut.shape[:r])):
        shp = [1] * r
        shp[ax] = s
        sel.append((np.arange(s) // (s // b)).reshape(shp))
    vals = lut[tuple(sel) + (idx,)]  # shape + (vector,)
    vs = lut.shape[-1]
    if vs == 1:
        return vals[..., 0]
    ax = axis_of(vector_axis, r)
    vals = np.moveaxis(vals, -1, ax + 1)
    shape = list(idx.shape)
    shape[ax] *= vs
    return vals.reshape(shape)


@mil_op("constexpr_lut_to_dense", upcast=False)
def constexpr_lut_to_dense(indices, lut, shape=None, vector_axis=None):
    if shape is not None:  # iOS16: 1-D lut, indices packed as uint8 bytes
        lut = np.asarray(lut)
        shp = ilist(shape)
        nbits = int(np.log2(lut.shape[-1]))
        idx = unpack_bits(np.asarray(indices).astype(np.uint8).reshape(-1), nbits,
                          int(np.prod(shp)), False)
        return lut[idx.astype(np.int64)].reshape(shp)
    return _lut_dense(indices, lut, vector_axis)


def _unpack_mask(mask, shape):
    return unpack_bits(np.asarray(mask).astype(np.uint8).reshape(-1), 1,
                       int(np.prod(shape)), False).reshape(shape).astype(bool)


@mil_op("constexpr_sparse_to_dense", upcast=False)
def constexpr_sparse_to_dense(nonzero_data, mask, shape=None):
    nz = np.asarray(nonzero_data)
    m = _unpack_mask(mask, ilist(shape)) if shape is not None else np.asarray(mask).astype(bool)
    if int(m.sum()) != nz.size:
        raise op_error(f"constexpr_sparse_to_dense: {int(m.sum())} mask bits, {nz.size} values")
    out = np.zeros(m.shape, nz.dtype)
    out[m] = nz.reshape(-1)
    return out


@mil_op("constexpr_lut_to_sparse", upcast=False)
def constexpr_lut_to_sparse(indices_mask, indices_nonzero_data, lut, vector_axis=None):
    m = np.asarray(indices_mask).astype(bool)
    idx = np.zeros(m.shape, np.int64)
    nz = np.asarray(indices_nonzero_data).reshape(-1)
    if int(m.sum()) != nz.size:
        raise op_error("constexpr_lut_to_sparse: mask and data disagree")
    idx[m] = nz
    dense = _lut_dense(idx, lut, vector_axis)
    vs = np.asarray(lut).shape[-1]
    if vs > 1:
        m = np.repeat(m, vs, axis=axis_of(vector_axis, m.ndim))
    return m.astype(np.uint8), dense[m]


@mil_op("constexpr_sparse_blockwise_shift_scale", upcast=False)
def constexpr_sparse_blockwise_shift_scale(data_mask, nonzero_data, scale, offset=None):
    m = np.asarray(data_mask).astype(bool)
    nz = np.asarray(nonzero_data)
    dense = np.zeros(m.shape, nz.dtype)
    dense[m] = nz.reshape(-1)
    return np.asarray(data_mask), constexpr_blockwise_shift_scale(dense, scale, offset)[m]


@mil_op("dequantize", upcast=False)
def dequantize(input, scale, zero_point=None, axis=None):
    q = np.asarray(input)
    s = np.asarray(scale)
    ax = axis_of(axis, q.ndim) if axis is not None else 0
    x = q.astype(np.float32)
    if zero_point is not None:
        x = x - _along(np.asarray(zero_point).astype(np.float32), ax, q.ndim)
    return (x * _along(s.astype(np.float32), ax, q.ndim)).astype(s.dtype)


@mil_op("quantize", upcast=False)
def quantize(input, scale, output_dtype, zero_point=None, axis=None):
    x = np.asarray(input).astype(np.float32)
    ax = axis_of(axis, x.ndim) if axis is not None else 0
    y = x / _along(np.asarray(scale).astype(np.float32), ax, x.ndim)
    if zero_point is not None:
        y = y + _along(np.asarray(zero_point).astype(np.float32), ax, x.ndim)
    dt = dtype_of_string(output_dtype)
    info = np.iinfo(dt)
    return np.clip(np.rint(y), info.min, info.max).astype(dt)


# ---- states (iOS18) ------------------------------------------------------------------------
@mil_op("read_state", upcast=False, stateful=True)
def read_state(input, _states):
    return _states[input]


@mil_op("write_state", upcast=False, stateful=True)
def write_state(input, data, _states):
    cur = _states[input]
    d = np.asarray(data)
    if d.shape != cur.shape:
        raise op_error(f"write_state: data {list(d.shape)} for a state of shape "
                       f"{list(cur.shape)}")
    _states[input] = d.astype(cur.dtype, copy=True)  # never alias a value of this run
    return None
