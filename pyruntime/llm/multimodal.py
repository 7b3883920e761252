"""MultimodalGenerator: text, images and audio in, text out, over a Llava- or Voxtral-style
ExecuTorch program.

    from pyruntime.llm import Audio, Image, MultimodalGenerator
    gen = MultimodalGenerator("llava.pte", "tokenizer.json")       # loads once (fast tier)
    image = Image(np.load("image.npy"))                             # uint8 [3, H, W]
    print(gen.generate(["A photo of", image, "What is in it?"], max_new_tokens=32,
                       temperature=0))
    for piece in gen.stream([Audio(features), "Transcribe"], 32):  # pieces as they come
        print(piece, end="", flush=True)

The program layout is ExecuTorch's (``extension/llm/runner/constants.h``): methods
``token_embedding`` (int64 ``[1, T]`` -> float ``[1, T, D]``), ``text_decoder``
(embeddings ``[1, T, D]`` + int64 start position ``[1]`` (or every position ``[T]``)
-> logits, the KV cache in its mutable buffers), ``vision_encoder`` (an image ->
``[1, N, D]``) and/or ``audio_encoder`` (features -> ``[1, N, D]``), plus the constant
methods of the text programs (``get_max_seq_len`` required).

The loop is ExecuTorch's ``MultimodalRunner``'s: each part in order goes through its
encoder (text: the tokenizer, then ``token_embedding``) and its embeddings through
``text_decoder`` at the next positions; the first token is sampled from the last part's
logits, then each token goes through ``token_embedding`` and ``text_decoder`` at the next
position until an EOS id or ``max_new_tokens``. Where this runner differs, on purpose:
a part longer than ``text_decoder`` takes at once is fed in chunks (ExecuTorch's fails);
a first token that is an EOS id stops generation (ExecuTorch's goes on); the first token
is sampled with the call's temperature (ExecuTorch's takes the argmax); BOS tokens asked
for (``num_bos``) before a media part that comes first are fed as tokens (as
ExecuTorch's ``prefill``; its ``generate`` drops them). The context carries over
between calls until ``reset()``, as for ``TextGenerator``.
"""
from __future__ import annotations

import time

import numpy as np

from pyruntime.llm.contract import LLMMetadata, check_tokenizer, read_constants
from pyruntime.llm.errors import LLMError, MediaError, NotAnLLMError
from pyruntime.llm.media import Audio, Image, fit_to_input
from pyruntime.llm.runner import GenerationStats, TextGenerator, open_program
from pyruntime.llm.tokenizer import Tokenizer, load_tokenizer
from pyruntime.program import TensorInfo

# ExecuTorch's method names (extension/llm/runner/constants.h)
VISION_ENCODER, AUDIO_ENCODER = "vision_encoder", "audio_encoder"
TOKEN_EMBEDDING, TEXT_DECODER = "token_embedding", "text_decoder"
_EXPECTED = (f"a multimodal program from ExecuTorch has {TOKEN_EMBEDDING!r}, {TEXT_DECODER!r}, "
             f"{VISION_ENCODER!r} and/or {AUDIO_ENCODER!r}, and the constant method "
             "get_max_seq_len")


def is_multimodal(program) -> bool:
    """Whether ``program`` has ExecuTorch's multimodal methods (token_embedding and
    text_decoder)."""
    names = set(program.method_names)
    return TOKEN_EMBEDDING in names and TEXT_DECODER in names


