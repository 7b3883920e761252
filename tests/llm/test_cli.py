"""`python -m pyruntime generate`: the continuation alone on stdout, stats on stderr."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import parts

parts.importorskip("executorch", "executorch")
parts.importorskip("tokenizers", "tokenizers")

from tests.llm.fixtures import NEW_TOKENS, PROMPTS, get_llm  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _generate(*args):
    return subprocess.run([sys.executable, "-m", "pyruntime", "generate", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_generate_command():
    fx = get_llm("llama3_2", "xnnpack")
    r = _generate(fx.pte, "--tokenizer", fx.tokenizer, "--prompt", PROMPTS[1],
                  "--max-new-tokens", NEW_TOKENS, "--temperature", 0, "--stats")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(fx.et_pieces[PROMPTS[1]])  # ExecuTorch's continuation, only
    line = r.stderr.strip().splitlines()[-1]
    for part in ("decode tok/s:", "prefill tok/s:", "time to first token:", "load:"):
        assert part in line, r.stderr
    float(line.split("decode tok/s:")[1].split()[0])


def test_generate_command_errors():
    fx = get_llm("llama3_2", "portable")
    r = _generate(fx.pte, "--tokenizer", fx.tokenizer, "--prompt", "The time is " * 40,
                  "--temperature", 0)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("error: the prompt is") and "get_max_context_len" in r.stderr
    r = _generate(fx.pte, "--tokenizer", fx.pte, "--prompt", "x")
    assert r.returncode == 1 and r.stdout == "" and "not a HF tokenizer.json" in r.stderr
