"""The compiled entry of XnnpackBackend: a DelegateCall run by the fast loop without Python.

``bind(handle, ctx, args)`` (called once when a method loads on the fast tier)
returns a kernel over the descriptor ABI, like any compiled op: its state
array holds the XNNPACK function pointers, the external-value table and, per
external value, the descriptor row of its tensor and what was last passed to
XNNPACK. Each run does what ``XnnpackBackend._execute`` does, in C: reshape
the inputs whose sizes changed (then re-plan and read back the output
shapes), resize the output descriptors, point the external values at the
current data (a padded staging copy for an input without XNNPACK's 16 bytes
of slack after it), set the runtime up only when something moved, invoke.

The handle's runtime is shared with the Python path (reference tier, devtools,
the first error report): ``state[S_OWNER]`` names who set the runtime up last,
so each side redoes its reshape and setup after the other ran. An xnn failure
returns an ExecuTorch error code and leaves the step and xnn_status in the state
array for ``explain``. Declines (returns None) for what it does not model:
a library without the reshape API, non-tensor arguments, int64 outputs widened
from XNNPACK's int32, read-only outputs.
"""
from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from pyruntime.cython_ext.errors import ErrorCode
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.xnnpack.blob import BACKEND
from pyruntime.delegates.xnnpack.ctypes_api import STATUS, XNN_EXTRA_BYTES, XNN_MAX_TENSOR_DIMS
from pyruntime.kernels.fast.deferred import carray, intrinsic, njit, types
from pyruntime.kernels.fast.nb import desc, lazy, ptr_like, resize_to

# ---- state array layout (int64 words) ------------------------------------------------
W_LEN, W_TOKEN, W_INVOKE, W_SETUP, W_RESHAPE_EXT, W_RESHAPE_RT, W_SHAPE = range(7)
W_NIN, W_NOUT, W_STATUS, W_STEP, W_WHICH, W_NDIM, W_HANDLE = range(7, 14)
HEADER = 16  # then 2 words per external value (struct xnn_external_value), then records
# per external value record
E_DESC, E_ID, E_ELSIZE, E_CL, E_SLOT, E_SAFE_LO, E_SAFE_HI, E_STAGE, E_STAGE_N, E_PTR, \
    E_NDIM, E_DIMS = range(12)
E_TMP = E_DIMS + XNN_MAX_TENSOR_DIMS
REC = 32
# handle state (shared by every kernel bound to one handle and the Python path)
S_OWNER, S_RUNTIME = 0, 1
# failing steps
STEP_RESHAPE_EXT, STEP_RESHAPE_RT, STEP_SHAPE, STEP_SETUP, STEP_INVOKE, STEP_NO_DATA, \
    STEP_RESIZE, STEP_RANK, STEP_CLOSED = range(1, 10)
_INTERNAL, _INVALID_STATE, _INVALID_ARG = int(ErrorCode.Internal), int(ErrorCode.InvalidState), \
    int(ErrorCode.InvalidArgument)
_INVALID_HANDLE = int(ErrorCode.DelegateInvalidHandle)


# ---- calls through C function pointers (xnn_status is a C int) --------------------------
def _fn(builder, addr, argtys):
    fnty = ir.FunctionType(ir.IntType(32), argtys)
    return builder.inttoptr(addr, fnty.as_pointer())


_I8P, _I64, _I32 = ir.IntType(8).as_pointer(), ir.IntType(64), ir.IntType(32)


@intrinsic
def _call_p(typingctx, fn, a):
    """``int f(void*)`` at address ``fn``."""
    def codegen(context, builder, sig, args):
        r = builder.call(_fn(builder, args[0], [_I8P]), [builder.inttoptr(args[1], _I8P)])
        return builder.sext(r, _I64)
    return types.int64(types.int64, types.int64), codegen


@intrinsic
def _call_pzp(typingctx, fn, a, b, c):
    """``int f(void*, size_t, void*)`` (xnn_setup_runtime_v2)."""
    def codegen(context, builder, sig, args):
        f = _fn(builder, args[0], [_I8P, _I64, _I8P])
        r = builder.call(f, [builder.inttoptr(args[1], _I8P), args[2],
                             builder.inttoptr(args[3], _I8P)])
        return builder.sext(r, _I64)
    return types.int64(types.int64, types.int64, types.int64, types.int64), codegen


