"""``pyruntime transcribe``: the transcript of speech from a Whisper-style program.

    pyruntime transcribe whisper.pte --tokenizer whisper-tiny/ --audio speech.wav \\
        --preprocessor whisper_preprocess.pte [--max-new-tokens 64] [--stats]
    pyruntime transcribe whisper.pte --tokenizer tokenizer.json --audio features.npy

stdout gets the transcript text only (no special tokens), streamed as it comes (a final
newline only on a terminal); ``--stats`` writes one line of timings to stderr.
"""
from __future__ import annotations

import sys
from pyruntime.method import TIERS


def add_parser(sub) -> None:
    pt = sub.add_parser("transcribe", help="transcribe speech with a Whisper-style program")
    pt.add_argument("file", help="the .pte (methods encoder and text_decoder)")
    pt.add_argument("--tokenizer", required=True,
                    help="tokenizer.json, or the folder holding it beside config.json / "
                         "generation_config.json (as transformers saves them)")
    pt.add_argument("--audio", required=True, metavar="FILE",
                    help="a .wav (16 kHz mono PCM or float; needs --preprocessor) or a .npy of "
                         "the encoder's features (e.g. float32 [1, 80, 3000] log-mel)")
    pt.add_argument("--preprocessor", metavar="PRE.pte",
                    help="samples -> features program (ExecuTorch's mel_spectrogram.py export)")
    pt.add_argument("--max-new-tokens", type=int, default=None,
                    help="tokens to generate at most (default: until the decoder's cache is full)")
    pt.add_argument("--stats", action="store_true", help="timings on stderr")
    pt.add_argument("--tier", default="fast", choices=TIERS)
    pt.add_argument("--threads", type=int, default=None, help="intra-op threads")
    pt.add_argument("--data", help=".ptd external data file")


def cli(args, stdout=None, stderr=None) -> int:
    from pyruntime import ExecuTorchError
    from pyruntime.llm import LLMError, Transcriber
    from pyruntime.llm.cli import finish, write_stream

    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        asr = Transcriber(args.file, args.tokenizer, preprocessor=args.preprocessor,
                          tier=args.tier, threads=args.threads, data_path=args.data)
        write_stream(lambda: asr.stream(args.audio, args.max_new_tokens), stdout, stderr)
    except (LLMError, ExecuTorchError) as e:
        stderr.write(f"error: {e}\n")
        return 1
    return finish(stdout, stderr, asr.stats if args.stats else None)