def read_multimodal_metadata(program, where: str) -> LLMMetadata:
    """The LLM facts of a multimodal program (the text decoder's signature stands for
    forward's); a ``NotAnLLMError`` saying what is missing or malformed."""
    names = program.method_names
    for need in (TOKEN_EMBEDDING, TEXT_DECODER, "get_max_seq_len"):
        if need not in names:
            raise NotAnLLMError(f"{where} is not a multimodal ExecuTorch program: it has no "
                                f"{need!r} method (methods: {', '.join(names)}); {_EXPECTED}")
    if VISION_ENCODER not in names and AUDIO_ENCODER not in names:
        raise NotAnLLMError(f"{where} has neither {VISION_ENCODER!r} nor {AUDIO_ENCODER!r} "
                            f"(methods: {', '.join(names)}); {_EXPECTED}")
    consts, vals, eos = read_constants(program, where)
    emb, dec = program.metadata(TOKEN_EMBEDDING), program.metadata(TEXT_DECODER)
    sig = f"{TEXT_DECODER}({', '.join(map(str, dec.inputs))}) -> " \
          f"{', '.join(map(str, dec.outputs))}"
    bad = f"{where}: {sig}, but a text decoder's is (embeddings float[1, T, D], start " \
          "position int64[1]) -> logits float[1, vocab]"
    if len(dec.inputs) != 2 or len(dec.outputs) != 1:
        raise NotAnLLMError(bad)
    x, p, out = dec.inputs[0], dec.inputs[1], dec.outputs[0]
    if not all(isinstance(t, TensorInfo) for t in (x, p, out)):
        raise NotAnLLMError(bad)
    if len(x.sizes) != 3 or x.sizes[0] != 1 or x.dtype.kind != "f" or len(p.sizes) != 1 \
            or p.dtype.kind not in "iu" or len(out.sizes) not in (2, 3) or out.dtype.kind != "f":
        raise NotAnLLMError(bad)
    tok = emb.inputs[0] if len(emb.inputs) == 1 else None
    if not isinstance(tok, TensorInfo) or len(tok.sizes) != 2 or tok.dtype.kind not in "iu":
        raise NotAnLLMError(f"{where}: {TOKEN_EMBEDDING} takes "
                            f"{', '.join(map(str, emb.inputs))}, expected tokens int64[1, T]")
    for info, name in ((tok, TOKEN_EMBEDDING), (x, TEXT_DECODER)):
        if not info.dynamic and info.sizes[1] != 1:
            raise NotAnLLMError(f"{where}: {name}'s input is static {list(info.sizes)}: a "
                                "prompt could only be fed in chunks of exactly that length "
                                "(ExecuTorch's runner needs a dynamic length)")
    if not vals["use_kv_cache"]:
        raise NotAnLLMError(f"{where}: use_kv_cache is false; a multimodal program keeps its "
                            "context in text_decoder's KV cache")
    max_seq = int(vals["get_max_seq_len"])
    vocab = int(out.sizes[-1])
    if "get_vocab_size" in vals and int(vals["get_vocab_size"]) != vocab:
        raise NotAnLLMError(f"{where}: get_vocab_size says {vals['get_vocab_size']} but "
                            f"{TEXT_DECODER} returns {vocab} logits per position ({sig})")
    return LLMMetadata(
        max_seq_len=max_seq, max_context_len=int(vals.get("get_max_context_len", max_seq)),
        vocab_size=vocab, use_kv_cache=True,
        enable_dynamic_shape=bool(vals["enable_dynamic_shape"]),
        use_sdpa_with_kv_cache=bool(vals["use_sdpa_with_kv_cache"]),
        bos_id=vals.get("get_bos_id"), eos_ids=tuple(int(e) for e in eos),
        n_layers=vals.get("get_n_layers"),
        max_tokens_input=min(int(x.sizes[1]), int(tok.sizes[1])),
        tokens_dtype=tok.dtype, positions=1 if p.sizes[0] == 1 else -1,
        positions_dtype=p.dtype, logits_dtype=out.dtype,
        extra={k: v for k, v in consts.items()})


class EmbeddingStep:
    """token_embedding + text_decoder with preallocated token and position arrays; the
    same calls as ``contract.ForwardStep`` (``step(ids, start)``, ``step.decode(tok, pos)``)
    plus ``step.embeddings(x, start)`` for an encoder's output."""

    def __init__(self, embed, decoder, meta: LLMMetadata, dim: int):
        self.embed, self.decoder, self.meta, self.dim = embed, decoder, meta, dim
        n = max(meta.max_tokens_input, 1)
        self.tokens = np.zeros((1, n), meta.tokens_dtype)
        self.pos = np.zeros(1 if meta.positions == 1 else n, meta.positions_dtype)
        self._f32 = meta.logits_dtype == np.float32
        # a decode step's embedding, written in place: the decoder then sees the same input
        # array every step (a new one each step moves its pointer, and an XNNPACK delegate
        # reading it in place sets its runtime up again: about 40 us a token)
        self._one = None

    def _logits(self, x, start: int) -> np.ndarray:
        count = x.shape[1]
        if self.meta.positions == 1:
            self.pos[0] = start
            pos = self.pos[:1]
        else:
            self.pos[:count] = np.arange(start, start + count)
            pos = self.pos[:count]
        out = self.decoder.execute([x, pos])[0]
        row = out[0, -1] if out.ndim == 3 else out[0]
        return row if self._f32 else row.astype(np.float32)

    def __call__(self, ids, start: int) -> np.ndarray:
        count = len(ids)
        self.tokens[0, :count] = ids
        return self._logits(self.embed.execute([self.tokens[:, :count]])[0], start)

    def embeddings(self, x: np.ndarray, start: int) -> np.ndarray:
        return self._logits(x, start)

    def decode(self, token: int, pos: int) -> np.ndarray:
        self.tokens[0, 0] = token
        if self._one is None:
            self._one = self.embed.execute([self.tokens[:, :1]])[0]
        else:
            self.embed.execute([self.tokens[:, :1]], out=[self._one])
        return self._logits(self._one, pos)


