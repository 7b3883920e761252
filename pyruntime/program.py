"""Program and MethodMeta: a loaded .pte and what each method looks like."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import prod

import numpy as np

from pyruntime.cython_ext.dtypes import element_size, scalar_type_name, to_numpy_dtype
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.loader import PteFile, load_bytes
from pyruntime.ptd import DataMap
from pyruntime.values import check_tensor_meta


@dataclass(frozen=True)
class TensorInfo:
    """A serialized tensor's metadata (sizes are upper bounds for dynamic tensors)."""

    sizes: tuple
    dtype: np.dtype
    scalar_type: int
    dim_order: tuple
    nbytes: int
    is_memory_planned: bool
    dynamic: bool

    def __str__(self):
        dyn = " (dynamic, upper bound)" if self.dynamic else ""
        return f"{scalar_type_name(self.scalar_type)}{list(self.sizes)}{dyn}"


@dataclass(frozen=True)
class ValueInfo:
    """A non-tensor input/output: its kind (Int, Bool, Double, String, None, list) and value."""

    kind: str
    value: object

    def __str__(self):
        return f"{self.kind}({self.value!r})"


class MethodMeta:
    """What a method takes and returns, its planned memory and its operators, without loading it.

    >>> # meta = program.metadata("forward"); meta.num_inputs(); meta.input_tensor_meta(0).sizes
    """

    def __init__(self, plan):
        self._plan = plan
        self.name = plan.name or ""
        self.inputs = [_value_info(plan, i) for i in (plan.inputs or [])]
        self.outputs = [_value_info(plan, i) for i in (plan.outputs or [])]
        sizes = plan.non_const_buffer_sizes or []
        self.planned_buffer_sizes = [int(s) for s in sizes[1:]]
        self.backends = [d.id for d in (plan.delegates or [])]
        self.instruction_count = sum(len(c.instructions or []) for c in (plan.chains or []))
        ops = [(o.name or "") + (f".{o.overload}" if o.overload else "")
               for o in (plan.operators or [])]
        counts = Counter()
        kinds = Counter()
        for c in plan.chains or []:
            for ins in c.instructions or []:
                code, a = ins.instr_args
                if a is None:
                    continue
                kinds[a._kind] += 1
                if a._kind == "KernelCall" and 0 <= a.op_index < len(ops):
                    counts[ops[a.op_index]] += 1
        self.operators = ops
        self.operator_counts = dict(counts)
        self.instruction_kinds = dict(kinds)

    # executorch.runtime-style accessors
    def num_inputs(self) -> int:
        return len(self.inputs)

    def num_outputs(self) -> int:
        return len(self.outputs)

    def input_tensor_meta(self, i: int) -> TensorInfo:
        return _tensor_only(self.inputs[i], "input", i)

    def output_tensor_meta(self, i: int) -> TensorInfo:
        return _tensor_only(self.outputs[i], "output", i)

    def num_memory_planned_buffers(self) -> int:
        return len(self.planned_buffer_sizes)

    def memory_planned_buffer_size(self, i: int) -> int:
        return self.planned_buffer_sizes[i]

    def __repr__(self):
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.outputs))
        return f"MethodMeta({self.name!r}, inputs=[{ins}], outputs=[{outs}])"


def _tensor_only(info, what, i):
    if not isinstance(info, TensorInfo):
        raise ExecuTorchError(ErrorCode.InvalidArgument, f"{what} {i} is not a tensor ({info})")
    return info


def _value_info(plan, idx):
    values = plan.values or []
    if not 0 <= idx < len(values):
        raise ExecuTorchError(ErrorCode.InvalidProgram, f"input/output index {idx} out of range")
    code, v = values[idx].val
    if v is None or code == 1:
        return ValueInfo("None", None)
    if v._kind == "Tensor":
        check_tensor_meta(v, f"method {plan.name!r} value {idx}")
        sizes = tuple(v.sizes)
        return TensorInfo(sizes, to_numpy_dtype(v.scalar_type), v.scalar_type, tuple(v.dim_order),
                          prod(sizes) * element_size(v.scalar_type),
                          v.allocation_info is not None or v.data_buffer_idx != 0,
                          v.shape_dynamism == 1)
    val = {"Int": "int_val", "Bool": "bool_val", "Double": "double_val",
           "String": "string_val"}.get(v._kind)
    return ValueInfo(v._kind, getattr(v, val) if val else None)


