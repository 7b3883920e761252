"""The seed's vision and speech families at fixture size: a DeepLabV3-style segmenter, a
YOLO-style detector and a Whisper-style speech model (log-mel front end, encoder, decoder
with cross-attention and a KV cache). Written here (torchvision does not install beside
this torch); ``tests/programs/models.py`` re-exports the factories. Every factory seeds
torch, so a call always returns the same weights.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tests.programs.models import (ConvBNReLU6, InvertedResidual, _make_divisible,
                                   randomize_batchnorm, sinusoids)

# ----------------------------------------------------------------- DeepLabV3


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling: a 1x1 branch, dilated 3x3 branches and an image-pool
    branch upsampled back (bilinear), concatenated and projected."""

    def __init__(self, c_in: int, c_out: int = 32, rates=(2, 4, 6)):
        super().__init__()

        def cbr(k, d):
            return nn.Sequential(nn.Conv2d(c_in, c_out, k, padding=d * (k - 1) // 2,
                                           dilation=d, bias=False),
                                 nn.BatchNorm2d(c_out), nn.ReLU())
        self.branches = nn.ModuleList([cbr(1, 1)] + [cbr(3, r) for r in rates])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c_in, c_out, 1, bias=False),
                                  nn.BatchNorm2d(c_out), nn.ReLU())
        self.project = nn.Sequential(nn.Conv2d(c_out * (len(rates) + 2), c_out, 1, bias=False),
                                     nn.BatchNorm2d(c_out), nn.ReLU())

    def forward(self, x):
        feats = [b(x) for b in self.branches]
        feats.append(F.interpolate(self.pool(x), size=x.shape[-2:], mode="bilinear",
                                   align_corners=False))
        return self.project(torch.cat(feats, 1))


class DeepLabV3(nn.Module):
    """MobileNetV2 backbone (width 0.5) at output stride 8: the last stages keep their
    resolution and dilate instead; ASPP head; logits upsampled (bilinear) to the input."""

    # t, c, n, first stride, dilation
    SETTINGS = [(1, 16, 1, 1, 1), (6, 24, 2, 2, 1), (6, 32, 2, 2, 1), (6, 64, 2, 1, 2),
                (6, 96, 1, 1, 4)]

    def __init__(self, num_classes: int = 6, width: float = 0.5):
        super().__init__()
        c_in = _make_divisible(32 * width)
        layers: list[nn.Module] = [ConvBNReLU6(3, c_in, stride=2)]
        for t, c, n, s, d in self.SETTINGS:
            c_out = _make_divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(c_in, c_out, s if i == 0 else 1, t, dilation=d))
                c_in = c_out
        self.backbone = nn.Sequential(*layers)
        self.aspp = ASPP(c_in)
        self.head = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, num_classes, 1))

    def forward(self, x):
        y = self.head(self.aspp(self.backbone(x)))
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


def make_deeplabv3(resolution: int = 64) -> DeepLabV3:
    torch.manual_seed(30)
    return randomize_batchnorm(DeepLabV3(), lambda: torch.randn(2, 3, resolution, resolution))


# ----------------------------------------------------------------- YOLO


