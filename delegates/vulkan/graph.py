"""A VkGraph made executable: values, device tensors, the op chain as dispatches.

Tensors are allocated per ``mem_obj_id`` (one buffer per shared object, sized for its
largest user), with a buffer of their own otherwise; constants are uploaded once.
Every tensor is a contiguous row-major buffer of its logical (NCHW) shape whatever
storage type and memory layout the graph asks for: our shaders index logically, so
layouts and packed dims change nothing in the numbers.

Each op's builder (``ops/``) runs once at load and returns a plan function; a plan
function sizes its outputs from the current input shapes and returns its dispatches.
The plans run again only when input shapes (or SymInt inputs) change; otherwise the
recorded command buffer is resubmitted as it is.
"""
from __future__ import annotations

from contextlib import contextmanager
from math import prod

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.vulkan.blob import BACKEND, VkBlob, blob_error, constant_bytes
from pyruntime.delegates.vulkan.commands import Dispatch, groups_1d
from pyruntime.delegates.vulkan import vk
from pyruntime.delegates.vulkan.device import Arena, Device
from pyruntime.delegates.vulkan.schema import DATATYPES, VALUE_TYPES

_GLSL = {"float32": "float", "float16": "float16_t", "int32": "int", "int8": "int8_t",
         "uint8": "uint8_t", "bool": "uint8_t"}
_SAMPLER = {"f": "samplerBuffer", "i": "isamplerBuffer", "u": "usamplerBuffer",
            "b": "usamplerBuffer"}
MAX_DIMS = 8
MAX_GRAPH_BYTES = 1 << 32  # device memory one delegate may take


class SymInt:
    __slots__ = ("value",)

    def __init__(self, value=0):
        self.value = int(value)

    def __repr__(self):
        return f"SymInt({self.value})"


class Tensor:
    """A device tensor: logical shape (current), capacity and its buffer binding."""

    __slots__ = ("vid", "dtype", "staging", "dims", "shape", "const_id", "mem_obj", "buf",
                 "storage", "layout", "src_dtype")

    def __init__(self, vid, node, force_fp16=False):
        self.vid = vid
        name, np_name = DATATYPES.get(node.datatype, (None, None))
        if np_name is None or name in ("float64", "int64"):
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: value {vid}: tensor datatype "
                                  f"{name or node.datatype} is not supported on the device "
                                  "(ExecuTorch downcasts 64-bit types unless downcast_64_bit "
                                  "is off)")
        self.dtype = self.src_dtype = np.dtype(np_name)
        st = DATATYPES.get(node.staging_datatype, (None, None))[1]
        self.staging = np.dtype(st) if st else self.dtype
        if force_fp16 and self.dtype == np.float32:  # the compile spec, on an fp32 payload
            self.dtype = np.dtype(np.float16)
        self.dims = tuple(int(d) for d in (node.dims or []))
        if len(self.dims) > MAX_DIMS:
            raise blob_error(f"value {vid}: {len(self.dims)} dims (at most {MAX_DIMS})")
        self.shape = self.dims
        self.const_id = node.constant_id
        self.mem_obj = node.mem_obj_id
        self.storage, self.layout = node.storage_type, node.memory_layout
        self.buf = None

    @classmethod
    def make(cls, vid, dtype, dims) -> "Tensor":
        t = cls.__new__(cls)
        t.vid, t.dtype = vid, np.dtype(dtype)
        t.staging = t.src_dtype = t.dtype
        t.dims = tuple(int(d) for d in dims)
        t.shape, t.const_id, t.mem_obj, t.storage, t.layout, t.buf = t.dims, -1, -1, 0, 0, None
        return t

    @property
    def glsl(self) -> str:
        return _GLSL[self.dtype.name]

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def capacity(self) -> int:
        return prod(self.dims) * self.dtype.itemsize

    def binding(self):
        return (self.buf, 0, self.buf.size)

    def resize(self, shape, where=""):
        shape = tuple(int(s) for s in shape)
        if prod(shape) * self.dtype.itemsize > self.buf.size:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: {where}: value {self.vid} resized to {list(shape)} "
                                  f"exceeds its {list(self.dims)} upper bound")
        self.shape = shape

    def __repr__(self):
        return f"Tensor(v{self.vid}, {self.dtype.name}{list(self.shape)})"