class Program:
    """A loaded .pte: its methods, constants, segments and named data.

    >>> import pyruntime
    >>> # program = pyruntime.Runtime.get().load_program("model.pte")
    >>> # program.method_names, program.metadata("forward")
    """

    def __init__(self, source, data_path=None):
        self._data = load_bytes(source)
        self._pte = PteFile(self._data)
        p = self._pte.program
        self._plans = {}
        for plan in p.execution_plan or []:
            self._plans[plan.name or ""] = plan
        self._constants = self._pte.constant_table()
        self._pte_named = DataMap({k: (v, None) for k, v in self._pte.named_data().items()},
                                  "<pte named_data>") \
            if p.named_data else None
        self._external = None
        if data_path is not None:
            paths = data_path if isinstance(data_path, (list, tuple)) else [data_path]
            for d in paths:
                m = d if isinstance(d, DataMap) else DataMap.load(d)
                self._external = m if self._external is None else self._external.merged(m)
        self._metas = {}

    @property
    def method_names(self) -> list[str]:
        return list(self._plans)

    @property
    def num_methods(self) -> int:
        return len(self._plans)

    def _plan(self, name: str):
        try:
            return self._plans[name]
        except KeyError:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"no method {name!r} in the program (methods: "
                                  f"{', '.join(self._plans) or 'none'})") from None

    def metadata(self, name: str) -> MethodMeta:
        if name not in self._metas:
            self._metas[name] = MethodMeta(self._plan(name))
        return self._metas[name]

    def load_method(self, name: str = "forward", tier: str = "fast", data_map=None,
                    max_planned_bytes=None, max_instructions=None, threads=None,
                    backends=None, math=None):
        """Load one method: arenas allocated, constants bound, delegates initialized.

        ``tier="fast"`` (the default) runs the compiled kernels (Numba, cached on disk:
        ``python -m pyruntime warmup`` compiles them ahead of use); ``tier="reference"``
        runs the numpy reference kernels, the readable definition and the oracle the
        fast tier is tested against. ``data_map`` adds a
        .ptd (path or DataMap) for this method on top of the program's ``data_path``.
        ``max_planned_bytes`` refuses plans needing more planned memory (a device
        budget); ``max_instructions`` lowers the per-execute infinite-loop guard
        (10,000,000 by default, as in the C++ runtime). ``threads`` sets intra-op
        parallelism for this method (default: ``Runtime.get().threads``).
        ``backends`` lists the backend ids the device has (default: every one this
        host has); a delegate of any other backend fails to load with NotFound, as
        on a device without it (see ``pyruntime.profiles`` for device profiles).
        ``math="fast"`` lets the fast tier's hot kernels use FMA, reassociated sums and
        vector approximations of the transcendentals (within 1e-4 x max(1, |ref|) of the
        exact results; ``pyruntime.mathmode``); the default, ``Runtime.get().math``, is
        ``"exact"``: ExecuTorch's numbers bit for bit.

        >>> # m = program.load_method("forward", max_planned_bytes=512 * 1024)
        >>> # fast = program.load_method("forward", math="fast")
        """
        from pyruntime.method import Method  # method imports this module's helpers

        external = self._external
        if data_map is not None:
            m = data_map if isinstance(data_map, DataMap) else DataMap.load(data_map)
            external = m if external is None else external.merged(m)
        kwargs = {} if max_instructions is None else {"max_instructions": max_instructions}
        return Method(self, self._plan(name), tier=tier, data_map=external,
                      max_planned_bytes=max_planned_bytes, threads=threads, backends=backends,
                      math=math, **kwargs)

    # ---- internals used by Method and the CLI -------------------------------------
    def _named_data_map(self, external):
        if self._pte_named is None:
            return external
        return self._pte_named.merged(external)

    def _plan_input_sizes(self, plan, i):
        v = plan.values[plan.inputs[i]].val[1]
        return v.sizes

    def _frame(self, plan, chain, pc):
        chains = plan.chains or []
        if chain >= len(chains) or not chains[chain].stacktrace:
            return ""
        st = chains[chain].stacktrace
        if pc >= len(st) or not st[pc].items:
            return ""
        f = st[pc].items[-1]
        return f"{f.filename}:{f.lineno} in {f.name}"

    @property
    def segments(self) -> list[tuple[int, int]]:
        """(file offset, size) per segment."""
        base = self._pte.segment_base_offset
        return [(base + s.offset, s.size) for s in (self._pte.program.segments or [])]

    @property
    def constant_bytes(self) -> int:
        cs = self._pte.program.constant_segment
        if cs is not None and cs.offsets and len(cs.offsets) > 1:
            return len(self._pte.segment(cs.segment_index))
        return sum(len(b.storage) for b in (self._pte.program.constant_buffer or [])
                   if b.storage is not None)

    @property
    def named_data_keys(self) -> list[str]:
        return self._pte_named.keys() if self._pte_named else []