class ConvBNSiLU(nn.Sequential):
    def __init__(self, c_in: int, c_out: int, k: int = 1, s: int = 1):
        super().__init__(nn.Conv2d(c_in, c_out, k, s, k // 2, bias=False), nn.BatchNorm2d(c_out),
                         nn.SiLU())


class CSP(nn.Module):
    """C2f-style block: split the 1x1 projection in two, run bottlenecks on one half,
    concatenate every intermediate, project."""

    def __init__(self, c_in: int, c_out: int, n: int = 1):
        super().__init__()
        h = c_out // 2
        self.cv1 = ConvBNSiLU(c_in, 2 * h)
        self.blocks = nn.ModuleList(nn.Sequential(ConvBNSiLU(h, h, 3), ConvBNSiLU(h, h, 3))
                                    for _ in range(n))
        self.cv2 = ConvBNSiLU((2 + n) * h, c_out)

    def forward(self, x):
        ys = list(self.cv1(x).chunk(2, 1))
        for b in self.blocks:
            ys.append(ys[-1] + b(ys[-1]))
        return self.cv2(torch.cat(ys, 1))


class SPPF(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.cv1, self.cv2 = ConvBNSiLU(c, c // 2), ConvBNSiLU(2 * c, c)

    def forward(self, x):
        x = self.cv1(x)
        y1 = F.max_pool2d(x, 5, 1, 2)
        y2 = F.max_pool2d(y1, 5, 1, 2)
        return self.cv2(torch.cat([x, y1, y2, F.max_pool2d(y2, 5, 1, 2)], 1))


class TinyYOLO(nn.Module):
    """YOLOv5-style detector: SiLU CSP backbone, SPPF, an FPN/PAN neck with nearest
    upsampling, anchor heads at strides 8 and 16 and the box decode in the graph:
    xy = (2 sigmoid - 0.5 + grid) * stride, wh = (2 sigmoid)^2 * anchor."""

    ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119))
    STRIDES = (8, 16)

    def __init__(self, num_classes: int = 4, image: int = 64):
        super().__init__()
        self.no, self.na = 5 + num_classes, 3
        self.stem = nn.Sequential(ConvBNSiLU(3, 16, 3, 2), ConvBNSiLU(16, 32, 3, 2), CSP(32, 32))
        self.down3 = nn.Sequential(ConvBNSiLU(32, 64, 3, 2), CSP(64, 64))  # stride 8
        self.down4 = nn.Sequential(ConvBNSiLU(64, 96, 3, 2), CSP(96, 96), SPPF(96))  # 16
        self.lat4 = ConvBNSiLU(96, 64)
        self.fpn3 = CSP(128, 64)
        self.pan = ConvBNSiLU(64, 64, 3, 2)
        self.fpn4 = CSP(128, 96)
        self.heads = nn.ModuleList(nn.Conv2d(c, self.na * self.no, 1) for c in (64, 96))
        for i, s in enumerate(self.STRIDES):
            g = image // s
            yy, xx = torch.meshgrid(torch.arange(g), torch.arange(g), indexing="ij")
            self.register_buffer(f"grid{i}", torch.stack((xx, yy), -1).view(1, 1, g, g, 2).float())
            anchors = torch.tensor(self.ANCHORS[i], dtype=torch.float32).view(1, self.na, 1, 1, 2)
            self.register_buffer(f"anchor{i}", anchors)

    def forward(self, x):
        p3 = self.down3(self.stem(x))
        p4 = self.down4(p3)
        l4 = self.lat4(p4)
        n3 = self.fpn3(torch.cat([F.interpolate(l4, scale_factor=2.0, mode="nearest"), p3], 1))
        n4 = self.fpn4(torch.cat([self.pan(n3), l4], 1))
        out = []
        for i, (f, head) in enumerate(zip((n3, n4), self.heads)):
            b, _, h, w = f.shape
            y = head(f).view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            xy, wh, conf = y.split((2, 2, self.no - 4), -1)
            xy = (xy * 2 - 0.5 + getattr(self, f"grid{i}")) * self.STRIDES[i]
            wh = (wh * 2) ** 2 * getattr(self, f"anchor{i}")
            out.append(torch.cat((xy, wh, conf), -1).view(b, -1, self.no))
        return torch.cat(out, 1)


def make_yolo(resolution: int = 64) -> TinyYOLO:
    torch.manual_seed(31)
    model = TinyYOLO(image=resolution)
    return randomize_batchnorm(model, lambda: torch.randn(2, 3, resolution, resolution))


# ----------------------------------------------------------------- Whisper


def mel_filters(n_mels: int, n_fft: int, sample_rate: int = 16000) -> torch.Tensor:
    """Triangular mel filterbank [n_mels, n_fft // 2 + 1] (HTK mel scale)."""
    mel = lambda f: 2595.0 * math.log10(1.0 + f / 700.0)  # noqa: E731
    pts = torch.linspace(mel(0.0), mel(sample_rate / 2), n_mels + 2)
    hz = 700.0 * (10 ** (pts / 2595.0) - 1.0)
    freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    lo, mid, hi = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    up, down = (freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)
    return torch.clamp(torch.minimum(up, down), min=0.0)


class LogMel(nn.Module):
    """Whisper's front end: |STFT|^2 (Hann window, centred, last frame dropped), mel
    filterbank, log10 clamped at 8 decades below the peak, scaled to about [-1, 1]."""

    def __init__(self, n_fft: int = 128, hop: int = 32, n_mels: int = 16):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("filters", mel_filters(n_mels, n_fft))

    def forward(self, audio):
        spec = torch.stft(audio, self.n_fft, self.hop, window=self.window, return_complex=True)
        power = torch.view_as_real(spec[..., :-1]).pow(2).sum(-1)  # |z|^2
        logmel = torch.clamp(self.filters @ power, min=1e-10).log10()
        logmel = torch.maximum(logmel, logmel.max() - 8.0)
        return (logmel + 4.0) / 4.0


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.query, self.key = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False)
        self.value, self.out = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def split(self, x):
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def merge(self, y):
        b, h, t, hd = y.shape
        return self.out(y.transpose(1, 2).reshape(b, t, h * hd))


