"""Media for multimodal and speech programs: images, audio features and 16 kHz samples,
read from files and checked against the method that takes them.

    from pyruntime.llm import Image, Audio
    Image(np.load("image.npy"))        # the tensor ExecuTorch's make_image_input is given:
                                       # uint8 or float32, [C, H, W] or [1, C, H, W]
    Audio(np.load("features.npy"))     # make_audio_input's: float32 [batch, bins, frames]
    load_image("cat.png", info)        # a picture, converted to the encoder's input (info)
    read_wav("speech.wav")             # float32 mono samples in [-1, 1] at 16 kHz

``.png``/``.jpg`` need Pillow (``pip install 'pyruntime[llm]'``); a ``.wav`` is read
here (PCM 8/16/24/32-bit or IEEE float32, mono, 16 kHz; anything else is refused with
what it is).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pyruntime.llm.errors import MediaError

SAMPLE_RATE = 16000  # what Whisper-style preprocessors and encoders are trained on


@dataclass(frozen=True)
class Image:
    """An image part of a multimodal prompt (the array as ExecuTorch's
    ``make_image_input`` takes it: uint8 or float32, ``[C, H, W]`` or ``[1, C, H, W]``)."""

    data: np.ndarray


@dataclass(frozen=True)
class Audio:
    """An audio part of a multimodal prompt: preprocessed features as ExecuTorch's
    ``make_audio_input`` takes them (float32 ``[batch, bins, frames]``)."""

    data: np.ndarray


def _describe(a: np.ndarray) -> str:
    return f"{a.dtype}{list(a.shape)}"


def fit_to_input(data: np.ndarray, info, what: str) -> np.ndarray:
    """``data`` as the method input ``info`` (a ``TensorInfo``) takes it: a batch
    dimension of 1 added or dropped as ExecuTorch's runner does, float32 -> bfloat16
    where the input is bfloat16; anything else that does not fit is a ``MediaError``
    naming both."""
    a = np.asarray(data)
    want = len(info.sizes)
    if a.ndim == want - 1:
        a = a[None]
    elif a.ndim == want + 1 and a.shape[0] == 1:
        a = a[0]
    if a.dtype != info.dtype:
        if info.dtype.name == "bfloat16" and a.dtype == np.float32:
            a = a.astype(info.dtype)
        else:
            raise MediaError(f"{what} is {_describe(np.asarray(data))}, but it takes {info}: "
                             f"the dtype must be {info.dtype}")
    shape_ok = a.ndim == want and all(
        (g <= b if info.dynamic else g == b) for g, b in zip(a.shape, info.sizes))
    if not shape_ok:
        bound = " (upper bounds)" if info.dynamic else ""
        raise MediaError(f"{what} is {_describe(np.asarray(data))}, but it takes {info}: "
                         f"expected sizes {list(info.sizes)}{bound}")
    return np.ascontiguousarray(a)


# ----------------------------------------------------------------------------- images
def load_image(path, info) -> Image:
    """An image file for a vision encoder whose input is ``info``: a ``.npy`` as is (checked
    when it runs), a ``.png``/``.jpg`` converted to RGB, resized (bilinear) to the input's
    height and width, channels first, as uint8 (0-255) or float32 (0-1) by the input's dtype."""
    p = Path(path)
    if p.suffix.lower() == ".npy":
        return Image(_load_npy(p))
    if p.suffix.lower() not in (".png", ".jpg", ".jpeg"):
        raise MediaError(f"{p}: an image is a .npy (the tensor ExecuTorch's make_image_input "
                         "takes), .png or .jpg")
    try:
        from PIL import Image as PILImage
    except ImportError as e:
        raise MediaError(f"{p}: reading a picture needs Pillow (pip install 'pyruntime[llm]' "
                         "or pip install pillow); a .npy image needs nothing") from e
    sizes = tuple(info.sizes[-3:])
    if len(sizes) != 3 or sizes[0] not in (3, 4):
        raise MediaError(f"{p}: the vision encoder takes {info}, not a [C, H, W] picture")
    channels, height, width = sizes
    try:
        with PILImage.open(p) as im:
            im = im.convert("RGB" if channels == 3 else "RGBA")
            if im.size != (width, height):
                im = im.resize((width, height), PILImage.BILINEAR)
            a = np.asarray(im, dtype=np.uint8).transpose(2, 0, 1)
    except OSError as e:
        raise MediaError(f"{p}: not a readable picture ({e})") from e
    a = a.astype(np.float32) / 255.0 if info.dtype.kind == "f" else a
    return Image(np.ascontiguousarray(a))


