"""Write ``delegates/mlx/schema.py`` (our field tables for ``cython_ext.flatbuf.read_table``)
from the MLX delegate's FlatBuffer schema in the installed executorch wheel
(``backends/mlx/serialization/schema.fbs``, namespace ``mlx_delegate``).

    python -m tests.delegates.gen_mlx_schema          # rewrite delegates/mlx/schema.py
    python -m tests.delegates.gen_mlx_schema --check  # exit 1 if it differs

Only field names, ids and kinds are taken from the schema (what the FlatBuffer format
itself fixes); the reader and interpreter are ours. Fields get ids in declaration
order, a union field two (type, value); the structs ``Tid``/``Vid`` (one ``uint32``) read
as a ``u32``, or None where the field is absent (optional tensors); enums as their base
type.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "delegates" / "mlx" / "schema.py"
_SCALARS = {"bool": "bool", "byte": "i8", "ubyte": "u8", "int8": "i8", "uint8": "u8",
            "short": "i16", "ushort": "u16", "int16": "i16", "uint16": "u16", "int": "i32",
            "uint": "u32", "int32": "i32", "uint32": "u32", "long": "i64", "ulong": "u64",
            "int64": "i64", "uint64": "u64", "float": "f32", "float32": "f32",
            "double": "f64", "float64": "f64"}


def schema_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("executorch is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "backends" / "mlx" / \
        "serialization" / "schema.fbs"


def parse(text: str) -> dict:
    text = re.sub(r"//[^\n]*", "", text)
    blocks = re.findall(r"\b(table|struct|enum|union)\s+(\w+)\s*(?::\s*(\w+))?\s*\{(.*?)\}",
                        text, re.S)
    out = {"table": {}, "struct": {}, "enum": {}, "union": {}}
    for kind, name, base, body in blocks:
        if kind in ("table", "struct"):
            fields = []
            for f in body.split(";"):
                f = f.strip()
                if not f:
                    continue
                m = re.match(r"(\w+)\s*:\s*(\[?\w+\]?)\s*(?:=\s*([^\s(]+))?\s*(\(.*\))?$", f, re.S)
                if m is None:
                    raise ValueError(f"{name}: cannot parse field {f!r}")
                fields.append((m.group(1), m.group(2), m.group(3),
                               bool(m.group(4) and "required" in m.group(4))))
            out[kind][name] = fields
        elif kind == "enum":
            out["enum"][name] = _SCALARS[base]
        else:
            members = [m.strip() for m in body.split(",") if m.strip()]
            out["union"][name] = {i + 1: m for i, m in enumerate(members)}
    return out


def _default(value: str, kind: str):
    if value in ("true", "false"):
        return value == "true"
    if value == "null":  # an optional scalar: None where absent
        return "null"
    if kind.startswith("f"):
        return float(value)
    try:
        return int(value)
    except ValueError:
        return None  # an enum member name: only ever the zero member here


def tables(parsed: dict) -> dict:
    structs, enums, unions = parsed["struct"], parsed["enum"], parsed["union"]
    for s, fields in structs.items():
        if [t for _, t, _, _ in fields] != ["uint32"]:
            raise ValueError(f"struct {s} is not one uint32: update the generator")
    result = {}
    for name, fields in parsed["table"].items():
        entries, fid = [], 0
        for fname, ftype, default, _ in fields:
            vec = ftype.startswith("[")
            base = ftype.strip("[]")
            if base in unions and not vec:
                entries.append((fname, fid, ("union", base)))
                fid += 2
                continue
            if vec:
                if base == "string":
                    kind = ("vec_str",)
                elif base in _SCALARS or base in enums:
                    kind = ("vec", _SCALARS.get(base) or enums[base])
                elif base in structs:
                    kind = ("vec", "u32")
                else:
                    kind = ("vec_table", base)
            elif base == "string":
                kind = "str"
            elif base in structs:
                kind = ("default", "u32", None)
            elif base in _SCALARS or base in enums:
                k = _SCALARS.get(base) or enums[base]
                d = _default(default, k) if default is not None else None
                if d == "null":
                    kind = ("default", k, None)
                else:
                    kind = ("default", k, d) if d not in (None, 0, False) else k
            else:
                kind = ("table", base)
            entries.append((fname, fid, kind))
            fid += 1
        result[name] = entries
    return result


def render(parsed: dict) -> str:
    t = tables(parsed)
    lines = ['"""Field tables of the MLX delegate\'s FlatBuffer (ExecuTorch '
             '``backends/mlx/serialization/schema.fbs``,',
             'namespace ``mlx_delegate``, root ``MLXGraph``), for '
             '``cython_ext.flatbuf.read_table``.', '',
             'Generated by ``python -m tests.delegates.gen_mlx_schema``; do not edit.', '"""', '',
             "# union name -> {type code: member table}"]
    lines.append("UNIONS = {")
    for u, members in parsed["union"].items():
        lines.append(f"    {u!r}: {{")
        for code, m in members.items():
            lines.append(f"        {code}: {m!r},")
        lines.append("    },")
    lines.append("}")
    lines.append("")
    lines.append("# the slot-reference fields of each table: field -> 'Tid', 'Vid', '[Tid]' or '[Vid]'")
    lines.append("SLOTS = {")
    for name, fields in parsed["table"].items():
        refs = {f: t for f, t, _, _ in fields if t.strip("[]") in parsed["struct"]}
        if refs:
            lines.append(f"    {name!r}: {refs!r},")
    lines.append("}")
    lines.append("# fields the schema marks (required)")
    lines.append("REQUIRED = {")
    for name, fields in parsed["table"].items():
        req = [f for f, _, _, r in fields if r]
        if req:
            lines.append(f"    {name!r}: {tuple(req)!r},")
    lines.append("}")
    lines.append("")
    lines.append("SCHEMA = {")
    for name, entries in t.items():
        lines.append(f"    {name!r}: [")
        for fname, fid, kind in entries:
            if isinstance(kind, tuple) and kind[0] == "union":
                kind_src = f"('union', UNIONS[{kind[1]!r}])"
            else:
                kind_src = repr(kind)
            lines.append(f"        ({fname!r}, {fid}, {kind_src}),")
        lines.append("    ],")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    text = render(parse(schema_path().read_text()))
    if a.check:
        same = OUT.exists() and OUT.read_text() == text
        print("up to date" if same else f"{OUT} differs from the wheel's schema")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
