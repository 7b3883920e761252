"""Field tables of ExecuTorch's VkGraph flatbuffer (``backends/vulkan/serialization/schema.fbs``,
namespace ``vkgraph``, file identifier ``VK00``), for ``cython_ext.flatbuf.read_table``.

Written by hand from the schema: each entry is ``(field, id, kind)`` and a union
consumes two ids. Enum fields with a non-zero default are ``("default", kind, value)``:
a flatbuffer omits a field equal to its default.
"""

# VkDataType -> (name, numpy dtype name or None)
DATATYPES = {
    0: ("bool", "bool"), 1: ("uint8", "uint8"), 2: ("int8", "int8"), 3: ("int32", "int32"),
    4: ("float16", "float16"), 5: ("float32", "float32"), 6: ("float64", "float64"),
    7: ("int64", "int64"), 127: ("unset", None),
}
UNSET = 127

STORAGE_TYPES = {0: "BUFFER", 1: "TEXTURE_3D", 2: "TEXTURE_2D", 255: "DEFAULT_STORAGE"}
MEMORY_LAYOUTS = {0: "TENSOR_WIDTH_PACKED", 1: "TENSOR_HEIGHT_PACKED", 2: "TENSOR_CHANNELS_PACKED",
                  3: "PACKED_INT8_4W4C", 4: "PACKED_INT8_4H4W", 5: "PACKED_INT8_4W",
                  6: "PACKED_INT8_4C", 8: "PACKED_INT8_4C1W", 9: "PACKED_INT8_CONV2D",
                  255: "DEFAULT_LAYOUT"}

# GraphTypes union member codes
VALUE_TYPES = {1: "Null", 2: "Int", 3: "Double", 4: "Bool", 5: "VkTensor", 6: "IntList",
               7: "DoubleList", 8: "BoolList", 9: "ValueList", 10: "String", 11: "SymInt"}

VK_SCHEMA = {
    "VkGraph": [
        ("version", 0, "str"), ("chain", 1, ("vec_table", "OperatorCall")),
        ("values", 2, ("vec_table", "VkValue")), ("input_ids", 3, ("vec", "u32")),
        ("output_ids", 4, ("vec", "u32")), ("constants", 5, ("vec_table", "VkBytes")),
        ("shaders", 6, ("vec_table", "VkBytes")),
        ("storage_type_override", 7, ("default", "u8", 255)),
        ("memory_layout_override", 8, ("default", "u8", 255)),
    ],
    "OperatorCall": [("node_id", 0, "u32"), ("name", 1, "str"), ("args", 2, ("vec", "i32"))],
    "VkValue": [("value", 0, ("union", VALUE_TYPES))],
    "VkTensor": [
        ("datatype", 0, "i8"), ("dims", 1, ("vec", "u32")), ("constant_id", 2, "i32"),
        ("mem_obj_id", 3, "i32"), ("storage_type", 4, ("default", "u8", 255)),
        ("memory_layout", 5, ("default", "u8", 255)),
        ("staging_datatype", 6, ("default", "i8", UNSET)),
    ],
    "Null": [],
    "Int": [("int_val", 0, "i64")],
    "Bool": [("bool_val", 0, "bool")],
    "Double": [("double_val", 0, "f64")],
    "String": [("string_val", 0, "str")],
    "IntList": [("items", 0, ("vec", "i64"))],
    "DoubleList": [("items", 0, ("vec", "f64"))],
    "BoolList": [("items", 0, ("vec", "bool"))],
    "ValueList": [("items", 0, ("vec", "i32"))],
    "SymInt": [("value", 0, "i32")],
    "VkBytes": [("offset", 0, "u64"), ("length", 1, "u64"), ("named_key", 2, "str")],
}
