"""The CoreMLBackend payload: a flattened directory, or a reference to one.

ExecuTorch's ``CoreMLBackend.preprocess`` flattens the ``lowered_module``
directory (``executorchcoreml.flatten_directory_contents``) into one buffer::

    file bytes ... | index (JSON, written byte-reversed: the payload's last byte is '{')

The index is ``{"nodes": [{"name", "kind": 0 file | 1 dir, "dataRegion":
{"offset", "size"}, "children": {name: node index}}, ...]}``, the root node
(``lowered_module``) last; a file's ``dataRegion`` is relative to the start
of the payload. The restored tree holds ``metadata.json`` (input and output
names, in the order of the DelegateCall's arguments; a multifunction model
has ``{"methods": {name: {...}}}`` instead), ``debug_info.json`` and either
``model.mlpackage`` (an ``Manifest.json`` and ``Data/com.apple.CoreML/``
with ``model.mlmodel`` and ``weights/weight.bin``) or a compiled
``model.mlmodelc`` (macOS only).

A payload starting with ``CMJR`` is a JSON reference ``{"version", "key",
"functionName"}`` to a flattened directory stored in the program's named
data (several methods sharing one multifunction model).

Every offset, size and child index is checked before a view is made; a bad
payload raises ``ExecuTorchError`` whose message names ``CoreMLBackend``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.interface import payload_bytes

BACKEND = "CoreMLBackend"
REFERENCE_MAGIC = b"CMJR"
_MAX_DEPTH = 64  # directory nesting; a deeper (or cyclic) index is malformed


def payload_error(msg: str, code=ErrorCode.InvalidProgram) -> ExecuTorchError:
    return ExecuTorchError(code, f"{BACKEND} payload: {msg}")


@dataclass
class Reference:
    """A ``CMJR`` payload: the model lives in named data under ``key``."""
    key: str
    function_name: str | None


@dataclass
class Directory:
    """A restored flattened directory: path -> bytes view (paths joined with '/')."""
    files: dict = field(default_factory=dict)
    dirs: set = field(default_factory=set)

    def read(self, path: str) -> np.ndarray:
        try:
            return self.files[path]
        except KeyError:
            raise payload_error(f"no file {path!r} in the payload (files: "
                                f"{', '.join(sorted(self.files)[:8])})") from None

    def text(self, path: str) -> str:
        try:
            return bytes(self.read(path)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise payload_error(f"{path} is not UTF-8 text: {e}") from None

    def json(self, path: str):
        try:
            return json.loads(self.text(path))
        except ValueError as e:
            raise payload_error(f"{path} is not valid JSON: {e}") from None


def parse_reference(buf: np.ndarray) -> Reference:
    try:
        ref = json.loads(bytes(buf[len(REFERENCE_MAGIC):]).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise payload_error(f"CMJR reference is not valid JSON: {e}") from None
    if not isinstance(ref, dict) or not isinstance(ref.get("key"), str):
        raise payload_error("CMJR reference has no string 'key'")
    fn = ref.get("functionName")
    return Reference(ref["key"], fn if isinstance(fn, str) and fn else None)


def _index_start(buf: np.ndarray) -> int:
    """Offset of the reversed JSON index: the shortest balanced object ending the payload."""
    n = len(buf)
    if n == 0 or buf[n - 1] != ord("{"):
        raise payload_error(f"the last byte is not '{{' (not a flattened directory, "
                            f"{n} bytes)")
    raw = bytes(buf)
    depth, in_str = 0, False
    # only quotes and braces matter: visit those (from the end), not every byte
    special = np.flatnonzero((buf == 0x22) | (buf == 0x7B) | (buf == 0x7D))
    for p in special[::-1].tolist():
        c = raw[p]
        if c == 0x22:  # '"': escaped when an odd run of backslashes precedes it in the text,
            k = p + 1  # which is stored reversed: they follow it in the payload
            while k < n and raw[k] == 0x5C:
                k += 1
            if (k - p - 1) % 2 == 0:
                in_str = not in_str
        elif not in_str:
            if c == 0x7B:
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return p
    raise payload_error("the directory index (reversed JSON at the end) is truncated")


def _int(v, what) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise payload_error(f"{what} must be a non-negative integer, got {v!r}")
    return v


def parse_directory(buf: np.ndarray) -> Directory:
    start = _index_start(buf)
    try:
        index = json.loads(bytes(buf[start:])[::-1].decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise payload_error(f"the directory index is not valid JSON: {e}") from None
    nodes = index.get("nodes") if isinstance(index, dict) else None
    if not isinstance(nodes, list) or not nodes:
        raise payload_error("the directory index has no nodes")
    out = Directory()

    def visit(i: int, path: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise payload_error(f"directory nesting deeper than {_MAX_DEPTH} (a cycle?) at "
                                f"{path!r}")
        node = nodes[i]
        if not isinstance(node, dict):
            raise payload_error(f"node {i} is not an object")
        kind = node.get("kind")
        if kind == 0:
            region = node.get("dataRegion")
            if not isinstance(region, dict):
                raise payload_error(f"file {path!r} has no dataRegion")
            off = _int(region.get("offset"), f"{path}: offset")
            size = _int(region.get("size"), f"{path}: size")
            if off + size > start:
                raise payload_error(f"file {path!r} [{off}, +{size}) is outside the {start}-byte "
                                    f"data region")
            out.files[path] = buf[off:off + size]
        elif kind == 1:
            out.dirs.add(path)
            children = node.get("children", {})
            if not isinstance(children, dict):
                raise payload_error(f"directory {path!r}: children is not an object")
            for name, j in children.items():
                if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
                    raise payload_error(f"directory {path!r}: bad child name {name!r}")
                if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < len(nodes):
                    raise payload_error(f"directory {path!r}: child {name!r} has node index "
                                        f"{j!r} out of range ({len(nodes)} nodes)")
                visit(j, f"{path}/{name}" if path else name, depth + 1)
        else:
            raise payload_error(f"node {i} ({path!r}) has kind {kind!r} (0 file, 1 directory)")

    root = nodes[-1]
    if not isinstance(root, dict) or root.get("kind") != 1:
        raise payload_error("the root node (last) is not a directory")
    visit(len(nodes) - 1, "", 0)
    return out


@dataclass
class Payload:
    """What ``read_payload`` finds: the directory and the metadata of one function."""
    directory: Directory
    input_names: list
    output_names: list
    identifier: str
    function_name: str | None  # None: the model's main function
    compiled: bool  # model.mlmodelc (macOS only) rather than model.mlpackage


def read_payload(data, named_data=None, method_name: str | None = None) -> Payload:
    """Parse a CoreMLBackend payload (a ``CMJR`` reference is resolved in ``named_data``)."""
    buf = payload_bytes(data)
    function_name = None
    if bytes(buf[:4]) == REFERENCE_MAGIC:
        ref = parse_reference(buf)
        if named_data is None:
            raise payload_error(f"CMJR reference to named data key {ref.key!r}, but the program "
                                "has no named data")
        try:
            buf = payload_bytes(named_data.get(ref.key))
        except ExecuTorchError as e:
            raise payload_error(f"CMJR reference: named data key {ref.key!r}: {e.message}",
                                ErrorCode.NotFound) from None
        if bytes(buf[:4]) == REFERENCE_MAGIC:
            raise payload_error(f"named data {ref.key!r} is itself a CMJR reference")
        function_name = ref.function_name
    d = parse_directory(buf)
    meta = d.json("metadata.json")
    if not isinstance(meta, dict):
        raise payload_error("metadata.json is not an object")
    if isinstance(meta.get("methods"), dict):  # a multifunction model: one entry per method
        methods = meta["methods"]
        name = function_name or method_name
        if name not in methods:
            raise payload_error(f"multifunction metadata has no method {name!r} (methods: "
                                f"{', '.join(sorted(map(str, methods)))})")
        entry = methods[name]
        function_name = function_name or name
    else:
        entry = meta
    names = []
    for key in ("inputNames", "outputNames"):
        v = entry.get(key) if isinstance(entry, dict) else None
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            raise payload_error(f"metadata.json: {key} must be a list of strings")
        names.append(v)
    if not names[1]:
        raise payload_error("metadata.json: the model has no outputs")
    compiled = "model.mlpackage" not in d.dirs
    if compiled and "model.mlmodelc" not in d.dirs:
        raise payload_error("the payload has neither model.mlpackage nor model.mlmodelc")
    ident = meta.get("identifier")
    return Payload(d, names[0], names[1], ident if isinstance(ident, str) else "", function_name,
                   compiled)


def mlpackage_model_path(d: Directory) -> str:
    """Path of the ML Program spec inside ``model.mlpackage`` (from its Manifest.json)."""
    base = "model.mlpackage/Data"
    default = f"{base}/com.apple.CoreML/model.mlmodel"
    if "model.mlpackage/Manifest.json" not in d.files:
        return default
    man = d.json("model.mlpackage/Manifest.json")
    try:
        entry = man["itemInfoEntries"][man["rootModelIdentifier"]]
        path = entry["path"]
    except (KeyError, TypeError):
        return default
    if not isinstance(path, str) or ".." in path.split("/"):
        raise payload_error(f"Manifest.json: bad root model path {path!r}")
    return f"{base}/{path}"
