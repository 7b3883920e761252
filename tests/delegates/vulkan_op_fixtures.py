"""Single-op Vulkan programs: one case per (op the Vulkan bridge registers, dtype) that
ExecuTorch 1.5.1's ``VulkanPartitioner`` delegates.

Each case is a tiny module around one op. The cases of a group are the independent parts
of one bundle module (the inputs of every case in, the outputs of every case out), exported
as one method of a shared program: lowering pays ExecuTorch's decomposition-table set-up
(about 4 s on 2 cores) once per method, not once per case. Groups: one per dtype family,
the dynamic-shape cases (SymInt ops), and the two PT2E-quantized families.

    from tests.delegates.vulkan_op_fixtures import cases, get_bundle
    b = get_bundle()   # b.pte_path, b.calls[group], b.expected[group], b.outputs[case.name]

Ops the partitioner never delegates are listed, with the reason, in
``delegates/vulkan/README.md``; ``test_vulkan_ops`` checks that every op the bridge
registers is either a case here or listed there.

Cache: ``$PYRUNTIME_FIXTURES`` or ``<repo>/tests/.fixtures/``, files ``vulkan_ops.*``, keyed
on the torch / executorch versions and the hash of this file (any edit rebuilds).
``python -m tests.delegates.vulkan_op_fixtures`` builds ahead of the tests.
"""
from __future__ import annotations

import copy
import hashlib
import io
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tests import fixture_cache
from tests.fixture_cache import cache_dir, write_atomic

STEM = "vulkan_ops"
QUANTIZED = ("int8", "int8_weights")  # groups exported after PT2E quantization


@dataclass(frozen=True)
class Arg:
    """One input: its shape and how its values are drawn (see ``_draw``)."""
    shape: tuple
    kind: str = "randn"  # randn | wide | pos | grid | int | bool | index
    dtype: str | None = None  # default: the case's dtype (index: int64)
    high: int = 0  # index: values in [0, high)
    dyn: dict | None = None  # dynamic dims: {dim: Dyn}


@dataclass(frozen=True)
class Dyn:
    """A dynamic dim: ``step * Dim(lo..hi)``; ``later``: its sizes in the calls after the
    first (the export example, ``Arg.shape``)."""
    lo: int
    hi: int
    later: tuple
    step: int = 1


@dataclass(frozen=True)
class Case:
    op: str  # the VkGraph operator name the case exists for
    dtype: str  # float32 | float16 | int32 | bool | int8 (quantized)
    make: Callable[[], Any]  # -> torch.nn.Module
    args: tuple
    variant: str = ""
    final: bool = True  # the op writes the case's outputs (else it only feeds them)
    ulps: float = 0.0  # fp32 tolerance, see test_vulkan_ops
    fp16_ulps: float = 0.6  # fp16 tolerance: one rounding to nearest (0.5) and fp32's error
    group: str = ""

    @property
    def name(self) -> str:
        return "-".join(p for p in (self.op, self.variant, self.dtype) if p)

    @property
    def method(self) -> str:
        return self.group or self.dtype


# ---- modules ------------------------------------------------------------------------
def _fn(f, **buffers):
    """A factory of a module computing ``f(*inputs, *buffers)``."""
    def make():
        import torch

        class Fn(torch.nn.Module):
            def __init__(self):
                super().__init__()
                for k, v in buffers.items():
                    self.register_buffer(k, v() if callable(v) else v)

            def forward(self, *xs):
                return f(*xs, *(getattr(self, k) for k in buffers))
        return Fn()
    return make


def _mod(factory, seed=0):
    def make():
        import torch

        torch.manual_seed(seed)
        return factory().eval()
    return make


def _cases(op, make, args, dtypes=("float32", "float16"), **kw):
    return [Case(op, dt, make, tuple(args), **kw) for dt in dtypes]


FLOAT = ("float32", "float16")
FLOAT_INT = ("float32", "float16", "int32")
ALL = ("float32", "float16", "int32", "bool")


def _catalog() -> list[Case]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    out: list[Case] = []
    for part in (_elementwise, _nn, _data, _dynamic, _quantized):
        out.extend(part(torch, F, nn))
    return out


