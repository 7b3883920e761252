"""Transcriber: speech in, text out, over a Whisper-style ExecuTorch program.

    from pyruntime.llm import Transcriber
    asr = Transcriber("whisper.pte", "whisper-tiny/",                # tokenizer.json + configs
                      preprocessor="whisper_preprocess.pte")          # loads once (fast tier)
    print(asr.transcribe("speech.wav"))                               # 16 kHz mono
    for piece in asr.stream(np.load("features.npy")):                 # log-mel features
        print(piece, end="", flush=True)
    print(asr.stats, asr.tokens)

The program is the encoder-decoder layout optimum-executorch and ExecuTorch's ASR runner
use: ``encoder(features) -> encoder states`` and ``text_decoder(decoder tokens int64
[1, 1], encoder states, cache position int64 [1]) -> logits`` with the self- and
cross-attention caches in its mutable buffers. The preprocessor is a separate program
(ExecuTorch's ``extension/audio/mel_spectrogram.py`` exports one) taking float32 16 kHz
mono samples and returning the encoder's features.

Decoding is greedy, as transformers' ``WhisperForConditionalGeneration.generate``
with ``do_sample=False`` does it from the generation config beside the tokenizer
(``generation_config.json``, else ``config.json``): the decoder-start token (the
program's ``decoder_start_token_id`` constant method, else the config's), then the
forced tokens (``forced_decoder_ids`` from position 1; a language left open is detected:
the most likely of ``lang_to_id``'s tokens after the start token), the task token when a
``language``/``task`` is set, and ``<|notimestamps|>`` (``no_timestamps_token_id``);
``suppress_tokens`` never come out and ``begin_suppress_tokens`` not first. It stops at
the end-of-text id (``get_eos_id``, else the config's ``eos_token_id``) or after
``max_new_tokens`` (default: until the decoder's cache is full). The text is the
generated tokens without the special ones.
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pyruntime.llm.errors import ContextFullWarning, LLMError, MediaError, NotAnLLMError
from pyruntime.llm.media import SAMPLE_RATE, fit_to_input, read_wav
from pyruntime.llm.tokenizer import Tokenizer, load_tokenizer
from pyruntime.program import TensorInfo

ENCODER, DECODER = "encoder", "text_decoder"  # ExecuTorch's ASR runner's method names


@dataclass
class TranscriptionStats:
    """Timings of one transcribe/stream call (seconds, ``time.perf_counter``)."""

    load_s: float = 0.0  # program(s) + methods + tokenizer (the transcriber's, once)
    audio_s: float = 0.0  # seconds of audio (samples / 16 kHz), 0 for features
    preprocess_s: float = 0.0  # the preprocessor program (wav input)
    encode_s: float = 0.0  # the encoder
    ttft_s: float = 0.0  # call to first generated token
    decode_s: float = 0.0  # first generated token to the last
    prompt_tokens: int = 0  # start + forced tokens fed before the first generated one
    generated_tokens: int = 0
    stop_reason: str = ""  # "eos", "max_new_tokens" or "cache"

    @property
    def decode_tok_s(self) -> float:
        n = self.generated_tokens - 1
        return n / self.decode_s if n > 0 and self.decode_s > 0 else 0.0

    def __str__(self):
        return (f"load: {self.load_s * 1e3:.1f} ms | audio: {self.audio_s:.2f} s | "
                f"preprocess: {self.preprocess_s * 1e3:.2f} ms | encode: "
                f"{self.encode_s * 1e3:.2f} ms | time to first token: {self.ttft_s * 1e3:.2f} "
                f"ms | generated tokens: {self.generated_tokens} | decode tok/s: "
                f"{self.decode_tok_s:.1f} | stop: {self.stop_reason}")


@dataclass(frozen=True)
class DecodingConfig:
    """What greedy decoding needs from a Whisper generation config."""

    start: int
    eos_ids: frozenset
    forced: tuple  # tokens after the start, None where the language is to be detected
    language_ids: tuple  # lang_to_id's tokens (for detection)
    suppress: tuple
    begin_suppress: tuple

    @classmethod
    def from_configs(cls, gen: dict, start=None, eos=None, where="") -> "DecodingConfig":
        """From a ``generation_config.json`` dict (with ``config.json``'s keys as its
        fallback), the program's start/EOS ids overriding the config's."""
        start = gen.get("decoder_start_token_id") if start is None else start
        if start is None:
            raise NotAnLLMError(f"{where}: no decoder-start token: the program has no "
                                "'decoder_start_token_id' method and the generation config "
                                "(generation_config.json / config.json) no "
                                "decoder_start_token_id")
        if eos is None:
            eos = gen.get("eos_token_id")
        if eos is None:
            raise NotAnLLMError(f"{where}: no end-of-text id: the program has no 'get_eos_id' "
                                "method and the generation config no eos_token_id")
        eos = frozenset(eos if isinstance(eos, list) else [eos])
        langs = dict(gen.get("lang_to_id") or {})
        tasks = dict(gen.get("task_to_id") or {})
        language, task = gen.get("language"), gen.get("task")
        forced = []
        if language is None and task is None:  # transformers ignores them otherwise
            for i, (index, token) in enumerate(sorted(gen.get("forced_decoder_ids") or [])):
                if index != i + 1:
                    raise NotAnLLMError(f"{where}: forced_decoder_ids {gen['forced_decoder_ids']}"
                                        " must name every position from 1 on")
                forced.append(token)
        if language is not None:
            tag = language if language in langs else f"<|{language}|>"
            if tag not in langs:
                raise NotAnLLMError(f"{where}: language {language!r} is not in lang_to_id "
                                    f"({', '.join(langs)})")
            forced[:1] = [langs[tag]]
        elif langs and (not forced or forced[0] is None):
            forced[:1] = [None]  # detected
        if task is not None:
            if task not in tasks:
                raise NotAnLLMError(f"{where}: task {task!r} is not in task_to_id")
            forced = [t for t in forced if t not in tasks.values()] + [tasks[task]]
        elif language is not None and tasks and not any(t in tasks.values() for t in forced):
            forced.append(tasks["transcribe"])
        nts = gen.get("no_timestamps_token_id")
        if nts is not None and not gen.get("return_timestamps") and \
                (not forced or forced[-1] != nts):
            forced.append(nts)
        # None stays only where a language is to be detected (transformers drops the rest)
        forced = [t for i, t in enumerate(forced) if t is not None or (i == 0 and langs)]
        return cls(int(start), eos, tuple(forced), tuple(langs.values()),
                   tuple(gen.get("suppress_tokens") or ()),
                   tuple(gen.get("begin_suppress_tokens") or ()))


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError) as e:
        raise LLMError(f"{path}: not a readable JSON file ({e})") from e


def read_generation_config(tokenizer_path) -> dict:
    """``generation_config.json`` beside the tokenizer (or in its folder), over
    ``config.json``'s keys: the configs transformers' ``save_pretrained`` writes."""
    p = Path(tokenizer_path)
    folder = p if p.is_dir() else p.parent
    return {**_read_json(folder / "config.json"), **_read_json(folder / "generation_config.json")}


def _constant(program, name):
    if name not in program.method_names:
        return None
    meta = program.metadata(name)
    if meta.num_inputs() or meta.instruction_count:
        return None
    from pyruntime.llm.contract import _constant as run_constant

    v = run_constant(program, name, "")
    return v[0] if len(v) == 1 else v


class Transcriber:
    """A loaded speech program, its tokenizer and generation config (and optionally a
    preprocessor program); see the module docstring.

    ``model``: the .pte; ``tokenizer``: a ``tokenizer.json`` or the folder holding it beside
    ``config.json``/``generation_config.json``; ``preprocessor``: the samples -> features
    .pte (needed for wav and sample inputs); ``generation_config``: a dict to use instead of
    the files'.
    """

    def __init__(self, model, tokenizer, *, preprocessor=None, generation_config=None,
                 tier: str = "fast", threads: int | None = None, data_path=None):
        from pyruntime.runtime import Runtime

        t0 = time.perf_counter()
        self.path = str(model)
        rt = Runtime.get()
        self.program = rt.load_program(model, data_path=data_path)
        names = self.program.method_names
        for need in (ENCODER, DECODER):
            if need not in names:
                raise NotAnLLMError(
                    f"{self.path} is not a speech (encoder-decoder) program: it has no {need!r} "
                    f"method (methods: {', '.join(names)}); a Whisper-style program has "
                    f"{ENCODER!r} and {DECODER!r}")
        self._check_decoder()
        self.tokenizer = tokenizer if isinstance(tokenizer, Tokenizer) else \
            load_tokenizer(tokenizer)
        gen = dict(generation_config) if generation_config is not None else \
            read_generation_config(self.tokenizer.path)
        self.config = DecodingConfig.from_configs(
            gen, _constant(self.program, "decoder_start_token_id"),
            _constant(self.program, "get_eos_id"), self.path)
        vocab = int(self.program.metadata(DECODER).outputs[0].sizes[-1])
        for what, ids in (("decoder start", [self.config.start]), ("EOS", self.config.eos_ids),
                          ("forced", [t for t in self.config.forced if t is not None])):
            bad = [i for i in ids if not 0 <= i < min(vocab, self.tokenizer.vocab_size)]
            if bad:
                raise LLMError(f"{self.path}: the {what} token(s) {bad} are outside the "
                               f"program's {vocab} logits or tokenizer {self.tokenizer.path}'s "
                               f"{self.tokenizer.vocab_size} tokens: they do not belong together")
        if self.tokenizer.vocab_size > vocab or vocab - self.tokenizer.vocab_size > 128:
            from pyruntime.llm.errors import TokenizerMismatchError
            raise TokenizerMismatchError(
                f"tokenizer {self.tokenizer.path} has {self.tokenizer.vocab_size} tokens but "
                f"program {self.path} returns {vocab} logits: they do not belong together")
        self.max_positions = int(_constant(self.program, "get_max_seq_len") or
                                 gen.get("max_target_positions") or 448)
        load = lambda p, n: p.load_method(n, tier=tier, threads=threads)  # noqa: E731
        self.encoder = load(self.program, ENCODER)
        self.decoder = load(self.program, DECODER)
        self.preprocessor = None
        if preprocessor is not None:
            pre = rt.load_program(preprocessor)
            name = "forward" if "forward" in pre.method_names else pre.method_names[0]
            self.preprocessor = load(pre, name)
            self.preprocessor_path = str(preprocessor)
        info = self.program.metadata(DECODER).inputs
        self._tok = np.zeros((1, 1), info[0].dtype)
        self._pos = np.zeros((1,), info[2].dtype)
        self.load_s = time.perf_counter() - t0
        self.stats = TranscriptionStats(load_s=self.load_s)
        self.tokens: list[int] = []  # the last call's generated ids (EOS included)

    def _check_decoder(self):
        dec = self.program.metadata(DECODER)
        ins = dec.inputs
        ok = len(ins) == 3 and len(dec.outputs) == 1 and all(
            isinstance(t, TensorInfo) for t in (*ins, dec.outputs[0]))
        if ok:
            tok, _, pos = ins
            ok = (tok.dtype.kind in "iu" and tuple(tok.sizes) == (1, 1) and pos.dtype.kind in "iu"
                  and tuple(pos.sizes) == (1,) and dec.outputs[0].dtype.kind == "f")
        if not ok:
            raise NotAnLLMError(
                f"{self.path}: {DECODER}({', '.join(map(str, ins))}) -> "
                f"{', '.join(map(str, dec.outputs))}, but a speech decoder's is (tokens int64"
                "[1, 1], encoder states, cache position int64[1]) -> logits")

    # ---- inputs ---------------------------------------------------------------------
    def features(self, audio) -> np.ndarray:
        """The encoder's input for ``audio``: a path (``.wav``: 16 kHz mono, through the
        preprocessor; ``.npy``: features, or 1-D samples), a 1-D float array of 16 kHz
        samples (through the preprocessor) or an array of features."""
        st = self.stats
        if isinstance(audio, (str, Path)):
            p = Path(audio)
            if p.suffix.lower() == ".wav":
                audio = read_wav(p)
            elif p.suffix.lower() == ".npy":
                try:
                    audio = np.load(p, allow_pickle=False)
                except (OSError, ValueError) as e:
                    raise MediaError(f"{p}: not a readable .npy file ({e})") from e
            else:
                raise MediaError(f"{p}: audio is a .wav (16 kHz mono) or a .npy of features")
        a = np.asarray(audio)
        if a.ndim == 1:
            if self.preprocessor is None:
                raise MediaError(f"audio samples need a preprocessor program (--preprocessor "
                                 f"PRE.pte) to become {self.path}'s encoder features")
            st.audio_s = a.shape[0] / SAMPLE_RATE
            t = time.perf_counter()
            info = self.preprocessor.method_meta.input_tensor_meta(0)
            x = fit_to_input(a.astype(np.float32, copy=False), info,
                             f"the audio ({st.audio_s:.2f} s) for {self.preprocessor_path}")
            a = np.array(self.preprocessor.execute([x])[0])
            st.preprocess_s = time.perf_counter() - t
        info = self.encoder.method_meta.input_tensor_meta(0)
        return fit_to_input(a, info, f"the features for {ENCODER} of {self.path}")

    # ---- public ---------------------------------------------------------------------
    def transcribe(self, audio, max_new_tokens: int | None = None) -> str:
        """The transcript of ``audio`` (see ``features`` for what it may be)."""
        return "".join(self.stream(audio, max_new_tokens))

    def stream(self, audio, max_new_tokens: int | None = None):
        """Like ``transcribe``, piece by piece (whole UTF-8 characters). The audio is
        checked and encoded here; decoding runs as the stream is iterated."""
        t0 = time.perf_counter()
        if max_new_tokens is not None and max_new_tokens < 1:
            raise LLMError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        self.stats = TranscriptionStats(load_s=self.load_s)
        x = self.features(audio)
        t = time.perf_counter()
        states = np.array(self.encoder.execute([x])[0])  # a copy: planned memory is reused
        self.stats.encode_s = time.perf_counter() - t
        room = self.max_positions - 1 - len(self.config.forced)
        if room < 1:
            raise LLMError(f"{self.path}: the decoder's cache holds {self.max_positions} "
                           f"positions, none left after {1 + len(self.config.forced)} forced")
        budget = room if max_new_tokens is None else min(room, max_new_tokens)
        if max_new_tokens is not None and budget < max_new_tokens:
            warnings.warn(ContextFullWarning(
                f"{self.path}: {max_new_tokens} new tokens asked for, but the decoder's cache "
                f"holds {self.max_positions} positions: generating {budget}"), stacklevel=2)
        return self._run(states, budget, t0)

    # ---- the loop -------------------------------------------------------------------
    def _step(self, token: int, pos: int, states) -> np.ndarray:
        self._tok[0, 0] = token
        self._pos[0] = pos
        out = self.decoder.execute([self._tok, states, self._pos])[0]
        return np.array(out.reshape(-1), dtype=np.float32)

    def _run(self, states, budget, t0):
        cfg, st = self.config, self.stats
        perf = time.perf_counter
        row = self._step(cfg.start, 0, states)
        pos = 1
        for token in cfg.forced:
            if token is None:  # language detection: the likeliest language token
                ids = np.asarray(cfg.language_ids)
                token = int(ids[np.argmax(row[ids])])
            row = self._step(token, pos, states)
            pos += 1
        st.prompt_tokens = pos
        suppress = np.asarray(cfg.suppress, dtype=np.int64)
        begin = np.asarray(cfg.begin_suppress, dtype=np.int64)
        text = self.tokenizer.stream()
        self.tokens = out = []
        stop = ""
        t1 = None
        while True:
            if suppress.size:
                row[suppress] = -np.inf
            if not out and begin.size:
                row[begin] = -np.inf
            tok = int(np.argmax(row))
            out.append(tok)
            if t1 is None:
                t1 = perf()
                st.ttft_s = t1 - t0
            st.generated_tokens = len(out)
            piece = text.push(tok)
            if piece:
                yield piece
            if tok in cfg.eos_ids:
                stop = "eos"
                break
            if len(out) >= budget:
                stop = "max_new_tokens" if pos + 1 < self.max_positions else "cache"
                break
            row = self._step(tok, pos, states)
            pos += 1
        st.decode_s = perf() - t1
        st.stop_reason = stop
        rest = text.flush()
        if rest:
            yield rest
