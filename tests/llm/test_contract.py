"""The LLM program contract on small programs made here with torch.export + to_edge
(constant methods as ExecuTorch's LLM export writes them): metadata, get_eos_ids,
programs without a KV cache, static [1, 1] tokens, full logits, wrong signatures.

The model is a bigram table (embedding -> linear): its next token depends on the last
token only, so the greedy chain is computed here in numpy, independently of the runner.
"""
from __future__ import annotations

import numpy as np
import pytest
from tests import parts

torch = parts.importorskip("torch", "executorch")
parts.importorskip("executorch", "executorch")
parts.importorskip("tokenizers", "tokenizers")

from pyruntime.llm import (NotAnLLMError, TextGenerator, TokenizerMismatchError,  # noqa: E402
                           read_metadata)
from tests.llm.fixtures import cache_dir, tokenizer_path  # noqa: E402

VERSION = "1"  # bump when Bigram changes: the cached programs are keyed on it
VOCAB = 320
CONSTANTS = {"get_max_seq_len": 16, "get_max_context_len": 16, "get_vocab_size": VOCAB,
             "get_bos_id": 0, "get_eos_ids": [5, 7], "use_kv_cache": True,
             "enable_dynamic_shape": True, "get_n_layers": 1}


class Bigram(torch.nn.Module):
    def __init__(self, full=False, out_dtype=None):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = torch.nn.Embedding(VOCAB, 16)
        self.lin = torch.nn.Linear(16, VOCAB)
        with torch.no_grad():
            self.emb.weight.copy_(torch.randn(VOCAB, 16, generator=g))
            self.lin.weight.copy_(torch.randn(VOCAB, 16, generator=g))
            self.lin.bias.zero_()
        self.full, self.out_dtype = full, out_dtype

    def forward(self, tokens, input_pos=None):
        x = self.lin(self.emb(tokens))
        x = x if self.full else x[:, -1, :]
        return x if self.out_dtype is None else x.to(self.out_dtype)

    def next_token(self) -> np.ndarray:
        with torch.no_grad():
            return (self.emb.weight @ self.lin.weight.T).argmax(1).numpy()


def _export(path, model, inputs, dynamic, constants):
    """Export once; cached by what the program is made of (and the versions)."""
    import hashlib
    import importlib.metadata
    import json
    import os

    what = json.dumps([VERSION, path.name, constants, dynamic, model.full, str(model.out_dtype),
                       [list(i.shape) for i in inputs], importlib.metadata.version("torch"),
                       importlib.metadata.version("executorch")])
    digest = hashlib.sha256(what.encode()).hexdigest()[:16]
    cached = cache_dir() / "contract" / f"{path.stem}-{digest}.pte"
    if cached.exists():
        return cached
    from executorch.exir import to_edge
    from torch.export import Dim

    cached.parent.mkdir(parents=True, exist_ok=True)
    shapes = None
    if dynamic:
        shapes = ({1: Dim("t", min=1, max=15)},) + (None,) * (len(inputs) - 1)
    ep = torch.export.export(model, inputs, dynamic_shapes=shapes)
    tmp = cached.with_name(f"{cached.name}.tmp{os.getpid()}")
    tmp.write_bytes(to_edge(ep, constant_methods=constants).to_executorch().buffer)
    os.replace(tmp, cached)
    return cached


@pytest.fixture(scope="module")
def programs():
    from pathlib import Path

    d = Path(".")
    tok, pos = torch.tensor([[1, 2, 3]]), torch.tensor([0])
    nokv = {**CONSTANTS, "use_kv_cache": False}
    return {
        "kv": _export(d / "kv.pte", Bigram(full=True), (tok, pos), True, CONSTANTS),
        "nokv": _export(d / "nokv.pte", Bigram(), (tok,), True, nokv),
        "static": _export(d / "static.pte", Bigram(), (torch.tensor([[4]]), pos), False,
                          {**CONSTANTS, "enable_dynamic_shape": False}),
        "int_logits": _export(d / "bad.pte", Bigram(out_dtype=torch.int32), (tok, pos), True,
                              CONSTANTS),
        "far_eos": _export(d / "far_eos.pte", Bigram(), (tok, pos), True,
                           {**CONSTANTS, "get_eos_ids": [4000]}),
    }