class MultimodalGenerator(TextGenerator):
    """A loaded multimodal program and its tokenizer; see the module docstring.

    ``model``: a .pte path (or a loaded ``pyruntime.Program``); ``tokenizer``: as for
    ``TextGenerator``. Every method is loaded once at ``tier`` with ``threads``.
    ``generate``/``stream`` take a list of parts: ``str``, ``Image`` and ``Audio``.
    """

    def __init__(self, model, tokenizer, *, tier: str = "fast", threads: int | None = None,
                 data_path=None, prefill_chunk: int | None = None, tokenizer_config=None):
        t0 = time.perf_counter()
        self.program, self.path = open_program(model, data_path)
        self.metadata = meta = read_multimodal_metadata(self.program, self.path)
        self.tokenizer = tokenizer if isinstance(tokenizer, Tokenizer) else \
            load_tokenizer(tokenizer, tokenizer_config)
        check_tokenizer(meta, self.tokenizer, self.path)
        load = lambda name: self.program.load_method(name, tier=tier, threads=threads)  # noqa
        self.encoders = {kind: load(name) for kind, name in
                         ((Image, VISION_ENCODER), (Audio, AUDIO_ENCODER))
                         if name in self.program.method_names}
        self.method = load(TEXT_DECODER)
        dim = int(self.program.metadata(TEXT_DECODER).inputs[0].sizes[2])
        self._step = EmbeddingStep(load(TOKEN_EMBEDDING), self.method, meta, dim)
        self.chunk = meta.prefill_chunk
        if prefill_chunk is not None:
            self.chunk = max(1, min(self.chunk, int(prefill_chunk)))
        eos = meta.eos_ids or (() if self.tokenizer.eos_id is None else (self.tokenizer.eos_id,))
        self.eos_ids = frozenset(eos)
        self.load_s = time.perf_counter() - t0
        self.pos = 0
        self.stats = GenerationStats(load_s=self.load_s)
        self.tokens: list[int] = []
        self._stop = False
        self._active = None

    @property
    def accepts(self) -> tuple:
        """The media part types this program takes (``Image``, ``Audio``)."""
        return tuple(self.encoders)

    def encoder_input(self, kind):
        """The ``TensorInfo`` of the encoder input for ``Image`` or ``Audio``."""
        if kind not in self.encoders:
            raise MediaError(self._no_encoder(kind))
        return self.encoders[kind].method_meta.input_tensor_meta(0)

    def _no_encoder(self, kind) -> str:
        name = VISION_ENCODER if kind is Image else AUDIO_ENCODER
        return (f"program {self.path} has no {name!r} method: it takes no "
                f"{'images' if kind is Image else 'audio'} (methods: "
                f"{', '.join(self.program.method_names)})")

    # ---- public ---------------------------------------------------------------------
    def generate(self, parts, max_new_tokens: int | None = None, **kw) -> str:
        """The continuation of ``parts`` (a list of ``str``, ``Image`` and ``Audio``; a
        plain ``str`` is one text part), as text. Keywords as ``TextGenerator.generate``."""
        return "".join(self.stream(parts, max_new_tokens, **kw))

    def stream(self, parts, max_new_tokens: int | None = None, *, temperature: float = 0.8,
               top_p: float = 0.9, seed: int | None = None, echo: bool = False,
               num_bos: int = 0, num_eos: int = 0, ignore_eos: bool = False,
               logits_processor=None):
        """Like ``generate``, piece by piece. The parts are encoded and checked here (a
        media part of the wrong shape or dtype, or of a kind the program has no encoder
        for, raises now); the text decoder runs as the stream is iterated. ``echo``
        yields the last part first if it is text (as ExecuTorch's runner)."""
        t0 = time.perf_counter()
        if isinstance(parts, (str, Image, Audio)):
            parts = [parts]
        parts = list(parts)
        if not parts:
            raise LLMError("a multimodal prompt needs at least one part")
        if max_new_tokens is not None and max_new_tokens < 1:
            raise LLMError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        segments = self._segments(parts, num_bos, num_eos)
        t1 = time.perf_counter()
        n = sum(len(s) if isinstance(s, list) else s.shape[1] for s in segments)
        budget, sampler = self._begin(n, max_new_tokens, temperature, top_p, seed,
                                      logits_processor, t1 - t0)
        echo_text = parts[-1] if echo and isinstance(parts[-1], str) else None
        return self._run(segments, budget, sampler, echo_text, ignore_eos, t0)

    # ---- parts to embeddings ----------------------------------------------------------
    def _segments(self, parts, num_bos, num_eos) -> list:
        """Each part as token ids (a list) or an encoder's embeddings ``[1, N, D]``; the
        encoders run here."""
        out = []
        for i, part in enumerate(parts):
            first = i == 0 and self.pos == 0
            if isinstance(part, str):
                ids = self.tokenizer.encode(part, bos=num_bos if first else 0,
                                            eos=num_eos if first else 0)
                if ids:
                    out.append(ids)
            elif isinstance(part, (Image, Audio)):
                if first and num_bos > 0 and self.metadata.bos_id is not None:
                    out.append([self.metadata.bos_id] * num_bos)
                out.append(self._encode(part, i))
            else:
                raise LLMError(f"prompt part {i} is a {type(part).__name__}; parts are str, "
                               "pyruntime.llm.Image and pyruntime.llm.Audio")
        if not out:
            raise LLMError(f"the prompt's parts encode to no tokens (tokenizer "
                           f"{self.tokenizer.path})")
        return out

    def _encode(self, part, index: int) -> np.ndarray:
        kind = type(part)
        if kind not in self.encoders:
            raise MediaError(f"prompt part {index}: {self._no_encoder(kind)}")
        name = VISION_ENCODER if kind is Image else AUDIO_ENCODER
        what = f"prompt part {index} ({kind.__name__.lower()}) for {name} of {self.path}"
        x = fit_to_input(part.data, self.encoder_input(kind), what)
        y = self.encoders[kind].execute([x])[0]
        d = self._step.dim
        if y.ndim != 3 or y.shape[0] != 1 or y.shape[2] != d or y.shape[1] == 0:
            raise NotAnLLMError(f"{what}: {name} returned {y.dtype}{list(y.shape)}, but "
                                f"{TEXT_DECODER} takes embeddings [1, N, {d}]")
        want = self.program.metadata(TEXT_DECODER).inputs[0].dtype
        return np.array(y, dtype=want)  # a copy: the encoder's output memory is reused

    def _prefill(self, segments):
        step, chunk = self._step, self.chunk
        row = None
        for seg in segments:
            n = len(seg) if isinstance(seg, list) else seg.shape[1]
            for i in range(0, n, chunk):
                part = seg[i:i + chunk] if isinstance(seg, list) else seg[:, i:i + chunk]
                row = step(part, self.pos) if isinstance(seg, list) else \
                    step.embeddings(np.ascontiguousarray(part), self.pos)
                self.pos += min(chunk, n - i)
        return row, step.decode


