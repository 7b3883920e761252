"""exporter: torch models -> ExecuTorch programs (.pte), with no executorch dependency.

    from pyruntime import exporter
    result = exporter.export(model, (x,))            # methods={...}, dynamic_shapes=...
    result.save("model.pte")                          # result.buffer holds the bytes
    exporter.export(model, (x,), external_constants=True).save_data("model.ptd")

CLI: ``python -m pyruntime.exporter MODULE:FACTORY --out model.pte [--shape 1x3x32x32]``.

Pipeline: torch.export -> core ATen decomposition -> edge passes -> out variants
-> memory planning (ExecuTorch's greedy by default, ``memory_planner="best"``
for a smaller plan; ``fold_constants=True`` also precomputes ops on weights)
-> emission -> serialization (spec sections 2-5). ``executorch`` is not needed:
it is only the reference the tests compare against.
"""
from pyruntime.exporter.api import ExportResult, export
from pyruntime.exporter.errors import ExportError

__all__ = ["export", "ExportResult", "ExportError"]