def _elementwise(torch, F, nn) -> list[Case]:
    A = Arg
    x3, pos, wide = (A((3, 5, 7)),), (A((3, 5, 7), "pos"),), (A((3, 5, 7), "wide"),)
    grid = (A((4, 9), "grid"),)
    two = (A((3, 1, 7)), A((4, 7)))  # broadcasting operands
    out: list[Case] = []
    add = out.extend
    for op, f, args, ulps in (
            ("aten.abs.default", torch.abs, x3, 0), ("aten.neg.default", torch.neg, x3, 0),
            ("aten.relu.default", torch.relu, x3, 0),
            ("aten.sigmoid.default", torch.sigmoid, x3, 2),
            ("aten.tanh.default", torch.tanh, x3, 2), ("aten.exp.default", torch.exp, x3, 4),
            ("aten.sqrt.default", torch.sqrt, pos, 2), ("aten.rsqrt.default", torch.rsqrt, pos, 2),
            ("aten.sin.default", torch.sin, wide, 1), ("aten.cos.default", torch.cos, wide, 1),
            ("aten.log10.default", torch.log10, pos, 1),
            ("aten.round.default", torch.round, grid, 0),
            ("aten.hardswish.default", F.hardswish, x3, 2),
            ("aten.hardtanh.default", lambda x: F.hardtanh(x, -0.5, 0.8), x3, 0),
            ("aten.leaky_relu.default", lambda x: F.leaky_relu(x, 0.1), x3, 1),
            ("aten.gelu.default", F.gelu, x3, 4)):
        add(_cases(op, _fn(f), args, ulps=ulps))
    add(_cases("aten.gelu.default", _fn(lambda x: F.gelu(x, approximate="tanh")), x3,
               variant="tanh", ulps=2))
    add(_cases("aten.clamp.default", _fn(lambda x: torch.clamp(x, -0.5, 0.7)), x3, FLOAT_INT))
    add(_cases("aten.pow.Tensor_Scalar", _fn(lambda x: x ** 3), x3, ulps=6))
    add(_cases("aten.pow.Tensor_Scalar", _fn(lambda x: x ** 0.5), pos, variant="sqrt", ulps=4))

    for op, f in (("aten.add.Tensor", lambda a, b: torch.add(a, b, alpha=2)),
                  ("aten.sub.Tensor", torch.sub), ("aten.mul.Tensor", torch.mul),
                  ("aten.minimum.default", torch.minimum)):
        add(_cases(op, _fn(f), two, FLOAT_INT, ulps=1))
    # a Python scalar operand becomes a constant tensor: prepacked, then cast
    add(_cases("aten.add.Tensor", _fn(lambda a: a + 2), (A((5, 6)),), FLOAT_INT,
               variant="scalar", ulps=1))
    add(_cases("et_vk.prepack.default", _fn(lambda x, c: x * c, c=lambda: _randn(7, 5, 7)),
               (A((5, 7)),), final=False, ulps=1))
    add(_cases("aten.div.Tensor", _fn(torch.div), (A((3, 1, 7)), A((4, 7), "pos")), FLOAT_INT,
               ulps=1))
    for mode in ("floor", "trunc"):
        add(_cases("aten.div.Tensor_mode",
                   _fn(lambda a, b, m=mode: torch.div(a, b, rounding_mode=m)),
                   (A((3, 1, 7), "grid"), A((4, 7), "pos")), FLOAT_INT, variant=mode))
    add(_cases("aten.pow.Tensor_Tensor", _fn(torch.pow), (A((3, 1, 7), "pos"), A((4, 7))),
               ulps=4))
    add(_cases("aten.pow.Tensor_Tensor", _fn(torch.pow), (A((3, 1, 7), "int"), A((4, 7), "pos")),
               ("int32",)))
    for name in ("eq", "lt", "le", "gt", "ge"):
        add(_cases(f"aten.{name}.Tensor", _fn(getattr(torch, name)),
                   (A((3, 1, 7), "grid"), A((4, 7), "grid")), FLOAT_INT))
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        add(_cases(f"aten.{name}.Scalar", _fn(lambda a, n=name: getattr(torch, n)(a, 1)),
                   grid, FLOAT_INT))
    for op, f in (("aten.bitwise_and.Tensor", torch.bitwise_and),
                  ("aten.bitwise_or.Tensor", torch.bitwise_or),
                  ("aten.logical_and.default", torch.logical_and),
                  ("aten.logical_or.default", torch.logical_or)):
        add(_cases(op, _fn(f), (A((3, 1, 7)), A((4, 7))), ("bool",)))
    add(_cases("aten.bitwise_not.default", _fn(torch.bitwise_not), x3, ("bool",)))
    add(_cases("aten.logical_not.default", _fn(torch.logical_not), x3, ("bool",)))
    add(_cases("aten.where.self", _fn(torch.where),
               (A((3, 1, 7), dtype="bool"), A((4, 7)), A((3, 4, 1)))))
    return out