PLACEHOLDERS = {"<image>": Image, "<audio>": Audio}


def parts_from_prompt(prompt: str, images=(), audios=()) -> list:
    """A prompt with ``<image>`` / ``<audio>`` placeholders as a list of parts: each
    placeholder takes the next of ``images`` / ``audios`` (``Image`` / ``Audio``) in order.
    Without placeholders the media come first (images, then audio), then the text. The
    counts must agree (a ``MediaError`` says which differ).

    >>> parts_from_prompt("A <image> and", [Image(img)])   # ["A ", Image(img), " and"]
    """
    import re

    pieces = re.split(r"(<image>|<audio>)", prompt)
    wanted = {kind: sum(p == tag for p in pieces) for tag, kind in PLACEHOLDERS.items()}
    given = {Image: list(images), Audio: list(audios)}
    if not any(wanted.values()):
        return given[Image] + given[Audio] + ([prompt] if prompt else [])
    for kind, n in wanted.items():
        if n != len(given[kind]):
            tag = next(t for t, k in PLACEHOLDERS.items() if k is kind)
            raise MediaError(f"the prompt has {n} {tag} placeholder(s) but {len(given[kind])} "
                             f"{kind.__name__.lower()} file(s) were given: each {tag} takes "
                             "the next one in order")
    out = []
    for p in pieces:
        if p in PLACEHOLDERS:
            out.append(given[PLACEHOLDERS[p]].pop(0))
        elif p:
            out.append(p)
    return out
