"""Field tables of the XNNGraph flatbuffer (ExecuTorch ``backends/xnnpack/serialization``,
namespace ``fb_xnnpack``, identifiers ``XN01`` and the older ``XN00``), spec section 8.1.

Written from the spec for ``cython_ext.flatbuf.read_table``: each entry is
``(field, id, kind)`` and a union consumes two ids. One table set reads both
identifiers: ``XN00`` adds ``XNNTensorValue.dq_datatype`` (id 7) and uses
``XNNGraph.constant_buffer``; both are simply absent in ``XN01`` files.
"""

# XNNDatatype as ExecuTorch serializes it (not XNNPACK's numbering: see graph.py).
ET_DATATYPES = {
    0: "invalid", 1: "fp32", 2: "fp16", 3: "qint8", 4: "quint8", 5: "qint32", 6: "qcint8",
    7: "qcint32", 8: "qcint4", 9: "qdint8", 10: "qbint4", 11: "qpint8", 12: "int32",
    13: "pfp32", 14: "bf16",
}

# XNodeUnion member codes -> (node name, table).
XNODE_TYPES = {
    1: ("Add", "_XNNNode2x1"), 2: ("FullyConnected", "XNNFullyConnected"),
    3: ("Softmax", "_XNNNode1x1"), 4: ("Sigmoid", "_XNNNode1x1"),
    5: ("StaticTranspose", "XNNStaticTranspose"), 6: ("Clamp", "_XNNNode1x1"),
    7: ("Conv2d", "_XNNNodeConv"), 8: ("Div", "_XNNNode2x1"),
    9: ("StaticResizeBilinear2D", "XNNStaticResizeBilinear2D"),
    10: ("StaticConstantPad", "XNNStaticConstantPad"), 11: ("AvgPooling2d", "_XNNPooling2D"),
    12: ("Minimum", "_XNNNode2x1"), 13: ("DepthwiseConv2d", "_XNNNodeConv"),
    14: ("MaxPooling2d", "_XNNPooling2D"), 15: ("Multiply", "_XNNNode2x1"),
    16: ("Subtract", "_XNNNode2x1"), 17: ("Floor", "_XNNNode1x1"),
    18: ("Convert", "_XNNNode1x1"), 19: ("GlobalAvgPooling2d", "_XNNNode1x1"),
    20: ("StaticReshape", "XNNStaticReshape"), 21: ("ArgMaxPooling2d", "XNNArgMaxPooling2d"),
    22: ("SquareRoot", "_XNNNode1x1"), 23: ("Ceiling", "_XNNNode1x1"),
    24: ("Hardswish", "_XNNNode1x1"), 25: ("LeakyReLU", "XNNLeakyReLU"),
    26: ("Maximum", "_XNNNode2x1"), 27: ("Negate", "_XNNNode1x1"),
    28: ("Square", "_XNNNode1x1"), 29: ("ELU", "XNNELU"), 30: ("Abs", "_XNNNode1x1"),
    31: ("PReLU", "_XNNNode2x1"), 32: ("Concatenate2", "_XNNCat"),
    33: ("Concatenate3", "_XNNCat"), 34: ("Concatenate4", "_XNNCat"),
    35: ("StaticSlice", "XNNStaticSlice"),
    36: ("ScaledDotProductAttention", "XNNScaledDotProductAttention"),
    37: ("BatchMatrixMultiply", "_XNNNode2x1"), 38: ("Concatenate5", "_XNNCat"),
    39: ("ConvTranspose2d", "_XNNNodeConv"), 40: ("ReciprocalSquareRoot", "_XNNNode1x1"),
    41: ("Log", "_XNNNode1x1"), 42: ("Gelu", "_XNNNode1x1"), 43: ("Tanh", "_XNNNode1x1"),
    44: ("Exp", "_XNNNode1x1"), 45: ("Sin", "_XNNNode1x1"), 46: ("Copy", "_XNNNode1x1"),
    47: ("Cos", "_XNNNode1x1"),
}

_U = "u32"
_PAD4 = [("padding_top", 0, _U), ("padding_right", 1, _U), ("padding_bottom", 2, _U),
         ("padding_left", 3, _U)]