def _nn(torch, F, nn) -> list[Case]:
    A = Arg
    x3, img = (A((3, 5, 7)),), (A((1, 4, 7, 9)),)
    out: list[Case] = []
    add = out.extend
    add(_cases("aten._softmax.default", _fn(lambda x: torch.softmax(x, -1)), x3, ulps=2))
    add(_cases("aten._softmax.default", _fn(lambda x: torch.softmax(x, 1)), x3, variant="dim1",
               ulps=2))
    add(_cases("aten._log_softmax.default", _fn(lambda x: F.log_softmax(x, -1)), x3, ulps=4))
    add(_cases("aten.native_layer_norm.default", _mod(lambda: _affine(nn.LayerNorm(7))), x3,
               ulps=4))
    add(_cases("aten.native_layer_norm.default", _fn(lambda x: F.layer_norm(x, (5, 7))), x3,
               variant="plain", ulps=4))
    add(_cases("aten.native_group_norm.default", _mod(lambda: _affine(nn.GroupNorm(2, 4))), img,
               ulps=6))
    add(_cases("aten._native_batch_norm_legit_no_training.default", _mod(_batch_norm), img,
               ulps=3))
    add(_cases("et_vk.rms_norm.default", _mod(_rms_norm), x3, ulps=2))
    add(_cases("et_vk.apply_rotary_emb.default", _rope,
               (A((1, 3, 4, 8)), A((1, 3, 2, 8)), A((3, 4)), A((3, 4))), ("float32",), ulps=2))

    # 7-term float32 dot products: torch's and lavapipe's sums (the JIT contracts to FMA or not
    # by host CPU) each land within ~2 ulps of the float64 product, so up to ~2.4 ulps apart
    # (mm: 1.79 and 1.79 from float64, 2.34 apart, on an Intel Xeon with AVX-512)
    dot = 3
    add(_cases("aten.mm.default", _fn(torch.mm), (A((5, 7)), A((7, 6))), ulps=dot))
    add(_cases("aten.bmm.default", _fn(torch.bmm), (A((2, 5, 7)), A((2, 7, 6))), ulps=dot))
    add(_cases("aten.addmm.default", _fn(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2)),
               (A((6,)), A((5, 7)), A((7, 6))), ulps=3))
    add(_cases("aten.linear.default", _mod(lambda: nn.Linear(7, 6)), (A((5, 7)),), ulps=dot))
    add(_cases("aten.linear.default", _mod(lambda: nn.Linear(7, 6, bias=False)), (A((5, 7)),),
               variant="nobias", ulps=dot))
    add(_cases("aten.linear.default", _mod(lambda: nn.Linear(7, 6)), x3, variant="3d",
               final=False, ulps=dot))  # viewed back to 3-d after the product

    add(_cases("aten.convolution.default", _mod(lambda: nn.Conv2d(4, 8, 3, padding=1)), img,
               ulps=4))
    add(_cases("aten.convolution.default",
               _mod(lambda: nn.Conv2d(4, 4, 3, stride=2, dilation=2, padding=2, groups=4)), img,
               variant="depthwise", ulps=3))
    add(_cases("aten.convolution.default", _mod(lambda: nn.Conv2d(4, 6, (1, 3), groups=2)), img,
               variant="grouped", ulps=2))
    add(_cases("aten.convolution.default", _mod(lambda: nn.ConvTranspose2d(4, 3, 3, stride=2)),
               img, variant="transposed", ulps=2))
    add(_cases("aten.convolution.default", _mod(lambda: nn.Conv1d(4, 6, 3, padding=1)),
               (A((1, 4, 11)),), variant="1d", ulps=4))
    add(_cases("et_vk.conv_with_clamp.default",
               _mod(lambda: nn.Sequential(nn.Conv2d(4, 6, 3), nn.Hardtanh(-0.5, 0.5))), img,
               ulps=4))
    add(_cases("et_vk.conv_with_clamp.default",
               _mod(lambda: nn.Sequential(nn.Conv2d(4, 6, 3), nn.ReLU())), img, variant="relu",
               ulps=4))
    add(_cases("aten.max_pool2d_with_indices.default", _fn(lambda x: F.max_pool2d(x, 3, 2, 1)),
               img))
    add(_cases("aten.max_pool2d_with_indices.default",
               _fn(lambda x: F.max_pool2d(x, 2, return_indices=True)), img, variant="indices"))
    add(_cases("aten.avg_pool2d.default", _fn(lambda x: F.avg_pool2d(x, 3, 2, 1)), img, ulps=1))
    add(_cases("aten.avg_pool2d.default",
               _fn(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)), img,
               variant="exclude_pad", ulps=1))
    add(_cases("aten.avg_pool2d.default",
               _fn(lambda x: F.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3)), img,
               variant="divisor", ulps=1))
    add(_cases("aten.upsample_nearest2d.vec", _fn(lambda x: F.interpolate(x, scale_factor=2.0)),
               img))
    add(_cases("aten.upsample_nearest2d.vec", _fn(lambda x: F.interpolate(x, size=(5, 13))),
               img, variant="size"))
    for align in (False, True):
        add(_cases("aten.upsample_bilinear2d.vec",
                   _fn(lambda x, a=align: F.interpolate(x, size=(10, 13), mode="bilinear",
                                                        align_corners=a)),
                   img, variant="align" if align else "", ulps=2 if align else 8))
    add(_cases("aten.pixel_shuffle.default", _fn(lambda x: F.pixel_shuffle(x, 2)),
               (A((1, 8, 3, 5)),)))

    for op, f in (("aten.sum.dim_IntList", torch.sum), ("aten.mean.dim", torch.mean),
                  ("aten.amax.default", torch.amax), ("aten.amin.default", torch.amin)):
        exact = "max" in op or "min" in op
        add(_cases(op, _fn(lambda x, f=f: f(x, -1)), x3, ulps=0 if exact else 4))
        add(_cases(op, _fn(lambda x, f=f: f(x, (1, 2), keepdim=True)), x3, variant="dims",
                   ulps=0 if exact else 4))
    for op, f in (("aten.argmax.default", torch.argmax), ("aten.argmin.default", torch.argmin)):
        add(_cases(op, _fn(lambda x, f=f: f(x, -1)), x3))
    return out


