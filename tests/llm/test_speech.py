"""Transcriber on a tiny Whisper exported here (tests.llm.speech_fixtures): greedy tokens
and text equal to transformers' ``generate(do_sample=False)`` of the same weights in torch
eager, from features and from a wav through ExecuTorch's mel-spectrogram preprocessor;
the generation-config rules, the wav reader, the command and the errors."""
from __future__ import annotations

import importlib.util
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from tests import parts

parts.importorskip("executorch", "executorch")
parts.importorskip("tokenizers", "tokenizers")
# transformers is only imported by the fixture's child process (tests.llm.speech_fixtures)
parts.need("transformers", None if importlib.util.find_spec("transformers") else
           "cannot find the transformers package")

from pyruntime.llm import (ContextFullWarning, MediaError, NotAnLLMError,  # noqa: E402
                           Transcriber)
from pyruntime.llm.media import read_wav, write_wav  # noqa: E402
from pyruntime.llm.speech import DecodingConfig  # noqa: E402
from tests.llm.multimodal_fixtures import get_multimodal  # noqa: E402
from tests.llm.speech_fixtures import FEATURES, NEW_TOKENS, VARIANTS, get_whisper  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
_LOADED = {}


def transcriber(variant="portable", tier="fast"):
    if (variant, tier) not in _LOADED:
        fx = get_whisper(variant)
        _LOADED[variant, tier] = fx, Transcriber(fx.pte, fx.tokenizer_dir,
                                                 preprocessor=fx.preprocessor, tier=tier)
    return _LOADED[variant, tier]