@intrinsic
def _call_puzp(typingctx, fn, a, b, c, d):
    """``int f(void*, uint32_t, size_t, size_t*)`` (xnn_reshape_external_value)."""
    def codegen(context, builder, sig, args):
        f = _fn(builder, args[0], [_I8P, _I32, _I64, _I8P])
        r = builder.call(f, [builder.inttoptr(args[1], _I8P), builder.trunc(args[2], _I32),
                             args[3], builder.inttoptr(args[4], _I8P)])
        return builder.sext(r, _I64)
    return types.int64(types.int64, types.int64, types.int64, types.int64, types.int64), codegen


@intrinsic
def _call_pupp(typingctx, fn, a, b, c, d):
    """``int f(void*, uint32_t, size_t*, size_t*)`` (xnn_get_external_value_shape)."""
    def codegen(context, builder, sig, args):
        f = _fn(builder, args[0], [_I8P, _I32, _I8P, _I8P])
        r = builder.call(f, [builder.inttoptr(args[1], _I8P), builder.trunc(args[2], _I32),
                             builder.inttoptr(args[3], _I8P), builder.inttoptr(args[4], _I8P)])
        return builder.sext(r, _I64)
    return types.int64(types.int64, types.int64, types.int64, types.int64, types.int64), codegen


# ---- the kernel ------------------------------------------------------------------------
@njit(inline="always")
def _fail(w, hs, step, which, st, code):
    w[W_STEP] = step
    w[W_WHICH] = which
    w[W_STATUS] = st
    hs[S_OWNER] = -1  # the runtime may be half re-planned: everyone redoes everything
    return code


