"""The layering of docs/ARCHITECTURE.md, read from the code: no module imports another in
a circle (function-level imports included), and no layer imports one above it:
cython_ext knows nothing of the others; kernels and delegates may use cython_ext (and
delegates the kernels); pyruntime composes them; only the exporter may use pyruntime.
The runtime never imports the exporter, torch or executorch."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = {"cython_ext": 0, "kernels": 1, "delegates": 2, "pyruntime": 3, "exporter": 4}
FORBIDDEN = {"torch", "executorch"}  # for everything but the exporter
# the runtime's few optional bridges to the reference, imported only when asked
REFERENCE_USERS = {"pyruntime.bench", "pyruntime.latency"}


def _modules() -> dict:
    """Every module by its installed name: pyruntime.*, and the other folders inside it
    (pyruntime.kernels.*, ...; pyproject.toml's package-dir)."""
    mods = {}
    for top in LAYERS:
        for p in (REPO / top).rglob("*.py"):
            rel = p.relative_to(REPO).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            mods[".".join(parts if top == "pyruntime" else ("pyruntime",) + parts)] = p
    return mods


def _layer(name: str) -> int:
    parts = name.split(".")
    return LAYERS[parts[1] if len(parts) > 1 and parts[1] in LAYERS else "pyruntime"]


def _imports(name: str, path: Path, mods: dict) -> set:
    """Every module ``name`` imports, at any depth of its code (names as written)."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def _graph():
    mods = _modules()

    def resolve(target):
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    graph, raw = {}, {}
    for name, path in mods.items():
        raw[name] = _imports(name, path, mods)
        graph[name] = {r for r in map(resolve, raw[name])
                       if r and r != name and not name.startswith(r + ".")}
    return graph, raw


def _cycles(graph) -> list:
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_another_in_a_circle():
    graph, _ = _graph()
    assert _cycles(graph) == []


def test_no_layer_imports_one_above_it():
    graph, raw = _graph()
    bad = []
    for name, deps in graph.items():
        layer = _layer(name)
        for d in deps:
            if _layer(d) > layer and d != "pyruntime":  # (the package itself: its __init__)
                bad.append(f"{name} -> {d}")
    assert bad == []


def test_the_runtime_never_imports_torch_or_executorch():
    _, raw = _graph()
    bad = sorted(f"{name} -> {t}" for name, targets in raw.items()
                 if not name.startswith("pyruntime.exporter") and name not in REFERENCE_USERS
                 for t in targets if t.split(".")[0] in FORBIDDEN)
    assert bad == []


def test_every_import_uses_the_one_import_name():
    """kernels/, delegates/, ... install inside pyruntime (tests/test_packaging.py builds the
    wheel): nothing imports them by their folder names."""
    code = [p for top in LAYERS for p in (REPO / top).rglob("*.py")] + \
        list((REPO / "tests").rglob("*.py")) + list((REPO / "examples").rglob("*.py"))
    bad = []
    for p in code:
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bad += [f"{p.relative_to(REPO)}: {n}" for n in names
                    if n.split(".")[0] in LAYERS and n.split(".")[0] != "pyruntime"]
    assert bad == []


def test_the_checker_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def _numbered_descriptor_words(path: Path, root: Path = REPO) -> list:
    """``x[3]``, ``x[8 + i]``... on a name that holds a descriptor in its function (made by
    ``desc``/``descs``, or read there with a ``D_*`` word): the words have names."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, ast.FunctionDef):
            continue
        names = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) \
                    and getattr(n.value.func, "id", "") in ("desc", "descs"):
                names |= {x.id for t in n.targets for x in ast.walk(t) if isinstance(x, ast.Name)}
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and any(
                    isinstance(x, ast.Name) and x.id.startswith("D_") for x in ast.walk(n.slice)):
                names.add(n.value.id)
        for n in ast.walk(fn):
            if not (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                    and n.value.id in names):
                continue
            s = n.slice
            left = s.left if isinstance(s, ast.BinOp) else s
            if isinstance(left, ast.Constant) and isinstance(left.value, int) \
                    and (left.value <= 5 or 8 <= left.value < 56):
                found.append(f"{path.relative_to(root)}:{n.lineno} {ast.unparse(n)}")
    return found


def test_kernels_read_descriptor_words_by_name():
    found = [f for p in sorted((REPO / "kernels").rglob("*.py"))
             for f in _numbered_descriptor_words(p)]
    assert not found, "descriptor words by number, not by their cython_ext/abi.py name:\n" \
        + "\n".join(found)


def test_the_descriptor_word_checker_sees_a_number(tmp_path):
    p = tmp_path / "k.py"
    p.write_text("def k(block):\n    x, o = descs(block, 0, 2)\n    return x[8] + o[D_NDIM] + o[3]\n")
    assert sorted(_numbered_descriptor_words(p, tmp_path)) == ["k.py:3 o[3]", "k.py:3 x[8]"]