XNN_SCHEMA = {
    "XNNGraph": [
        ("version", 0, "str"), ("xnodes", 1, ("vec_table", "XNode")),
        ("xvalues", 2, ("vec_table", "XValue")), ("num_externs", 3, _U),
        ("input_ids", 4, ("vec", _U)), ("output_ids", 5, ("vec", _U)),
        ("constant_buffer", 6, ("vec_table", "Buffer")),
        ("mem_buffer_sizes", 7, ("vec", _U)),
        ("constant_data", 8, ("vec_table", "ConstantDataOffset")),
    ],
    "Buffer": [("storage", 0, "bytes")],
    "ConstantDataOffset": [("offset", 0, "u64"), ("size", 1, "u64"), ("named_key", 2, "str")],
    "XValue": [("xvalue_union", 0, ("union", {1: "XNNTensorValue",
                                              2: "XNNQuantizedTensorValue"}))],
    "XNNTensorValue": [
        ("datatype", 0, "i16"), ("num_dims", 1, _U), ("dims", 2, ("vec", _U)),
        ("constant_buffer_idx", 3, _U), ("external_id", 4, _U), ("flags", 5, _U),
        ("id_out", 6, _U), ("dq_datatype", 7, "i16"),
    ],
    "XNNQuantizedTensorValue": [
        ("tensor_value", 0, ("table", "XNNTensorValue")),
        ("quant_params", 1, ("union", {1: "PerChannelQuant", 2: "PerTensorQuant",
                                       3: "PerTokenDynamicQuant", 4: "PerChannelGroupQuant"})),
    ],
    "PerChannelQuant": [("scale", 0, ("vec", "f32")), ("channel_dim", 1, "i32"),
                        ("scale_buffer_idx", 2, _U), ("num_scales", 3, _U)],
    "PerTensorQuant": [("scale", 0, "f32"), ("zero_point", 1, "i32")],
    "PerTokenDynamicQuant": [("num_nonbatch_dims", 0, "i32")],
    "PerChannelGroupQuant": [("scale", 0, ("vec", "f32")), ("channel_dim", 1, "i32"),
                             ("group_size", 2, "i32"), ("scale_bf16", 3, ("vec", "u16")),
                             ("scale_buffer_idx", 4, _U), ("num_scales", 5, _U)],
    "XNode": [("xnode_union", 0, ("union", {c: t for c, (_, t) in XNODE_TYPES.items()})),
              ("debug_handle", 2, _U), ("output_min_max", 3, ("table", "OutputMinMax"))],
    "OutputMinMax": [("output_min", 0, "f32"), ("output_max", 1, "f32")],
    "_XNNNode2x1": [("input1_id", 0, _U), ("input2_id", 1, _U), ("output_id", 2, _U),
                    ("flags", 3, _U)],
    "_XNNNode1x1": [("input_id", 0, _U), ("output_id", 1, _U), ("flags", 2, _U)],
    "XNNFullyConnected": [("input1_id", 0, _U), ("filter_id", 1, _U), ("bias_id", 2, _U),
                          ("output_id", 3, _U), ("flags", 4, _U)],
    "_XNNNodeConv": _PAD4 + [
        ("kernel_height", 4, _U), ("kernel_width", 5, _U), ("subsampling_height", 6, _U),
        ("subsampling_width", 7, _U), ("dilation_height", 8, _U), ("dilation_width", 9, _U),
        ("group_input_channels", 10, _U), ("group_output_channels", 11, _U),
        ("groups", 12, _U), ("adjustment_height", 13, _U), ("adjustment_width", 14, _U),
        ("input1_id", 15, _U), ("filter_id", 16, _U), ("bias_id", 17, _U),
        ("output_id", 18, _U), ("flags", 19, _U),
    ],
    "_XNNPooling2D": _PAD4 + [
        ("pooling_height", 4, _U), ("pooling_width", 5, _U), ("stride_height", 6, _U),
        ("stride_width", 7, _U), ("dilation_height", 8, _U), ("dilation_width", 9, _U),
        ("input_id", 10, _U), ("output_id", 11, _U), ("flags", 12, _U),
    ],
    "_XNNCat": [("axis", 0, _U), ("input1_id", 1, _U), ("input2_id", 2, _U),
                ("input3_id", 3, _U), ("input4_id", 4, _U), ("output_id", 5, _U),
                ("flags", 6, _U), ("input5_id", 7, _U)],
    "XNNStaticTranspose": [("num_dims", 0, _U), ("perm", 1, ("vec", _U)), ("input_id", 2, _U),
                           ("output_id", 3, _U), ("flags", 4, _U)],
    "XNNStaticResizeBilinear2D": [("new_height", 0, _U), ("new_width", 1, _U),
                                  ("input_id", 2, _U), ("output_id", 3, _U), ("flags", 4, _U)],
    "XNNStaticConstantPad": [("pre_paddings", 0, ("vec", _U)), ("post_paddings", 1, ("vec", _U)),
                             ("padding_value", 2, "f32"), ("input_id", 3, _U),
                             ("output_id", 4, _U), ("flags", 5, _U)],
    "XNNStaticReshape": [("num_dims", 0, _U), ("new_shape", 1, ("vec", _U)), ("input_id", 2, _U),
                         ("output_id", 3, _U), ("flags", 4, _U)],
    "XNNStaticSlice": [("num_dims", 0, _U), ("offsets", 1, ("vec", _U)), ("sizes", 2, ("vec", _U)),
                       ("input_id", 3, _U), ("output_id", 4, _U), ("flags", 5, _U)],
    "XNNScaledDotProductAttention": [("query_id", 0, _U), ("key_id", 1, _U), ("value_id", 2, _U),
                                     ("scale_id", 3, _U), ("mask_id", 4, _U),
                                     ("output_id", 5, _U), ("flags", 6, _U)],
    "XNNArgMaxPooling2d": _PAD4 + [("pooling_height", 4, _U), ("pooling_width", 5, _U),
                                   ("input_id", 6, _U), ("output_value_id", 7, _U),
                                   ("output_index_id", 8, _U), ("flags", 9, _U)],
    "XNNLeakyReLU": [("negative_slope", 0, "f32"), ("input_id", 1, _U), ("output_id", 2, _U),
                     ("flags", 3, _U)],
    "XNNELU": [("alpha", 0, "f32"), ("input_id", 1, _U), ("output_id", 2, _U), ("flags", 3, _U)],
}
