"""``pyruntime generate``: text from an ExecuTorch LLM program, text-only or multimodal.

    pyruntime generate model.pte --tokenizer tokenizer.json --prompt "Once upon a time" \\
        --max-new-tokens 64 --temperature 0 [--top-p 0.9] [--seed 0] [--stats]
    pyruntime generate llava.pte --tokenizer tokenizer.json --prompt "A photo: <image> Say" \\
        --image cat.png --max-new-tokens 64 --temperature 0     # [--audio FEATURES.npy]...

For a multimodal program (``token_embedding`` + ``text_decoder`` + encoders), each
``<image>`` / ``<audio>`` in the prompt takes the next ``--image`` / ``--audio`` file in
order; without placeholders the media come first, then the text.

stdout gets the generated continuation and nothing else (streamed as it comes;
a final newline only on a terminal); ``--stats`` writes one line to stderr with
the load time, prefill tokens/s, time to first token and ``decode tok/s``.
"""
from __future__ import annotations

import sys
import warnings
from pyruntime.method import TIERS


def add_parser(sub) -> None:
    pg = sub.add_parser("generate", help="generate text with an ExecuTorch LLM program")
    pg.add_argument("file", help="the .pte (from ExecuTorch's LLM export)")
    pg.add_argument("--tokenizer", required=True,
                    help="tokenizer.json (or its folder), or a tiktoken/sentencepiece .model")
    pg.add_argument("--prompt", required=True,
                    help="the text; in a multimodal program's prompt each <image> / <audio> "
                         "takes the next --image / --audio file (none: media first)")
    pg.add_argument("--image", action="append", default=[], metavar="FILE",
                    help="an image (multimodal programs; repeatable): a .npy holding the tensor "
                         "ExecuTorch's make_image_input is given (uint8 or float32 [C, H, W]), "
                         "or a .png/.jpg, converted to RGB, resized (bilinear) to the "
                         "vision_encoder's input height and width, channels first, as uint8 "
                         "0-255 or float32 0-1 by that input's dtype (needs Pillow)")
    pg.add_argument("--audio", action="append", default=[], metavar="FILE",
                    help="audio (multimodal programs; repeatable): a .npy of preprocessed "
                         "features as ExecuTorch's make_audio_input is given (float32 "
                         "[batch, bins, frames])")
    pg.add_argument("--max-new-tokens", type=int, default=None,
                    help="tokens to generate, the first included (default: fill the context)")
    pg.add_argument("--temperature", type=float, default=0.8, help="0: greedy (default 0.8)")
    pg.add_argument("--top-p", type=float, default=0.9, help="nucleus sampling (default 0.9)")
    pg.add_argument("--seed", type=int, default=None, help="seed of the sampler's random numbers")
    pg.add_argument("--stats", action="store_true", help="timings on stderr")
    pg.add_argument("--echo", action="store_true", help="print the prompt before the continuation")
    pg.add_argument("--num-bos", type=int, default=0, help="BOS tokens to add (as ExecuTorch)")
    pg.add_argument("--num-eos", type=int, default=0, help="EOS tokens to add (as ExecuTorch)")
    pg.add_argument("--ignore-eos", action="store_true", help="do not stop at an EOS token")
    pg.add_argument("--chat", nargs="?", const="auto", default=None, metavar="TEMPLATE",
                    help="wrap the prompt as a user message in a chat template (llama3, "
                         "qwen3, chatml, phi4; default: detected from the tokenizer)")
    pg.add_argument("--tier", default="fast", choices=TIERS)
    pg.add_argument("--threads", type=int, default=None, help="intra-op threads")
    pg.add_argument("--data", help=".ptd external data file")


def cli(args, stdout=None, stderr=None) -> int:
    from pyruntime import ExecuTorchError
    from pyruntime.llm import LLMError, apply_chat_template

    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        gen, parts = _generator(args)
        prompt = args.prompt
        if args.chat is not None:
            prompt = apply_chat_template([{"role": "user", "content": prompt}],
                                         None if args.chat == "auto" else args.chat,
                                         tokenizer=gen.tokenizer)
        if parts is not None:
            prompt = parts(prompt)
        write_stream(lambda: gen.stream(
            prompt, args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
            seed=args.seed, echo=args.echo, num_bos=args.num_bos, num_eos=args.num_eos,
            ignore_eos=args.ignore_eos), stdout, stderr)
    except (LLMError, ExecuTorchError) as e:
        stderr.write(f"error: {e}\n")
        return 1
    return finish(stdout, stderr, gen.stats if args.stats else None)


def write_stream(start, stdout, stderr) -> None:
    """``start()`` gives the piece stream (it checks the inputs, with warnings recorded:
    they come out as notes on stderr); each piece goes to stdout as it comes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pieces = start()
        for w in caught:
            stderr.write(f"note: {w.message}\n")
        for piece in pieces:
            stdout.write(piece)
            stdout.flush()


def finish(stdout, stderr, stats=None) -> int:
    """A final newline on a terminal only, then the stats line on stderr if given."""
    if getattr(stdout, "isatty", lambda: False)():
        stdout.write("\n")
    if stats is not None:
        stderr.write(f"{stats}\n")
    return 0


def _generator(args):
    """(the generator for the program, and for a multimodal one a function turning the
    prompt into its parts with the media files loaded; None for a text program)."""
    from pyruntime.llm import MediaError, TextGenerator
    from pyruntime.llm.media import Image, load_audio_features, load_image
    from pyruntime.llm.multimodal import MultimodalGenerator, is_multimodal, parts_from_prompt
    from pyruntime.runtime import Runtime

    kw = dict(tier=args.tier, threads=args.threads, data_path=args.data)
    if not is_multimodal(Runtime.get().load_program(args.file, data_path=args.data)):
        if args.image or args.audio:
            raise MediaError(f"{args.file} is a text-only program (no token_embedding / "
                             "text_decoder methods): --image and --audio need a multimodal one")
        return TextGenerator(args.file, args.tokenizer, **kw), None
    gen = MultimodalGenerator(args.file, args.tokenizer, **kw)
    images = [load_image(f, gen.encoder_input(Image)) for f in args.image]
    audios = [load_audio_features(f) for f in args.audio]
    return gen, lambda prompt: parts_from_prompt(prompt, images, audios)