def chain(start: int, n: int, stop=()) -> list[int]:
    nxt, out, t = Bigram().next_token(), [], start
    for _ in range(n):
        t = int(nxt[t])
        out.append(t)
        if t in stop:
            break
    return out


def test_metadata(programs):
    import pyruntime

    m = read_metadata(pyruntime.Runtime.get().load_program(programs["kv"]), "kv.pte")
    assert (m.max_seq_len, m.max_context_len, m.vocab_size, m.bos_id, m.eos_ids, m.n_layers) \
        == (16, 16, VOCAB, 0, (5, 7), 1)
    assert m.use_kv_cache and m.enable_dynamic_shape and m.positions == 1
    assert m.max_tokens_input == 15 and m.prefill_chunk == 15
    n = read_metadata(pyruntime.Runtime.get().load_program(programs["nokv"]), "nokv.pte")
    assert not n.use_kv_cache and n.positions == 0 and n.prefill_chunk == 15


@pytest.mark.parametrize("name", ["kv", "nokv", "static"])
def test_greedy_follows_the_bigram_chain(programs, name):
    """Full logits ([1, T, V]: the last row is used), no KV cache (the whole sequence
    every step) and a static [1, 1] input (the prompt one token per execute)."""
    gen = TextGenerator(programs[name], tokenizer_path("ascii"))
    assert gen.chunk == (1 if name == "static" else 15)
    ids = gen.tokenizer.encode("He said that")
    gen.generate("He said that", 6, temperature=0, ignore_eos=True)
    assert gen.tokens == chain(ids[-1], 6)


def test_program_eos_ids_end_generation(programs):
    """get_eos_ids (not the tokenizer's EOS) ends generation: make one of the chain's
    tokens an EOS by exporting it as such."""
    ids = TextGenerator(programs["kv"], tokenizer_path("ascii")).tokenizer.encode("The time")
    full = chain(ids[-1], 12)
    eos = next(t for t in full[2:] if t not in full[:2])
    path = _export(programs["kv"].with_name("eos.pte"), Bigram(),
                   (torch.tensor([[1, 2, 3]]), torch.tensor([0])), True,
                   {**CONSTANTS, "get_eos_ids": [eos, 6]})
    gen = TextGenerator(path, tokenizer_path("ascii"))
    assert gen.eos_ids == {eos, 6}
    gen.generate("The time", 12, temperature=0)
    assert gen.tokens == full[:full.index(eos) + 1] and gen.stats.stop_reason == "eos"


def test_context_clamp_without_kv_cache(programs):
    """No KV cache: the tokens input bounds the sequence (15), each call starts over."""
    gen = TextGenerator(programs["nokv"], tokenizer_path("ascii"))
    n = len(gen.tokenizer.encode("He said that"))
    with pytest.warns(UserWarning, match="only"):
        gen.generate("He said that", 100, temperature=0, ignore_eos=True)
    assert len(gen.tokens) == 15 - n
    gen.generate("He said that", 3, temperature=0, ignore_eos=True)  # no reset needed
    assert gen.tokens == chain(gen.tokenizer.encode("He said that")[-1], 3)


def test_wrong_signature_and_ids(programs):
    with pytest.raises(NotAnLLMError, match=r"bad-\w+.pte: forward is forward\(.*INT.*but an LLM's "
                                            r"is forward\(tokens int64\[1, T\]"):
        TextGenerator(programs["int_logits"], tokenizer_path("ascii"))
    with pytest.raises(TokenizerMismatchError, match="get_eos_ids names token 4000, outside "
                                                     "the 320 tokens"):
        TextGenerator(programs["far_eos"], tokenizer_path("ascii"))
