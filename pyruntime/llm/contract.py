"""What ExecuTorch's LLM export writes into a .pte, read and checked, and the forward
step that drives it.

A program from ``export_llama`` (or ``export_llm``) has ``forward(tokens, input_pos)``:
``tokens`` int64 ``[1, T]`` (T up to ``max_seq_len - 1`` when the shape is dynamic,
1 otherwise), ``input_pos`` int64 ``[1]`` (the position of ``tokens[0]``; some
programs take every position, ``[T]``), returning the last position's logits
``[1, vocab]`` (``[1, T, vocab]`` with ``--generate_full_logits``). The KV cache is
a mutable buffer of ``forward``: it lives in the method's planned memory and
keeps its contents between executes. Constant methods describe the program:
``get_max_seq_len`` (required, as in ExecuTorch's runner), ``get_max_context_len``,
``get_vocab_size``, ``use_kv_cache``, ``enable_dynamic_shape``,
``use_sdpa_with_kv_cache``, ``get_n_layers`` and, when the export was given
them with ``--metadata``, ``get_bos_id`` and ``get_eos_ids``. A program without
a KV cache takes ``forward(tokens)`` alone and sees the whole sequence each step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pyruntime.llm.errors import NotAnLLMError, TokenizerMismatchError
from pyruntime.program import TensorInfo

# ExecuTorch's runner defaults for constant methods a program lacks (llm_runner_helper.cpp)
_DEFAULTS = {"enable_dynamic_shape": False, "use_kv_cache": True, "use_sdpa_with_kv_cache": False}
_KNOWN = ("get_max_seq_len", "get_max_context_len", "get_vocab_size", "get_bos_id",
          "get_eos_ids", "get_n_layers", "use_kv_cache", "use_sdpa_with_kv_cache",
          "enable_dynamic_shape")


@dataclass(frozen=True)
class LLMMetadata:
    """The LLM facts of a program: its constant methods and its forward's signature."""

    max_seq_len: int  # the longest prefill chunk the export planned for
    max_context_len: int  # positions in the KV cache
    vocab_size: int  # logits per position (get_vocab_size must agree)
    use_kv_cache: bool
    enable_dynamic_shape: bool
    use_sdpa_with_kv_cache: bool
    bos_id: int | None  # get_bos_id, when the export wrote it
    eos_ids: tuple  # get_eos_ids, when the export wrote it
    n_layers: int | None
    max_tokens_input: int  # upper bound of forward's token input (its dim 1)
    tokens_dtype: np.dtype
    positions: int  # 1: input_pos is [1] (start position); 0: no input_pos; -1: [T] positions
    positions_dtype: np.dtype
    logits_dtype: np.dtype
    extra: dict = field(default_factory=dict)  # other constant methods, by name

    @property
    def prefill_chunk(self) -> int:
        """Tokens per prefill execute: at most max_seq_len and what the input can hold."""
        if not self.use_kv_cache:
            return self.max_tokens_input
        return max(1, min(self.max_seq_len, self.max_tokens_input))


def _constant(program, name, where):
    """A constant method's outputs as Python values (ints, bools, floats, lists)."""
    meta = program.metadata(name)
    if all(not isinstance(o, TensorInfo) for o in meta.outputs):
        return [o.value for o in meta.outputs]
    outs = program.load_method(name, tier="reference").execute([])
    return [o.tolist() if isinstance(o, np.ndarray) else o for o in outs]


def _scalar(values, name, where):
    if len(values) != 1 or isinstance(values[0], (list, str)) or values[0] is None:
        raise NotAnLLMError(f"{where}: constant method {name!r} returns {values!r}, expected "
                            "one number")
    v = values[0]
    return int(v) if not isinstance(v, bool) else v


