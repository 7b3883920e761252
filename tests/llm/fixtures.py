"""LLM programs exported by ExecuTorch's own LLM export, for the runner's tests and bench.

Each fixture is one model family x one variant, exported by
``executorch.examples.models.llama.export_llama`` from a small config written
here and a random checkpoint saved here (so nothing is downloaded), with a
vocabulary trained here with ``tokenizers``::

    from tests.llm.fixtures import get_llm, tokenizer_path
    fx = get_llm("qwen3", "xnnpack")        # exported once, then read from the cache
    fx.pte, fx.tokenizer, fx.et_pieces      # ExecuTorch TextLLMRunner's greedy pieces per prompt
    fx.command                              # the export_llama command line that made it

Families: ``llama3_2``, ``qwen3`` (``--model qwen3_0_6b``: QK-norm, HF RoPE, explicit
head_dim) and ``phi4`` (``--model phi_4_mini``: partial rotary 0.75, LongRoPE factors).
Variants: ``portable``; ``xnnpack`` (``-X``: linears delegated to XNNPACK);
``8da4w`` (``-X -qmode 8da4w -G 32 -E 8,0``: int4 weights with dynamically
quantized int8 activations through XNNPACK, int8 embedding). Sizes: ``tiny``
(the tests: dim 64-128, 2 layers, context 64, vocabulary 320) and ``bench``
(dim 256, 4 layers, context 256, vocabulary 2048).

Every export runs in one child process (``python -m tests.llm.fixtures NAME...``),
so torch and executorch are imported once for all missing fixtures. The same
child runs ExecuTorch's ``TextLLMRunner`` greedily on ``PROMPTS`` and stores its
pieces: the reference the tests compare with.

Cache: ``$PYRUNTIME_FIXTURES/llm`` or ``tests/.fixtures/llm``; per fixture a
folder with the .pte, reference.json and a key file (versions + spec + file hashes)
written last, under a build lock; a family's params.json and checkpoint.pth in
``weights/<family>-<size>/``, shared by its variants.

CLI: ``python -m tests.llm.fixtures [--all] [--size bench] [names...]`` builds and
lists fixtures with their export commands.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.child import repo_env

FORMAT_VERSION = "1"
_REPO = Path(__file__).resolve().parents[2]

FAMILIES = {
    "llama3_2": "llama3_2",
    "qwen3": "qwen3_0_6b",
    "phi4": "phi_4_mini",
}
VARIANTS = {
    "portable": [],
    "xnnpack": ["-X"],
    "8da4w": ["-X", "-qmode", "8da4w", "-G", "32", "-E", "8,0"],
}
# What the test suite exports from empty caches (the rest: PYRUNTIME_LLM_ALL=1 or the bench):
# every family portable (their own attention code), and llama in every variant
# (the XNNPACK and 8da4w paths are the same linears in every family).
CI_SET = (("llama3_2", "portable"), ("llama3_2", "xnnpack"), ("llama3_2", "8da4w"),
          ("qwen3", "portable"), ("phi4", "portable"))
ALL_SET = tuple((f, v) for f in FAMILIES for v in VARIANTS)

PROMPTS = ("The time is", "He said that we can", "Water, water. Then we look up at the day 42")
NEW_TOKENS = 24


def _params(family: str, size: str, vocab: int) -> dict:
    big = size == "bench"
    dim = 256 if big else (128 if family == "phi4" else 64)
    layers = 4 if big else 2
    heads = 8 if big else 4
    p = {"dim": dim, "n_layers": layers, "n_heads": heads, "n_kv_heads": heads // 2,
         "vocab_size": vocab, "norm_eps": 1e-5}
    if family == "llama3_2":  # Llama 3.2 1B's shape of config
        p.update(ffn_dim_multiplier=1.5, multiple_of=32, rope_theta=500000.0,
                 use_scaled_rope=True)
    elif family == "qwen3":  # Qwen3-0.6B's config, scaled down
        p.update(hidden_dim=3 * dim, head_dim=2 * dim // heads, norm_eps=1e-6,
                 rope_theta=1000000.0, use_scaled_rope=False, use_hf_rope=True,
                 attention_qkv_bias=False, use_qk_norm=True, qk_norm_before_rope=True)
    else:  # Phi-4-mini's config, scaled down: partial rotary, LongRoPE factors
        rot = int(dim // heads * 0.75) // 2
        p.update(hidden_dim=2 * dim, rope_theta=10000.0, use_scaled_rope=False,
                 use_hf_rope=True, partial_rotary_factor=0.75, attention_qkv_bias=False,
                 original_max_position_embeddings=4096, max_position_embeddings=131072,
                 rope_scaling_short_factor=[1.0] * rot,
                 rope_scaling_long_factor=[round(1.0 + 0.25 * i, 3) for i in range(rot)])
    return p


def _context(size: str) -> int:
    return 256 if size == "bench" else 64


# ----------------------------------------------------------------- tokenizers

_WORDS = ("the a of to and in is it you that he was for on are with as his they be at one "
          "have this from or had by hot word but what some we can out other were all there "
          "when up use your how said an each she which do their time if will way about many "
          "then them write would like so these her long make thing see him two has look more "
          "day could go come did number sound no most people my over know water than call "
          "first who may down side been now find").split()
_NON_ASCII = "café naïve über façade 日本語 中文 привет мир 😀 🙂 ñandú Ωμέγα".split()


def _corpus(kind: str) -> list[str]:
    rng = random.Random(0)
    if kind == "bench":  # many made-up words: enough merges for a 2048-token vocabulary
        syl = [a + b for a in "bcdfghklmnprstvwz" for b in "aeiou"]
        words = _WORDS + ["".join(rng.choice(syl) for _ in range(rng.randint(1, 3)))
                          for _ in range(3000)]
    else:
        words = _WORDS + (_NON_ASCII if kind == "bytes" else [])
    lines = []
    for _ in range(4000):
        s = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
        lines.append(s[0].upper() + s[1:] + rng.choice(".!?,") +
                     rng.choice(["", " 42", " 7", " (x)", ": y"]))
    return lines


TOKENIZERS = {
    # every token is ASCII: ExecuTorch's runner can stream it (its Python callback
    # raises UnicodeDecodeError on a token that is part of a UTF-8 character)
    "ascii": 320,
    # all 256 byte tokens: streaming must buffer partial characters (same size as
    # "ascii", so one program serves both)
    "bytes": 320,
    "bench": 2048,
}


def _train_tokenizer(kind: str, path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    extra = {"initial_alphabet": pre_tokenizers.ByteLevel.alphabet()} if kind == "bytes" else {}
    trainer = trainers.BpeTrainer(vocab_size=TOKENIZERS[kind], show_progress=False,
                                  special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                  **extra)
    tok.train_from_iterator(_corpus(kind), trainer)
    if tok.get_vocab_size() != TOKENIZERS[kind]:
        raise RuntimeError(f"tokenizer {kind}: trained {tok.get_vocab_size()} tokens, "
                           f"expected {TOKENIZERS[kind]}")
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tok.save(str(tmp))
    os.replace(tmp, path)


def tokenizer_path(kind: str = "ascii") -> Path:
    """A trained tokenizer.json (cached; trained in a second if missing)."""
    d = cache_dir() / "tokenizers"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{kind}-v{FORMAT_VERSION}.json"
    if not path.exists():
        with _lock(d / f"{kind}.lock"):
            if not path.exists():
                _train_tokenizer(kind, path)
    return path


# ----------------------------------------------------------------- fixtures


@dataclass(frozen=True)
class LLMFixture:
    family: str
    variant: str
    size: str
    pte: Path
    tokenizer: Path
    params: Path
    checkpoint: Path
    command: str  # the export_llama command line (paths relative to the fixture folder)
    et_pieces: dict  # prompt -> TextLLMRunner's greedy pieces (NEW_TOKENS of them)

    @property
    def name(self) -> str:
        return fixture_name(self.family, self.variant, self.size)


def fixture_name(family: str, variant: str, size: str = "tiny") -> str:
    return f"{family}-{variant}" + ("" if size == "tiny" else f"-{size}")


def cache_dir() -> Path:
    env = os.environ.get("PYRUNTIME_FIXTURES")
    return (Path(env) if env else _REPO / "tests" / ".fixtures") / "llm"


def _tok_kind(size: str) -> str:
    return "bench" if size == "bench" else "ascii"


def export_args(family: str, variant: str, size: str, folder: Path, weights: Path) -> list[str]:
    ctx = str(_context(size))
    return (["--model", FAMILIES[family], "--params", str(weights / "params.json"),
             "--checkpoint", str(weights / "checkpoint.pth"), "-kv", "--use_sdpa_with_kv_cache",
             "--max_seq_length", ctx, "--max_context_length", ctx] + VARIANTS[variant]
            + ["-n", str(folder / "model.tmp.pte")])


def _spec(family, variant, size) -> dict:
    return {"format": FORMAT_VERSION, "family": family, "variant": variant, "size": size,
            "params": _params(family, size, TOKENIZERS[_tok_kind(size)]),
            "flags": VARIANTS[variant], "context": _context(size), "prompts": list(PROMPTS),
            "new_tokens": NEW_TOKENS, "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch")}


def _folder(family, variant, size) -> Path:
    return cache_dir() / fixture_name(family, variant, size)


def _weights(family, size) -> Path:
    # shared by a family's variants; the path must not contain "8da4w" or "int8": Llama's
    # model loader takes such a checkpoint for an already quantized one
    return cache_dir() / "weights" / f"{family}-{size}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_FILES = ("model.pte", "reference.json")


def _valid(family, variant, size) -> bool:
    d, w = _folder(family, variant, size), _weights(family, size)
    try:
        key = json.loads((d / "key.json").read_text())
        return key.get("spec") == _spec(family, variant, size) and all(
            key["files"][f] == _sha256(d / f) for f in _FILES) and all(
            key["files"][f] == _sha256(w / f) for f in ("params.json", "checkpoint.pth"))
    except (OSError, ValueError, KeyError):
        return False


@contextlib.contextmanager
def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _command(family, variant, size) -> str:
    args = export_args(family, variant, size, Path("."), Path("."))
    args[-1] = "model.pte"
    return "python -m executorch.examples.models.llama.export_llama " + " ".join(args)


def _load(family, variant, size) -> LLMFixture:
    d, w = _folder(family, variant, size), _weights(family, size)
    ref = json.loads((d / "reference.json").read_text())
    return LLMFixture(family, variant, size, d / "model.pte", tokenizer_path(_tok_kind(size)),
                      w / "params.json", w / "checkpoint.pth", _command(family, variant, size),
                      ref["pieces"])


def ensure(pairs, size: str = "tiny") -> None:
    """Build every missing fixture of ``pairs`` ((family, variant), ...) in one child
    process (torch and executorch imported once)."""
    missing = [(f, v) for f, v in pairs if not _valid(f, v, size)]
    if not missing:
        return
    tokenizer_path(_tok_kind(size))
    names = [fixture_name(f, v, size) for f, v in missing]
    env = repo_env()
    r = subprocess.run([sys.executable, "-m", "tests.llm.fixtures", "--build", *names],
                       cwd=_REPO, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"exporting LLM fixtures {names} failed (exit {r.returncode}):\n"
                           f"{r.stdout[-3000:]}\n{r.stderr[-6000:]}")


def get_llm(family: str, variant: str = "portable", size: str = "tiny") -> LLMFixture:
    """Fixture (family, variant), exporting it (and every other missing one of the
    test set, in the same child process) if the cache lacks it."""
    if family not in FAMILIES or variant not in VARIANTS:
        raise KeyError(f"unknown LLM fixture {family!r}/{variant!r}: families "
                       f"{', '.join(FAMILIES)}, variants {', '.join(VARIANTS)}")
    if not _valid(family, variant, size):
        pairs = [(family, variant)]
        if size == "tiny":  # export the whole test set at once: one torch import
            wanted = ALL_SET if os.environ.get("PYRUNTIME_LLM_ALL") else CI_SET
            pairs += [p for p in wanted if p != (family, variant)]
        ensure(pairs, size)
    return _load(family, variant, size)


# ----------------------------------------------------------------- build (child process)


def _checkpoint(family: str, params: dict, path: Path) -> None:
    """Random weights with a spread that makes greedy decoding varied (sharp attention,
    large logit gaps) and the top logits rarely near ties."""
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    seed = {"llama3_2": 1, "qwen3": 2, "phi4": 3}[family]
    model = construct_transformer(ModelArgs(max_seq_len=8, max_context_len=8, **params))
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for k, v in model.named_parameters():
        if "norm" in k:
            sd[k] = 1.0 + 0.1 * torch.randn(v.shape, generator=g)
        else:
            scale = 3.0 if k == "output.weight" or ".wq." in k or ".wk." in k else 1.0
            sd[k] = torch.randn(v.shape, generator=g) * (scale / v.shape[-1] ** 0.5)
    torch.save(sd, path)


def _et_reference(pte: Path, tokenizer: Path) -> dict:
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401 - registers llama ops
    import executorch.kernels.quantized  # noqa: F401 - registers the quantized kernels
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

    runner = TextLLMRunner(str(pte), str(tokenizer))
    pieces = {}
    for prompt in PROMPTS:
        got = []
        runner.reset()
        runner.generate(prompt, GenerationConfig(echo=False, max_new_tokens=NEW_TOKENS,
                                                 temperature=0.0), got.append)
        pieces[prompt] = got
    return {"pieces": pieces}


def _build(family: str, variant: str, size: str) -> float:
    import torch
    from executorch.examples.models.llama.export_llama_lib import (build_args_parser,
                                                                   export_llama)

    d, w = _folder(family, variant, size), _weights(family, size)
    d.mkdir(parents=True, exist_ok=True)
    w.mkdir(parents=True, exist_ok=True)
    (d / "key.json").unlink(missing_ok=True)  # invalid until every file is in place
    spec = _spec(family, variant, size)
    params = json.dumps(spec["params"], indent=1)
    with _lock(w.with_suffix(".lock")):
        if not (w / "params.json").exists() or (w / "params.json").read_text() != params:
            (w / "params.json").unlink(missing_ok=True)
            _checkpoint(family, spec["params"], w / "checkpoint.tmp")
            os.replace(w / "checkpoint.tmp", w / "checkpoint.pth")
            (w / "params.json").write_text(params)
    t0 = time.perf_counter()
    torch.manual_seed(42)  # as export_llama.py's main
    export_llama(build_args_parser().parse_args(export_args(family, variant, size, d, w)))
    os.replace(d / "model.tmp.pte", d / "model.pte")
    dt = time.perf_counter() - t0
    ref = _et_reference(d / "model.pte", tokenizer_path(_tok_kind(size)))
    ref["export_s"] = round(dt, 1)
    (d / "reference.json").write_text(json.dumps(ref, indent=1))
    key = {"spec": spec, "files": {**{f: _sha256(d / f) for f in _FILES},
                                   **{f: _sha256(w / f) for f in ("params.json",
                                                                  "checkpoint.pth")}}}
    (d / "key.json").write_text(json.dumps(key, indent=1))
    return dt


def _parse_name(name: str):
    parts = name.split("-")
    size = parts[2] if len(parts) > 2 else "tiny"
    return parts[0], parts[1], size


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.llm.fixtures", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="family-variant[-size] (default: the test set)")
    ap.add_argument("--all", action="store_true", help="every family x variant")
    ap.add_argument("--size", default="tiny", choices=("tiny", "bench"))
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)  # the child
    args = ap.parse_args(argv)
    if args.build:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.INFO)
        for name in args.names:
            f, v, s = _parse_name(name)
            with _lock(cache_dir() / f"{name}.lock"):
                if not _valid(f, v, s):
                    dt = _build(f, v, s)
                    print(f"exported {name} in {dt:.1f} s", flush=True)
        return 0
    pairs = [_parse_name(n)[:2] for n in args.names] or list(ALL_SET if args.all else CI_SET)
    t0 = time.perf_counter()
    ensure(pairs, args.size)
    for f, v in pairs:
        fx = _load(f, v, args.size)
        ref = json.loads((fx.pte.parent / "reference.json").read_text())
        print(f"{fx.name}: {fx.pte} ({fx.pte.stat().st_size / 1e6:.2f} MB, export "
              f"{ref.get('export_s', '?')} s)\n  {fx.command}")
    print(f"ready in {time.perf_counter() - t0:.1f} s; tokenizer "
          f"{tokenizer_path(_tok_kind(args.size))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
