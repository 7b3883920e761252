"""The FlatBuffers reader, re-exported from ``cython_ext.flatbuf`` (its home: the
lowest layer, so delegate bridges can use it too)."""
from pyruntime.cython_ext.flatbuf import (  # noqa: F401
    _NP, _SCALARS, _STRUCTS, Node, Reader, Table, _read_field, _string, read_table,
)

__all__ = ["Node", "Reader", "Table", "read_table"]
