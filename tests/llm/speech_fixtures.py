"""A tiny Whisper-style speech program exported here, its preprocessor, and transformers'
greedy transcripts of the same weights in torch eager as the reference.

    from tests.llm.speech_fixtures import get_whisper
    fx = get_whisper("xnnpack")     # exported once, then read from the cache
    fx.pte, fx.preprocessor         # encoder + text_decoder; WhisperAudioProcessor's .pte
    fx.tokenizer_dir                # tokenizer.json, config.json, generation_config.json
    fx.features, fx.wav             # the inputs; fx.reference: {name: tokens and text}

The model is a ``WhisperForConditionalGeneration`` of a small ``WhisperConfig`` (d_model
64, two encoder and two decoder layers, 80 mel bins, 100 frames = 1 s of 16 kHz audio,
a 340-token BPE vocabulary trained here, Whisper's special tokens last) with random
weights spread for varied greedy text. Exported as optimum-executorch exports Whisper:
``encoder(input_features) -> last_hidden_state`` and transformers'
``Seq2SeqLMDecoderExportableModuleWithStaticCache`` as ``text_decoder(decoder_input_ids
[1, 1], encoder_hidden_states, cache_position [1]) -> logits`` (self- and cross-attention
caches in mutable buffers); ``portable`` carries the constant methods
``decoder_start_token_id``, ``get_eos_id`` and ``get_max_seq_len``, ``xnnpack`` (both
methods through ``XnnpackPartitioner``) has none, so the config's values are used. The
generation config is a multilingual Whisper's: ``forced_decoder_ids`` ``[[1, None],
[2, <|transcribe|>]]`` (the language is detected), ``no_timestamps_token_id``,
``suppress_tokens`` and ``begin_suppress_tokens``. The preprocessor is ExecuTorch's
``extension/audio/mel_spectrogram.py`` ``export_processor`` (XNNPACK) for 1 s chunks.

The reference (``reference.json``): ``model.generate(features, do_sample=False)`` for
each features input and for the wav (through the eager ``WhisperAudioProcessor``), and
``executorch.runtime``'s features from the preprocessor .pte. Built in a child process
(``python -m tests.llm.speech_fixtures --build``) that imports transformers with the
repository's root off ``sys.path`` (its top-level ``kernels/`` folder would shadow the
``kernels`` package transformers imports).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.child import repo_env
from tests.llm.fixtures import _corpus, _lock, _sha256, cache_dir

FORMAT_VERSION = "2"
_REPO = Path(__file__).resolve().parents[2]
VARIANTS = ("portable", "xnnpack")
SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|fr|>", "<|translate|>",
            "<|transcribe|>", "<|notimestamps|>"]
VOCAB, DIM, FRAMES, MELS, CACHE = 340, 64, 100, 80, 48
NEW_TOKENS = 24
FEATURES = ("features0", "features1", "features2")


@dataclass(frozen=True)
class WhisperFixture:
    variant: str
    pte: Path
    preprocessor: Path
    tokenizer_dir: Path
    features: dict  # name -> .npy of [1, 80, 100] log-mel features
    wav: Path  # 1 s of 16 kHz mono 16-bit PCM
    reference: dict  # name (features names and "wav") -> {"tokens": [...], "text": str}
    et_features: Path  # executorch.runtime's preprocessor output for the wav (.npy)

    @property
    def tokenizer(self) -> Path:
        return self.tokenizer_dir / "tokenizer.json"


def _root() -> Path:
    return cache_dir() / "whisper"


def _folder(variant) -> Path:
    return _root() / variant


def _spec(variant) -> dict:
    import importlib.metadata

    versions = {d: importlib.metadata.version(d) for d in ("torch", "executorch",
                                                           "transformers")}
    return {"format": FORMAT_VERSION, "variant": variant, "vocab": VOCAB, "dim": DIM,
            "frames": FRAMES, "cache": CACHE, "new_tokens": NEW_TOKENS, **versions}


_SHARED = ("tokenizer.json", "config.json", "generation_config.json", "weights.pt",
           "preprocessor.pte", "audio.wav", "et_features.npy", "eager_features.npy") + \
    tuple(f"{f}.npy" for f in FEATURES)


def _files(variant) -> dict:
    return {**{f"shared/{n}": _root() / n for n in _SHARED},
            "model.pte": _folder(variant) / "model.pte",
            "reference.json": _folder(variant) / "reference.json"}


def _valid(variant) -> bool:
    try:
        key = json.loads((_folder(variant) / "key.json").read_text())
        return key.get("spec") == _spec(variant) and all(
            key["files"][n] == _sha256(p) for n, p in _files(variant).items())
    except (OSError, ValueError, KeyError):
        return False


def get_whisper(variant: str = "portable") -> WhisperFixture:
    """The fixture of ``variant``, exporting every missing one in one child process."""
    if variant not in VARIANTS:
        raise KeyError(f"unknown whisper variant {variant!r}: {', '.join(VARIANTS)}")
    if not _valid(variant):
        missing = [v for v in VARIANTS if not _valid(v)]
        env = repo_env()
        r = subprocess.run([sys.executable, "-m", "tests.llm.speech_fixtures", "--build",
                            *missing], cwd=_REPO, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"exporting whisper fixtures {missing} failed (exit "
                               f"{r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    d, root = _folder(variant), _root()
    return WhisperFixture(variant, d / "model.pte", root / "preprocessor.pte", root,
                          {f: root / f"{f}.npy" for f in FEATURES}, root / "audio.wav",
                          json.loads((d / "reference.json").read_text()),
                          root / "et_features.npy")


# ----------------------------------------------------------------- build (child process)


def _tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # the text tokens first, the special ones last (as Whisper's: its timestamp tokens
    # would start after <|notimestamps|>, past the vocabulary here)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(SPECIALS), show_progress=False)
    tok.train_from_iterator(_corpus("ascii"), trainer)
    tok.add_special_tokens(SPECIALS)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    tok.save(str(path))


def _ids(tok_path: Path) -> dict:
    vocab = json.loads(tok_path.read_text())["added_tokens"]
    return {t["content"]: t["id"] for t in vocab}


def _model(root: Path):
    """The random-weight model (made once, shared by the variants) and its configs."""
    import torch
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    ids = _ids(root / "tokenizer.json")
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    cfg = WhisperConfig(vocab_size=VOCAB, num_mel_bins=MELS, d_model=DIM, encoder_layers=2,
                        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                        encoder_ffn_dim=2 * DIM, decoder_ffn_dim=2 * DIM,
                        max_source_positions=FRAMES // 2, max_target_positions=CACHE,
                        decoder_start_token_id=sot, pad_token_id=eot, bos_token_id=eot,
                        eos_token_id=eot, suppress_tokens=None, begin_suppress_tokens=None)
    model = WhisperForConditionalGeneration(cfg).eval()
    if (root / "weights.pt").exists():
        model.load_state_dict(torch.load(root / "weights.pt"))
    else:
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "layer_norm" in name:
                    base = 1.0 if name.endswith("weight") else 0.0
                    p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
                elif p.ndim >= 2:
                    p.copy_(torch.randn(p.shape, generator=g) * (2.0 / p.shape[-1] ** 0.5))
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
        torch.save(model.state_dict(), root / "weights.pt")
    space = json.loads((root / "tokenizer.json").read_text())["model"]["vocab"]["Ġ"]
    gen = GenerationConfig(
        decoder_start_token_id=sot, eos_token_id=eot, pad_token_id=eot, bos_token_id=eot,
        forced_decoder_ids=[[1, None], [2, ids["<|transcribe|>"]]], is_multilingual=True,
        lang_to_id={"<|en|>": ids["<|en|>"], "<|fr|>": ids["<|fr|>"]},
        task_to_id={"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"], suppress_tokens=[5, 9, 17, 40],
        begin_suppress_tokens=[space, eot], max_length=CACHE)
    model.generation_config = gen
    return model, cfg, gen


def _export(model, variant, path: Path) -> None:
    import torch
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from transformers.integrations.executorch import \
        Seq2SeqLMDecoderExportableModuleWithStaticCache

    class Encoder(torch.nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_features):
            return self.encoder(input_features=input_features).last_hidden_state

    model.lm_head = model.proj_out  # the wrapper's name for the output projection
    enc = Encoder(model.get_encoder()).eval()
    dec = Seq2SeqLMDecoderExportableModuleWithStaticCache(model, CACHE, 1).eval()
    feats = torch.zeros(1, MELS, FRAMES)
    with torch.no_grad():
        hidden = enc(feats)
        programs = {"encoder": torch.export.export(enc, (feats,), strict=True),
                    "text_decoder": torch.export.export(
                        dec, (torch.tensor([[model.config.decoder_start_token_id]]), hidden,
                              torch.tensor([0])), strict=True)}
    partitioner, constants = None, {
        "decoder_start_token_id": model.config.decoder_start_token_id,
        "get_eos_id": model.config.eos_token_id, "get_max_seq_len": CACHE}
    if variant == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import \
            XnnpackPartitioner
        partitioner, constants = {n: [XnnpackPartitioner()] for n in programs}, None
    edge = to_edge_transform_and_lower(programs, partitioner=partitioner,
                                       constant_methods=constants,
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(edge.to_executorch().buffer)
    os.replace(tmp, path)


def _wav_samples():
    """1 s of a made-up 'utterance': gliding tones, a pause and noise (16-bit PCM values)."""
    import numpy as np

    t = np.arange(16000) / 16000.0
    rng = np.random.default_rng(3)
    x = 0.3 * np.sin(2 * np.pi * (220 + 300 * t) * t) * (t < 0.45)
    x += 0.2 * np.sin(2 * np.pi * 660 * t) * (t > 0.6) + 0.02 * rng.standard_normal(t.size)
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)


def _shared(root: Path) -> None:
    """Tokenizer, configs, weights, media and the preprocessor (once for both variants)."""
    import numpy as np
    import torch
    from executorch.extension.audio.mel_spectrogram import WhisperAudioProcessor, \
        export_processor

    from pyruntime.llm.media import write_wav

    if not (root / "tokenizer.json").exists():
        _tokenizer(root / "tokenizer.json")
    model, cfg, gen = _model(root)
    cfg.save_pretrained(root)
    gen.save_pretrained(root)
    rng = np.random.default_rng(5)
    proc = WhisperAudioProcessor(feature_size=MELS, chunk_length=1, max_audio_len=1)
    for i, name in enumerate(FEATURES):
        if i < 2:
            f = rng.standard_normal((1, MELS, FRAMES)).astype(np.float32)
        else:  # a real log-mel range: a tone through the eager processor
            tone = 0.4 * np.sin(2 * np.pi * 440 * np.arange(12000) / 16000.0)
            f = proc(torch.tensor(tone, dtype=torch.float32)).numpy()
        np.save(root / f"{name}.npy", f)
    samples = _wav_samples()
    write_wav(root / "audio.wav", samples / 32767.0)
    export_processor(str(root / "preprocessor.pte"), backend="xnnpack", feature_size=MELS,
                     chunk_length=1, max_audio_len=1)
    from executorch.runtime import Runtime

    from pyruntime.llm.media import read_wav

    pre = Runtime.get().load_program(str(root / "preprocessor.pte")).load_method("forward")
    wav = torch.from_numpy(read_wav(root / "audio.wav"))
    np.save(root / "et_features.npy", pre.execute([wav])[0].numpy())
    np.save(root / "eager_features.npy", proc(wav).numpy())


def _reference(model, root: Path) -> dict:
    import numpy as np
    import torch
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(root / "tokenizer.json"))
    out = {}
    inputs = {name: np.load(root / f"{name}.npy") for name in FEATURES}
    inputs["wav"] = np.load(root / "eager_features.npy")
    for name, feats in inputs.items():
        with torch.no_grad():
            seq = model.generate(torch.from_numpy(feats), do_sample=False,
                                 max_new_tokens=NEW_TOKENS)[0].tolist()
        out[name] = {"tokens": seq, "text": tok.decode(seq, skip_special_tokens=True)}
    return out


def _build(variants) -> None:
    root = _root()
    root.mkdir(parents=True, exist_ok=True)
    if not all((root / n).exists() for n in _SHARED):
        _shared(root)
    model, _, _ = _model(root)
    for variant in variants:
        d = _folder(variant)
        d.mkdir(parents=True, exist_ok=True)
        (d / "key.json").unlink(missing_ok=True)
        t0 = time.perf_counter()
        _export(model, variant, d / "model.pte")
        ref = {"export_s": round(time.perf_counter() - t0, 1), **_reference(model, root)}
        (d / "reference.json").write_text(json.dumps(ref, indent=1))
        key = {"spec": _spec(variant),
               "files": {n: _sha256(p) for n, p in _files(variant).items()}}
        (d / "key.json").write_text(json.dumps(key, indent=1))
        print(f"exported whisper-{variant} in {ref['export_s']} s", flush=True)


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.llm.speech_fixtures", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", help="portable, xnnpack (default: both)")
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)  # the child
    args = ap.parse_args(argv)
    variants = args.variants or list(VARIANTS)
    if args.build:
        import logging
        import warnings

        # transformers imports the `kernels` package; the checkout's kernels/ folder must
        # not stand in for it (pyruntime itself is imported as pyruntime.kernels)
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _REPO]
        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        with _lock(_root().with_suffix(".lock")):
            _build([v for v in variants if not _valid(v)])
        return 0
    for v in variants:
        fx = get_whisper(v)
        print(f"whisper-{v}: {fx.pte} ({fx.pte.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
