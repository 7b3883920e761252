"""The ML Program inside an mlpackage, read into plain Python objects.

The ``Model`` protobuf is parsed with coremltools' generated modules
(``coremltools/proto/*_pb2.py``, which only need ``google.protobuf``). Importing
``coremltools`` itself would import its converters and torch (seconds, and the
runtime never imports torch), so ``proto_modules`` loads the ``proto``
subpackage by itself, under its own name ``coremltools.proto``: a later
``import coremltools`` finds it in ``sys.modules`` and uses the same classes.

``load_program`` turns the protobuf into ``Function``s of ``Op``s whose
arguments are either the name of a value or a constant (numpy array, str,
bool, list); blob-file constants are read from ``weights/weight.bin`` here.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import threading
from dataclasses import dataclass, field

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.coreml.blobs import BlobFile, unpack_bits
from pyruntime.delegates.coreml.payload import BACKEND, Directory, payload_error

INSTALL_HINT = ("coremltools is not installed: pip install 'pyruntime[coreml]' (its generated "
                "protobuf modules read the Core ML model)")

# MIL DataType enum (MIL.proto) -> our dtype names (MIL's own spelling)
MIL_DTYPES = {1: "bool", 2: "string", 10: "fp16", 11: "fp32", 12: "fp64", 13: "bf16",
              21: "int8", 22: "int16", 23: "int32", 24: "int64", 25: "int4", 31: "uint8",
              32: "uint16", 33: "uint32", 34: "uint64", 35: "uint4", 36: "uint2", 37: "uint1",
              38: "uint6", 39: "uint3", 40: "fp8e4m3fn", 41: "fp8e5m2"}
SUB_BYTE = {"int4": 4, "uint4": 4, "uint2": 2, "uint1": 1, "uint6": 6, "uint3": 3}
# Core ML feature (MultiArray) data types
ARRAY_DTYPES = {65568: "fp32", 65600: "fp64", 131104: "int32", 131080: "int8", 65552: "fp16"}

_lock = threading.Lock()
_proto = None


def proto_modules():
    """(Model_pb2, MIL_pb2) from coremltools' generated code, without importing coremltools."""
    global _proto
    if _proto is not None:
        return _proto
    with _lock:
        if _proto is None:
            _proto = _load_proto()
    return _proto


