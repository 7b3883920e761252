"""MLX-only behaviour: our field tables match the wheel's schema, and malformed payloads,
node types the bridge lacks and bad slots are ExecuTorchErrors at load (the parity tests
are in test_graph_delegates.py)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.mlx import mlx_backend
from pyruntime.delegates.mlx.ops import OPS
from pyruntime.delegates.mlx.schema import SCHEMA, UNIONS

pytest.importorskip("executorch.backends.native", reason="fixtures need executorch's exporter")

from tests.delegates import gen_mlx_schema  # noqa: E402
from tests.delegates.graph_fixtures import get_fixture  # noqa: E402


def _payload(name="mlp"):
    from tests.fuzz.targets import _delegate_region

    data = get_fixture(name, "mlx").pte_path.read_bytes()
    a, b = _delegate_region(data)
    return data, a, b


def test_the_field_tables_are_the_wheels_schema():
    assert gen_mlx_schema.main(["--check"]) == 0


def test_every_op_the_bridge_runs_is_a_node_of_the_schema():
    nodes = set(UNIONS["OpNode"].values())
    assert set(OPS) <= nodes and set(OPS) <= set(SCHEMA)
    print(f"{len(OPS)} of {len(nodes)} MLX node types")


def test_a_node_type_the_bridge_lacks_fails_at_load_naming_it(monkeypatch):
    data, a, b = _payload("cnn_bn")
    monkeypatch.delitem(OPS, "Conv2DNode")
    with pytest.raises(ExecuTorchError) as e:
        mlx_backend.init(data[a:b], [], None)
    assert e.value.code == ErrorCode.NotSupported and "Conv2DNode" in str(e.value)


def test_a_bad_header_is_a_clear_error():
    data, a, b = _payload()
    blob = bytearray(data[a:b])
    for bad in (bytes(blob[:10]), b"\0\0\0\0XLM0" + bytes(blob[8:]),
                bytes(blob[:8]) + struct.pack("<QQ", 1 << 40, 0) + bytes(blob[24:])):
        with pytest.raises(ExecuTorchError) as e:
            mlx_backend.init(bad, [], None)
        assert e.value.code == ErrorCode.InvalidProgram and "MLXBackend" in str(e.value)


def test_missing_weights_name_the_key():
    data, a, b = _payload()
    with pytest.raises(ExecuTorchError) as e:
        mlx_backend.init(data[a:b], [], None)
    assert e.value.code == ErrorCode.NotFound and "named data" in str(e.value)


def test_describe_payload_lists_the_nodes():
    data, a, b = _payload()
    assert mlx_backend.describe_payload(data[a:b]).count("Addmm") == 3


def test_dynamic_batch_runs_each_size():
    fx = get_fixture("mlp_dynamic", "mlx")
    m = pyruntime.Runtime.get().load_program(fx.pte_path).load_method("forward")
    for call, want in zip(fx.calls, fx.expected):
        got = m.execute(call)[0]
        assert got.shape == want[0].shape
        np.testing.assert_allclose(got, want[0], rtol=0, atol=1e-4)


# ---- the element-wise nodes no fixture reaches, against torch ------------------------------
class _Ctx:
    def __init__(self, tensors):
        self.tensors = dict(tensors)

    def t(self, tid):
        return self.tensors[tid]

    def set(self, tid, a):
        self.tensors[tid] = np.asarray(a)


_UNARY = {"Abs": "abs", "Neg": "neg", "Exp": "exp", "Log": "log", "Log2": "log2",
          "Log10": "log10", "Log1p": "log1p", "Expm1": "expm1", "Sqrt": "sqrt",
          "Rsqrt": "rsqrt", "Reciprocal": "reciprocal", "Square": "square", "Sign": "sign",
          "Floor": "floor", "Ceil": "ceil", "Trunc": "trunc", "Sin": "sin", "Cos": "cos",
          "Tan": "tan", "Tanh": "tanh", "Sigmoid": "sigmoid", "Erf": "erf",
          "Arcsin": "asin", "Arccos": "acos", "Arctan": "atan", "Sinh": "sinh", "Cosh": "cosh",
          "Arcsinh": "asinh", "Arccosh": "acosh", "Arctanh": "atanh"}
_BINARY = {"Add": "add", "Subtract": "sub", "Multiply": "mul", "Divide": "div",
           "Maximum": "maximum", "Minimum": "minimum", "Power": "pow", "Atan2": "atan2",
           "Remainder": "remainder", "FloorDivide": "floor_divide", "LogAddExp": "logaddexp",
           "Less": "lt", "LessEqual": "le", "Greater": "gt", "GreaterEqual": "ge",
           "Equal": "eq", "NotEqual": "ne"}


@pytest.mark.parametrize("node,fn", sorted(_UNARY.items()))
def test_unary_nodes_match_torch(node, fn):
    import torch
    from types import SimpleNamespace

    x = np.random.default_rng(7).uniform(-0.9, 0.9, (3, 5)).astype(np.float32)
    if node == "Arccosh":
        x = x + 2.0
    if node in ("Log", "Log2", "Log10", "Sqrt", "Rsqrt"):
        x = np.abs(x) + 0.1
    c = _Ctx({0: x})
    OPS[f"{node}Node"](SimpleNamespace(x=0, out=1), c)
    want = getattr(torch, fn)(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(c.t(1), want, rtol=1e-6, atol=1e-6)
    assert c.t(1).dtype == want.dtype


@pytest.mark.parametrize("node,fn", sorted(_BINARY.items()))
def test_binary_nodes_match_torch(node, fn):
    import torch
    from types import SimpleNamespace

    rng = np.random.default_rng(8)
    a = rng.uniform(0.5, 2.0, (3, 5)).astype(np.float32)
    b = rng.uniform(0.5, 2.0, (1, 5)).astype(np.float32)
    b[0, 0] = a[0, 0]  # one tie for the comparisons
    c = _Ctx({0: a, 1: b})
    OPS[f"{node}Node"](SimpleNamespace(a=0, b=1, out=2), c)
    want = getattr(torch, fn)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(c.t(2), want, rtol=1e-6, atol=1e-6)
    assert c.t(2).dtype == want.dtype


def test_bitwise_nodes_match_torch():
    import torch
    from types import SimpleNamespace

    a = np.array([[3, -8, 255]], np.int32)
    b = np.array([[5, 7, -1]], np.int32)
    for node, fn in (("BitwiseAnd", "bitwise_and"), ("BitwiseOr", "bitwise_or"),
                     ("BitwiseXor", "bitwise_xor")):
        c = _Ctx({0: a, 1: b})
        OPS[f"{node}Node"](SimpleNamespace(a=0, b=1, out=2), c)
        assert np.array_equal(c.t(2), getattr(torch, fn)(torch.from_numpy(a),
                                                         torch.from_numpy(b)).numpy())
    c = _Ctx({0: a})
    OPS["BitwiseInvertNode"](SimpleNamespace(x=0, out=1), c)
    assert np.array_equal(c.t(1), torch.bitwise_not(torch.from_numpy(a)).numpy())


def _iv(v):
    from types import SimpleNamespace

    return SimpleNamespace(literal=v, vid=None, is_vid=False)


class _VCtx(_Ctx):
    def iv(self, x):
        return int(x.literal)


def _run(node, slots, **fields):
    from types import SimpleNamespace

    c = _VCtx(slots)
    OPS[node](SimpleNamespace(**fields), c)
    return c


def test_shape_and_scan_nodes_match_torch():
    import torch

    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    tx = torch.from_numpy(x)
    checks = [
        ("CumsumNode", dict(x=0, out=1, axis=1, reverse=False, inclusive=True),
         torch.cumsum(tx, 1)),
        ("CumsumNode", dict(x=0, out=1, axis=2, reverse=True, inclusive=True),
         torch.flip(torch.cumsum(torch.flip(tx, [2]), 2), [2])),
        ("SortNode", dict(x=0, out=1, axis=-1), torch.sort(tx, dim=-1, stable=True).values),
        ("ArgsortNode", dict(x=0, out=1, axis=0), torch.sort(tx, dim=0, stable=True).indices),
        ("TileNode", dict(x=0, out=1, reps=[_iv(2), _iv(1), _iv(3)]), tx.repeat(2, 1, 3)),
        ("RepeatNode", dict(x=0, out=1, repeats=_iv(2), axis=1),
         torch.repeat_interleave(tx, 2, 1)),
        ("StackNode", dict(tensors=[0, 0], out=1, axis=1), torch.stack([tx, tx], 1)),
        ("TrilNode", dict(x=0, out=1, k=1), torch.tril(tx, 1)),
        ("TriuNode", dict(x=0, out=1, k=-1), torch.triu(tx, -1)),
        ("VarNode", dict(x=0, out=1, axes=[2], keepdims=True, ddof=1),
         torch.var(tx, 2, keepdim=True)),
        ("StdNode", dict(x=0, out=1, axes=[0, 2], keepdims=False, ddof=0),
         torch.std(tx, (0, 2), correction=0)),
        ("RMSNormNode", dict(x=0, weight=None, out=1, eps=1e-6),
         torch.nn.functional.rms_norm(tx, (5,), eps=1e-6)),
    ]
    for node, fields, want in checks:
        got = _run(node, {0: x}, **fields).t(1)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5, err_msg=node)


def test_updates_arange_and_conv1d_match_torch():
    import torch

    rng = np.random.default_rng(10)
    dst = rng.standard_normal((4, 6)).astype(np.float32)
    upd = rng.standard_normal((4, 2)).astype(np.float32)
    got = _run("SliceUpdateNode", {0: dst, 1: upd}, dst=0, update=1, out=2, axis=_iv(1),
               start=_iv(3), stop=_iv(5), step=1).t(2)
    want = torch.from_numpy(dst.copy())
    want[:, 3:5] = torch.from_numpy(upd)
    assert np.array_equal(got, want.numpy())
    assert np.array_equal(dst, _run("IdCopyNode", {0: dst}, x=0, out=1).t(1))  # dst untouched
    idx = np.array([5, 0], np.int64)
    got = _run("IndexCopyNode", {0: dst, 1: upd, 2: idx}, dst=0, update=1, indices=2, out=3,
               axis=1).t(3)
    want = torch.from_numpy(dst).index_copy(1, torch.from_numpy(idx), torch.from_numpy(upd))
    assert np.array_equal(got, want.numpy())
    got = _run("ARangeNode", {}, out=0, start=_iv(2), stop=_iv(11), step=_iv(3),
               scalar_type=4).t(0)
    assert np.array_equal(got, torch.arange(2, 11, 3).numpy())
    x = rng.standard_normal((2, 9, 4)).astype(np.float32)  # [N, L, C_in]
    w = rng.standard_normal((6, 3, 2)).astype(np.float32)  # [C_out, K, C_in / groups]
    got = _run("Conv1DNode", {0: x, 1: w}, x=0, w=1, out=2, stride=2, padding=1, dilation=2,
               groups=2).t(2)
    want = torch.nn.functional.conv1d(torch.from_numpy(x).permute(0, 2, 1),
                                      torch.from_numpy(w).permute(0, 2, 1), stride=2,
                                      padding=1, dilation=2, groups=2).permute(0, 2, 1)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_reduction_logical_and_gather_nodes_match_torch():
    import torch

    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    tx = torch.from_numpy(x)
    b = x > 0
    tb = torch.from_numpy(b)
    idx = rng.integers(0, 5, (3, 4, 2)).astype(np.int64)
    checks = [
        ("MinNode", {0: x}, dict(x=0, out=1, axes=[1], keepdims=False), torch.amin(tx, 1)),
        ("ProdNode", {0: x}, dict(x=0, out=1, axes=[], keepdims=False), torch.prod(tx)),
        ("ArgminNode", {0: x}, dict(x=0, out=1, axis=2, keepdims=True),
         torch.argmin(tx, 2, keepdim=True)),
        ("AnyNode", {0: b}, dict(x=0, out=1, axes=[0, 2], keepdims=False), torch.any(
            torch.any(tb, 2), 0)),
        ("AllNode", {0: b}, dict(x=0, out=1, axes=[1], keepdims=True),
         torch.all(tb, 1, keepdim=True)),
        ("LogicalNotNode", {0: b}, dict(x=0, out=1), torch.logical_not(tb)),
        ("TakeAlongAxisNode", {0: x, 2: idx}, dict(x=0, indices=2, out=1, axis=2),
         torch.take_along_dim(tx, torch.from_numpy(idx), 2)),
    ]
    for node, slots, fields, want in checks:
        got = _run(node, slots, **fields).t(1)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5, err_msg=node)
    for node, fn in (("LogicalAndNode", torch.logical_and), ("LogicalOrNode", torch.logical_or)):
        got = _run(node, {0: b, 1: ~b[:1]}, a=0, b=1, out=2).t(2)
        assert np.array_equal(got, fn(tb, torch.from_numpy(~b[:1])).numpy()), node


def test_integer_value_nodes():
    from types import SimpleNamespace

    class Vals(_VCtx):
        def __init__(self, tensors):
            super().__init__(tensors)
            self.values = {}

        def setv(self, vid, v):
            self.values[vid] = v

    def run(node, **fields):
        c = Vals({0: np.zeros((2, 7), np.float32), 1: np.array([9], np.int64)})
        OPS[node](SimpleNamespace(**fields), c)
        return c.values[0]

    assert run("SymSizeNode", a=0, dim=1, out=0) == 7
    assert run("ItemIntNode", x=1, out=0) == 9
    assert run("AddIntNode", a=_iv(7), b=_iv(-3), out=0) == 4
    assert run("SubtractIntNode", a=_iv(7), b=_iv(-3), out=0) == 10
    assert run("MultiplyIntNode", a=_iv(7), b=_iv(-3), out=0) == -21
    assert run("FloorDivideIntNode", a=_iv(7), b=_iv(-3), out=0) == 7 // -3  # floor, as torch
    assert run("ModIntNode", a=_iv(7), b=_iv(-3), out=0) == 7 % -3
    with pytest.raises(ExecuTorchError, match="division by zero"):
        run("FloorDivideIntNode", a=_iv(7), b=_iv(0), out=0)
