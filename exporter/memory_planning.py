"""Memory planning: tensor lifetimes and arena offsets (spec section 5).

``plan_memory(gm, algorithm)`` assigns ``mem_id`` / ``mem_offset`` to every
planned TensorSpec of the graph (and of its ``torch.cond`` branches) and
returns ``non_const_buffer_sizes``.

* ``"greedy"`` reproduces ExecuTorch's default planner exactly (same offsets,
  same arena size): shared objects, largest tensor first (spec 5.5).
* ``"best"`` places each tensor at an address, not in a shared object: for a
  few orderings it puts every tensor at the lowest (or tightest) gap left by
  the tensors alive at the same time, and keeps the smallest arena; ExecuTorch's
  greedy plan is one of the candidates, so "best" is never larger.
"""
from __future__ import annotations

import torch

from pyruntime.exporter.errors import ExportError
from pyruntime.exporter.specs import TensorSpec, node_specs

ALIGNMENT = 16


def _align(n: int, a: int = ALIGNMENT) -> int:
    return (n + a - 1) // a * a


def _is_inplace(node) -> bool:
    return node.op == "call_function" and node.target == torch.ops.aten.copy_.default


def _flat_nodes(values) -> list:
    out = []
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, torch.fx.Node):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
    return out


def _touched_specs(n) -> list[TensorSpec]:
    if n.op == "get_attr" or _is_inplace(n):
        return []
    return [s.storage for s in node_specs(n)]


# ----------------------------------------------------------------- lifetimes (5.3)


def update_lifetimes(gm) -> None:
    nodes = list(gm.graph.nodes)
    last = len(nodes) - 1
    for idx, node in enumerate(nodes):
        touched = [node] + _flat_nodes(list(node.args)) + _flat_nodes(list(node.kwargs.values()))
        for n in touched:
            for spec in _touched_specs(n):
                start, end = spec.lifetime
                if node.op == "placeholder":
                    start = 0
                elif start is None or start > idx:
                    start = idx
                if node.op == "placeholder" and node.meta.get("io") == "mutable":
                    end = last
                elif end is None or end < idx:
                    end = idx
                spec.lifetime = [start, end]


# ----------------------------------------------------------------- collection (5.4)


def collect_specs(gm, alloc_graph_input=True, alloc_graph_output=True) -> list[TensorSpec]:
    inputs, outputs = set(), set()
    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.meta.get("io") != "mutable":
            inputs.update(id(s.storage) for s in node_specs(node))
        if node.op == "output":
            for n in _flat_nodes(list(node.args)):
                outputs.update(id(s) for s in _touched_specs(n))
    seen, specs = set(), []
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "output") or _is_inplace(node):
            continue
        for spec in node_specs(node):
            spec = spec.storage
            if spec.const or id(spec) in seen:
                continue
            if not alloc_graph_input and id(spec) in inputs:
                continue
            if not alloc_graph_output and id(spec) in outputs:
                continue
            seen.add(id(spec))
            specs.append(spec)
    return specs


def _overlap(a: TensorSpec, b: TensorSpec) -> bool:
    return not (a.lifetime[1] < b.lifetime[0] or a.lifetime[0] > b.lifetime[1])


# ----------------------------------------------------------------- greedy (5.5)


def greedy(specs: list[TensorSpec], base: int) -> tuple[dict, int]:
    """ExecuTorch's shared-object greedy. Returns ({id(spec): offset}, arena size)."""
    order = sorted(specs, key=lambda s: s.allocated())  # stable: ties keep collection order
    order.reverse()
    objects: list[list] = []  # [size, [(offset, spec), ...]]
    where: dict[int, tuple[int, int]] = {}
    for s in order:
        size = s.allocated()
        placed = None
        for i, (osize, allocs) in enumerate(objects):
            if all(not _overlap(s, t) for _, t in allocs):
                placed = (i, 0)
                break
        if placed is None:
            for i, (osize, allocs) in enumerate(objects):
                top = max((off + t.allocated() for off, t in allocs if _overlap(s, t)),
                          default=0)
                if top > 0 and top + size <= osize:
                    placed = (i, top)
                    break
        if placed is None:
            objects.append([size, []])
            placed = (len(objects) - 1, 0)
        objects[placed[0]][1].append((placed[1], s))
        where[id(s)] = placed
    starts, running = [], base
    for osize, _ in objects:
        starts.append(running)
        running += osize
    offsets = {k: starts[i] + off for k, (i, off) in where.items()}
    return offsets, running  # ExecuTorch says 0 when only cond branches use memory: too small