class DecoderBlock(nn.Module):
    """Causal self-attention over a KV cache (mutable buffers written at ``input_pos``),
    cross-attention over the encoder's output, MLP."""

    def __init__(self, dim: int, heads: int, max_len: int):
        super().__init__()
        self.attn_ln, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.cross_ln, self.cross = nn.LayerNorm(dim), Attention(dim, heads)
        self.mlp_ln = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        shape = (1, heads, max_len, dim // heads)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, x, enc, input_pos, mask):
        h = self.attn_ln(x)
        q, k, v = (self.attn.split(p(h)) for p in (self.attn.query, self.attn.key,
                                                   self.attn.value))
        self.k_cache[:, :, input_pos] = k
        self.v_cache[:, :, input_pos] = v
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        x = x + self.attn.merge(y)
        h = self.cross_ln(x)
        q, k, v = (self.cross.split(t) for t in (self.cross.query(h), self.cross.key(enc),
                                                 self.cross.value(enc)))
        x = x + self.cross.merge(F.scaled_dot_product_attention(q, k, v))
        return x + self.mlp(self.mlp_ln(x))


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn_ln, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.mlp_ln = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.attn_ln(x)
        q, k, v = (self.attn.split(p(h)) for p in (self.attn.query, self.attn.key,
                                                   self.attn.value))
        x = x + self.attn.merge(F.scaled_dot_product_attention(q, k, v))
        return x + self.mlp(self.mlp_ln(x))


class Whisper(nn.Module):
    """Whisper-style speech model, one decode step per call: (audio [1, samples], token
    [1, 1], input_pos [1]) -> next-token logits [1, 1, vocab]. The log-mel front end and
    encoder run in the program; the decoder's self-attention keys/values persist in
    mutable buffers across calls."""

    def __init__(self, samples: int = 2048, n_mels: int = 16, dim: int = 64, heads: int = 4,
                 layers: int = 2, vocab: int = 64, max_len: int = 16):
        super().__init__()
        self.logmel = LogMel(n_mels=n_mels)
        frames = samples // self.logmel.hop
        self.conv1 = nn.Conv1d(n_mels, dim, 3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.register_buffer("enc_pos", sinusoids(frames // 2, dim))
        self.encoder = nn.ModuleList(EncoderBlock(dim, heads) for _ in range(layers))
        self.enc_ln = nn.LayerNorm(dim)
        self.token_embedding = nn.Embedding(vocab, dim)
        self.dec_pos = nn.Parameter(0.02 * torch.randn(max_len, dim))
        self.decoder = nn.ModuleList(DecoderBlock(dim, heads, max_len) for _ in range(layers))
        self.dec_ln = nn.LayerNorm(dim)
        self.register_buffer("steps", torch.arange(max_len))

    def forward(self, audio, tokens, input_pos):
        mel = self.logmel(audio)
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).permute(0, 2, 1) + self.enc_pos
        for block in self.encoder:
            x = block(x)
        enc = self.enc_ln(x)
        y = self.token_embedding(tokens) + self.dec_pos[input_pos]
        mask = (self.steps <= input_pos)[None, None, None, :]  # attend to filled positions
        for block in self.decoder:
            y = block(y, enc, input_pos, mask)
        return self.dec_ln(y) @ self.token_embedding.weight.T


def make_whisper() -> Whisper:
    torch.manual_seed(32)
    return Whisper().eval()
