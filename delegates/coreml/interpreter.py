"""A MIL interpreter: runs one ML Program function in SSA order over numpy.

``compile_function`` does at load time everything that does not depend on the
inputs: it resolves every argument to a constant or an earlier value, looks
up each op (an op we lack raises NotSupported naming the MIL op), evaluates
ops whose inputs are all constants (``const``, the ``constexpr_*`` weight
ops, shape arithmetic on constants), widens float16 constants for ops that
compute in float32, and notes when each value is last used.

``run`` then executes the remaining steps: gather keyword arguments, call the
op, convert each result to the dtype the program declares (the fp16 rounding
of "fp16 semantics", see ``ops.py``), check it against the declared shape,
and drop values after their last use.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.coreml.model import Function, Op, np_dtype
from pyruntime.delegates.coreml.families import load_families
from pyruntime.delegates.coreml.ops import OPS, cast_to
from pyruntime.delegates.coreml.payload import BACKEND

_NO_FOLD = {"read_state", "write_state", "random_bernoulli", "random_categorical",
            "random_normal", "random_uniform"}
_LIST_PARAMS = {"values", "ref_tensors"}  # variadic inputs (a list even with one element)
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


class _Step:
    __slots__ = ("impl", "op", "consts", "names", "lists", "outs", "drop")

    def __init__(self, impl, op, consts, names, lists, outs):
        self.impl, self.op = impl, op
        self.consts, self.names, self.lists = consts, names, lists
        self.outs = [out_spec(v) for v in outs]  # (var, numpy dtype, static shape)
        self.drop = ()


def out_spec(var) -> tuple:
    """(var, numpy dtype or None, shape or None): what ``finish`` checks, decided once."""
    dt = np_dtype(var.dtype) if var.dtype not in (None, "string") else None
    shape = var.shape if var.shape is not None and None not in var.shape else None
    return var, dt, shape


def _where(op: Op) -> str:
    return f"MIL op {op.type!r} ({op.name})"


def finish(value, spec, op: Op):
    """Convert an op result to the declared dtype and check its declared shape."""
    var, dt, shape = spec
    if dt is None and var.dtype in (None, "string"):
        return value
    a = value if type(value) is np.ndarray else np.asarray(value)
    if dt is not None and a.dtype != dt:
        a = cast_to(a, dt) if a.dtype.kind == "f" and dt.kind in "iub" else a.astype(dt)
    if shape is not None and a.shape != shape:
        if a.size == 1 and (a.ndim == 0 or shape == ()) and \
                int(np.prod(shape, dtype=np.int64)) == 1:
            a = a.reshape(shape)
        else:
            raise ExecuTorchError(ErrorCode.Internal,
                                  f"{BACKEND}: {_where(op)} output {var.name!r}: computed shape "
                                  f"{list(a.shape)}, the program declares {list(shape)}")
    return a


def _upcast(v):
    if isinstance(v, np.ndarray) and v.dtype == _F16:
        return v.astype(_F32)
    if isinstance(v, list):
        return [_upcast(e) for e in v]
    return v


def call(step: _Step, kwargs: dict, states):
    impl = step.impl
    if impl.upcast:
        for k, v in kwargs.items():
            kwargs[k] = _upcast(v)
    if impl.stateful:
        kwargs["_states"] = states
    try:
        return impl.fn(**kwargs)
    except ExecuTorchError as e:
        raise e.with_context(_where(step.op)) from e
    except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError,
            MemoryError) as e:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{BACKEND}: {_where(step.op)}: {type(e).__name__}: {e}") from e


def _outputs(step: _Step, result):
    outs = step.outs
    if len(outs) == 1 and not isinstance(result, tuple):
        return [finish(result, outs[0], step.op)]
    if result is None and not outs:
        return []
    res = list(result) if isinstance(result, tuple) else [result]
    if len(res) < len(outs):
        raise ExecuTorchError(ErrorCode.Internal,
                              f"{BACKEND}: {_where(step.op)} gave {len(res)} results, the "
                              f"program declares {len(outs)}")
    return [finish(r, v, step.op) for r, v in zip(res, outs)]


class CompiledFunction:
    """A function ready to run: ``run(inputs: dict, states: dict) -> dict`` of outputs."""

    def __init__(self, fn: Function):
        load_families()
        self.fn = fn
        self.input_vars = [v for v in fn.inputs if not v.state]
        self.state_vars = [v for v in fn.inputs if v.state]
        self.consts: dict = {}
        known = {v.name for v in fn.inputs}
        state_names = {v.name for v in self.state_vars}
        self.steps: list = []
        for op in fn.block.ops:
            if op.type == "const":
                val = op.attributes.get("val")
                if val is None or len(op.outputs) != 1:
                    raise ExecuTorchError(ErrorCode.InvalidProgram,
                                          f"{BACKEND}: {_where(op)} has no value")
                self.consts[op.outputs[0].name] = finish(val, out_spec(op.outputs[0]), op)
                continue
            impl = OPS.get(op.type)
            if impl is None or op.blocks:
                raise ExecuTorchError(
                    ErrorCode.NotSupported,
                    f"{BACKEND}: MIL op {op.type!r} ({op.name}) is not supported by pyruntime's "
                    f"MIL interpreter ({len(OPS)} ops are: docs/COREML.md)")
            # constexpr_* ops carry their operands as attributes
            consts = {k: v for k, v in op.attributes.items() if k in impl.params}
            names, lists = [], []
            for param, binds in op.inputs.items():
                if param not in impl.params:
                    raise ExecuTorchError(ErrorCode.InvalidProgram,
                                          f"{BACKEND}: {_where(op)} has an unknown input "
                                          f"{param!r}")
                refs = []
                for kind, v in binds:
                    if kind == "value":
                        refs.append(("c", v))
                    elif v in state_names:
                        refs.append(("c", v))  # state ops take the state's name
                    elif v in self.consts:
                        refs.append(("c", self.consts[v]))
                    elif v in known:
                        refs.append(("n", v))
                    else:
                        raise ExecuTorchError(ErrorCode.InvalidProgram,
                                              f"{BACKEND}: {_where(op)} input {param!r} uses "
                                              f"{v!r} before it is defined")
                variadic = len(binds) != 1 or param in _LIST_PARAMS
                if not variadic:
                    kind, v = refs[0]
                    (consts.__setitem__(param, v) if kind == "c" else names.append((param, v)))
                elif all(k == "c" for k, _ in refs):
                    consts[param] = [v for _, v in refs]
                else:
                    lists.append((param, refs))
            step = _Step(impl, op, consts, names, lists, op.outputs)
            if not names and not lists and op.type not in _NO_FOLD:
                with np.errstate(all="ignore"):
                    vals = _outputs(step, call(step, dict(consts), None))
                for var, val in zip(op.outputs, vals):
                    self.consts[var.name] = val
                continue
            if impl.upcast:
                step.consts = {k: _upcast(v) for k, v in consts.items()}
            self.steps.append(step)
            known.update(v.name for v in op.outputs)
        for name in fn.block.outputs:
            if name not in known and name not in self.consts:
                raise ExecuTorchError(ErrorCode.InvalidProgram,
                                      f"{BACKEND}: function output {name!r} is never defined")
        self._plan_drops()

    def _plan_drops(self):
        last = {}
        for i, st in enumerate(self.steps):
            for _, n in st.names:
                last[n] = i
            for _, refs in st.lists:
                for k, v in refs:
                    if k == "n":
                        last[v] = i
        keep = set(self.fn.block.outputs)
        drops = [[] for _ in self.steps]
        for n, i in last.items():
            if n not in keep:
                drops[i].append(n)
        for st, d in zip(self.steps, drops):
            st.drop = tuple(d)

    def new_states(self) -> dict:
        out = {}
        for v in self.state_vars:
            if v.shape is None or None in v.shape:
                raise ExecuTorchError(ErrorCode.NotSupported,
                                      f"{BACKEND}: state {v.name!r} has no static shape")
            out[v.name] = np.zeros(v.shape, np_dtype(v.dtype))
        return out

    def run(self, env: dict, states: dict) -> list:
        """``env``: input name -> array (already in the declared dtype); returns the block
        outputs in order."""
        with np.errstate(all="ignore"):  # inf and NaN are values here, as on a device
            self._run(env, states)
        return [env[n] if n in env else self.consts[n] for n in self.fn.block.outputs]

    def _run(self, env: dict, states: dict) -> None:
        for st in self.steps:
            kw = dict(st.consts)
            for p, n in st.names:
                kw[p] = env[n]
            for p, refs in st.lists:
                kw[p] = [env[v] if k == "n" else v for k, v in refs]
            res = call(st, kw, states)
            if st.outs:
                for spec, val in zip(st.outs, _outputs(st, res)):
                    env[spec[0].name] = val
            for n in st.drop:
                env.pop(n, None)