def xnn_delegate(block):
    b = carray(block, 2)
    w = carray(ptr_like(b[0], np.int64(0)), HEADER)
    w = carray(ptr_like(b[0], np.int64(0)), w[W_LEN])
    hs = carray(ptr_like(b[1], np.int64(0)), 4)
    rt = hs[S_RUNTIME]
    if rt == 0:
        return _fail(w, hs, STEP_CLOSED, -1, 0, _INVALID_HANDLE)
    token = w[W_TOKEN]
    fresh = hs[S_OWNER] != token
    nin = w[W_NIN]
    nout = w[W_NOUT]
    base = b[0]
    reshape = fresh
    setup = fresh
    for k in range(nin):
        r = HEADER + 2 * (nin + nout) + REC * k
        d = desc(w[r + E_DESC])
        nd = d[2]
        if nd > XNN_MAX_TENSOR_DIMS:
            return _fail(w, hs, STEP_RANK, w[r + E_ID], 0, _INVALID_ARG)
        t = r + E_TMP
        if w[r + E_CL] != 0:
            w[t] = d[8]
            w[t + 1] = d[10]
            w[t + 2] = d[11]
            w[t + 3] = d[9]
        else:
            for i in range(nd):
                w[t + i] = d[8 + i]
        same = not fresh and w[r + E_NDIM] == nd
        if same:
            for i in range(nd):
                if w[r + E_DIMS + i] != w[t + i]:
                    same = False
                    break
        if not same:
            for i in range(nd):
                w[r + E_DIMS + i] = w[t + i]
            w[r + E_NDIM] = nd
            st = _call_puzp(w[W_RESHAPE_EXT], rt, w[r + E_ID], nd, base + 8 * (r + E_DIMS))
            if st != 0:
                w[r + E_NDIM] = -1
                return _fail(w, hs, STEP_RESHAPE_EXT, w[r + E_ID], st, _INVALID_ARG)
            reshape = True
        p = d[0]
        n = d[3] * w[r + E_ELSIZE]
        if p == 0:
            return _fail(w, hs, STEP_NO_DATA, w[r + E_ID], 0, _INVALID_STATE)
        if not (w[r + E_SAFE_LO] <= p and p + n + XNN_EXTRA_BYTES <= w[r + E_SAFE_HI]):
            # no slack after the data: XNNPACK's over-read must land in our staging copy
            if n + XNN_EXTRA_BYTES > w[r + E_STAGE_N]:
                return _fail(w, hs, STEP_NO_DATA, w[r + E_ID], 0, _INVALID_STATE)
            src = carray(ptr_like(p, np.uint8(0)), max(n, 1))
            dst = carray(ptr_like(w[r + E_STAGE], np.uint8(0)), max(n, 1))
            for i in range(n):
                dst[i] = src[i]
            p = w[r + E_STAGE]
        if p != w[r + E_PTR]:
            w[r + E_PTR] = p
            w[HEADER + 2 * w[r + E_SLOT] + 1] = p
            setup = True
    if reshape:
        st = _call_p(w[W_RESHAPE_RT], rt)
        if st != 0:
            return _fail(w, hs, STEP_RESHAPE_RT, -1, st, _INVALID_ARG)
        setup = True
        for k in range(nin, nin + nout):
            r = HEADER + 2 * (nin + nout) + REC * k
            st = _call_pupp(w[W_SHAPE], rt, w[r + E_ID], base + 8 * W_NDIM,
                            base + 8 * (r + E_DIMS))
            if st != 0 or w[W_NDIM] > XNN_MAX_TENSOR_DIMS:
                return _fail(w, hs, STEP_SHAPE, w[r + E_ID], st, _INTERNAL)
            w[r + E_NDIM] = w[W_NDIM]
    for k in range(nin, nin + nout):
        r = HEADER + 2 * (nin + nout) + REC * k
        d = desc(w[r + E_DESC])
        nd = w[r + E_NDIM]
        t = r + E_TMP
        if w[r + E_CL] != 0 and nd == 4:
            w[t] = w[r + E_DIMS]
            w[t + 1] = w[r + E_DIMS + 3]
            w[t + 2] = w[r + E_DIMS + 1]
            w[t + 3] = w[r + E_DIMS + 2]
        else:
            for i in range(nd):
                w[t + i] = w[r + E_DIMS + i]
        if resize_to(d, w[t:t + nd], nd) != 0:
            return _fail(w, hs, STEP_RESIZE, w[r + E_ID], 0, _INVALID_STATE)
        p = d[0]
        if p == 0:
            return _fail(w, hs, STEP_NO_DATA, w[r + E_ID], 0, _INVALID_STATE)
        if p != w[r + E_PTR]:
            w[r + E_PTR] = p
            w[HEADER + 2 * w[r + E_SLOT] + 1] = p
            setup = True
    if setup:
        st = _call_pzp(w[W_SETUP], rt, nin + nout, base + 8 * HEADER)
        if st != 0:
            return _fail(w, hs, STEP_SETUP, -1, st, _INTERNAL)
    hs[S_OWNER] = token
    st = _call_p(w[W_INVOKE], rt)
    if st != 0:
        return _fail(w, hs, STEP_INVOKE, -1, st, _INTERNAL)
    return 0


def kernel():
    return lazy(xnn_delegate)


