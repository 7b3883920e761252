"""exporter: torch models -> ExecuTorch programs (.pte), with no executorch dependency.

    import exporter
    result = exporter.export(model, (x,))            # methods={...}, dynamic_shapes=...
    result.save("model.pte")                          # result.buffer holds the bytes

Pipeline: torch.export -> core ATen decomposition -> edge passes -> out variants
-> memory planning (ExecuTorch's greedy by default, ``memory_planner="best"``
for a smaller plan) -> emission -> serialization (spec sections 2-5).
"""
from exporter.api import ExportResult, export
from exporter.errors import ExportError

__all__ = ["export", "ExportResult", "ExportError"]
