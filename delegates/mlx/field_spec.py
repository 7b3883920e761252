"""The one-line table specs of ``schema.py`` expanded to ``cython_ext.flatbuf.read_table``'s
field tables, and to the slot fields and required fields ``backend.py`` checks.

The MLX schema has some 190 tables whose fields differ only in name and type; written
out as ``(name, id, kind)`` tuples they were 900 lines of the same shape. A spec is the
table's fields in declaration order, ``name:type`` separated by spaces, ``!`` after a
field the schema marks ``(required)``; ids follow the FlatBuffer rule (one per field,
two for a union: type and value). Types:

    i32, u8, bool, f32, ..., str      a scalar (0 / False / None where absent)
    i32?                              an optional scalar: None where absent
    i32=1                             a scalar with that default
    Tid, Vid                          a slot id (a struct of one uint32): None where absent
    [i32]  [str]  [Tid]  [Table]      a vector of scalars, strings, slot ids or tables
    Table  Union                      a table, or a union (a name in ``unions``)

>>> schema, slots, required = read_specs({"AddNode": "a:Tid! b:Tid! out:Tid!"}, {}, ("Tid",))
>>> schema["AddNode"][0], slots["AddNode"]["out"], required["AddNode"]
(('a', 0, ('default', 'u32', None)), 'Tid', ('a', 'b', 'out'))
"""
from __future__ import annotations

import ast

SCALARS = frozenset({"bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32",
                     "f64"})


def read_specs(specs: dict, unions: dict, structs) -> tuple[dict, dict, dict]:
    """``(schema, slots, required)`` of the table specs ``{table: spec}``: ``schema`` the
    ``(name, id, kind)`` tuples of each table; ``slots`` each table's slot-id fields
    (field -> ``'Tid'``, ``'Vid'``, ``'[Tid]'`` or ``'[Vid]'``) and ``required`` its
    required fields, both only for tables that have any. ``unions`` maps a union's name
    to its ``{type code: member table}``, ``structs`` names the slot-id structs."""
    schema, slots, required = {}, {}, {}
    for table, spec in specs.items():
        fields, refs, req, fid = [], {}, [], 0
        for item in spec.split():
            name, kind = item.split(":", 1)
            if kind.endswith("!"):
                kind = kind[:-1]
                req.append(name)
            if kind.strip("[]") in structs:
                refs[name] = kind
            fields.append((name, fid, _kind(kind, unions, structs)))
            fid += 2 if kind in unions else 1
        schema[table] = fields
        if refs:
            slots[table] = refs
        if req:
            required[table] = tuple(req)
    return schema, slots, required


def _kind(kind: str, unions: dict, structs):
    if kind.startswith("["):
        base = kind[1:-1]
        if base == "str":
            return ("vec_str",)
        if base in structs:
            return ("vec", "u32")
        return ("vec", base) if base in SCALARS else ("vec_table", base)
    if kind in structs:
        return ("default", "u32", None)
    if kind.endswith("?"):
        return ("default", kind[:-1], None)
    if "=" in kind:
        base, value = kind.split("=", 1)
        return ("default", base, ast.literal_eval(value))
    if kind in SCALARS or kind == "str":
        return kind
    return ("union", unions[kind]) if kind in unions else ("table", kind)
