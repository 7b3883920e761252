"""Plain torch models behind the golden-reference program fixtures.

Every ``make_<fixture>()`` factory seeds torch itself, so the same call always
returns the same weights. Models are small on purpose: exporting and running
all of them with the real ExecuTorch stack must take a few minutes on 2 cores.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

# ----------------------------------------------------------------- helpers


def randomize_batchnorm(model: nn.Module, make_input, steps: int = 3) -> nn.Module:
    """Give every BatchNorm realistic, non-trivial running stats and affine params.

    The stats are first measured on random inputs (so activations keep a sane
    scale through deep nets), then jittered, and gamma/beta are drawn randomly.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(steps):
            model(make_input())
        for bn in bns:
            n = bn.num_features
            std = bn.running_var.sqrt()
            bn.running_mean += 0.1 * torch.randn(n) * std
            bn.running_var *= torch.empty(n).uniform_(0.8, 1.25)
            bn.weight.copy_(torch.empty(n).uniform_(0.5, 1.5))
            bn.bias.copy_(0.1 * torch.randn(n))
    return model.eval()


# ----------------------------------------------------------------- MLP / small CNN


class MLP(nn.Module):
    def __init__(self, d_in: int = 32, hidden: int = 64, d_out: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def make_mlp() -> MLP:
    torch.manual_seed(0)
    return MLP().eval()


class SmallCNN(nn.Module):
    """Conv-BN-ReLU-MaxPool x2, adaptive average pool, linear head."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


def make_cnn_bn() -> SmallCNN:
    torch.manual_seed(1)
    return randomize_batchnorm(SmallCNN(), lambda: torch.randn(4, 3, 32, 32))


# ----------------------------------------------------------------- MobileNetV2


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class ConvBNReLU6(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, kernel: int = 3, stride: int = 1, groups: int = 1,
                 dilation: int = 1):
        super().__init__(
            nn.Conv2d(c_in, c_out, kernel, stride, dilation * (kernel - 1) // 2, dilation,
                      groups=groups, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, expand_ratio: int, dilation: int = 1):
        super().__init__()
        hidden = int(round(c_in * expand_ratio))
        self.use_res = stride == 1 and c_in == c_out
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU6(c_in, hidden, kernel=1))
        layers += [
            ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden, dilation=dilation),  # dw
            nn.Conv2d(hidden, c_out, 1, bias=False),  # linear bottleneck
            nn.BatchNorm2d(c_out),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2, width 1.0, same layout as torchvision's."""

    # t (expansion), c (channels), n (repeats), s (first stride)
    SETTINGS = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0):
        super().__init__()
        c_in = _make_divisible(32 * width_mult)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [ConvBNReLU6(3, c_in, stride=2)]
        for t, c, n, s in self.SETTINGS:
            c_out = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(c_in, c_out, s if i == 0 else 1, t))
                c_in = c_out
        features.append(ConvBNReLU6(c_in, self.last_channel, kernel=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        return self.classifier(torch.flatten(x, 1))


def make_mobilenet_v2(resolution: int = 96) -> MobileNetV2:
    torch.manual_seed(2)
    model = MobileNetV2()
    return randomize_batchnorm(model, lambda: torch.randn(2, 3, resolution, resolution))


# ----------------------------------------------------------------- ResNet-18


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers=(2, 2, 2, 2), num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        c_in = 64
        stages = []
        for i, n in enumerate(layers):
            c_out = 64 * 2**i
            blocks = [BasicBlock(c_in, c_out, 1 if i == 0 else 2)]
            blocks += [BasicBlock(c_out, c_out) for _ in range(n - 1)]
            stages.append(nn.Sequential(*blocks))
            c_in = c_out
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_resnet18(resolution: int = 64) -> ResNet:
    torch.manual_seed(3)
    return randomize_batchnorm(ResNet(), lambda: torch.randn(2, 3, resolution, resolution))


# ----------------------------------------------------------------- ViT


class ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(
            nn.Linear(dim, dim * mlp_ratio), nn.GELU(), nn.Linear(dim * mlp_ratio, dim)
        )

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """ViT-tiny-like: conv patch embedding, cls token, learned pos embedding, pre-norm blocks."""

    def __init__(self, image: int = 64, patch: int = 8, dim: int = 192, depth: int = 4,
                 heads: int = 3, num_classes: int = 1000):
        super().__init__()
        n_patches = (image // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, n_patches + 1, dim))
        self.blocks = nn.Sequential(*[ViTBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # [B, N, D]
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def make_vit_tiny() -> ViT:
    torch.manual_seed(4)
    return ViT().eval()


# ----------------------------------------------------------------- Whisper-like audio encoder


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> torch.Tensor:
    """Whisper's sinusoidal position embedding, [length, channels]."""
    log_inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-log_inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class AudioAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim, bias=False)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (
            p(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)
            for p in (self.query, self.key, self.value)
        )
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class AudioBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn_ln = nn.LayerNorm(dim)
        self.attn = AudioAttention(dim, heads)
        self.mlp_ln = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.attn_ln(x))
        return x + self.mlp(self.mlp_ln(x))


class AudioEncoder(nn.Module):
    """Whisper-style encoder: mel [B, n_mels, T] -> [B, T/2, dim]."""

    def __init__(self, n_mels: int = 80, n_frames: int = 200, dim: int = 256, heads: int = 4,
                 layers: int = 4):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, dim, 3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(n_frames // 2, dim))
        self.blocks = nn.ModuleList([AudioBlock(dim, heads) for _ in range(layers)])
        self.ln_post = nn.LayerNorm(dim)

    def forward(self, mel):
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.positional_embedding
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


def make_audio_encoder() -> AudioEncoder:
    torch.manual_seed(5)
    return AudioEncoder().eval()


# ----------------------------------------------------------------- Llama (executorch.examples)

LLAMA_CONFIG = dict(
    dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=128, multiple_of=32,
    max_seq_len=32, max_context_len=32, max_batch_size=1,
)


class LlamaPrefill(nn.Module):
    """tokens [1, S] -> logits; no KV cache."""

    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.model = transformer

    def forward(self, tokens):
        return self.model(tokens)


class LlamaStep(nn.Module):
    """(tokens [1, S], input_pos [1]) -> logits; KV cache lives in mutable buffers."""

    def __init__(self, transformer: nn.Module):
        super().__init__()
        self.model = transformer

    def forward(self, tokens, input_pos):
        return self.model(tokens, {"input_pos": input_pos})


def _llama(seed: int, **overrides) -> nn.Module:
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    torch.manual_seed(seed)
    model = construct_transformer(ModelArgs(**{**LLAMA_CONFIG, **overrides}))
    with torch.no_grad():  # RMSNorm weights start at 1; make them non-trivial
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.empty_like(p).uniform_(0.5, 1.5))
    return model.eval()


def make_llama() -> LlamaPrefill:
    return LlamaPrefill(_llama(6, generate_full_logits=True)).eval()


def make_llama_kv() -> LlamaStep:
    return LlamaStep(_llama(7, use_kv_cache=True)).eval()


def make_llama_sdpa_kv() -> LlamaStep:
    """KV-cache llama rewritten the way export_llama --use_sdpa_with_kv_cache does:
    llama::update_cache + llama::custom_sdpa, dynamic sequence length."""
    from executorch.examples.models.llama.source_transformation.custom_kv_cache import (
        replace_kv_cache_with_custom_kv_cache,
    )
    from executorch.examples.models.llama.source_transformation.sdpa import (
        replace_sdpa_with_custom_op,
    )

    model = _llama(8, use_kv_cache=True, enable_dynamic_shape=True)
    model = replace_sdpa_with_custom_op(model)
    model = replace_kv_cache_with_custom_kv_cache(model)
    return LlamaStep(model).eval()


# ----------------------------------------------------------------- dynamic shape / control flow


def make_mlp_dynamic() -> MLP:
    torch.manual_seed(9)
    return MLP(d_in=16, hidden=48, d_out=8).eval()


class CondModel(nn.Module):
    """torch.cond on a data-dependent predicate, different computation per branch."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        def true_fn(x):
            return torch.relu(self.lin(x)) + 1.0

        def false_fn(x):
            return torch.tanh(self.proj(x)) * 2.0 - x

        y = torch.cond(x.sum() > 0, true_fn, false_fn, (x,))
        return y * 0.5


def make_cond() -> CondModel:
    torch.manual_seed(10)
    return CondModel().eval()


# ----------------------------------------------------------------- quantized CNN


class QuantCNN(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        return self.fc(torch.flatten(self.pool(x), 1))


def quant_cnn_input(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 3, 32, 32, generator=g)


def quantize_int8(model: nn.Module, example: tuple, calibration) -> nn.Module:
    """int8 PT2E with XNNPACKQuantizer (symmetric, per-channel weights): the module exported
    with ``example`` args, calibrated on ``calibration`` (arg tuples), converted (fake-quant)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, example).module(), quantizer)
    with torch.no_grad():
        for args in calibration:
            prepared(*args)
    return convert_pt2e(prepared)


def make_quant_cnn() -> tuple[nn.Module, nn.Module]:
    """Returns (float model, converted fake-quant GraphModule) after int8 PT2E
    quantization with XNNPACKQuantizer (symmetric, per-channel weights)."""
    torch.manual_seed(11)
    model = QuantCNN().eval()
    return model, quantize_int8(model, (quant_cnn_input(0),),
                                [(quant_cnn_input(seed),) for seed in range(100, 116)])


class QuantCNNBN(nn.Module):
    """Three conv + BatchNorm + ReLU + max-pool stages, global average pool, a linear layer:
    after int8 PT2E the batch norms fold into the convolutions, whose weights are
    dequantized on every run into planned memory that a later tensor may reuse (the shape
    of program that found the fused-convolution race of issue 28)."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        chans = (3, 16, 32, 64)
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, padding=1) for a, b in zip(chans, chans[1:]))
        self.bns = nn.ModuleList(nn.BatchNorm2d(b) for b in chans[1:])
        self.fc = nn.Linear(chans[-1], num_classes)

    def forward(self, x):
        for conv, bn in zip(self.convs, self.bns):
            x = F.max_pool2d(F.relu(bn(conv(x))), 2)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make_quant_cnn_bn() -> nn.Module:
    torch.manual_seed(13)
    model = QuantCNNBN().eval()
    for bn in model.bns:  # non-trivial running statistics, so the fold changes the weights
        bn.running_mean.normal_(0, 0.1)
        bn.running_var.uniform_(0.5, 1.5)
    return quantize_int8(model, (quant_cnn_input(0),),
                         [(quant_cnn_input(seed),) for seed in range(120, 128)])


def make_quant_mobilenet_v2(resolution: int = 96) -> nn.Module:
    """MobileNetV2 (the float fixture's weights at ``resolution``) after int8 PT2E: lowered
    with ``to_edge`` it runs dequantize -> float conv/addmm -> quantize on portable kernels,
    where a last-bit difference in a float accumulation flips whole quantization steps."""
    model = make_mobilenet_v2(resolution)
    g = torch.Generator().manual_seed(12)
    calibration = [(torch.randn(1, 3, resolution, resolution, generator=g),) for _ in range(4)]
    return quantize_int8(model, calibration[0], calibration)


# ----------------------------------------------------------------- the seed's families
# DeepLabV3-style segmenter, YOLO-style detector, Whisper-style speech model: written in
# tests/programs/family_models.py (this file stays readable in one sitting).


def make_deeplabv3():
    from tests.programs import family_models

    return family_models.make_deeplabv3()


def make_yolo():
    from tests.programs import family_models

    return family_models.make_yolo()


def make_whisper():
    from tests.programs import family_models

    return family_models.make_whisper()
