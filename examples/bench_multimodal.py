"""pyruntime's MultimodalGenerator vs ExecuTorch's MultimodalRunner, and its Transcriber vs a
greedy loop over ``executorch.runtime``'s methods, side by side in one process.

    python examples/bench_multimodal.py                     # llava + voxtral x 2 variants, whisper
    python examples/bench_multimodal.py --kinds llava --variants xnnpack --rounds 3
    python examples/bench_multimodal.py --update BENCHMARKS.md

Multimodal programs come from tests.llm.multimodal_fixtures (exported here as
``export_llava.py`` does, random weights; ``--size bench``: dim 256, 4 layers, context
256, a 2048-token vocabulary, 64 embeddings per image or audio clip; ``--size tiny``: the
tests'). Both runners generate greedily from each kind's first test case (text, media,
text) on the same .pte, interleaved round by round (reset, then generate), timed from
outside with ``time.perf_counter`` in the per-token callback: time to first token (TTFT,
which holds the encoder and the prefill) from the call, decode tok/s = (tokens - 1) /
(last - first token time). Medians over rounds.

ExecuTorch has no Python speech runner (its ``extension/asr/runner`` is C++ only), so the
Whisper rows time pyruntime's ``Transcriber`` against the same greedy loop written over
``executorch.runtime``'s ``encoder`` and ``text_decoder`` (start token, the forced tokens
our config chose, argmax until EOS): the time of one whole transcription of each input.
"same" says whether the outputs were equal in every round. Needs torch + executorch.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("PYRUNTIME_COMPILE", "sync")  # time compiled kernels: compile at load

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))

from bench_llm import _quiet_stdout, _timed, update  # noqa: E402

BEGIN, END = "<!-- multimodal-bench:start -->", "<!-- multimodal-bench:end -->"


def _parts(fx, case):
    """(ExecuTorch's inputs, ours) for one case's parts."""
    import numpy as np
    import torch
    from executorch.extension.llm.runner import make_audio_input, make_image_input, \
        make_text_input

    from pyruntime.llm import Audio, Image

    et, ours = [], []
    for p in case.parts:
        if isinstance(p, str):
            et.append(make_text_input(p))
            ours.append(p)
        elif "image" in p:
            arr = np.load(fx.media[p["image"]])
            et.append(make_image_input(torch.from_numpy(arr)))
            ours.append(Image(arr))
        else:
            arr = np.load(fx.media[p["audio"]])
            et.append(make_audio_input(torch.from_numpy(arr)))
            ours.append(Audio(arr))
    return et, ours


def bench_multimodal(fx, new_tokens, rounds, threads):
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401 - llama ops
    from executorch.extension.llm.runner import GenerationConfig, MultimodalRunner

    from pyruntime.llm import MultimodalGenerator

    case = fx.cases[0]
    et_parts, our_parts = _parts(fx, case)
    cfg = GenerationConfig(echo=False, max_new_tokens=new_tokens, temperature=0.0)
    t = time.perf_counter()
    et = MultimodalRunner(str(fx.pte), str(fx.tokenizer))
    with _quiet_stdout():
        et.generate(et_parts, GenerationConfig(echo=False, max_new_tokens=2, temperature=0.0))
    et_load = time.perf_counter() - t  # ExecuTorch loads the methods on first generate
    t = time.perf_counter()
    ours = MultimodalGenerator(fx.pte, fx.tokenizer, threads=threads)
    our_load = time.perf_counter() - t

    def run_et(cb):
        et.reset()
        with _quiet_stdout():
            et.generate(et_parts, cfg, cb)

    def run_ours(cb):
        ours.reset()
        for piece in ours.stream(our_parts, new_tokens, temperature=0):
            cb(piece)
    for run in (run_et, run_ours):  # warm-up round
        _timed(run)
    tok = ours.tokenizer  # ExecuTorch prints special tokens (the EOS), our stream does not
    special = {tok.token_bytes(i).decode(errors="replace") for i in tok.special_ids}
    res, same = {"et": [], "ours": []}, True
    for _ in range(rounds):
        a, b = _timed(run_et), _timed(run_ours)
        res["et"].append(a)
        res["ours"].append(b)
        same &= "".join(p for p in a[2] if p not in special) == "".join(b[2])
    out = {"prompt_tokens": ours.stats.prompt_tokens, "tokens": len(res["ours"][-1][2]),
           "same": same, "load": (et_load, our_load)}
    for k, rows in res.items():
        out[k] = {"ttft": statistics.median(r[0] for r in rows),
                  "decode": statistics.median(r[1] for r in rows)}
    return out


def _et_transcribe(encoder, decoder, features, cfg, budget):
    """The greedy loop over executorch.runtime's methods: generated ids, EOS included."""
    import numpy as np
    import torch

    states = encoder.execute([torch.from_numpy(features)])[0]
    tok, pos = torch.zeros((1, 1), dtype=torch.long), torch.zeros((1,), dtype=torch.long)

    def step(t, p):
        tok[0, 0], pos[0] = t, p
        return decoder.execute([tok, states, pos])[0].reshape(-1).numpy().copy()
    row, p = step(cfg.start, 0), 1
    for t in cfg.forced:
        if t is None:  # language detection: the likeliest language token
            t = cfg.language_ids[int(np.argmax(row[list(cfg.language_ids)]))]
        row, p = step(t, p), p + 1
    out = []
    while True:
        row[list(cfg.suppress)] = -np.inf
        if not out:
            row[list(cfg.begin_suppress)] = -np.inf
        t = int(np.argmax(row))
        out.append(t)
        if t in cfg.eos_ids or len(out) >= budget:
            return out
        row, p = step(t, p), p + 1


def bench_speech(fx, new_tokens, rounds, threads):
    import numpy as np
    from executorch.runtime import Runtime as ETRuntime

    from pyruntime.llm import Transcriber

    t = time.perf_counter()
    prog = ETRuntime.get().load_program(str(fx.pte))
    encoder, decoder = prog.load_method("encoder"), prog.load_method("text_decoder")
    et_load = time.perf_counter() - t
    t = time.perf_counter()
    ours = Transcriber(fx.pte, fx.tokenizer_dir, threads=threads)
    our_load = time.perf_counter() - t
    rows = []
    for name, path in fx.features.items():
        feats = np.load(path)
        et_s, our_s, same = [], [], True
        for _ in range(rounds + 1):  # the first round warms up
            t = time.perf_counter()
            a = _et_transcribe(encoder, decoder, feats, ours.config, new_tokens)
            et_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            ours.transcribe(feats, new_tokens)
            our_s.append(time.perf_counter() - t)
            same &= a == ours.tokens
        rows.append({"input": name, "tokens": len(ours.tokens), "same": same,
                     "et": statistics.median(et_s[1:]), "ours": statistics.median(our_s[1:]),
                     "load": (et_load, our_load)})
    return rows


def table(mm_rows, speech_rows, args, load) -> str:
    head = (f"Produced by `python examples/bench_multimodal.py --size {args.size} --rounds "
            f"{args.rounds} --new-tokens {args.new_tokens}` on {time.strftime('%Y-%m-%d')} "
            f"({platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}); 1-min load average {load[0]:.1f} before, "
            f"{load[1]:.1f} after (a shared machine: ratios move by tens of percent between "
            "runs).")
    lines = ["## Multimodal generation and transcription: pyruntime.llm vs ExecuTorch", "",
             head, ""]
    if mm_rows:
        lines += [
            "Llava- and Voxtral-style programs exported here as ExecuTorch's `export_llava.py` "
            "exports (random weights; " +
            ("dim 256, 4 layers, context 256, vocabulary 2048, 64 embeddings per `[3, 64, 64]` "
             "image or `[1, 128, 128]` features" if args.size == "bench" else
             "the tests' programs: dim 64, 2 layers, 16 embeddings per image or audio") +
            "), each kind's first test case (text, media, text), greedy, interleaved rounds, "
            "medians, timed from outside in the per-token callback: TTFT (encoder + prefill) "
            "from the call, decode tok/s = (tokens - 1) / (last - first token time). Ratio = "
            "ExecuTorch's time / pyruntime's (above 1: pyruntime is faster). pyruntime runs "
            "the fast tier.", "",
            "| model | variant | prompt / new tokens | TTFT pyruntime | TTFT MultimodalRunner |"
            " TTFT ratio | decode tok/s pyruntime | decode tok/s MultimodalRunner | decode "
            "ratio | load pyruntime / ExecuTorch | same output |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
        for (kind, variant), r in mm_rows:
            o, e = r["ours"], r["et"]
            lines.append(
                f"| {kind} | {variant} | {r['prompt_tokens']} / {r['tokens']} | "
                f"{o['ttft'] * 1e3:.2f} ms | {e['ttft'] * 1e3:.2f} ms | "
                f"{e['ttft'] / o['ttft']:.2f} | {o['decode']:.1f} | {e['decode']:.1f} | "
                f"{o['decode'] / e['decode']:.2f} | {r['load'][1] * 1e3:.0f} / "
                f"{r['load'][0] * 1e3:.0f} ms | {'yes' if r['same'] else 'NO'} |")
        lines.append("")
    if speech_rows:
        lines += [
            "Whisper-style programs (tests.llm.speech_fixtures: d_model 64, 2 + 2 layers, 1 s "
            "of 80-bin features): one whole transcription (encoder, start and forced tokens, "
            "greedy to EOS or 24 tokens), pyruntime's `Transcriber` vs the same loop over "
            "`executorch.runtime`'s methods (ExecuTorch's speech runner is C++ only). "
            "Medians; ratio as above.", "",
            "| variant | input | tokens | pyruntime | executorch.runtime loop | ratio | load "
            "pyruntime / ExecuTorch | same tokens |",
            "|---|---|---|---|---|---|---|---|"]
        for variant, r in speech_rows:
            lines.append(
                f"| {variant} | {r['input']} | {r['tokens']} | {r['ours'] * 1e3:.2f} ms | "
                f"{r['et'] * 1e3:.2f} ms | {r['et'] / r['ours']:.2f} | {r['load'][1] * 1e3:.0f}"
                f" / {r['load'][0] * 1e3:.0f} ms | {'yes' if r['same'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from tests.llm import multimodal_fixtures as mf
    from tests.llm import speech_fixtures as sf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="bench", choices=tuple(mf.SIZES))
    ap.add_argument("--kinds", nargs="+", default=[*mf.KINDS, "whisper"],
                    choices=[*mf.KINDS, "whisper"])
    ap.add_argument("--variants", nargs="+", default=list(mf.VARIANTS), choices=mf.VARIANTS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=64, help="tokens per generation")
    ap.add_argument("--threads", type=int, default=None, help="pyruntime intra-op threads")
    ap.add_argument("--update", type=Path, help="rewrite this file's multimodal-bench section")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    mm_rows, speech_rows = [], []
    for kind in (k for k in args.kinds if k in mf.KINDS):
        for variant in args.variants:
            fx = mf.get_multimodal(kind, variant, args.size)
            r = bench_multimodal(fx, args.new_tokens, args.rounds, args.threads)
            mm_rows.append(((kind, variant), r))
            o, e = r["ours"], r["et"]
            print(f"{kind}-{variant}: TTFT {o['ttft'] * 1e3:.1f} vs {e['ttft'] * 1e3:.1f} ms, "
                  f"decode {o['decode']:.1f} vs {e['decode']:.1f} tok/s, same output: "
                  f"{r['same']}", flush=True)
    if "whisper" in args.kinds:
        for variant in args.variants:
            for r in bench_speech(sf.get_whisper(variant), min(args.new_tokens, 24),
                                   args.rounds, args.threads):
                speech_rows.append((variant, r))
                print(f"whisper-{variant} {r['input']}: {r['ours'] * 1e3:.2f} vs "
                      f"{r['et'] * 1e3:.2f} ms, same tokens: {r['same']}", flush=True)
    text = table(mm_rows, speech_rows, args, (load0, os.getloadavg()[0]))
    print(text)
    if args.update:
        update(args.update, text, BEGIN, END)
        print(f"updated {args.update}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