@pytest.mark.parametrize("tier", ["fast", "reference"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_transcripts_equal_transformers_greedy_generate(variant, tier):
    fx, asr = transcriber(variant, tier)
    for name in (*FEATURES, "wav"):
        audio = fx.wav if name == "wav" else fx.features[name]
        text = asr.transcribe(audio, NEW_TOKENS)
        ref = fx.reference[name]
        assert asr.tokens == ref["tokens"], name
        assert text == ref["text"], name
        assert asr.stats.prompt_tokens == 4  # start, detected language, task, notimestamps
        assert asr.stats.stop_reason == ("eos" if ref["tokens"][-1] == 333 else
                                         "max_new_tokens")


def test_the_preprocessor_gives_executorchs_features():
    """ExecuTorch's preprocessor (stft, |.|^2, mel matmul, log10) on the same samples:
    executorch.runtime's features within 2 float32 ulps at 1.0 (measured: 1.2e-7 at most,
    from the FFT's rounding), and the eager WhisperAudioProcessor's within 1e-5."""
    fx, asr = transcriber("xnnpack")
    ours = asr.features(fx.wav)
    et = np.load(fx.et_features)
    assert ours.shape == et.shape == (1, 80, 100)
    assert np.abs(ours - et).max() <= 2.4e-7
    assert np.abs(ours - np.load(fx.tokenizer_dir / "eager_features.npy")).max() <= 1e-5
    assert asr.stats.audio_s == 1.0


def test_the_programs_constants_or_the_configs_values():
    fx, asr = transcriber("portable")  # decoder_start_token_id / get_eos_id methods
    _, plain = transcriber("xnnpack")  # none: the generation config's
    assert asr.config == plain.config
    assert asr.config.start == 334 and asr.config.eos_ids == {333}
    assert asr.config.forced == (None, 338, 339)  # language detected, transcribe, no ts


def test_generation_config_rules():
    base = {"decoder_start_token_id": 1, "eos_token_id": 0, "lang_to_id": {"<|en|>": 2,
            "<|fr|>": 3}, "task_to_id": {"transcribe": 5, "translate": 4},
            "no_timestamps_token_id": 6}
    english_only = {"decoder_start_token_id": 1, "eos_token_id": 0,
                    "forced_decoder_ids": [[1, 6]], "no_timestamps_token_id": 6}
    assert DecodingConfig.from_configs(english_only).forced == (6,)
    assert DecodingConfig.from_configs(base).forced == (None, 6)
    assert DecodingConfig.from_configs({**base, "language": "fr"}).forced == (3, 5, 6)
    assert DecodingConfig.from_configs({**base, "language": "<|en|>", "task": "translate"}
                                       ).forced == (2, 4, 6)
    assert DecodingConfig.from_configs({**base, "return_timestamps": True,
                                        "forced_decoder_ids": [[1, 2], [2, 5]]}).forced == (2, 5)
    assert DecodingConfig.from_configs({**base, "eos_token_id": [0, 7]}).eos_ids == {0, 7}
    with pytest.raises(NotAnLLMError, match="no decoder-start token"):
        DecodingConfig.from_configs({"eos_token_id": 0})
    with pytest.raises(NotAnLLMError, match="language 'de' is not in lang_to_id"):
        DecodingConfig.from_configs({**base, "language": "de"})
    with pytest.raises(NotAnLLMError, match="every position from 1"):
        DecodingConfig.from_configs({**english_only, "forced_decoder_ids": [[2, 6]]})


def test_stream_and_cache_clamping():
    fx, asr = transcriber("xnnpack")
    pieces = list(asr.stream(fx.features["features1"], NEW_TOKENS))
    assert "".join(pieces) == fx.reference["features1"]["text"] and len(pieces) > 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asr.transcribe(fx.features["features1"], 1000)
    assert any(issubclass(w.category, ContextFullWarning) for w in caught)
    assert asr.stats.stop_reason in ("cache", "eos")
    assert len(asr.tokens) <= asr.max_positions - asr.stats.prompt_tokens


def test_bad_audio_and_programs_are_refused_by_name(tmp_path):
    fx, asr = transcriber("portable")
    with pytest.raises(MediaError, match=r"features for encoder.*expected sizes \[1, 80, 100\]"):
        asr.transcribe(np.zeros((1, 80, 60), np.float32))
    with pytest.raises(MediaError, match="dtype must be float32"):
        asr.transcribe(np.zeros((1, 80, 100), np.float64))
    with pytest.raises(MediaError, match=r"the audio \(2.00 s\).*upper bounds"):
        asr.transcribe(np.zeros(32000, np.float32))  # the preprocessor takes 1 s at most
    write_wav(tmp_path / "8k.wav", np.zeros(800), rate=8000)
    with pytest.raises(MediaError, match="8000 Hz; the program takes 16000 Hz"):
        asr.transcribe(tmp_path / "8k.wav")
    bare = Transcriber(fx.pte, fx.tokenizer_dir)
    with pytest.raises(MediaError, match="need a preprocessor program"):
        bare.transcribe(fx.wav)
    with pytest.raises(NotAnLLMError, match="no 'encoder' method"):
        Transcriber(get_multimodal("llava").pte, fx.tokenizer_dir)


def _wav(path, code, bits, channels, payload: bytes, rate=16000):
    align = channels * bits // 8
    path.write_bytes(struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(payload), b"WAVE",
                                 b"fmt ", 16, code, channels, rate, rate * align, align, bits,
                                 b"data", len(payload)) + payload)


def test_read_wav_formats(tmp_path):
    x = np.array([0.0, 0.5, -0.5, -1.0], np.float32)
    write_wav(tmp_path / "a.wav", x)
    assert np.allclose(read_wav(tmp_path / "a.wav"), x, atol=1 / 32767)
    _wav(tmp_path / "f.wav", 3, 32, 1, x.astype("<f4").tobytes())
    assert np.array_equal(read_wav(tmp_path / "f.wav"), x)
    _wav(tmp_path / "u8.wav", 1, 8, 1, bytes([128, 192, 64, 0]))
    assert np.array_equal(read_wav(tmp_path / "u8.wav"), x)
    v24 = b"".join(int(round(s * (1 << 23))).to_bytes(3, "little", signed=True)
                   for s in (0.0, 0.5, -0.5, -1.0))
    _wav(tmp_path / "p24.wav", 1, 24, 1, v24)
    assert np.array_equal(read_wav(tmp_path / "p24.wav"), x)
    _wav(tmp_path / "st.wav", 1, 16, 2, bytes(8))
    with pytest.raises(MediaError, match="2 channels"):
        read_wav(tmp_path / "st.wav")
    _wav(tmp_path / "alaw.wav", 6, 8, 1, bytes(4))
    with pytest.raises(MediaError, match="encoding 6"):
        read_wav(tmp_path / "alaw.wav")
    (tmp_path / "junk.wav").write_bytes(b"RIFX0000")
    with pytest.raises(MediaError, match="not a RIFF/WAVE"):
        read_wav(tmp_path / "junk.wav")


def _transcribe(*args):
    return subprocess.run([sys.executable, "-m", "pyruntime", "transcribe", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_transcribe_command():
    fx = get_whisper("xnnpack")
    r = _transcribe(fx.pte, "--tokenizer", fx.tokenizer_dir, "--audio", fx.wav,
                    "--preprocessor", fx.preprocessor, "--max-new-tokens", NEW_TOKENS, "--stats")
    assert r.returncode == 0, r.stderr
    assert r.stdout == fx.reference["wav"]["text"]
    line = r.stderr.strip().splitlines()[-1]
    assert "decode tok/s:" in line and "encode:" in line and "preprocess:" in line
    r = _transcribe(fx.pte, "--tokenizer", fx.tokenizer, "--audio", fx.features["features2"],
                    "--max-new-tokens", NEW_TOKENS)
    assert r.returncode == 0 and r.stdout == fx.reference["features2"]["text"], r.stderr
    r = _transcribe(fx.pte, "--tokenizer", fx.tokenizer_dir, "--audio", fx.wav)
    assert r.returncode == 1 and r.stdout == "" and "--preprocessor" in r.stderr


def test_bench_multimodal_measures_both_runtimes(tmp_path):
    """examples/bench_multimodal.py (the BENCHMARKS.md "Multimodal" table): a multimodal
    row and a Whisper row per input, both runtimes timed, the outputs compared, and
    --update replacing only its section."""
    doc = tmp_path / "B.md"
    begin, end = "<!-- multimodal-bench:start -->", "<!-- multimodal-bench:end -->"
    doc.write_text(f"# B\n\n{begin}\nold\n{end}\n\ntail\n")
    r = subprocess.run([sys.executable, str(REPO / "examples" / "bench_multimodal.py"),
                        "--size", "tiny", "--rounds", "1", "--new-tokens", "4", "--kinds",
                        "llava", "whisper", "--variants", "xnnpack", "--update", str(doc)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    text = doc.read_text()
    assert "old" not in text and text.startswith("# B") and text.endswith("tail\n")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith(("| llava |", "| xnnpack |"))]
    mm = [c for c in rows if c[0] == "llava"]
    speech = [c for c in rows if c[0] == "xnnpack"]
    assert len(mm) == 1 and len(speech) == len(FEATURES)
    assert mm[0][1] == "xnnpack" and mm[0][-1] == "yes"
    assert mm[0][3].endswith(" ms") and float(mm[0][5]) > 0 and float(mm[0][8]) > 0
    for c in speech:
        assert c[-1] == "yes" and c[3].endswith(" ms") and float(c[5]) > 0
