"""MultimodalGenerator on Llava- and Voxtral-style programs exported here in ExecuTorch's
layout (tests.llm.multimodal_fixtures): greedy pieces equal to ExecuTorch's
MultimodalRunner's on the same .pte and inputs, on both tiers and both variants; chunked
prefill, the context, media conversion, the placeholders and the errors."""
from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from tests import parts

parts.importorskip("executorch", "executorch")
parts.importorskip("tokenizers", "tokenizers")

from pyruntime.llm import (Audio, ContextFullWarning, Image, MediaError,  # noqa: E402
                           MultimodalGenerator, NotAnLLMError, PromptTooLongError,
                           TokenizerMismatchError)
from pyruntime.llm.media import load_image  # noqa: E402
from pyruntime.llm.multimodal import parts_from_prompt  # noqa: E402
from tests.llm.fixtures import get_llm, tokenizer_path  # noqa: E402
from tests.llm.multimodal_fixtures import (CASES, EOS_ID, IMAGE_SHAPE, KINDS,  # noqa: E402
                                           NEW_TOKENS, VARIANTS, get_multimodal)

REPO = Path(__file__).resolve().parents[2]
EOS_TEXT = "<|end_of_text|>"  # how ExecuTorch's runner streams the EOS token
_LOADED = {}


def generator(kind="llava", variant="portable", **kw):
    key = (kind, variant, tuple(sorted(kw.items())))
    if key not in _LOADED:
        fx = get_multimodal(kind, variant)
        _LOADED[key] = (fx, MultimodalGenerator(fx.pte, fx.tokenizer, **kw))
    fx, gen = _LOADED[key]
    gen.reset()
    return fx, gen


def expected(case) -> tuple[list, bool]:
    """(ExecuTorch's pieces, whether its first token is EOS). ExecuTorch's runner goes on
    after a first EOS token (and streams it as text); ours stops there, and with
    ignore_eos gives the same tokens after it (the EOS itself renders as no text)."""
    eos_first = case.pieces[0] == EOS_TEXT
    return (case.pieces[1:] if eos_first else case.pieces), eos_first


@pytest.mark.parametrize("tier", ["fast", "reference"])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kind", KINDS)
def test_greedy_pieces_equal_executorchs_multimodal_runner(kind, variant, tier):
    fx, gen = generator(kind, variant, tier=tier)
    assert len(fx.cases) == len(CASES[kind])
    for case in fx.cases:
        want, eos_first = expected(case)
        gen.reset()
        got = list(gen.stream(fx.inputs(case), NEW_TOKENS, temperature=0,
                              ignore_eos=eos_first))
        assert got == want, (case.parts, got, want)
        assert len(gen.tokens) == NEW_TOKENS
        if eos_first:
            gen.reset()
            assert gen.generate(fx.inputs(case), NEW_TOKENS, temperature=0) == ""
            assert gen.tokens == [EOS_ID] and gen.stats.stop_reason == "eos"


@pytest.mark.parametrize("kind", KINDS)
def test_chunked_prefill_gives_the_same_pieces(kind):
    fx, gen = generator(kind, "xnnpack", prefill_chunk=5)
    for case in fx.cases:
        want, eos_first = expected(case)
        gen.reset()
        assert list(gen.stream(fx.inputs(case), NEW_TOKENS, temperature=0,
                               ignore_eos=eos_first)) == want


def test_the_context_carries_over_until_reset_and_is_clamped():
    fx, gen = generator("llava", "portable")
    case = fx.cases[1]
    first = gen.generate(fx.inputs(case), 8, temperature=0)
    used = gen.pos
    assert used == gen.stats.prompt_tokens + 7  # the last token is not fed back yet
    gen.generate(["and then"], 4, temperature=0)
    assert gen.pos > used
    gen.reset()
    assert gen.generate(fx.inputs(case), 8, temperature=0) == first
    gen.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gen.generate(fx.inputs(case), 500, temperature=0, ignore_eos=True)
    assert any(issubclass(w.category, ContextFullWarning) for w in caught)
    assert gen.stats.clamped_to == gen.metadata.max_context_len - gen.stats.prompt_tokens
    assert gen.stats.stop_reason == "context"
    with pytest.raises(PromptTooLongError, match="get_max_context_len"):
        gen.generate(fx.inputs(case), 4)  # the context is full now


def test_sampling_is_seeded():
    fx, gen = generator("voxtral", "xnnpack")
    inputs = fx.inputs(fx.cases[0])
    a = gen.generate(inputs, 12, temperature=0.9, seed=3)
    gen.reset()
    assert gen.generate(inputs, 12, temperature=0.9, seed=3) == a