def _load_proto():
    if "coremltools" in sys.modules:  # already imported by the user: use it as it is
        from coremltools.proto import MIL_pb2, Model_pb2
        return Model_pb2, MIL_pb2
    spec = importlib.util.find_spec("coremltools")
    if spec is None or not spec.submodule_search_locations:
        raise ExecuTorchError(ErrorCode.NotFound, f"{BACKEND}: {INSTALL_HINT}")
    pkg = "coremltools.proto"
    if pkg not in sys.modules:
        folder = os.path.join(list(spec.submodule_search_locations)[0], "proto")
        ps = importlib.util.spec_from_file_location(
            pkg, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
        if ps is None:
            raise ExecuTorchError(ErrorCode.NotFound, f"{BACKEND}: {INSTALL_HINT}")
        mod = importlib.util.module_from_spec(ps)  # not executed: its body imports all modules
        sys.modules[pkg] = mod
        # Import leaves first, so every `from . import X` inside finds X as an attribute
        # (a missing one would make Python import the top-level coremltools package).
        for name in _dependency_order(folder, "Model_pb2"):
            importlib.import_module(f"{pkg}.{name}")
    return sys.modules[f"{pkg}.Model_pb2"], sys.modules[f"{pkg}.MIL_pb2"]


def _dependency_order(folder: str, root: str) -> list:
    order, seen = [], set()

    def visit(name):
        if name in seen:
            return
        seen.add(name)
        with open(os.path.join(folder, name + ".py"), encoding="utf-8") as f:
            deps = re.findall(r"^from \. import (\w+)", f.read(), re.M)
        for d in deps:
            visit(d)
        order.append(name)
    visit(root)
    return order


# ---- the program ----------------------------------------------------------------------
@dataclass
class Var:
    name: str
    dtype: str | None  # MIL dtype name; None for non-tensor types (lists, tuples)
    shape: tuple | None  # ints, None per unknown dim; None for unknown rank
    state: bool = False  # a Core ML state (iOS18): read_state/write_state only


@dataclass
class Op:
    type: str
    name: str
    inputs: dict  # param -> list of ("name", str) | ("value", constant)
    outputs: list  # [Var]
    attributes: dict
    blocks: list = field(default_factory=list)  # nested Blocks (cond, while_loop)


@dataclass
class Block:
    inputs: list  # [Var]
    outputs: list  # [str]
    ops: list  # [Op]


@dataclass
class Function:
    name: str
    opset: str
    inputs: list  # [Var] (states included)
    block: Block


@dataclass
class MLProgram:
    spec_version: int
    functions: dict  # name -> Function
    default_function: str
    description: object  # the protobuf ModelDescription (inputs, outputs, states)


def _shape_of(tensor_type) -> tuple | None:
    if tensor_type.rank < 0:
        return None
    dims = []
    for d in tensor_type.dimensions:
        dims.append(d.constant.size if d.WhichOneof("dimension") == "constant" else None)
    return tuple(dims)


def var_of(name: str, vtype) -> Var:
    kind = vtype.WhichOneof("type")
    if kind == "tensorType":
        t = vtype.tensorType
        return Var(name, MIL_DTYPES.get(t.dataType, f"dtype{t.dataType}"), _shape_of(t))
    if kind == "stateType":
        w = vtype.stateType.wrappedType
        if w.WhichOneof("type") != "tensorType":
            raise payload_error(f"state {name!r} does not wrap a tensor")
        t = w.tensorType
        return Var(name, MIL_DTYPES.get(t.dataType, f"dtype{t.dataType}"), _shape_of(t), True)
    return Var(name, None, None)


class _Reader:
    """Turns protobuf values into constants; reads blob-file values through ``blobs``."""

    def __init__(self, directory: Directory, model_dir: str):
        self.d, self.model_dir = directory, model_dir
        self.blobs: dict = {}

    def blob_file(self, file_name: str) -> BlobFile:
        if not file_name.startswith("@model_path/"):
            raise payload_error(f"blob file {file_name!r} is not under @model_path/")
        rel = file_name[len("@model_path/"):]
        if ".." in rel.split("/"):
            raise payload_error(f"blob file {file_name!r} leaves the model directory")
        path = f"{self.model_dir}/{rel}"
        if path not in self.blobs:
            self.blobs[path] = BlobFile(self.d.read(path), rel)
        return self.blobs[path]

    def value(self, v, where: str):
        kind = v.WhichOneof("value")
        if kind == "blobFileValue":
            var = var_of(where, v.type)
            if var.dtype is None or var.shape is None or None in var.shape:
                raise payload_error(f"{where}: a blob value needs a tensor type of known shape")
            return self.blob_file(v.blobFileValue.fileName).read(v.blobFileValue.offset, var.dtype,
                                                                 var.shape)
        if kind != "immediateValue":
            raise payload_error(f"{where}: value without data")
        imm = v.immediateValue
        ik = imm.WhichOneof("value")
        if ik == "tensor":
            var = var_of(where, v.type)
            return _tensor_value(imm.tensor, var, where)
        if ik in ("list", "tuple"):
            return [self.value(e, where) for e in getattr(imm, ik).values]
        if ik == "dictionary":
            return {self.value(e.key, where).item() if isinstance(e.key, np.ndarray) else
                    self.value(e.key, where): self.value(e.value, where)
                    for e in imm.dictionary.values}
        raise payload_error(f"{where}: unsupported immediate value kind {ik!r}")


_NP = {"bool": np.bool_, "fp16": np.float16, "fp32": np.float32, "fp64": np.float64,
       "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
       "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64}


def np_dtype(name: str):
    """numpy dtype of a MIL dtype name (bf16 via ml_dtypes); None for strings."""
    if name == "bf16":
        from pyruntime.cython_ext.dtypes import to_numpy_dtype
        return to_numpy_dtype(15)
    if name in SUB_BYTE:
        return np.dtype(np.int8 if name == "int4" else np.uint8)
    dt = _NP.get(name)
    return None if dt is None else np.dtype(dt)


def _tensor_value(t, var: Var, where: str):
    if var.shape is None or None in var.shape:
        raise payload_error(f"{where}: an immediate tensor needs a known shape")
    shape, dt = var.shape, var.dtype
    count = int(np.prod(shape, dtype=np.int64))
    field = t.WhichOneof("value")
    if dt == "string":
        vals = [s if isinstance(s, str) else s.decode() for s in t.strings.values]
        if len(vals) != count:
            raise payload_error(f"{where}: {len(vals)} strings for shape {list(shape)}")
        return vals[0] if shape == () else np.array(vals, dtype=object).reshape(shape)
    npdt = np_dtype(dt)
    if npdt is None:
        raise payload_error(f"{where}: unsupported constant dtype {dt}")
    if field == "bytes":
        raw = np.frombuffer(t.bytes.values, np.uint8)
        if dt in SUB_BYTE:
            arr = unpack_bits(raw, SUB_BYTE[dt], count, dt == "int4")
        else:
            if raw.size != count * npdt.itemsize:
                raise payload_error(f"{where}: {raw.size} bytes for {count} {dt} values")
            arr = raw.view(npdt)
    elif field in ("floats", "ints", "bools", "longInts", "doubles"):
        arr = np.asarray(list(getattr(t, field).values))
        if arr.size != count:
            raise payload_error(f"{where}: {arr.size} values for shape {list(shape)}")
        arr = arr.astype(npdt) if arr.size else np.zeros(0, npdt)
    elif field is None and count == 0:
        arr = np.zeros(0, npdt)
    else:
        raise payload_error(f"{where}: {dt} tensor stored in field {field!r}")
    return arr.reshape(shape)


def _block(b, reader: _Reader, where: str) -> Block:
    ops = []
    for i, o in enumerate(b.operations):
        w = f"{where} op {i} ({o.type})"
        inputs = {}
        for param, arg in o.inputs.items():
            binds = []
            for bnd in arg.arguments:
                if bnd.WhichOneof("binding") == "name":
                    binds.append(("name", bnd.name))
                else:
                    binds.append(("value", reader.value(bnd.value, f"{w} input {param}")))
            inputs[param] = binds
        attrs = {k: reader.value(v, f"{w} attribute {k}") for k, v in o.attributes.items()}
        outs = [var_of(v.name, v.type) for v in o.outputs]
        name = attrs.get("name")
        blocks = [_block(nb, reader, f"{w} block {j}") for j, nb in enumerate(o.blocks)]
        ops.append(Op(o.type, name if isinstance(name, str) else (outs[0].name if outs else ""),
                      inputs, outs, attrs, blocks))
    return Block([var_of(v.name, v.type) for v in b.inputs], list(b.outputs), ops)


def load_program(directory: Directory, model_path: str) -> MLProgram:
    Model_pb2, _ = proto_modules()
    m = Model_pb2.Model()
    try:
        m.ParseFromString(bytes(directory.read(model_path)))
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise payload_error(f"{model_path} is not a Core ML Model protobuf: "
                            f"{type(e).__name__}: {e}") from None
    kind = m.WhichOneof("Type")
    if kind != "mlProgram":
        raise payload_error(f"the model is a {kind or 'empty'} model, not an ML Program",
                            ErrorCode.NotSupported)
    reader = _Reader(directory, model_path.rsplit("/", 1)[0])
    functions = {}
    for fname, fn in m.mlProgram.functions.items():
        specs = fn.block_specializations
        if fn.opset in specs:
            blk = specs[fn.opset]
        elif len(specs) == 1:
            blk = next(iter(specs.values()))
        else:
            raise payload_error(f"function {fname!r}: no block for its opset {fn.opset!r}")
        functions[fname] = Function(fname, fn.opset, [var_of(v.name, v.type) for v in fn.inputs],
                                    _block(blk, reader, f"function {fname}"))
    if not functions:
        raise payload_error("the ML Program has no functions")
    default = m.description.defaultFunctionName or ("main" if "main" in functions
                                                    else next(iter(functions)))
    return MLProgram(m.specificationVersion, functions, default, m.description)
