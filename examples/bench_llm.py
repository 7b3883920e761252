"""pyruntime's TextGenerator vs ExecuTorch's TextLLMRunner, side by side in one process.

    python examples/bench_llm.py                      # every family x variant, bench size
    python examples/bench_llm.py --families llama3_2 --variants portable --rounds 3
    python examples/bench_llm.py --variants 8da4w --math exact fast
    python examples/bench_llm.py --update BENCHMARKS.md

Programs come from tests.llm.fixtures (exported by ExecuTorch's export_llama from
random checkpoints; ``--size bench``: dim 256, 4 layers, context 256, vocabulary
2048; ``--size tiny``: the tests' programs). Both runners generate greedily from the
same prompt on the same .pte, interleaved round by round (each round: reset, then
generate). ``--math fast`` rows run pyruntime with ``math="fast"`` (8da4w linears on its
own int4 kernels instead of XNNPACK: ``delegates.xnnpack.qb4w``). Both are timed the same
way from outside, with ``time.perf_counter`` in the per-token callback (ExecuTorch's own
stats count whole milliseconds): time to first token from the call, prefill tok/s =
prompt tokens / time to first token, decode tok/s = (tokens - 1) / (last token time -
first token time). Medians over rounds. "same" says whether the greedy outputs were equal
in every round.
Needs torch + executorch (the fixtures and the reference), not pyruntime's runtime.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("PYRUNTIME_COMPILE", "sync")  # time compiled kernels: compile at load

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BEGIN, END = "<!-- llm-bench:start -->", "<!-- llm-bench:end -->"


@contextlib.contextmanager
def _quiet_stdout():
    """ExecuTorch's runner printf()s every piece: send fd 1 to /dev/null meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def _timed(run):
    """run(callback) -> None; (time to first token, decode tok/s, pieces)."""
    stamps, pieces = [], []

    def cb(piece):
        stamps.append(time.perf_counter())
        pieces.append(piece)
    t0 = time.perf_counter()
    run(cb)
    ttft = stamps[0] - t0
    dec = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
    return ttft, dec, pieces


def bench_one(fx, prompt, new_tokens, rounds, threads, math="exact"):
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401 - llama ops
    import executorch.kernels.quantized  # noqa: F401 - quantized kernels
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

    from pyruntime.llm import TextGenerator

    t = time.perf_counter()
    et = TextLLMRunner(str(fx.pte), str(fx.tokenizer))
    cfg = GenerationConfig(echo=False, max_new_tokens=new_tokens, temperature=0.0)
    with _quiet_stdout():
        et.generate("warm up", GenerationConfig(echo=False, max_new_tokens=2, temperature=0.0))
    et_load = time.perf_counter() - t  # ExecuTorch loads the method on first generate
    t = time.perf_counter()
    ours = TextGenerator(fx.pte, fx.tokenizer, threads=threads, math=math)
    our_load = time.perf_counter() - t
    n_prompt = len(ours.tokenizer.encode(prompt))

    def run_et(cb):
        et.reset()
        with _quiet_stdout():
            et.generate(prompt, cfg, cb)

    def run_ours(cb):
        ours.reset()
        for t in ours.stream(prompt, new_tokens, temperature=0):
            cb(t)
    for run in (run_et, run_ours):  # warm-up round
        _timed(run)
    res = {"et": [], "ours": []}
    same = True
    tok = ours.tokenizer  # ExecuTorch prints special tokens (the EOS), our stream does not
    special = {tok.token_bytes(i).decode(errors="replace") for i in tok.special_ids}
    for _ in range(rounds):
        a = _timed(run_et)
        b = _timed(run_ours)
        res["et"].append(a)
        res["ours"].append(b)
        same &= "".join(p for p in a[2] if p not in special) == "".join(b[2])
    out = {"prompt_tokens": n_prompt, "tokens": len(res["ours"][-1][2]), "same": same,
           "load": (et_load, our_load)}
    for k, rows in res.items():
        ttft = statistics.median(r[0] for r in rows)
        out[k] = {"ttft": ttft, "prefill": n_prompt / ttft,
                  "decode": statistics.median(r[1] for r in rows)}
    return out


