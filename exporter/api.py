"""``exporter.export``: a torch model to ``.pte`` bytes (and ``.ptd`` weights) in one call."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from pyruntime.exporter.emit import MethodEmitter, ProgramEmitter
from pyruntime.exporter.errors import ExportError
from pyruntime.exporter.lower import lower
from pyruntime.exporter.memory_planning import plan_memory, verify_plan
from pyruntime.exporter.passes import graph_modules
from pyruntime.exporter.writer import serialize_pte, serialize_ptd

@dataclass
class ExportResult:
    """The exported program: ``buffer`` (.pte bytes), ``data`` (.ptd bytes or None)."""

    buffer: bytes
    data: bytes | None = None
    non_const_buffer_sizes: dict = field(default_factory=dict)  # method -> sizes
    seconds: float = 0.0
    methods: dict = field(default_factory=dict, repr=False)  # name -> planned EdgeMethod

    def save(self, path) -> Path:
        path = Path(path)
        path.write_bytes(self.buffer)
        return path

    def save_data(self, path) -> Path:
        if self.data is None:
            raise ExportError("this program has no external data; export with "
                              "external_constants=True to put the weights in a .ptd")
        path = Path(path)
        path.write_bytes(self.data)
        return path


def _method_specs(model, example_args, dynamic_shapes, methods):
    if methods is None:
        if model is None:
            raise ExportError("give a model or methods={name: (model, args[, dynamic_shapes])}")
        return {"forward": (model, example_args, dynamic_shapes)}
    out = {}
    for name, entry in methods.items():
        if isinstance(entry, dict):
            entry = (entry.get("model", model), entry.get("args", example_args),
                     entry.get("dynamic_shapes"))
        elif not isinstance(entry, tuple):
            entry = (entry, example_args, None)
        entry = tuple(entry) + (None,) * (3 - len(entry))
        out[name] = entry
    return out


def export(model=None, example_args=(), dynamic_shapes=None, methods=None,
           memory_planner: str = "greedy", external_constants: bool = False,
           fold_constants: bool = False, example_kwargs=None,
           strict: bool = False) -> ExportResult:
    """Export ``model`` (an ``nn.Module``, or an ``ExportedProgram``) to an ExecuTorch program.

    ``methods``: ``{name: (module, args[, dynamic_shapes])}`` for several methods
    (a bare module uses ``example_args``). ``memory_planner``: ``"greedy"`` gives
    ExecuTorch's own plan, ``"best"`` a plan that is never larger.
    ``external_constants=True`` moves weights to ``result.data`` (a .ptd).
    ``fold_constants=True`` computes ops on weights alone (the transpose of a
    Linear weight) at export time instead of at every run: ExecuTorch's exporter
    does not, so this changes the program and shrinks its plan further.

    >>> import torch, exporter
    >>> result = exporter.export(torch.nn.Linear(4, 2), (torch.randn(1, 4),))
    >>> result.buffer[4:8]
    b'ET12'
    """
    t0 = time.perf_counter()
    program = ProgramEmitter(external_constants)
    plans, sizes, lowered = [], {}, {}
    for name, (mod, args, dyn) in sorted(_method_specs(model, example_args, dynamic_shapes,
                                                       methods).items()):
        method = lower(mod, args, example_kwargs, dyn, name=name, strict=strict,
                       fold_constants=fold_constants)
        if external_constants:
            _mark_external(method)
        sizes[name] = plan_memory(method.gm, memory_planner)
        for gm in graph_modules(method.gm):
            verify_plan(gm)
        plans.append(MethodEmitter(program, method, sizes[name]).emit_method())
        lowered[name] = method
    buffer = serialize_pte({"version": 0, "execution_plan": plans}, program.constants,
                           program.mutable)
    data = None
    if external_constants:
        data = serialize_ptd([(k, b, layout) for k, (b, layout) in program.external.items()])
    return ExportResult(buffer, data, sizes, time.perf_counter() - t0, lowered)


def _mark_external(method) -> None:
    for node in method.gm.graph.nodes:
        if node.op == "placeholder" and node.meta.get("fqn") and "spec" in node.meta:
            spec = node.meta["spec"]
            if getattr(spec, "const", False):
                spec.external = True