def read_constants(program, where: str) -> tuple[dict, dict, list]:
    """The program's constant methods (no inputs, no instructions): (every one by name,
    the known scalars with ExecuTorch's runner defaults, the EOS ids flattened)."""
    consts = {}
    for n in program.method_names:
        meta = program.metadata(n)
        if meta.instruction_count == 0 and meta.num_inputs() == 0:
            consts[n] = _constant(program, n, where)
    vals = dict(_DEFAULTS)
    for n in ("get_max_seq_len", "get_max_context_len", "get_vocab_size", "get_bos_id",
              "get_n_layers", "use_kv_cache", "use_sdpa_with_kv_cache", "enable_dynamic_shape"):
        if n in consts:
            vals[n] = _scalar(consts[n], n, where)
    eos = consts.get("get_eos_ids", [])
    return consts, vals, [x for v in eos for x in (v if isinstance(v, list) else [v])]


def read_metadata(program, where: str, method: str = "forward") -> LLMMetadata:
    """Read and check the LLM contract of ``program``; ``where`` names it in errors."""
    names = program.method_names
    expected = (f"a program from ExecuTorch's LLM export has '{method}' and the constant "
                "methods get_max_seq_len, get_max_context_len, use_kv_cache, ...")
    if method not in names:
        raise NotAnLLMError(f"{where} is not an ExecuTorch LLM program: it has no {method!r} "
                            f"method (methods: {', '.join(names) or 'none'}); {expected}")
    if "get_max_seq_len" not in names:
        raise NotAnLLMError(f"{where} is not an ExecuTorch LLM program: it has no "
                            f"'get_max_seq_len' method (methods: {', '.join(names)}); {expected}")
    consts, vals, eos = read_constants(program, where)
    max_seq = int(vals["get_max_seq_len"])
    max_ctx = int(vals.get("get_max_context_len", max_seq))

    fwd = program.metadata(method)
    sig = f"{method}({', '.join(map(str, fwd.inputs))}) -> {', '.join(map(str, fwd.outputs))}"
    bad = f"{where}: {method} is {sig}, but an LLM's is forward(tokens int64[1, T], " \
          "input_pos int64[1]) -> logits float[1, vocab]"
    ins = fwd.inputs
    if not 1 <= len(ins) <= 2 or not all(isinstance(i, TensorInfo) for i in ins):
        raise NotAnLLMError(bad)
    tok = ins[0]
    if len(tok.sizes) != 2 or tok.sizes[0] != 1 or tok.dtype.kind not in "iu":
        raise NotAnLLMError(bad)
    if not tok.dynamic and tok.sizes[1] != 1:
        raise NotAnLLMError(f"{where}: {method}'s tokens input is static {list(tok.sizes)}: "
                            "a prompt could only be fed in chunks of exactly that many tokens "
                            "(ExecuTorch's runner needs [1, 1] or a dynamic length too)")
    positions, pos_dtype = 0, np.dtype(np.int64)
    if len(ins) == 2:
        p = ins[1]
        if len(p.sizes) != 1 or p.dtype.kind not in "iu":
            raise NotAnLLMError(bad)
        positions, pos_dtype = (1 if p.sizes[0] == 1 else -1), p.dtype
    if len(fwd.outputs) != 1 or not isinstance(fwd.outputs[0], TensorInfo):
        raise NotAnLLMError(bad)
    out = fwd.outputs[0]
    if len(out.sizes) not in (2, 3) or out.dtype.kind != "f":
        raise NotAnLLMError(bad)
    vocab = int(out.sizes[-1])
    if "get_vocab_size" in vals and int(vals["get_vocab_size"]) != vocab:
        raise NotAnLLMError(f"{where}: get_vocab_size says {vals['get_vocab_size']} but "
                            f"{method} returns {vocab} logits per position ({sig})")
    use_kv = bool(vals["use_kv_cache"]) and positions != 0
    if max_seq < 1 or max_ctx < 1:
        raise NotAnLLMError(f"{where}: get_max_seq_len {max_seq} / get_max_context_len "
                            f"{max_ctx} must be positive")
    return LLMMetadata(
        max_seq_len=max_seq, max_context_len=max_ctx, vocab_size=vocab, use_kv_cache=use_kv,
        enable_dynamic_shape=bool(vals["enable_dynamic_shape"]),
        use_sdpa_with_kv_cache=bool(vals["use_sdpa_with_kv_cache"]),
        bos_id=vals.get("get_bos_id"), eos_ids=tuple(int(e) for e in eos),
        n_layers=vals.get("get_n_layers"), max_tokens_input=int(tok.sizes[1]),
        tokens_dtype=tok.dtype, positions=positions, positions_dtype=pos_dtype,
        logits_dtype=out.dtype,
        extra={k: v for k, v in consts.items() if k not in _KNOWN})


