"""Tokenizers for ExecuTorch LLM programs: the formats ``pytorch-tokenizers`` reads.

    tok = load_tokenizer("tokenizer.json")      # HF tokenizers (file or its folder)
    tok = load_tokenizer("tokenizer.model")     # tiktoken (Llama 3) or sentencepiece (Llama 2)
    ids = tok.encode("Hello", bos=1)
    stream = tok.stream()                       # token ids in, text out, UTF-8 safe
    text = "".join(stream.push(i) for i in ids) + stream.flush()

Each tokenizer knows the raw bytes of every token (``token_bytes``), so a
streamed piece is never cut inside a UTF-8 character: a byte-level token that
is only part of a character waits in ``TextStream`` until the character is
complete (bytes that can never form one come out as U+FFFD, never an
exception). The packages doing the encoding (``tokenizers``, ``tiktoken``,
``sentencepiece``) are imported only when a file of their format is loaded:
``pip install 'pyruntime[llm]'``.

BOS/EOS follow ExecuTorch's runner: ``encode(text, bos=n, eos=m)`` adds n BOS
and m EOS ids for tiktoken and sentencepiece; for a HF ``tokenizer.json`` the
special tokens are the ones its post-processor adds, and only when ``bos > 0``.
"""
from __future__ import annotations

import codecs
import json
import os
import re
from functools import lru_cache

from pyruntime.llm.errors import TokenizerError

# Llama 3's split pattern (Meta's tokenizer.py), the one tiktoken files were trained with
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# ExecuTorch's default special tokens for a tiktoken file: 256 ids after the base tokens
_LLAMA3_NAMED = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                 "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                 "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
                 "<|python_tag|>"]
LLAMA3_SPECIAL_TOKENS = _LLAMA3_NAMED + [f"<|reserved_special_token_{i}|>"
                                         for i in range(2, 2 + 256 - len(_LLAMA3_NAMED))]
_INSTALL = "pip install 'pyruntime[llm]'"


def _need(module: str, path: str, kind: str):
    try:
        return __import__(module)
    except ImportError as e:
        raise TokenizerError(f"{path}: reading a {kind} tokenizer needs the '{module}' package "
                             f"({_INSTALL})") from e


# ----------------------------------------------------------------------------- streaming
class TextStream:
    """Token ids in, text out: bytes of a character split over tokens are held until the
    character is complete; bytes that can never be valid UTF-8 become U+FFFD.

    >>> # s = tok.stream(); pieces = [s.push(i) for i in ids] + [s.flush()]
    """

    __slots__ = ("_bytes", "_decode", "_skip")

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = True):
        self._bytes = tokenizer.token_bytes
        self._skip = tokenizer.special_ids if skip_special else frozenset()
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode

    def push(self, token: int) -> str:
        if token in self._skip:
            return ""
        return self._decode(self._bytes(token))

    def flush(self) -> str:
        """What is still held (an incomplete character at the end comes out as U+FFFD)."""
        return self._decode(b"", True)


# ----------------------------------------------------------------------------- base
class Tokenizer:
    """What the runner needs of a tokenizer; one subclass per file format."""

    kind = "?"

    def __init__(self, path: str):
        self.path = str(path)
        self.vocab_size = 0
        self.bos_id: int | None = None
        self.eos_id: int | None = None
        self.special_ids: frozenset = frozenset()

    def encode(self, text: str, bos: int = 0, eos: int = 0) -> list[int]:
        raise NotImplementedError

    def token_bytes(self, token: int) -> bytes:
        """The raw bytes token ``token`` stands for (possibly part of a UTF-8 character)."""
        raise NotImplementedError

    def token_id(self, piece: str) -> int | None:
        """The id of vocabulary entry ``piece`` (a special token's text), or None."""
        return None

    def decode(self, ids, skip_special: bool = False) -> str:
        s = self.stream(skip_special)
        return "".join(s.push(int(i)) for i in ids) + s.flush()

    def stream(self, skip_special: bool = True) -> TextStream:
        return TextStream(self, skip_special)

    def _check_id(self, token: int) -> None:
        if not 0 <= token < self.vocab_size:
            raise TokenizerError(f"{self.path}: token id {token} is outside the vocabulary "
                                 f"(0..{self.vocab_size - 1})")

    def __repr__(self):
        return (f"{type(self).__name__}({self.path!r}, vocab_size={self.vocab_size}, "
                f"bos_id={self.bos_id}, eos_id={self.eos_id})")


# ----------------------------------------------------------------------------- HF tokenizer.json
@lru_cache(maxsize=1)
def _byte_level_decoder() -> dict:
    """GPT-2's byte <-> printable character table, inverted: char -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _component_types(node) -> list:
    """Types of a (possibly Sequence) normalizer/pre-tokenizer/decoder json node, in order."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        inner = node.get("decoders") or node.get("pretokenizers") or node.get("normalizers") or []
        return [t for n in inner for t in _component_types(n)]
    return [(node.get("type"), node)]