def _data(torch, F, nn) -> list[Case]:
    A = Arg
    x4 = (A((2, 3, 5, 7)),)
    out: list[Case] = []
    add = out.extend
    add(_cases("aten.embedding.default", _mod(lambda: nn.Embedding(10, 6)),
               (A((3, 4), "index", high=10),)))
    add(_cases("aten.index_select.default", _fn(lambda x, i: torch.index_select(x, 1, i)),
               (A((3, 5, 7)), A((4,), "index", high=5)), ALL))
    add(_cases("aten.index.Tensor", _fn(lambda x, i: x[i]),
               (A((6, 5)), A((4,), "index", high=6)), FLOAT_INT))
    for op, f, dtypes in (
            ("aten.permute_copy.default", lambda x: x.permute(2, 0, 3, 1), ALL),
            ("aten.view_copy.default", lambda x: x.reshape(6, 35), ALL),
            ("aten.squeeze_copy.dims", lambda x: x[:, :1].squeeze(1), ALL),
            ("aten.unsqueeze_copy.default", lambda x: x.unsqueeze(2), ALL),
            ("aten.select_copy.int", lambda x: x[:, 2], ALL),
            ("aten.slice_copy.Tensor", lambda x: x[:, :, 1:5:2], ALL),
            ("aten.flip.default", lambda x: torch.flip(x, [0, 3]), ALL),
            ("aten.repeat.default", lambda x: x.repeat(1, 2, 1, 3), ALL),
            ("aten.constant_pad_nd.default", lambda x: F.pad(x, (1, 2, 0, 1), value=1), ALL),
            ("aten.expand_copy.default", lambda x: x[:, :1].expand(2, 4, 5, 7), ALL),
            ("aten.split_with_sizes_copy.default", lambda x: torch.split(x, [2, 3], 2), ALL),
            ("aten.cat.default", lambda x: torch.cat([x, x[:, :2]], 1), FLOAT_INT),
            ("aten.unfold_copy.default", lambda x: x.unfold(2, 3, 2), FLOAT)):
        add(_cases(op, _fn(f), x4, dtypes, final=op not in (
            "aten.squeeze_copy.dims", "aten.expand_copy.default", "aten.cat.default")))
    # a layout transition: avg_pool2d wants channels-packed textures, sum over the last dim
    # a contiguous buffer, so the partitioner's memory tagging puts a clone between them
    add(_cases("aten.clone.default", _fn(lambda x: F.avg_pool2d(x, 2).sum(-1)), x4,
               final=False, ulps=1, fp16_ulps=1.0))  # fp16: the pooled tensor rounds too
    for src, dst in (("float32", "int32"), ("int32", "float32"), ("bool", "float32"),
                     ("float32", "float16"), ("float16", "float32"), ("float32", "bool"),
                     ("int32", "bool")):
        add([Case("dim_order_ops._to_dim_order_copy.default", src,
                  _fn(lambda x, d=dst: x.to(getattr(torch, d))), (A((3, 5, 7), "wide"),),
                  variant=f"to_{dst}")])
    # fills and ranges, combined with an input (a method needs one)
    add(_cases("aten.full.default", _fn(lambda x: x + torch.full((3, 5), 3, dtype=x.dtype)),
               (A((3, 5)),), FLOAT_INT, final=False))
    add(_cases("aten.full.default", _fn(lambda x: x & torch.full((3, 5), True)), (A((3, 5)),),
               ("bool",), final=False))
    add(_cases("aten.full_like.default", _fn(lambda x: torch.full_like(x, 2)), (A((3, 5)),), ALL))
    add(_cases("aten.arange.start_step", _fn(lambda x: x + torch.arange(1, 11, 2, dtype=x.dtype)),
               (A((3, 5)),), FLOAT_INT, final=False))
    return out