def load_audio_features(path) -> Audio:
    """Preprocessed audio features from a ``.npy`` (``[batch, bins, frames]``)."""
    p = Path(path)
    if p.suffix.lower() != ".npy":
        raise MediaError(f"{p}: audio for a multimodal program is a .npy of preprocessed "
                         "features (the tensor ExecuTorch's make_audio_input takes)")
    a = _load_npy(p)
    if a.ndim != 3:
        raise MediaError(f"{p}: audio features are [batch, bins, frames], got {_describe(a)}")
    return Audio(a)


def _load_npy(p: Path) -> np.ndarray:
    try:
        return np.load(p, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise MediaError(f"{p}: not a readable .npy file ({e})") from e


# ----------------------------------------------------------------------------- wav
_PCM, _FLOAT, _EXTENSIBLE = 1, 3, 0xFFFE


def read_wav(path, rate: int = SAMPLE_RATE) -> np.ndarray:
    """The samples of a mono ``.wav`` at ``rate`` Hz as float32 in [-1, 1] (PCM scaled by
    its full range, float copied). Other rates, several channels and other encodings are a
    ``MediaError`` saying what the file holds."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise MediaError(f"{p}: cannot read ({e})") from e
    if len(raw) < 12 or raw[:4] != b"RIFF" or raw[8:12] != b"WAVE":
        raise MediaError(f"{p}: not a RIFF/WAVE file")
    fmt = data = None
    at = 12
    while at + 8 <= len(raw):
        cid, size = raw[at:at + 4], struct.unpack_from("<I", raw, at + 4)[0]
        body = raw[at + 8:at + 8 + size]
        if cid == b"fmt ":
            if len(body) < 16:
                raise MediaError(f"{p}: its fmt chunk is {len(body)} bytes, expected 16+")
            fmt = struct.unpack_from("<HHIIHH", body)
            if fmt[0] == _EXTENSIBLE and len(body) >= 26:
                fmt = (struct.unpack_from("<H", body, 24)[0],) + fmt[1:]
        elif cid == b"data":
            data = body
        at += 8 + size + (size & 1)
    if fmt is None or data is None:
        raise MediaError(f"{p}: a WAVE file needs a fmt and a data chunk")
    code, channels, file_rate, _, align, bits = fmt
    if channels != 1:
        raise MediaError(f"{p}: {channels} channels; speech programs take mono audio "
                         "(mix it down first, e.g. ffmpeg -ac 1)")
    if file_rate != rate:
        raise MediaError(f"{p}: sampled at {file_rate} Hz; the program takes {rate} Hz audio "
                         f"(resample it first, e.g. ffmpeg -ar {rate})")
    n = len(data) // max(align, 1)
    data = data[:n * align]
    if code == _FLOAT and bits == 32:
        return np.frombuffer(data, "<f4").astype(np.float32)
    if code == _PCM and bits == 8:
        return (np.frombuffer(data, np.uint8).astype(np.float32) - 128.0) / 128.0
    if code == _PCM and bits == 16:
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768.0
    if code == _PCM and bits == 24:
        b = np.frombuffer(data, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        return (np.where(v >= 1 << 23, v - (1 << 24), v)).astype(np.float32) / float(1 << 23)
    if code == _PCM and bits == 32:
        return (np.frombuffer(data, "<i4").astype(np.float64) / 2147483648.0).astype(np.float32)
    raise MediaError(f"{p}: encoding {code} with {bits}-bit samples; readable are PCM 8/16/24/"
                     "32-bit and IEEE float 32-bit")


def write_wav(path, samples, rate: int = SAMPLE_RATE) -> None:
    """Write mono float samples in [-1, 1] as a 16-bit PCM ``.wav`` (for tests and demos)."""
    pcm = np.clip(np.round(np.asarray(samples, np.float64) * 32767.0), -32768, 32767)
    body = pcm.astype("<i2").tobytes()
    head = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(body), b"WAVE", b"fmt ", 16,
                       _PCM, 1, rate, rate * 2, 2, 16, b"data", len(body))
    Path(path).write_bytes(head + body)
