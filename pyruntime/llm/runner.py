"""TextGenerator: text in, text out, over an ExecuTorch LLM program.

    from pyruntime.llm import TextGenerator
    gen = TextGenerator("llama.pte", "tokenizer.json")      # loads once (fast tier)
    print(gen.generate("Once upon a time", max_new_tokens=32, temperature=0))
    for piece in gen.stream("And then", max_new_tokens=32):  # pieces as they come
        print(piece, end="", flush=True)
    print(gen.stats)                                        # tok/s, time to first token, ...
    gen.reset()                                             # forget the context

The loop is ExecuTorch's ``TextLLMRunner``'s: encode the prompt (``num_bos`` /
``num_eos`` as its GenerationConfig), prefill it in chunks of at most
``max_seq_len`` tokens, sample the first token from the last logits, then decode
one token per execute, feeding each sampled token back at the next position,
until an EOS id (``get_eos_ids``, else the tokenizer's EOS) or ``max_new_tokens``
tokens (the first one included). The context carries over between calls, as in
ExecuTorch's runner (a conversation continues where it stopped); ``reset()``
starts over. Generation is clamped to the context: at most
``max_context_len - position`` tokens, with a ``ContextFullWarning`` saying so.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

from pyruntime.llm.contract import ForwardStep, check_tokenizer, read_metadata
from pyruntime.llm.errors import ContextFullWarning, LLMError, PromptTooLongError
from pyruntime.llm.sampling import Sampler
from pyruntime.llm.tokenizer import Tokenizer, load_tokenizer


@dataclass
class GenerationStats:
    """Timings of one generate/stream call (seconds, from ``time.perf_counter``)."""

    load_s: float = 0.0  # program + method + tokenizer load (the generator's, once)
    prompt_tokens: int = 0
    generated_tokens: int = 0  # the first token (from prefill) included
    tokenize_s: float = 0.0
    prefill_s: float = 0.0  # prompt executes + sampling the first token
    ttft_s: float = 0.0  # call to first token: tokenize + prefill
    decode_s: float = 0.0  # first token to last token
    sampling_s: float = 0.0  # all sampling, first token included
    stop_reason: str = ""  # "eos", "max_new_tokens", "context" or "stopped"
    clamped_to: int | None = None  # max_new_tokens after clamping to the context

    @property
    def prefill_tok_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        """Tokens per second of the decode steps (the first token comes from prefill)."""
        n = self.generated_tokens - 1
        return n / self.decode_s if n > 0 and self.decode_s > 0 else 0.0

    def __str__(self):
        return (f"load: {self.load_s * 1e3:.1f} ms | prompt tokens: {self.prompt_tokens} | "
                f"prefill tok/s: {self.prefill_tok_s:.1f} | time to first token: "
                f"{self.ttft_s * 1e3:.2f} ms | generated tokens: {self.generated_tokens} | "
                f"decode tok/s: {self.decode_tok_s:.1f} | stop: {self.stop_reason}")


class _Processed:
    """A sampler behind a logits processor (kept off the loop when there is none)."""

    def __init__(self, sampler, processor):
        self.sampler, self.processor = sampler, processor

    def __call__(self, row):
        self.processor(row)
        return self.sampler(row)


def open_program(model, data_path=None):
    """(program, path for messages) of a .pte path or an already loaded ``Program``."""
    from pyruntime.program import Program
    from pyruntime.runtime import Runtime

    if isinstance(model, Program):
        return model, "<program>"
    return Runtime.get().load_program(model, data_path=data_path), str(model)


class TextGenerator:
    """A loaded LLM program and its tokenizer; see the module docstring.

    ``model``: a .pte path (or a loaded ``pyruntime.Program``); ``tokenizer``: a path
    (``tokenizer.json`` or its folder, a tiktoken or sentencepiece ``.model``) or a
    ``pyruntime.llm.Tokenizer``. ``tier="fast"`` runs the compiled kernels;
    ``threads`` sets intra-op threads; ``prefill_chunk`` caps the tokens per prefill
    execute (default: what the program allows); ``math`` picks ``"exact"`` or
    ``"fast"`` arithmetic (default: the process's, ``pyruntime.mathmode``). Under
    ``"fast"`` an 8da4w program's int4 linears run on pyruntime's own kernels instead of
    XNNPACK (``delegates.xnnpack.qb4w``)::

        gen = TextGenerator("llama-8da4w.pte", "tokenizer.json", math="fast")
    """

    def __init__(self, model, tokenizer, *, tier: str = "fast", threads: int | None = None,
                 data_path=None, method: str = "forward", prefill_chunk: int | None = None,
                 tokenizer_config=None, math: str | None = None):
        t0 = time.perf_counter()
        self.program, self.path = open_program(model, data_path)
        self.metadata = read_metadata(self.program, self.path, method)
        self.tokenizer = tokenizer if isinstance(tokenizer, Tokenizer) else \
            load_tokenizer(tokenizer, tokenizer_config)
        check_tokenizer(self.metadata, self.tokenizer, self.path)
        self.method = self.program.load_method(method, tier=tier, threads=threads, math=math)
        self._step = ForwardStep(self.method, self.metadata)
        self.chunk = self.metadata.prefill_chunk
        if prefill_chunk is not None:
            self.chunk = max(1, min(self.chunk, int(prefill_chunk)))
        eos = self.metadata.eos_ids or (() if self.tokenizer.eos_id is None
                                        else (self.tokenizer.eos_id,))
        self.eos_ids = frozenset(eos)
        self.load_s = time.perf_counter() - t0
        self.pos = 0  # positions of the KV cache in use
        self.stats = GenerationStats(load_s=self.load_s)
        self.tokens: list[int] = []  # ids generated by the last call
        self._stop = False
        self._active = None  # the running stream's token

    # ---- public ---------------------------------------------------------------------
    def generate(self, prompt: str, max_new_tokens: int | None = None, *,
                 temperature: float = 0.8, top_p: float = 0.9, seed: int | None = None,
                 echo: bool = False, num_bos: int = 0, num_eos: int = 0,
                 ignore_eos: bool = False, logits_processor=None) -> str:
        """The continuation of ``prompt`` (with the prompt first if ``echo``), as text.

        Defaults are ExecuTorch's runner's (temperature 0.8, top-p 0.9, no BOS added);
        ``temperature=0`` is greedy. ``max_new_tokens=None`` fills the context.
        """
        return "".join(self.stream(prompt, max_new_tokens, temperature=temperature,
                                   top_p=top_p, seed=seed, echo=echo, num_bos=num_bos,
                                   num_eos=num_eos, ignore_eos=ignore_eos,
                                   logits_processor=logits_processor))

    def stream(self, prompt: str, max_new_tokens: int | None = None, *,
               temperature: float = 0.8, top_p: float = 0.9, seed: int | None = None,
               echo: bool = False, num_bos: int = 0, num_eos: int = 0,
               ignore_eos: bool = False, logits_processor=None):
        """Like ``generate``, piece by piece: an iterator of text pieces (whole UTF-8
        characters only). The prompt is checked here; the model runs as it is iterated.
        ``logits_processor(row)``, if given, sees (and may change in place) each float32
        logits row before sampling."""
        t0 = time.perf_counter()
        if max_new_tokens is not None and max_new_tokens < 1:
            raise LLMError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        ids = self.tokenizer.encode(prompt, bos=num_bos, eos=num_eos)
        t1 = time.perf_counter()
        if not ids:
            raise LLMError(f"the prompt {prompt[:40]!r} encodes to no tokens (tokenizer "
                           f"{self.tokenizer.path})")
        if not self.metadata.use_kv_cache:
            self.pos = 0  # no cache to continue from: every call starts over
        budget, sampler = self._begin(len(ids), max_new_tokens, temperature, top_p, seed,
                                      logits_processor, t1 - t0)
        return self._run(ids, budget, sampler, prompt if echo else None,
                         ignore_eos, t0)

    def chat(self, messages, max_new_tokens: int | None = None, *, template=None, **kw) -> str:
        """Reply to ``messages`` (``[{"role": ..., "content": ...}]``) formatted with the
        chat template (``template``: a name from ``pyruntime.llm.chat.TEMPLATES``, a
        Jinja string, or None to use the tokenizer's or detect it from its tokens)."""
        from pyruntime.llm.chat import apply_chat_template

        return self.generate(apply_chat_template(messages, template, tokenizer=self.tokenizer),
                             max_new_tokens, **kw)

    def stop(self) -> None:
        """Make a running stream stop after its current token (from a callback/thread)."""
        self._stop = True

    def reset(self) -> None:
        """Forget the context: the next prompt starts at position 0 (a stream still being
        iterated ends)."""
        self._active = None
        self.pos = 0
        self.tokens = []
        self.stats = GenerationStats(load_s=self.load_s)

    # ---- the loop -------------------------------------------------------------------
    def _begin(self, n_prompt, max_new_tokens, temperature, top_p, seed, logits_processor,
               tokenize_s):
        """Check the prompt's ``n_prompt`` positions fit; (token budget, sampler), with the
        call's stats started and a ``ContextFullWarning`` if the budget was clamped."""
        budget, limit = self._budget(n_prompt, max_new_tokens)
        sampler = Sampler(self.tokenizer.vocab_size, temperature, top_p, seed)
        if logits_processor is not None:
            sampler = _Processed(sampler, logits_processor)
        self.stats = GenerationStats(load_s=self.load_s, prompt_tokens=n_prompt,
                                     tokenize_s=tokenize_s)
        if max_new_tokens is not None and budget < max_new_tokens:
            self.stats.clamped_to = budget
            warnings.warn(ContextFullWarning(
                f"{self.path}: {max_new_tokens} new tokens asked for, but only {budget} fit in "
                f"the context of {limit} positions after "
                f"{self.pos + n_prompt} in use: generating {budget}"), stacklevel=3)
        return budget, sampler

    def _budget(self, n_prompt: int, max_new_tokens) -> int:
        m = self.metadata
        limit = m.max_context_len if m.use_kv_cache else min(m.max_context_len,
                                                             m.max_tokens_input)
        if self.pos + n_prompt >= limit:
            held = f" + {self.pos} already in the context" if self.pos else ""
            what = "get_max_context_len" + ("" if m.use_kv_cache else ", forward input")
            fit = max(0, limit - 1 - self.pos)
            raise PromptTooLongError(
                f"the prompt is {n_prompt} tokens{held}, but program {self.path} has a context "
                f"of {limit} positions ({what}): at most {fit} prompt tokens fit, one position "
                "being kept for the first generated token"
                + ("; reset() frees the context" if self.pos else ""))
        room = limit - self.pos - n_prompt
        return (room if max_new_tokens is None else min(room, max_new_tokens)), limit

    def _run(self, ids, budget, sampler, echo, ignore_eos, t0):
        st = self.stats
        perf = time.perf_counter
        text = self.tokenizer.stream()
        push = text.push
        me = self._active = object()  # a later call (or reset) ends this stream
        if echo:
            yield echo
        self._stop = False
        self.tokens = out = []
        t = perf()
        row, decode = self._prefill(ids)
        ts = perf()
        tok = sampler(row)
        t1 = perf()
        st.sampling_s += t1 - ts
        st.prefill_s, st.ttft_s = t1 - t, t1 - t0
        out.append(tok)
        st.generated_tokens = 1
        eos = frozenset() if ignore_eos else self.eos_ids
        stop = "eos" if tok in eos else ""
        piece = push(tok)
        if piece:
            yield piece
        pos = self.pos
        try:
            while not stop and len(out) < budget and not self._stop and self._active is me:
                row = decode(tok, pos)
                pos += 1
                ts = perf()
                tok = sampler(row)
                st.sampling_s += perf() - ts
                out.append(tok)
                if tok in eos:
                    stop = "eos"
                piece = push(tok)
                if piece:
                    yield piece
        finally:
            superseded = self._active is not me
            if not superseded:
                self.pos = pos
                self._active = None
            st.generated_tokens = len(out)
            st.decode_s = perf() - t1
            st.stop_reason = stop or ("stopped" if self._stop or superseded else
                                      "context" if st.clamped_to is not None and
                                      len(out) >= budget else "max_new_tokens")
        rest = text.flush()
        if rest:
            yield rest

    def _prefill(self, ids):
        """Run the prompt; (last logits, the decode step to continue with)."""
        step = self._step
        if not self.metadata.use_kv_cache:
            # no KV cache: every execute sees the whole sequence, from position 0
            seq = list(ids)
            self.pos = len(seq)

            def decode(token, pos):
                seq.append(token)
                return step(seq, 0)
            return step(seq, 0), decode
        row = None
        for i in range(0, len(ids), self.chunk):
            part = ids[i:i + self.chunk]
            row = step(part, self.pos)
            self.pos += len(part)
        return row, step.decode