def _dynamic(torch, F, nn) -> list[Case]:
    """SymInt ops: sizes read from inputs with dynamic dims (torch.export Dim) and computed
    on; every case runs at several sizes, so the graph is re-planned between calls."""
    def dyn(shape, later=(3, 8, 5), lo=2, hi=8, step=1, kind="randn"):
        return (Arg(shape, kind, dyn={0: Dyn(lo, hi, later, step)}),)
    G = dict(dtypes=("float32",), group="dynamic")
    out: list[Case] = []
    add = out.extend
    add(_cases("sym_size.int", _fn(lambda x: x.reshape(x.size(0) * 5, -1)), dyn((4, 5, 7)),
               final=False, **G))
    add(_cases("mul", _fn(lambda x: x.reshape(x.size(0) * 5, -1)), dyn((4, 5, 7)), final=False,
               **G))
    add(_cases("floordiv", _fn(lambda x: x.view(x.size(0) // 2, -1)),
               dyn((4, 5, 7), (6, 16, 2), 1, 8, 2), final=False, **G))
    add(_cases("add", _fn(lambda x: torch.arange(x.size(0) + 1, dtype=torch.float32)),
               dyn((4, 5)), final=False, **G))
    add(_cases("sub", _fn(lambda x: x.narrow(0, 0, x.size(0) - 1)), dyn((4, 5), lo=3),
               final=False, **G))
    add(_cases("aten.arange.start_step", _fn(lambda x: torch.arange(x.size(0), dtype=x.dtype)),
               dyn((4, 5)), variant="dyn", **G))
    add(_cases("aten.linear.default", _mod(lambda: nn.Linear(5, 3)), dyn((4, 5)), variant="dyn",
               ulps=1, **G))
    add(_cases("aten._softmax.default", _fn(lambda x: torch.softmax(x, 0)), dyn((4, 5)),
               variant="dyn", ulps=1, **G))
    add(_cases("aten.cat.default", _fn(lambda x: torch.cat([x, x * 2], 0)), dyn((4, 5)),
               variant="dyn", **G))
    add(_cases("aten.upsample_nearest2d.vec",
               _fn(lambda x: F.interpolate(x, size=(x.size(2) * 2, 5))),
               (Arg((1, 2, 3, 4), dyn={2: Dyn(2, 6, (5, 2))}),), variant="dyn", **G))
    return out


def _quantized(torch, F, nn) -> list[Case]:
    """int8 PT2E: static per-tensor activations, per-channel weights (XNNPACKQuantizer, as
    ExecuTorch's Vulkan examples) fuse into q8ta ops between a quantize and a dequantize;
    weight-only int8 (VulkanQuantizer) becomes _weight_int8pack_mm."""
    A = Arg
    img = (A((1, 8, 7, 9)),)
    Q = dict(dtypes=("int8",), group="int8", final=False)
    out: list[Case] = []
    add = out.extend
    add(_cases("et_vk.q8ta_conv2d.default", _mod(lambda: nn.Conv2d(8, 8, 3, padding=1)), img,
               **Q))
    add(_cases("et_vk.q8ta_conv2d_pw.default", _mod(lambda: nn.Conv2d(8, 12, 1)), img, **Q))
    add(_cases("et_vk.q8ta_conv2d_dw.default",
               _mod(lambda: nn.Conv2d(8, 8, 3, padding=1, groups=8)), img, **Q))
    add(_cases("et_vk.q8ta_linear.default", _mod(lambda: nn.Linear(16, 12)), (A((5, 16)),),
               **Q))
    add(_cases("et_vk.q8ta_linear_gemv.default", _mod(lambda: nn.Linear(16, 12)),
               (A((1, 16)),), **Q))
    add(_cases("et_vk.q8ta_add.default", _fn(lambda a, b: a + b),
               (A((1, 8, 5, 6)), A((1, 8, 5, 6))), **Q))
    # a relu between two quantized ops (a lone relu is not annotated by the quantizer)
    add(_cases("et_vk.q8ta_relu.default",
               _mod(lambda: nn.Sequential(nn.Conv2d(8, 8, 1), nn.MaxPool2d(1), nn.ReLU(),
                                          nn.Conv2d(8, 4, 1))), img, **Q))
    add(_cases("quantized_decomposed.quantize_per_tensor.default",
               _mod(lambda: nn.Conv2d(8, 4, 1)), img, **Q))
    add(_cases("quantized_decomposed.dequantize_per_tensor.default",
               _mod(lambda: nn.Conv2d(8, 4, 1)), img, **{**Q, "final": True}))
    W = dict(dtypes=("float32",), group="int8_weights", ulps=4)
    add(_cases("aten._weight_int8pack_mm.default", _mod(lambda: nn.Linear(16, 12, bias=False)),
               (A((5, 16)),), **W))
    add(_cases("aten._weight_int8pack_mm.default", _mod(lambda: nn.Linear(16, 12)),
               (A((5, 16)),), variant="bias", final=False, **W))
    return out


def _randn(seed, *shape):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _affine(norm):
    """A norm layer with non-trivial weight and bias."""
    import torch

    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_(0, 0.3)
    return norm


def _batch_norm():
    from torch import nn

    bn = _affine(nn.BatchNorm2d(4))
    bn.running_mean.normal_(0, 0.3)
    bn.running_var.uniform_(0.5, 1.5)
    return bn


def _rms_norm():
    """The RMSNorm of ExecuTorch's llama example, which the partitioner fuses into
    et_vk.rms_norm."""
    import torch
    from torch import nn

    class RMSNorm(nn.Module):
        def __init__(self, dim=7):
            super().__init__()
            self.weight = nn.Parameter(torch.rand(dim) + 0.5)

        def forward(self, x):
            return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6) * self.weight
    return RMSNorm()


def _rope():
    """The llama rotary embedding the partitioner's pattern matches (its own copy)."""
    from executorch.backends.vulkan.patterns.rope import RotaryEmbeddingPattern

    return RotaryEmbeddingPattern()


CASES: list[Case] = []


def cases() -> list[Case]:
    if not CASES:
        CASES.extend(_catalog())
        names = [c.name for c in CASES]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate case names: {sorted(dup)}")
    return CASES


def groups() -> dict[str, list[Case]]:
    out: dict[str, list[Case]] = {}
    for c in cases():
        out.setdefault(c.method, []).append(c)
    return out


# ---- inputs -----------------------------------------------------------------------------
_NP = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "int64": np.int64,
       "bool": np.bool_}