class Graph:
    def __init__(self, dev: Device, vb: VkBlob, named_data, options: dict):
        self.dev, self.vb, self.options = dev, vb, options
        g = vb.graph
        self.arena = Arena(dev)
        self.values = [self._value(i, v) for i, v in enumerate(g.values)]
        n = len(self.values)
        for what, ids in (("input", g.input_ids or []), ("output", g.output_ids or [])):
            for i in ids:
                if not 0 <= i < n:
                    raise blob_error(f"{what} id {i} out of range ({n} values)")
        self.inputs, self.outputs = list(g.input_ids or []), list(g.output_ids or [])
        try:
            self._check_features()
            self._allocate(named_data)
        except BaseException:
            self.arena.close()
            raise
        self.plans = []  # (op name, plan function)
        self.plan_cache = None  # dispatches of the current shapes

    # ---- values ------------------------------------------------------------------
    def _value(self, i, v):
        code, node = v.value
        kind = VALUE_TYPES.get(code)
        if code and kind is None:
            raise blob_error(f"value {i}: unknown value type {code}")
        if node is None or kind == "Null":
            return None
        if kind == "VkTensor":
            return Tensor(i, node, bool(self.options.get("force_fp16")))
        if kind == "Int":
            return int(node.int_val)
        if kind == "Double":
            return float(node.double_val)
        if kind == "Bool":
            return bool(node.bool_val)
        if kind == "String":
            return node.string_val or ""
        if kind in ("IntList", "DoubleList", "BoolList"):
            return list(node.items or [])
        if kind == "ValueList":
            return ValueList(node.items or [])
        if kind == "SymInt":
            return SymInt(node.value)
        raise blob_error(f"value {i}: unhandled value type {kind}")

    def _check_features(self):
        need16 = any(isinstance(v, Tensor) and v.dtype == np.float16 for v in self.values)
        need8 = any(isinstance(v, Tensor) and v.dtype.itemsize == 1 for v in self.values)
        dev = self.dev
        for v in self.values:
            if isinstance(v, Tensor) and vk.FORMATS[v.dtype.name] not in dev.texel_formats:
                raise ExecuTorchError(ErrorCode.NotSupported,
                                      f"{BACKEND}: device {dev.name!r} cannot read "
                                      f"{v.dtype.name} tensors as texel buffers "
                                      f"({vk.FORMAT_NAMES[vk.FORMATS[v.dtype.name]]})")
        if need16 and not dev.fp16:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: the graph has float16 tensors and device "
                                  f"{dev.name!r} lacks shaderFloat16 or 16-bit storage buffers")
        if need8 and not dev.int8:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: the graph has 8-bit tensors and device "
                                  f"{dev.name!r} lacks shaderInt8 or 8-bit storage buffers")

    def _allocate(self, named_data):
        shared: dict[int, int] = {}
        tensors = [v for v in self.values if isinstance(v, Tensor)]
        limit = self.dev.max_storage_range
        for t in tensors:
            if t.capacity > limit or prod(t.dims) > self.dev.max_texels:
                raise ExecuTorchError(ErrorCode.NotSupported,
                                      f"{BACKEND}: value {t.vid} {t.dtype.name}{list(t.dims)} "
                                      f"({t.capacity} bytes) exceeds the device's storage "
                                      f"buffer range ({limit} bytes, {self.dev.max_texels} "
                                      "texels)")
            if t.const_id < 0 and t.mem_obj >= 0:
                shared[t.mem_obj] = max(shared.get(t.mem_obj, 0), t.capacity)
        total = sum(shared.values()) + sum(t.capacity for t in tensors
                                           if t.const_id >= 0 or t.mem_obj < 0)
        if total > MAX_GRAPH_BYTES:
            raise ExecuTorchError(ErrorCode.MemoryAllocationFailed,
                                  f"{BACKEND}: the graph needs {total} bytes of device memory "
                                  f"(more than {MAX_GRAPH_BYTES})")
        bufs = {m: self.arena.buffer(size) for m, size in shared.items()}
        consts = []
        for t in tensors:
            if t.const_id >= 0:
                data = constant_bytes(self.vb, t.const_id, named_data, f"value {t.vid}")
                need = prod(t.dims) * t.src_dtype.itemsize
                if len(data) < need:
                    raise blob_error(f"value {t.vid}: constant {t.const_id} has {len(data)} bytes,"
                                     f" {t.src_dtype.name}{list(t.dims)} needs {need}")
                if t.src_dtype != t.dtype:
                    data = np.frombuffer(bytes(data[:need]), t.src_dtype).astype(t.dtype)
                    data = data.view(np.uint8)
                t.buf = self.arena.buffer(t.capacity)
                consts.append((t, data))
            elif t.mem_obj >= 0:
                t.buf = bufs[t.mem_obj]
            else:
                t.buf = self.arena.buffer(t.capacity)
        self.arena.commit()
        for t, data in consts:
            if t.capacity:
                t.buf.view(np.uint8, t.capacity)[:] = data[:t.capacity]

    # ---- accessors for op builders -------------------------------------------------
    def t(self, vid: int, where: str) -> Tensor:
        v = self.values[vid] if 0 <= vid < len(self.values) else None
        if not isinstance(v, Tensor):
            raise blob_error(f"{where}: value {vid} is {type(v).__name__}, expected a tensor")
        return v

    def val(self, vid: int):
        if not 0 <= vid < len(self.values):
            raise blob_error(f"value id {vid} out of range ({len(self.values)} values)")
        v = self.values[vid]
        return v.value if isinstance(v, SymInt) else v

    def fval(self, vid: int, default: float) -> float:
        """A float argument, ``default`` where it is None (an optional scalar not given)."""
        v = self.val(vid)
        return default if v is None else float(v)

    def ival(self, vid: int, where: str, default=None) -> int:
        """An int argument. The serializer shares one value among equal scalars (0, 0.0 and
        False hash alike), so an int argument may arrive as a Double or a Bool."""
        v = self.val(vid)
        if v is None and default is not None:
            return default
        if isinstance(v, (bool, int)) or (isinstance(v, float) and v.is_integer()):
            return int(v)
        raise blob_error(f"{where}: value {vid} is {v!r}, expected an int")

    def ints(self, vid: int, where: str) -> list[int]:
        v = self.val(vid)
        if isinstance(v, ValueList):
            return [self.ival(j, where) for j in v]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return [self.ival(vid, where)]
        if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
            raise blob_error(f"{where}: value {vid} is {v!r}, expected a list of ints")
        return [int(x) for x in v]

    def scratch(self, dtype, dims) -> "Tensor":
        """A device tensor of our own (prepacked weights, intermediates), not in the graph."""
        t = Tensor.make(len(self.values) + len(self.arena.buffers), dtype, dims)
        t.buf = self.arena.buffer(t.capacity)
        self.arena.commit()
        return t

    def const_tensor(self, array) -> "Tensor":
        """A device tensor holding ``array`` (derived constants computed at load)."""
        a = np.ascontiguousarray(array)
        t = self.scratch(a.dtype, a.shape)
        if a.size:
            t.buf.view(a.dtype, a.size)[:] = a.reshape(-1)
        return t

    def dispatch(self, shader, defines, ins, outs, params, groups, label="") -> Dispatch:
        """A dispatch reading the ``ins`` and writing the ``outs`` (lists of (NAME, Tensor),
        in binding order): NAME's S_NAME / T_NAME defines are added here."""
        bufs, defs = [], list(defines)
        for name, t in ins:
            defs.append((f"S_{name}", _SAMPLER[t.dtype.kind]))
            bufs.append(("t", t.buf, vk.FORMATS[t.dtype.name], t.dtype.itemsize))
        for name, t in outs:
            defs.append((f"T_{name}", t.glsl))
            defs.append((f"CV_{name}", "f16rne" if t.dtype == np.float16 else t.glsl))
            bufs.append(("s", t.buf, 0, 0))
        if any(n > m for n, m in zip(groups, self.dev.max_groups)):
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: {label}: {list(groups)} workgroups exceed the "
                                  f"device's limit {list(self.dev.max_groups)}")
        return Dispatch(shader, tuple(defs), bufs, params, groups, label)

    def groups(self, n: int) -> tuple:
        return groups_1d(self.dev, n)

    # ---- planning ------------------------------------------------------------------
    def plan(self) -> list:
        out = []
        for i, (name, fn) in enumerate(self.plans):
            with guard(f"op {i} ({name})"):
                out.extend(fn())
        return out

    def close(self):
        self.arena.close()


@contextmanager
def guard(where: str):
    """Python errors from a malformed graph (a value of the wrong kind where an op expects
    another) become InvalidProgram errors naming the backend and the op."""
    try:
        yield
    except ExecuTorchError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError,
            OverflowError) as e:
        raise ExecuTorchError(ErrorCode.InvalidProgram,
                              f"{BACKEND} payload: {where}: {type(e).__name__}: {e}") from e


class ValueList(list):
    """A ValueList's value ids (distinct from an IntList's ints)."""