# ---- binding -----------------------------------------------------------------------------
def _addr(fn) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def _region(a: np.ndarray):
    """(first byte, one past the last) of the allocation ``a`` views."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root.ctypes.data, root.ctypes.data + root.nbytes


_STAGE_ALWAYS, _STAGE_MAX = 1 << 24, 1 << 28  # staging buffer sizes (bytes)


def bind(h, ctx, args, check_elsize):
    """The compiled entry for one DelegateCall of handle ``h`` over ``args`` (the
    instruction's values), or None to keep the Python path."""
    api = h.api
    if h.runtime is None or not h.dynamic or len(args) < h.n_args:
        return None
    if not api.has("xnn_setup_runtime_v2", "xnn_invoke_runtime", "xnn_reshape_external_value",
                   "xnn_reshape_runtime", "xnn_get_external_value_shape"):
        return None
    compiled = kernel()  # before any state changes: KernelNotReady leaves the handle as it was
    exts = h.inputs + h.outputs
    for e in exts:
        t = args[e.ext_id]
        if not isinstance(t, ETensor) or t.ndim > XNN_MAX_TENSOR_DIMS:
            return None
        try:
            check_elsize(e, t, "input" if e in h.inputs else "output")
        except Exception:  # noqa: BLE001 - the Python path reports it when it runs
            return None
        if e.widen:
            return None
    for e in h.outputs:
        st = args[e.ext_id].storage
        if st is None or not st.flags.writeable:
            return None
    n = len(exts)
    w = np.zeros(HEADER + 2 * n + REC * n, np.int64)
    h.tokens += 1
    w[W_LEN], w[W_TOKEN] = len(w), h.tokens
    w[W_INVOKE] = _addr(api.xnn_invoke_runtime)
    w[W_SETUP] = _addr(api.xnn_setup_runtime_v2)
    w[W_RESHAPE_EXT] = _addr(api.xnn_reshape_external_value)
    w[W_RESHAPE_RT] = _addr(api.xnn_reshape_runtime)
    w[W_SHAPE] = _addr(api.xnn_get_external_value_shape)
    w[W_NIN], w[W_NOUT] = len(h.inputs), len(h.outputs)
    w[W_STEP], w[W_WHICH] = 0, -1
    for k, e in enumerate(exts):
        t = args[e.ext_id]
        r = HEADER + 2 * n + REC * k
        w[HEADER + 2 * k] = e.ext_id
        w[r + E_DESC] = ctx.desc(t)
        w[r + E_ID] = e.ext_id
        w[r + E_ELSIZE] = e.elsize
        w[r + E_CL] = int(t.ndim == 4 and tuple(t.dim_order) == (0, 2, 3, 1))
        w[r + E_SLOT] = k
        w[r + E_NDIM] = -1
        if k < len(h.inputs):
            nbytes = max(t.capacity, t.numel) * e.elsize + XNN_EXTRA_BYTES
            slack = False
            if t.storage is not None and t.storage.nbytes:
                lo, hi = _region(t.storage)
                w[r + E_SAFE_LO], w[r + E_SAFE_HI] = lo, hi
                slack = t.storage.ctypes.data + nbytes <= hi
            if nbytes <= _STAGE_ALWAYS or (not slack and nbytes <= _STAGE_MAX):
                w[r + E_STAGE] = ctx.buffer(nbytes)  # a moved pointer may land without slack
                w[r + E_STAGE_N] = nbytes
            elif not slack:
                return None  # a huge staging copy per call: leave it to the Python path
    ctx.scratch += [w, h.state]
    fn, block = ctx.bind(compiled, [w.ctypes.data, h.state.ctypes.data])
    h.kernels.append(w)
    return fn, block, lambda status: explain(w, status)


_STEPS = {STEP_RESHAPE_EXT: "xnn_reshape_external_value (input {which})",
          STEP_RESHAPE_RT: "xnn_reshape_runtime",
          STEP_SHAPE: "xnn_get_external_value_shape (output {which})",
          STEP_SETUP: "setting up the XNNPACK runtime", STEP_INVOKE: "xnn_invoke_runtime"}


def explain(w: np.ndarray, status: int) -> str:
    """The message for a failed run of the kernel whose state array is ``w``."""
    step, which, st = int(w[W_STEP]), int(w[W_WHICH]), int(w[W_STATUS])
    if step in _STEPS:
        what = _STEPS[step].format(which=which)
        return f"{BACKEND}: {what} failed with xnn_status {STATUS.get(st, st)}"
    if step == STEP_CLOSED:
        return f"{BACKEND}: handle destroyed"
    if step == STEP_NO_DATA:
        return f"{BACKEND}: external value {which} has no data (or more than its capacity)"
    if step == STEP_RESIZE:
        return f"{BACKEND}: output {which} cannot be resized to the shape XNNPACK computed"
    if step == STEP_RANK:
        return f"{BACKEND}: input {which} has more than {XNN_MAX_TENSOR_DIMS} dimensions"
    return f"{BACKEND}: compiled delegate call failed with status {status}"