_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class HFTokenizer(Tokenizer):
    """A HuggingFace ``tokenizer.json`` (a file, or a folder with ``tokenizer.json`` and
    optionally ``tokenizer_config.json`` naming ``bos_token``/``eos_token``)."""

    kind = "hf"

    def __init__(self, path, config_path=None):
        super().__init__(path)
        json_path = path
        if os.path.isdir(path):
            json_path = os.path.join(path, "tokenizer.json")
            cfg = os.path.join(path, "tokenizer_config.json")
            if config_path is None and os.path.exists(cfg):
                config_path = cfg
            if not os.path.exists(json_path):
                raise TokenizerError(f"{path}: a tokenizer folder needs a tokenizer.json")
        try:
            with open(json_path, encoding="utf-8") as f:
                spec = json.load(f)
        except (OSError, ValueError) as e:
            raise TokenizerError(f"{json_path}: not a readable tokenizer.json: {e}") from e
        tk = _need("tokenizers", json_path, "HF tokenizer.json")
        try:
            self._tok = tk.Tokenizer.from_file(json_path)
        except Exception as e:  # noqa: BLE001 - the library's own parse errors
            raise TokenizerError(f"{json_path}: the tokenizers package cannot read it: {e}") from e
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        added = spec.get("added_tokens") or []
        self._added = {int(a["id"]): a["content"] for a in added}
        self.special_ids = frozenset(int(a["id"]) for a in added if a.get("special", True))
        self._set_bos_eos(config_path, added)
        types = dict(_component_types(spec.get("decoder")))
        if "ByteLevel" in types:
            self._piece = self._byte_level_piece
        elif types.keys() & {"ByteFallback", "Metaspace", "Replace"}:
            meta = types.get("Metaspace") or {}
            self._space = meta.get("replacement", "▁")
            self._fallback = "ByteFallback" in types
            self._piece = self._metaspace_piece
        else:  # WordPiece, BPEDecoder, CTC, ...: the library decodes each token alone
            self._piece = lambda t: self._tok.decode([t], skip_special_tokens=False).encode()
        self._cache = {}

    def _set_bos_eos(self, config_path, added) -> None:
        ids = {a["content"]: int(a["id"]) for a in added}
        if config_path:
            try:
                with open(config_path, encoding="utf-8") as f:
                    cfg = json.load(f)
            except (OSError, ValueError) as e:
                raise TokenizerError(f"{config_path}: not a readable tokenizer_config.json: "
                                     f"{e}") from e
            for attr, key in (("bos_id", "bos_token"), ("eos_id", "eos_token")):
                tok = cfg.get(key)
                if isinstance(tok, dict):
                    tok = tok.get("content")
                if tok:
                    tid = self._tok.token_to_id(tok)
                    if tid is None:
                        raise TokenizerError(f"{config_path}: {key} {tok!r} is not in the "
                                             "vocabulary")
                    setattr(self, attr, tid)
            self._chat_template = cfg.get("chat_template")
            return
        # no config: ExecuTorch's guess from the added tokens' names
        def pick(words):
            c = [t for t in ids if any(w in t for w in words)]
            if len(c) > 1:
                c = [t for t in c if "text" in t]
            return ids[c[0]] if len(c) == 1 else None
        self.bos_id, self.eos_id = pick(("bos", "begin")), pick(("eos", "end"))
        if self.bos_id is None:
            self.bos_id = self.eos_id
        if self.eos_id is None:
            self.eos_id = self.bos_id

    def encode(self, text: str, bos: int = 0, eos: int = 0) -> list[int]:
        return self._tok.encode(text, add_special_tokens=bos > 0).ids

    def decode(self, ids, skip_special: bool = False) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special)

    def token_bytes(self, token: int) -> bytes:
        b = self._cache.get(token)
        if b is None:
            self._check_id(token)
            if token in self._added:
                b = self._added[token].encode()
            else:
                b = self._piece(token)
            self._cache[token] = b
        return b

    def token_id(self, piece: str) -> int | None:
        return self._tok.token_to_id(piece)

    def _byte_level_piece(self, token: int) -> bytes:
        table = _byte_level_decoder()
        piece = self._tok.id_to_token(token) or ""
        try:
            return bytes(table[c] for c in piece)
        except KeyError:  # not a byte-level character: the text itself
            return piece.encode()

    def _metaspace_piece(self, token: int) -> bytes:
        piece = self._tok.id_to_token(token) or ""
        if self._fallback:
            m = _BYTE_PIECE.fullmatch(piece)
            if m:
                return bytes([int(m.group(1), 16)])
        return piece.replace(self._space, " ").encode()

    @property
    def chat_template(self):
        """The Jinja chat template of tokenizer_config.json, if one was read."""
        return getattr(self, "_chat_template", None)


# ----------------------------------------------------------------------------- tiktoken
_TIKTOKEN_LINE = re.compile(rb"^[A-Za-z0-9+/=]+ \d+\s*$")