def check_tokenizer(meta: LLMMetadata, tokenizer, where: str) -> None:
    """The tokenizer must fit the program: its ids inside the logits, the program's
    BOS/EOS ids inside its vocabulary (a program's vocabulary may be padded a little
    past the tokenizer's, as Qwen 3's and Phi-4-mini's are)."""
    tv, mv = tokenizer.vocab_size, meta.vocab_size
    slack = max(128, mv // 50)
    if tv > mv or mv - tv > slack:
        raise TokenizerMismatchError(
            f"tokenizer {tokenizer.path} has {tv} tokens but program {where} has a vocabulary "
            f"of {mv} (its logits per position): they do not belong together (the program's "
            f"vocabulary may exceed the tokenizer's by padding of at most {slack})")
    for name, ids in (("get_bos_id", () if meta.bos_id is None else (meta.bos_id,)),
                      ("get_eos_ids", meta.eos_ids)):
        for i in ids:
            if not 0 <= i < tv:
                raise TokenizerMismatchError(
                    f"program {where}'s {name} names token {i}, outside the {tv} tokens of "
                    f"tokenizer {tokenizer.path}: they do not belong together")


class ForwardStep:
    """Runs ``forward`` with preallocated inputs; returns the last position's logits row
    (float32, a copy of one row).

    The token and position arrays are allocated once and handed to every execute
    (the method aliases them: no copy, no allocation per token).
    """

    def __init__(self, method, meta: LLMMetadata):
        self.method = method
        self.meta = meta
        n = max(meta.max_tokens_input, 1)
        self.tokens = np.zeros((1, n), meta.tokens_dtype)
        self.pos = np.zeros(1 if meta.positions >= 0 else n, meta.positions_dtype)
        self._one = [self.tokens[:, :1], self.pos[:1]] if meta.positions else [self.tokens[:, :1]]
        self._views = {}
        self._f32 = meta.logits_dtype == np.float32

    def _inputs(self, count: int, start: int) -> list:
        if self.meta.positions == 1:
            self.pos[0] = start
        elif self.meta.positions == -1:
            self.pos[:count] = np.arange(start, start + count)
        if count == 1:
            return self._one
        v = self._views.get(count)
        if v is None:
            v = self._views[count] = [self.tokens[:, :count]] + (
                [self.pos[:1] if self.meta.positions == 1 else self.pos[:count]]
                if self.meta.positions else [])
        return v

    def __call__(self, ids, start: int) -> np.ndarray:
        """Run tokens ``ids`` at positions ``start...``; the logits of the last one."""
        count = len(ids)
        self.tokens[0, :count] = ids
        out = self.method.execute(self._inputs(count, start))[0]
        row = out[0, -1] if out.ndim == 3 else out[0]
        return row if self._f32 else row.astype(np.float32)

    def decode(self, token: int, pos: int) -> np.ndarray:
        """One token at ``pos`` (the hot path: two stores, one execute)."""
        self.tokens[0, 0] = token
        self.pos[0] = pos
        out = self.method.execute(self._one)[0]
        row = out[0, -1] if out.ndim == 3 else out[0]
        return row if self._f32 else row.astype(np.float32)