def test_media_that_does_not_fit_is_refused_by_name():
    fx, gen = generator("llava", "portable")
    img = np.load(fx.media["image0"])
    with pytest.raises(MediaError, match=r"prompt part 1 \(image\).*dtype must be uint8"):
        gen.generate(["a", Image(img.astype(np.float32))], 4)
    with pytest.raises(MediaError, match=r"expected sizes \[3, 32, 32\]"):
        gen.generate([Image(img[:, :16])], 4)
    with pytest.raises(MediaError, match="no 'audio_encoder' method"):
        gen.generate([Audio(np.zeros((1, 128, 32), np.float32))], 4)
    with pytest.raises(ValueError, match="parts are str"):
        gen.generate([42], 4)
    _, vox = generator("voxtral", "portable")
    with pytest.raises(MediaError, match="no 'vision_encoder' method"):
        vox.generate([Image(img)], 4)


def test_a_batched_image_equals_the_plain_one():
    fx, gen = generator("llava", "portable")
    img = np.load(fx.media["image1"])
    a = gen.generate([Image(img), "He said that we can"], 6, temperature=0)
    gen.reset()
    assert gen.generate([Image(img[None]), "He said that we can"], 6, temperature=0) == a


def test_programs_and_tokenizers_that_do_not_belong_are_refused():
    fx = get_multimodal("llava", "portable")
    with pytest.raises(NotAnLLMError, match="no 'token_embedding' method"):
        MultimodalGenerator(get_llm("llama3_2", "portable").pte, fx.tokenizer)
    with pytest.raises(TokenizerMismatchError, match="2048 tokens"):
        MultimodalGenerator(fx.pte, tokenizer_path("bench"))


def test_parts_from_prompt():
    a, b, c = Image(np.zeros(1)), Image(np.ones(1)), Audio(np.zeros(1))
    assert parts_from_prompt("x <image> y<image>", [a, b]) == ["x ", a, " y", b]
    assert parts_from_prompt("say", [a], [c]) == [a, c, "say"]
    assert parts_from_prompt("<audio>", [], [c]) == [c]
    with pytest.raises(MediaError, match="1 <image> placeholder.*2 image file"):
        parts_from_prompt("<image>", [a, b])


def test_a_picture_file_is_converted_to_the_encoders_input(tmp_path):
    from PIL import Image as pil
    fx, gen = generator("llava", "portable")
    info = gen.encoder_input(Image)
    img = np.load(fx.media["image0"])
    pil.fromarray(img.transpose(1, 2, 0)).save(tmp_path / "same.png")
    assert np.array_equal(load_image(tmp_path / "same.png", info).data, img)
    pil.fromarray(np.repeat(np.repeat(img.transpose(1, 2, 0), 3, 0), 2, 1)).convert(
        "RGBA").save(tmp_path / "big.png")  # 96x64 RGBA: resized, alpha dropped
    big = load_image(tmp_path / "big.png", info).data
    assert big.shape == IMAGE_SHAPE and big.dtype == np.uint8
    (tmp_path / "bad.png").write_bytes(b"not a png")
    with pytest.raises(MediaError, match="not a readable picture"):
        load_image(tmp_path / "bad.png", info)


def _generate(*args):
    return subprocess.run([sys.executable, "-m", "pyruntime", "generate", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_generate_command_with_placeholders_and_media_first(tmp_path):
    fx = get_multimodal("llava", "xnnpack")
    case = fx.cases[0]  # ["A photo of", image0, "Then we look up at the day"]
    r = _generate(fx.pte, "--tokenizer", fx.tokenizer, "--prompt",
                  f"{case.parts[0]}<image>{case.parts[2]}", "--image", fx.media["image0"],
                  "--max-new-tokens", NEW_TOKENS, "--temperature", 0, "--stats")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(case.pieces)
    assert "decode tok/s:" in r.stderr.strip().splitlines()[-1]
    case = fx.cases[1]  # [image1, "He said that we can"]: the media come first
    r = _generate(fx.pte, "--tokenizer", fx.tokenizer, "--prompt", case.parts[1],
                  "--image", fx.media["image1"], "--max-new-tokens", NEW_TOKENS,
                  "--temperature", 0)
    assert r.returncode == 0 and r.stdout == "".join(case.pieces), r.stderr
    r = _generate(fx.pte, "--tokenizer", fx.tokenizer, "--prompt", "<image><image>",
                  "--image", fx.media["image1"])
    assert r.returncode == 1 and r.stdout == "" and "2 <image> placeholder" in r.stderr
    text = get_llm("llama3_2", "portable")
    r = _generate(text.pte, "--tokenizer", text.tokenizer, "--prompt", "x",
                  "--image", fx.media["image1"])
    assert r.returncode == 1 and "text-only program" in r.stderr
