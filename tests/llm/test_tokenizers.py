"""Tokenizers against ExecuTorch's own (pytorch-tokenizers' C++ classes, the ones its
runner uses): HF tokenizer.json, tiktoken, sentencepiece; UTF-8-safe streaming;
chat templates."""
from __future__ import annotations

import base64
import io

import pytest

from pyruntime.llm import (HFTokenizer, SentencePieceTokenizer, TiktokenTokenizer,
                           TokenizerError, apply_chat_template, detect_template, load_tokenizer)
from pyruntime.llm.errors import LLMError
from pyruntime.llm.tokenizer import _byte_level_decoder
from tests import parts
from tests.llm.fixtures import _corpus, tokenizer_path

cpp = parts.importorskip("pytorch_tokenizers", "executorch")

TEXTS = ["The time is 42.", "He said: (x) we can't!", "Water, water.\nThen we look up",
         "café über 日本語 😀 ok", "<|end_of_text|> after", ""]


def _cpp(cls, path):
    t = cls()
    t.load(str(path))
    return t


@pytest.fixture(scope="module")
def tiktoken_file(tmp_path_factory):
    """A tiktoken file with the byte-level vocabulary of the 'bytes' tokenizer (every
    single byte is a token, as in a real tiktoken file)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path("bytes")))
    inv = _byte_level_decoder()
    items = sorted((i, s) for s, i in tok.get_vocab(with_added_tokens=False).items() if i >= 2)
    path = tmp_path_factory.mktemp("tiktoken") / "tokenizer.model"
    path.write_text("".join(base64.b64encode(bytes(inv[c] for c in s)).decode() + f" {r}\n"
                            for r, (_, s) in enumerate(items)))
    return path


@pytest.fixture(scope="module")
def sp_file(tmp_path_factory):
    spm = parts.importorskip("sentencepiece", "tokenizers")
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_corpus("bytes")), model_writer=buf,
                                   vocab_size=420, model_type="bpe", byte_fallback=True,
                                   character_coverage=0.99, minloglevel=2)
    path = tmp_path_factory.mktemp("sp") / "tokenizer.model"
    path.write_bytes(buf.getvalue())
    return path


# ----------------------------------------------------------------------------- HF


@pytest.mark.parametrize("kind", ["ascii", "bytes"])
def test_hf_matches_executorch(kind):
    path = tokenizer_path(kind)
    ours, ref = load_tokenizer(path), _cpp(cpp.CppHFTokenizer, path)
    assert isinstance(ours, HFTokenizer)
    assert (ours.vocab_size, ours.bos_id, ours.eos_id) == (ref.vocab_size(), ref.bos_tok(),
                                                           ref.eos_tok())
    # the ascii vocabulary has only the characters of its corpus
    texts = TEXTS if kind == "bytes" else ["The time is 42.", "He said: (x) we can!", "",
                                           "Water, water. Then we look up 7?", "<|end_of_text|>"]
    for text in texts:
        assert ours.encode(text) == ref.encode(text, 0, 0), text
    if kind == "ascii":  # every token is ASCII: the C++ piece is our piece
        for i in range(ours.vocab_size):
            assert ours.token_bytes(i).decode() == ref.decode(i), i


def test_hf_bos_from_post_processor(tmp_path):
    """ExecuTorch adds an HF tokenizer's BOS through its post-processor, only when bos > 0."""
    from tokenizers import Tokenizer, processors

    tok = Tokenizer.from_file(str(tokenizer_path("ascii")))
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    ours, ref = load_tokenizer(path), _cpp(cpp.CppHFTokenizer, path)
    for bos in (0, 1, 2):
        assert ours.encode("The time", bos=bos) == ref.encode("The time", bos, 0)
    assert ours.encode("The time", bos=1)[0] == ours.bos_id == 0