class TiktokenTokenizer(Tokenizer):
    """A tiktoken file (Llama 3's ``tokenizer.model``: ``base64-token rank`` per line),
    with ExecuTorch's default special tokens (Llama 3's 256, BOS ``<|begin_of_text|>``,
    EOS ``<|end_of_text|>``) unless ``special_tokens`` is given."""

    kind = "tiktoken"

    def __init__(self, path, special_tokens=None, pattern=LLAMA3_PATTERN, bos_index=0,
                 eos_index=1):
        super().__init__(path)
        import base64

        ranks = {}
        try:
            with open(path, "rb") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    tok, rank = line.split()
                    ranks[base64.b64decode(tok)] = int(rank)
        except (OSError, ValueError) as e:
            raise TokenizerError(f"{path}: not a tiktoken file (line {n}: {e})") from e
        tt = _need("tiktoken", path, "tiktoken")
        specials = list(LLAMA3_SPECIAL_TOKENS if special_tokens is None else special_tokens)
        base = len(ranks)
        self._special = {s: base + i for i, s in enumerate(specials)}
        try:
            self._enc = tt.Encoding(os.path.basename(path), pat_str=pattern,
                                    mergeable_ranks=ranks, special_tokens=self._special)
        except Exception as e:  # noqa: BLE001 - the library's own checks
            raise TokenizerError(f"{path}: tiktoken rejects it: {e}") from e
        self.vocab_size = base + len(specials)
        self.special_ids = frozenset(self._special.values())
        self.bos_id = base + bos_index if specials else None
        self.eos_id = base + eos_index if specials else None
        self._text = {v: k.encode() for k, v in self._special.items()}

    def encode(self, text: str, bos: int = 0, eos: int = 0) -> list[int]:
        try:
            ids = self._enc.encode(text, allowed_special="all")
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - tiktoken panics (a BaseException) on a
            # byte its file lacks
            raise TokenizerError(f"{self.path}: cannot encode {text[:40]!r}: {e!r} (a file "
                                 "without every single byte as a token?)") from None
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def token_id(self, piece: str) -> int | None:
        if piece in self._special:
            return self._special[piece]
        try:
            return self._enc.encode_single_token(piece.encode())
        except KeyError:
            return None

    def token_bytes(self, token: int) -> bytes:
        b = self._text.get(token)
        if b is None:
            self._check_id(token)
            b = self._enc.decode_single_token_bytes(token)
        return b


# ----------------------------------------------------------------------------- sentencepiece
class SentencePieceTokenizer(Tokenizer):
    """A sentencepiece model (Llama 2's ``tokenizer.model``)."""

    kind = "sentencepiece"

    def __init__(self, path):
        super().__init__(path)
        spm = _need("sentencepiece", path, "sentencepiece")
        try:
            self._sp = spm.SentencePieceProcessor(model_file=str(path))
        except Exception as e:  # noqa: BLE001 - the library's own parse errors
            raise TokenizerError(f"{path}: not a sentencepiece model: {e}") from e
        sp = self._sp
        self.vocab_size = sp.get_piece_size()
        self.bos_id = sp.bos_id() if sp.bos_id() >= 0 else None
        self.eos_id = sp.eos_id() if sp.eos_id() >= 0 else None
        self.special_ids = frozenset(i for i in range(self.vocab_size)
                                     if sp.is_control(i) or sp.is_unknown(i))
        self._cache = {}

    def encode(self, text: str, bos: int = 0, eos: int = 0) -> list[int]:
        ids = self._sp.encode(text)
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def decode(self, ids, skip_special: bool = False) -> str:
        return self._sp.decode([int(i) for i in ids])  # the leading space of "▁" dropped

    def token_id(self, piece: str) -> int | None:
        i = self._sp.piece_to_id(piece)
        return None if i == self._sp.unk_id() and piece != self._sp.id_to_piece(i) else i

    def token_bytes(self, token: int) -> bytes:
        b = self._cache.get(token)
        if b is None:
            self._check_id(token)
            piece = self._sp.id_to_piece(token)
            if self._sp.is_byte(token):
                b = bytes([int(piece[3:5], 16)])
            else:
                b = piece.replace("▁", " ").encode()
            self._cache[token] = b
        return b


# ----------------------------------------------------------------------------- loading
def load_tokenizer(path, config_path=None) -> Tokenizer:
    """Read a tokenizer file, its format told from its content, in the order ExecuTorch's
    runner tries them: HF ``tokenizer.json`` (or its folder), tiktoken, sentencepiece."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return HFTokenizer(path, config_path)
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise TokenizerError(f"cannot read tokenizer {path!r}: {e}") from e
    if head.lstrip().startswith(b"{"):
        if os.path.basename(path) == "tekken.json":
            raise TokenizerError(f"{path}: Mistral's Tekken format is not supported")
        return HFTokenizer(path, config_path)
    first = head.split(b"\n", 1)[0]
    if _TIKTOKEN_LINE.match(first):
        return TiktokenTokenizer(path)
    try:
        return SentencePieceTokenizer(path)
    except TokenizerError as e:
        raise TokenizerError(f"{path}: not a HF tokenizer.json, a tiktoken file or a "
                             f"sentencepiece model ({e})") from e