# ----------------------------------------------------------------- best (address-level)


def _place_by_address(order: list[TensorSpec], base: int, tightest: bool) -> tuple[dict, int]:
    placed: list[tuple[int, int, TensorSpec]] = []  # (offset, size, spec)
    offsets, top = {}, base
    for s in order:
        size = s.allocated()
        busy = sorted((off, off + sz) for off, sz, t in placed if _overlap(s, t))
        choice, best_gap, cursor = None, None, base
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= size:
                if not tightest:
                    choice = cursor
                    break
                if best_gap is None or gap < best_gap:
                    choice, best_gap = cursor, gap
            cursor = max(cursor, hi)
        if choice is None:
            choice = cursor
        placed.append((choice, size, s))
        offsets[id(s)] = choice
        top = max(top, choice + size)
    return offsets, top


def best(specs: list[TensorSpec], base: int) -> tuple[dict, int]:
    """The smallest of several address-level placements and ExecuTorch's greedy."""
    idx = {id(s): i for i, s in enumerate(specs)}
    orders = [
        sorted(specs, key=lambda s: (-s.allocated(), idx[id(s)])),
        sorted(specs, key=lambda s: (-s.allocated() * (s.lifetime[1] - s.lifetime[0] + 1),
                                     idx[id(s)])),
        sorted(specs, key=lambda s: (-(s.lifetime[1] - s.lifetime[0]), -s.allocated())),
        sorted(specs, key=lambda s: (s.lifetime[0], -s.allocated())),
    ]
    candidates = [greedy(specs, base)]
    for order in orders:
        for tightest in (False, True):
            candidates.append(_place_by_address(order, base, tightest))
    return min(candidates, key=lambda c: c[1])


ALGORITHMS = {"greedy": greedy, "best": best}


# ----------------------------------------------------------------- driver (5.7)


def _submodule_nodes(gm):
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.higher_order.cond:
            yield getattr(gm, node.args[1].target)
            yield getattr(gm, node.args[2].target)


def plan_memory(gm, algorithm: str = "greedy", alloc_graph_input: bool = True,
                alloc_graph_output: bool = True) -> list[int]:
    """Plan ``gm`` (and its cond branches, first); returns ``non_const_buffer_sizes``."""
    algo = ALGORITHMS.get(algorithm)
    if algo is None:
        raise ExportError(f"unknown memory planner {algorithm!r}; use one of "
                          f"{sorted(ALGORITHMS)}")
    update_lifetimes(gm)
    specs = collect_specs(gm, alloc_graph_input, alloc_graph_output)
    reserved = 0
    for sub in _submodule_nodes(gm):
        sizes = plan_memory(sub, algorithm, alloc_graph_input=False, alloc_graph_output=True)
        reserved = max(reserved, sizes[1])
    for s in specs:
        if s.lifetime[0] is None:
            s.lifetime = [0, 0]
    offsets, size = algo(specs, reserved)
    for s in specs:
        s.mem_id = 1
        s.mem_offset = offsets[id(s)]
    sizes = [0, size]
    gm.meta["non_const_buffer_sizes"] = sizes
    return sizes


def verify_plan(gm) -> None:
    """No two planned tensors alive at the same time may share bytes."""
    specs = [s for s in collect_specs(gm) if s.mem_offset is not None]
    for i, a in enumerate(specs):
        for b in specs[i + 1:]:
            if a.allocated() == 0 or b.allocated() == 0 or not _overlap(a, b):
                continue
            if a.mem_offset < b.mem_offset + b.allocated() and \
                    b.mem_offset < a.mem_offset + a.allocated():
                raise ExportError(f"memory plan overlap: {a} and {b}")