def _draw(case: Case, arg: Arg, rng, shape) -> np.ndarray:
    dt = arg.dtype or ("int64" if arg.kind == "index" else
                       "float32" if case.dtype == "int8" else case.dtype)
    if arg.kind == "index":
        return rng.integers(0, arg.high, size=shape).astype(np.int64)
    if dt == "bool" or arg.kind == "bool":
        return rng.random(shape) < 0.5
    if dt in ("int32", "int64"):
        lo, hi = {"pos": (1, 6), "grid": (-3, 4), "int": (-4, 5)}.get(arg.kind, (-10, 11))
        return rng.integers(lo, hi, size=shape).astype(_NP[dt])
    if arg.kind == "pos":
        v = np.abs(rng.standard_normal(shape)) + 0.2
    elif arg.kind == "grid":  # halves: ties for round, equal values for comparisons
        v = rng.integers(-6, 7, size=shape) / 2.0
    elif arg.kind == "wide":
        v = rng.standard_normal(shape) * 4
    elif arg.kind == "int":
        v = rng.integers(-4, 5, size=shape).astype(np.float64)
    else:
        v = rng.standard_normal(shape)
    return v.astype(_NP[dt])


def call_shapes(case: Case) -> list[list[tuple]]:
    """The input shapes of each call (one call unless an arg has dynamic dims)."""
    n = max([len(d.later) + 1 for a in case.args for d in (a.dyn or {}).values()] or [1])
    out = []
    for i in range(n):
        shapes = []
        for a in case.args:
            s = list(a.shape)
            for dim, d in (a.dyn or {}).items():
                if i:
                    s[dim] = d.later[min(i, len(d.later)) - 1]
            shapes.append(tuple(s))
        out.append(shapes)
    return out


