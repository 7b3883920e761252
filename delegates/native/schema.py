"""Field tables of ExecuTorch's NativeBackend graph (``backends/native/serialization/
native_graph.fbs``, namespace ``native_backend``, file identifier ``NPTG``), for
``cython_ext.flatbuf.read_table``.

The graph is an fx graph in topological order: nodes name their ATen target
(``"torch.ops.aten.convolution.default"``) and take named, tagged arguments that refer
to other values by SSA name; tensor metadata sits in a side table; constants are in
the program's named data under ``NamedTensorRef.data_key``. Each entry is
``(field, id, kind)``; a union consumes two ids.
"""

IDENTIFIER = b"NPTG"

# ArgumentValue union codes -> table
ARG_TYPES = {1: "TensorArg", 2: "NoneArg", 3: "IntArg", 4: "FloatArg", 5: "BoolArg",
             6: "StringArg", 7: "ScalarTypeArg", 8: "IntListArg", 9: "FloatListArg",
             10: "BoolListArg", 11: "TensorListArg", 12: "OptionalTensorListArg",
             13: "GraphArg"}

OP_CALL, OP_PLACEHOLDER, OP_OUTPUT = 0, 1, 2
OUT_TENSOR, OUT_TENSOR_LIST, OUT_INT, OUT_BOOL, OUT_FLOAT = 0, 1, 2, 3, 4
IN_USER, IN_PARAMETER, IN_BUFFER, IN_CONSTANT = 0, 1, 2, 3
OUTPUT_USER, OUTPUT_BUFFER_MUTATION, OUTPUT_USER_INPUT_MUTATION = 0, 1, 2

_TENSOR_META = [("dtype", 0, "i8"), ("sizes", 1, ("vec_table", "Dim")),
                ("dim_order", 2, ("vec", "i32")), ("quant", 3, ("table", "QuantSpec"))]

SCHEMA = {
    "Program": [("version", 0, "str"), ("methods", 1, ("vec_table", "Method"))],
    "Method": [("name", 0, "str"), ("graph", 1, ("table", "Graph")),
               ("constants", 2, ("vec_table", "NamedTensorRef")),
               ("output_specs", 3, ("vec_table", "OutputSpec")),
               ("mutable_buffers", 4, ("vec_table", "MutableBufferSpec"))],
    "Graph": [("nodes", 0, ("vec_table", "Node")), ("inputs", 1, ("vec_str",)),
              ("outputs", 2, ("vec_str",)), ("tensor_values", 3, ("vec_table", "TensorValue"))],
    "Node": [("name", 0, "str"), ("op_kind", 1, "i8"), ("target", 2, "str"),
             ("inputs", 3, ("vec_table", "NamedArgument")), ("outputs", 4, ("vec_table", "Output")),
             ("metadata", 5, ("vec_table", "KeyValue"))],
    "NamedArgument": [("name", 0, "str"), ("arg", 1, ("table", "Argument")),
                      ("mutated", 2, "bool")],
    "Argument": [("value", 0, ("union", ARG_TYPES))],
    "TensorArg": [("name", 0, "str")],
    "NoneArg": [],
    "IntArg": [("value", 0, "i64"), ("ref", 1, "str")],
    "FloatArg": [("value", 0, "f64"), ("ref", 1, "str")],
    "BoolArg": [("value", 0, "bool"), ("ref", 1, "str")],
    "StringArg": [("value", 0, "str")],
    "ScalarTypeArg": [("value", 0, "i8")],
    "IntListArg": [("values", 0, ("vec", "i64")), ("refs", 1, ("vec_str",))],
    "FloatListArg": [("values", 0, ("vec", "f64"))],
    "BoolListArg": [("values", 0, ("vec", "bool"))],
    "TensorListArg": [("names", 0, ("vec_str",))],
    "OptionalTensorListArg": [("names", 0, ("vec_str",)), ("has_value", 1, ("vec", "bool"))],
    "GraphArg": [("name", 0, "str"), ("graph", 1, ("table", "Graph"))],
    "KeyValue": [("key", 0, "str"), ("value", 1, "str")],
    "Output": [("name", 0, "str"), ("alias_of", 1, "str"), ("kind", 2, "i8"),
               ("names", 3, ("vec_str",))],
    "TensorValue": [("name", 0, "str"), ("meta", 1, ("table", "TensorMeta"))],
    "TensorMeta": _TENSOR_META,
    "Dim": [("min", 0, "i64"), ("max", 1, ("default", "i64", -1))],
    "QuantSpec": [("scheme", 0, ("union", {1: "AffineGroup", 2: "PackedQuant"}))],
    "AffineGroup": [("scale_data_key", 0, "str"), ("scale_dtype", 1, "i8"),
                    ("quant_min", 2, "i32"), ("quant_max", 3, "i32"), ("group_size", 4, "i32"),
                    ("zero_point_data_key", 5, "str"), ("zero_point_dtype", 6, "i8")],
    "PackedQuant": [("codec", 0, "str")],
    "NamedTensorRef": [("name", 0, "str"), ("data_key", 1, "str"),
                       ("meta", 2, ("table", "TensorMeta")), ("kind", 3, "i8"),
                       ("mutated", 4, "bool")],
    "OutputSpec": [("name", 0, "str"), ("kind", 1, "i8"), ("target", 2, "str")],
    "MutableBufferSpec": [("name", 0, "str"), ("fqn", 1, "str")],
}
