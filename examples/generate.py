"""Generate text from an ExecuTorch LLM program with pyruntime.llm.

    python examples/generate.py MODEL.pte TOKENIZER ["prompt"]
    python examples/generate.py            # exports a tiny Llama 3.2-shaped model first

A real model comes from ExecuTorch's LLM export, for example Llama 3.2 1B with
XNNPACK and 8da4w quantization::

    python -m executorch.examples.models.llama.export_llama --model llama3_2 \\
        --checkpoint consolidated.00.pth --params params.json -kv --use_sdpa_with_kv_cache \\
        -X -qmode 8da4w -G 32 -E 8,0 --max_seq_length 1024 --max_context_length 1024 \\
        -n llama3_2.pte

and its tokenizer (``tokenizer.model``, tiktoken) or ``tokenizer.json``. Without
arguments this script exports a tiny random-weight model with the same command
(it needs torch + executorch for that; generating needs neither): its text is
gibberish, but the path is the real one.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyruntime.llm import TextGenerator  # noqa: E402


def main(argv) -> int:
    if len(argv) >= 2:
        pte, tokenizer = argv[0], argv[1]
        prompt = argv[2] if len(argv) > 2 else "Once upon a time"
    else:
        from tests.llm.fixtures import get_llm

        print("exporting a tiny Llama 3.2-shaped program with ExecuTorch (once) ...")
        fx = get_llm("llama3_2", "xnnpack")
        print(f"  {fx.command}")
        pte, tokenizer, prompt = fx.pte, fx.tokenizer, "He said that we can"

    gen = TextGenerator(pte, tokenizer)  # loads the program, its tokenizer, compiles once
    m = gen.metadata
    print(f"{pte}: context {m.max_context_len}, vocabulary {m.vocab_size}, "
          f"KV cache {'yes' if m.use_kv_cache else 'no'}; tokenizer {gen.tokenizer}")

    # 1. Whole text, greedy
    print("\ngreedy:", repr(gen.generate(prompt, 32, temperature=0)))
    print(gen.stats)

    # 2. Streaming with sampling (seeded: the same text every run)
    gen.reset()  # the context otherwise carries over, as in a conversation
    print("\nsampled: ", end="")
    for piece in gen.stream(prompt, 32, temperature=0.8, top_p=0.9, seed=0):
        print(piece, end="", flush=True)
    print(f"\n{gen.stats}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