def inputs(case: Case) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    return [[_draw(case, a, rng, s) for a, s in zip(case.args, shapes)]
            for shapes in call_shapes(case)]


# ---- build ------------------------------------------------------------------------------
def _bundle(group: list[Case], half: bool):
    import torch

    class Bundle(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.parts = torch.nn.ModuleList(c.make() for c in group)
            self.arity = [len(c.args) for c in group]

        def forward(self, *xs):
            outs, k = [], 0
            for part, n in zip(self.parts, self.arity):
                r = part(*xs[k:k + n])
                k += n
                outs.extend(r if isinstance(r, (tuple, list)) else (r,))
            return tuple(outs)
    m = Bundle().eval()
    return m.half() if half else m


def _torch(arrays):
    import torch

    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)


def _dynamic_shapes(group):
    from torch.export import Dim

    spec = []
    for c in group:
        for j, a in enumerate(c.args):
            dims = {}
            for d, dyn in (a.dyn or {}).items():
                ident = "".join(ch if ch.isalnum() else "_" for ch in f"{c.name}_{j}_{d}")
                dims[d] = dyn.step * Dim(ident, min=dyn.lo, max=dyn.hi) if dyn.step > 1 else \
                    Dim(ident, min=dyn.lo, max=dyn.hi)
            spec.append(dims or None)
    return (tuple(spec),) if any(spec) else None  # forward(*xs): one entry, the tuple


def _calls(group) -> list[list[np.ndarray]]:
    per_case = [inputs(c) for c in group]
    n = max(len(p) for p in per_case)
    return [[a for p in per_case for a in p[min(i, len(p) - 1)]] for i in range(n)]


def _eager(module, calls, as_float32: bool) -> list[list[np.ndarray]]:
    import torch

    outs = []
    with torch.no_grad():
        for call in calls:
            args = _torch(call)
            if as_float32:
                args = tuple(a.float() if a.is_floating_point() else a for a in args)
            res = module(*args)
            outs.append([r.numpy() if r.dtype != torch.float16 else r.float().numpy()
                         for r in res])
    return outs


