"""Field tables of the two devtools flatbuffer schemas, read and written with them.

Written from the schema files in the ``executorch`` wheel
(``devtools/etdump/etdump_schema_flatcc.fbs``, namespace ``etdump``, and
``devtools/bundled_program/schema/bundled_program_schema.fbs``, namespace
``bundled_program_flatbuffer``); spec section 9. Entries are
``(field, id, kind)`` in the format of ``pyruntime/schema/program.py``; a
union consumes two ids. ``ALIGN`` lists the ``force_align`` vectors.
"""

ETDUMP_IDENTIFIER = b"ED00"
BUNDLED_IDENTIFIER = b"BP08"
BUNDLED_VERSION = 2

# etdump.ValueType (a plain byte enum, not a union)
VALUE_TYPES = {0: "Null", 1: "Int", 2: "Bool", 3: "Float", 4: "Double", 5: "Tensor",
               6: "TensorList", 7: "String"}
VALUE_CODES = {v: k for k, v in VALUE_TYPES.items()}

ETDUMP_SCHEMA = {
    "ETDump": [("version", 0, "u32"), ("run_data", 1, ("vec_table", "RunData"))],
    "RunData": [("name", 0, "str"), ("bundled_input_index", 1, ("default", "i32", -1)),
                ("allocators", 2, ("vec_table", "Allocator")),
                ("events", 3, ("vec_table", "Event"))],
    "Allocator": [("name", 0, "str")],
    "Event": [("profile_event", 0, ("table", "ProfileEvent")),
              ("allocation_event", 1, ("table", "AllocationEvent")),
              ("debug_event", 2, ("table", "DebugEvent"))],
    "ProfileEvent": [("name", 0, "str"), ("chain_index", 1, "i32"),
                     ("instruction_id", 2, ("default", "i32", -1)),
                     ("delegate_debug_id_int", 3, ("default", "i32", -1)),
                     ("delegate_debug_id_str", 4, "str"),
                     ("delegate_debug_metadata", 5, "bytes"),
                     ("start_time", 6, "u64"), ("end_time", 7, "u64")],
    "AllocationEvent": [("allocator_id", 0, "i32"), ("allocation_size", 1, "u64")],
    "DebugEvent": [("chain_index", 0, "u64"), ("instruction_id", 1, ("default", "i32", -1)),
                   ("debug_entry", 2, ("table", "Value")),
                   ("delegate_debug_id_int", 3, ("default", "i32", -1)),
                   ("delegate_debug_id_str", 4, "str"), ("name", 5, "str")],
    "Value": [("val", 0, "i8"), ("tensor", 1, ("table", "Tensor")),
              ("tensor_list", 2, ("table", "TensorList")), ("int_value", 3, ("table", "Int")),
              ("float_value", 4, ("table", "Float")), ("double_value", 5, ("table", "Double")),
              ("bool_value", 6, ("table", "Bool")), ("output", 7, ("table", "Bool"))],
    "Tensor": [("scalar_type", 0, "i8"), ("sizes", 1, ("vec", "i64")),
               ("strides", 2, ("vec", "i64")), ("offset", 3, "i64")],
    "TensorList": [("tensors", 0, ("vec_table", "Tensor"))],
    "Int": [("int_val", 0, "i64")],
    "Bool": [("bool_val", 0, "bool")],
    "Float": [("float_val", 0, "f32")],
    "Double": [("double_val", 0, "f64")],
    "String": [("string_val", 0, "str")],
}

BUNDLED_VALUE_TYPES = {1: "Tensor", 2: "Int", 3: "Bool", 4: "Double"}

BUNDLED_SCHEMA = {
    "BundledProgram": [("version", 0, "u32"),
                       ("method_test_suites", 1, ("vec_table", "BundledMethodTestSuite")),
                       ("program", 2, "bytes")],
    "BundledMethodTestSuite": [("method_name", 0, "str"),
                               ("test_cases", 1, ("vec_table", "BundledMethodTestCase"))],
    "BundledMethodTestCase": [("inputs", 0, ("vec_table", "Value")),
                              ("expected_outputs", 1, ("vec_table", "Value"))],
    "Value": [("val", 0, ("union", BUNDLED_VALUE_TYPES))],
    "Tensor": [("scalar_type", 0, "i8"), ("sizes", 1, ("vec", "i32")), ("data", 2, "bytes"),
               ("dim_order", 3, ("vec", "u8"))],
    "Int": [("int_val", 0, "i64")],
    "Bool": [("bool_val", 0, "bool")],
    "Double": [("double_val", 0, "f64")],
}

# (table, field) -> force_align of a [ubyte] vector
BUNDLED_ALIGN = {("BundledProgram", "program"): 32, ("Tensor", "data"): 16}
