"""The exporter's one exception type, naming the graph node and the user's source line."""
from __future__ import annotations

import re


class ExportError(Exception):
    """Raised when a model uses something the exporter cannot turn into a program.

    The message names the FX node, its operator and, when torch.export recorded
    it, the source line of the model that produced the node.
    """


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def source_line(node) -> str:
    """``file:line in func: code`` of the innermost frame of ``node``'s stack trace."""
    trace = (getattr(node, "meta", None) or {}).get("stack_trace") or ""
    frames = _FRAME.findall(trace)
    if not frames:
        return "unknown source line"
    path, line, func, code = frames[-1]
    return f"{path}:{line} in {func}: {code.strip()}"


def node_error(node, message: str) -> ExportError:
    target = getattr(node, "target", None)
    name = getattr(target, "__name__", None) or str(target)
    return ExportError(f"node {node.name!r} ({name}): {message}\n  at {source_line(node)}")