def _quantize(module, calls, group_name):
    """The PT2E-converted (fake-quant) module, calibrated on the group's calls."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    if group_name == "int8_weights":
        from executorch.backends.vulkan.quantizer.vulkan_quantizer import (
            VulkanQuantizer, get_symmetric_quantization_config)
        quantizer = VulkanQuantizer().set_global(get_symmetric_quantization_config(weight_bits=8))
    else:
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer, get_symmetric_quantization_config)
        quantizer = XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(module, _torch(calls[0])).module(), quantizer)
    with torch.no_grad():
        for call in calls:
            prepared(*_torch(call))
    return convert_pt2e(prepared)


def _output_steps(module) -> list:
    """Per output of a converted module: the scale of the dequantize writing it, or None."""
    out = next(n for n in module.graph.nodes if n.op == "output")
    res = out.args[0] if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    return [float(n.args[1]) if "dequantize_per_tensor" in str(getattr(n, "target", ""))
            else None for n in res]


def _export_group(name, group):
    """(ExportedProgram, calls, eager outputs per call, output quantization steps)."""
    import torch

    half = group[0].dtype == "float16"
    module = _bundle(group, half)
    calls = _calls(group)
    steps = None
    if name in QUANTIZED:
        module = _quantize(module, calls, name)
        steps = _output_steps(module)
    with torch.no_grad():
        ep = torch.export.export(module, _torch(calls[0]), dynamic_shapes=_dynamic_shapes(group))
    # fp16 params upcast: the same numbers in fp32 (a copy: the program shares the params)
    ref = copy.deepcopy(module).float() if half else module
    return ep, calls, _eager(ref, calls, half), steps


def _cache_pattern_graphs() -> None:
    from tests.delegates.vulkan_fixtures import _cache_pattern_graphs as cache

    cache()


def build() -> tuple[bytes, dict, dict]:
    """(.pte with one method per group, arrays, meta)."""
    import torch
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    _cache_pattern_graphs()
    eps, arrays, meta = {}, {}, {"groups": {}}
    for name, group in groups().items():
        ep, calls, expected, steps = _export_group(name, group)
        eps[name] = ep
        counts = []
        for i, (call, outs) in enumerate(zip(calls, expected)):
            arrays.update({f"{name}/c{i}/in{j}": a for j, a in enumerate(call)})
            arrays.update({f"{name}/c{i}/out{j}": o for j, o in enumerate(outs)})
            counts.append([len(call), len(outs)])
        # which outputs belong to which case: the case's output count from a lone eager run
        per_case = []
        for c in group:
            m = c.make()
            m = m.half() if c.dtype == "float16" else m
            with torch.no_grad():
                r = m(*_torch(inputs(c)[0]))
            per_case.append([c.name, len(r) if isinstance(r, (tuple, list)) else 1])
        meta["groups"][name] = {"calls": counts, "cases": per_case, "steps": steps}
    with torch.no_grad():
        pte = to_edge_transform_and_lower(
            eps, partitioner=[VulkanPartitioner()]).to_executorch().buffer
    return pte, arrays, meta


# ---- cache ------------------------------------------------------------------------------
def _paths() -> dict:
    return {ext: cache_dir() / f"{STEM}.{ext}" for ext in ("pte", "npz", "json", "key")}


def _key() -> dict:
    return {"fixture": STEM, "definition": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
            **fixture_cache.versions("torch", "executorch")}


def _valid() -> bool:
    p = _paths()
    return fixture_cache.is_valid(p["key"], _key(), {e: p[e] for e in ("pte", "npz", "json")})


def _build() -> None:
    p = _paths()
    p["key"].unlink(missing_ok=True)
    pte, arrays, meta = build()
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    write_atomic(p["pte"], pte)
    write_atomic(p["npz"], npz.getvalue())
    write_atomic(p["json"], json.dumps(meta, indent=1).encode())
    fixture_cache.write_key(p["key"], _key(), {e: p[e] for e in ("pte", "npz", "json")})


@dataclass(frozen=True)
class Bundle:
    pte_path: Path
    calls: dict  # group -> [[inputs] per call]
    expected: dict  # group -> [[outputs] per call]
    outputs: dict  # case name -> (group, first output index, output count)
    steps: dict  # group -> per output: its quantization step (int8 groups), else None
    meta: dict = field(default_factory=dict)


_MEMO: list[Bundle] = []


def get_bundle() -> Bundle:
    if not _MEMO:
        if not _valid():
            with fixture_cache.lock(STEM):
                if not _valid():
                    _build()
        p = _paths()
        meta = json.loads(p["json"].read_text())
        calls, expected, outputs, steps = {}, {}, {}, {}
        with np.load(p["npz"]) as z:
            for g, info in meta["groups"].items():
                calls[g] = [[z[f"{g}/c{i}/in{j}"] for j in range(n_in)]
                            for i, (n_in, _) in enumerate(info["calls"])]
                expected[g] = [[z[f"{g}/c{i}/out{j}"] for j in range(n_out)]
                               for i, (_, n_out) in enumerate(info["calls"])]
                steps[g] = info["steps"]
                k = 0
                for name, n in info["cases"]:
                    outputs[name] = (g, k, n)
                    k += n
        _MEMO.append(Bundle(p["pte"], calls, expected, outputs, steps, meta))
    return _MEMO[0]


if __name__ == "__main__":
    import time

    t = time.perf_counter()
    get_bundle()
    print(f"{STEM}: {time.perf_counter() - t:.1f}s", flush=True)