def table(rows, args, load) -> str:
    head = (f"Produced by `python examples/bench_llm.py --size {args.size} --rounds {args.rounds}"
            f" --new-tokens {args.new_tokens}` on {time.strftime('%Y-%m-%d')} "
            f"({platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}); 1-min load average {load[0]:.1f} before, "
            f"{load[1]:.1f} after (a shared machine: ratios move by tens of percent between "
            "runs).")
    lines = [
        "## LLM text generation: pyruntime.llm vs ExecuTorch's TextLLMRunner", "",
        head, "",
        "Programs exported by ExecuTorch's `export_llama` (random weights; " +
        ("dim 256, 4 layers, 8 heads / 4 KV heads, context 256, vocabulary 2048" if
         args.size == "bench" else "the tests' programs: dim 64-128, 2 layers, context 64, "
         "vocabulary 320") + "); greedy decoding, the same prompt and .pte for both, "
        "interleaved rounds, medians. Both timed from outside with `time.perf_counter` in "
        "the per-token callback: time to first token (TTFT) from the call, prefill tok/s = "
        "prompt tokens / TTFT, decode tok/s = (tokens - 1) / (last - first token time). "
        "Ratio = pyruntime / ExecuTorch (above 1: pyruntime is faster). pyruntime runs the "
        "fast tier; XNNPACK-delegated linears go through the same XNNPACK library in both, "
        "except in `math=fast` rows, where pyruntime runs 8da4w linears on its own int4 "
        "kernels.", "",
        "| model | variant | prompt / new tokens | decode tok/s pyruntime | decode tok/s "
        "ExecuTorch | decode ratio | prefill tok/s pyruntime | prefill tok/s ExecuTorch | "
        "TTFT pyruntime | TTFT ExecuTorch | load pyruntime / ExecuTorch | same output |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (family, variant, math), r in rows:
        o, e = r["ours"], r["et"]
        v = variant if math == "exact" else f"{variant}, math={math}"
        lines.append(
            f"| {family} | {v} | {r['prompt_tokens']} / {r['tokens']} | "
            f"{o['decode']:.1f} | {e['decode']:.1f} | {o['decode'] / e['decode']:.2f} | "
            f"{o['prefill']:.1f} | {e['prefill']:.1f} | {o['ttft'] * 1e3:.2f} ms | "
            f"{e['ttft'] * 1e3:.2f} ms | {r['load'][1] * 1e3:.0f} / {r['load'][0] * 1e3:.0f} ms"
            f" | {'yes' if r['same'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def update(path: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the section between the begin/end markers of ``path`` (or append one)."""
    body = path.read_text() if path.exists() else ""
    block = f"{begin}\n{text}{end}"
    if begin in body:
        body = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, body,
                      flags=re.S)
    else:
        body = body.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(body)


def main(argv=None) -> int:
    from tests.llm import fixtures

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="bench", choices=("bench", "tiny"))
    ap.add_argument("--families", nargs="+", default=list(fixtures.FAMILIES))
    ap.add_argument("--variants", nargs="+", default=list(fixtures.VARIANTS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=None,
                    help="tokens per generation (default: 128 bench, 32 tiny)")
    ap.add_argument("--threads", type=int, default=None, help="pyruntime intra-op threads")
    ap.add_argument("--math", nargs="+", default=["exact"], choices=("exact", "fast"),
                    help="pyruntime's arithmetic, one row each (default: exact)")
    ap.add_argument("--update", type=Path, help="rewrite this file's llm-bench section")
    args = ap.parse_args(argv)
    if args.new_tokens is None:
        args.new_tokens = 128 if args.size == "bench" else 32
    pairs = [(f, v) for f in args.families for v in args.variants]
    fixtures.ensure(pairs, args.size)
    prompt = ("Water, water. Then we look up at the day 42. He said that we can write a long "
              "word, then come down to the side of the first people")
    rows = []
    load0 = os.getloadavg()[0]
    for (f, v), math in ((p, m) for p in pairs for m in args.math):
        fx = fixtures.get_llm(f, v, args.size)
        r = bench_one(fx, prompt, args.new_tokens, args.rounds, args.threads, math)
        rows.append(((f, v, math), r))
        o, e = r["ours"], r["et"]
        print(f"{fx.name} (math={math}): decode {o['decode']:.1f} vs {e['decode']:.1f} tok/s "
              f"({o['decode'] / e['decode']:.2f}x), prefill {o['prefill']:.1f} vs "
              f"{e['prefill']:.1f} tok/s, same output: {r['same']}", flush=True)
    text = table(rows, args, (load0, os.getloadavg()[0]))
    print(text)
    if args.update:
        update(args.update, text)
        print(f"updated {args.update}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