def test_hf_folder_with_config(tmp_path):
    """A folder: tokenizer.json + tokenizer_config.json naming BOS/EOS (and a chat template)."""
    (tmp_path / "tokenizer.json").write_bytes(tokenizer_path("ascii").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(
        '{"bos_token": "<|end_of_text|>", "eos_token": {"content": "<|begin_of_text|>"},'
        ' "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}')
    tok = load_tokenizer(tmp_path)
    assert (tok.bos_id, tok.eos_id) == (1, 0)
    assert tok.chat_template.startswith("{%")


# ----------------------------------------------------------------------------- tiktoken


def test_tiktoken_matches_executorch(tiktoken_file):
    ours, ref = load_tokenizer(tiktoken_file), _cpp(cpp.CppTiktoken, tiktoken_file)
    assert isinstance(ours, TiktokenTokenizer)
    assert (ours.vocab_size, ours.bos_id, ours.eos_id) == (ref.vocab_size(), ref.bos_tok(),
                                                           ref.eos_tok())
    for text in TEXTS + ["x<|eot_id|>y"]:
        assert ours.encode(text, bos=1, eos=1) == ref.encode(text, 1, 1), text
        for i in ours.encode(text):
            if not ours.token_bytes(i).decode(errors="replace").count("\ufffd"):
                assert ours.token_bytes(i).decode() == ref.decode(i)
    assert ours.decode(ours.encode("café 日本語 😀")) == "café 日本語 😀"
    # By design not ExecuTorch's: runs of spaces split as Llama 3's tokenizer (and
    # tiktoken) do, with the `\s+(?!\S)` ExecuTorch's default pattern drops.
    assert ours.encode("a  b") != ref.encode("a  b", 0, 0)


def test_tiktoken_file_without_every_byte(tmp_path):
    path = tmp_path / "t.model"
    path.write_text("".join(f"{base64.b64encode(c.encode()).decode()} {i}\n"
                            for i, c in enumerate("abc ")))
    tok = load_tokenizer(path)
    assert tok.encode("ab c") == [0, 1, 3, 2]
    with pytest.raises(TokenizerError, match="cannot encode"):
        tok.encode("xyz")


# ----------------------------------------------------------------------------- sentencepiece


def test_sentencepiece_matches_executorch(sp_file):
    ours, ref = load_tokenizer(sp_file), _cpp(cpp.CppSPTokenizer, sp_file)
    assert isinstance(ours, SentencePieceTokenizer)
    assert (ours.vocab_size, ours.bos_id, ours.eos_id) == (ref.vocab_size(), ref.bos_tok(),
                                                           ref.eos_tok())
    for text in TEXTS + ["€ ✓"]:
        assert ours.encode(text, bos=1, eos=1) == ref.encode(text, 1, 1), text
        if "\n" not in text:  # sentencepiece's normalizer makes a newline a space
            assert ours.decode(ours.encode(text)) == text
    # byte-fallback pieces stream as the characters they make (ExecuTorch: "<0xE2>")
    s = ours.stream()
    assert "".join(s.push(i) for i in ours.encode("€")) + s.flush() == " €"


# ----------------------------------------------------------------------------- streaming


def test_stream_holds_partial_characters():
    tok = load_tokenizer(tokenizer_path("bytes"))
    text = "café 日本語 😀 über"
    ids = tok.encode(text)
    partial = [i for i in ids if _invalid(tok.token_bytes(i))]
    assert partial, "the byte tokenizer should split some characters over tokens"
    s = tok.stream()
    pieces = [s.push(i) for i in ids]
    assert "" in pieces  # a partial character was held, not emitted
    assert "".join(pieces) + s.flush() == text
    assert all("\ufffd" not in p for p in pieces)


def test_stream_never_raises_on_invalid_bytes():
    tok = load_tokenizer(tokenizer_path("bytes"))
    byte = {tok.token_bytes(i): i for i in range(tok.vocab_size)}
    ff, e6, a = byte[b"\xff"], byte[b"\xe6"], byte[b"a"]
    s = tok.stream()
    out = [s.push(i) for i in (a, ff, e6, a, e6)] + [s.flush()]
    assert "".join(out) == "a\ufffd\ufffda\ufffd"
    assert tok.decode([e6, byte[b"\x97"], byte[b"\xa5"]]) == "日"


def test_stream_skips_special_tokens():
    tok = load_tokenizer(tokenizer_path("ascii"))
    ids = tok.encode("The time") + [tok.eos_id]
    s = tok.stream()
    assert "".join(s.push(i) for i in ids) + s.flush() == "The time"
    s = tok.stream(skip_special=False)
    assert "".join(s.push(i) for i in ids) + s.flush() == "The time<|end_of_text|>"


def _invalid(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return True
    return False


# ----------------------------------------------------------------------------- loading


def test_load_errors(tmp_path):
    with pytest.raises(TokenizerError, match="cannot read tokenizer"):
        load_tokenizer(tmp_path / "missing.json")
    bad = tmp_path / "junk.model"
    bad.write_bytes(b"\x00\x01 not a tokenizer")
    with pytest.raises(TokenizerError, match="junk.model: not a HF tokenizer.json, a tiktoken"):
        load_tokenizer(bad)
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{ not json")
    with pytest.raises(TokenizerError, match="tokenizer.json: not a readable tokenizer.json"):
        load_tokenizer(broken)
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenizerError, match="needs a tokenizer.json"):
        load_tokenizer(tmp_path / "empty")


# ----------------------------------------------------------------------------- chat


def test_chat_templates():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert apply_chat_template(msgs, "llama3") == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert apply_chat_template(msgs, "qwen3") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert apply_chat_template(msgs, "phi4") == (
        "<|system|>Be brief.<|end|><|user|>Hi<|end|><|assistant|>")
    with pytest.raises(LLMError, match="unknown chat template"):
        apply_chat_template(msgs, "nope")
    with pytest.raises(LLMError, match="message 0"):
        apply_chat_template([{"content": "x"}], "llama3")


def test_chat_template_detected(tiktoken_file):
    tok = load_tokenizer(tiktoken_file)  # ExecuTorch's default (Llama 3) special tokens
    assert detect_template(tok) == "llama3"
    assert detect_template(load_tokenizer(tokenizer_path("ascii"))) is None
