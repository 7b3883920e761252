"""Multimodal programs in ExecuTorch's layout, exported here, with ExecuTorch's own
``MultimodalRunner``'s greedy pieces as the reference.

    from tests.llm.multimodal_fixtures import get_multimodal
    fx = get_multimodal("llava", "xnnpack")    # exported once, then read from the cache
    fx.pte, fx.tokenizer, fx.media             # the program, tokenizer.json, media .npy files
    fx.cases                                   # [MultimodalCase(parts, pieces)], the reference

Kinds: ``llava`` (``vision_encoder``: a uint8 ``[3, 32, 32]`` image through a strided conv
and a two-layer projector to 16 embeddings) and ``voxtral`` (``audio_encoder``: float
``[1, 128, 32]`` log-mel features through two 1-D convs and a projector to 16
embeddings); both with ``token_embedding`` (dynamic ``[1, T]``) and ``text_decoder``
(ExecuTorch's Llama ``construct_transformer`` with its custom KV cache and
``llama::custom_sdpa``, fed embeddings and a start position) and the constant methods
ExecuTorch's runner reads. Random weights, the ``ascii`` vocabulary of
``tests.llm.fixtures``; exported as ``export_llava.py`` does (one program, three
methods, ``alloc_graph_input=False``). Variants: ``portable``; ``xnnpack`` (every method
through ``XnnpackPartitioner``). Sizes: ``tiny`` (the tests: those shapes, dim 64, 2
layers, context 96) and ``bench`` (dim 256, 4 layers, context 256, the 2048-token
vocabulary, 64 embeddings per ``[3, 64, 64]`` image or ``[1, 128, 128]`` features).

Cases (``parts``: text strings and ``{"image": name}`` / ``{"audio": name}`` naming a file
of ``media``) are run by ``MultimodalRunner.generate`` with ``temperature=0`` in the
export's child process (``python -m tests.llm.multimodal_fixtures --build``); their
pieces are stored in ``reference.json``. Cache: ``<llm cache>/multimodal-<kind>-<variant>``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.child import repo_env
from tests.llm.fixtures import _lock, _sha256, cache_dir, tokenizer_path

FORMAT_VERSION = "1"
_REPO = Path(__file__).resolve().parents[2]
KINDS = ("llava", "voxtral")
VARIANTS = ("portable", "xnnpack")
NEW_TOKENS = 20
BOS_ID, EOS_ID = 0, 1  # the tokenizers' <|begin_of_text|>, <|end_of_text|>


@dataclass(frozen=True)
class Size:
    dim: int
    layers: int
    heads: int
    vocab: int
    context: int
    max_seq: int
    tokenizer: str  # a kind of tests.llm.fixtures.tokenizer_path
    image: tuple  # vision_encoder's input, uint8 CHW (as make_image_input gives it)
    audio: tuple  # audio_encoder's input, float log-mel [batch, bins, frames]


# "tiny": the tests' (16 embeddings per image or audio); "bench": examples/bench_multimodal.py
SIZES = {"tiny": Size(64, 2, 4, 320, 96, 32, "ascii", (3, 32, 32), (1, 128, 32)),
         "bench": Size(256, 4, 8, 2048, 256, 128, "bench", (3, 64, 64), (1, 128, 128))}
IMAGE_SHAPE, AUDIO_SHAPE = SIZES["tiny"].image, SIZES["tiny"].audio

CASES = {
    "llava": [["A photo of", {"image": "image0"}, "Then we look up at the day"],
              [{"image": "image1"}, "He said that we can"],
              ["The time is", {"image": "image0"}, "and", {"image": "image1"}, "what"]],
    "voxtral": [["Listen to this:", {"audio": "audio0"}, "What was said?"],
                [{"audio": "audio1"}, "Water, water"]],
}


@dataclass(frozen=True)
class MultimodalCase:
    parts: list  # str | {"image": name} | {"audio": name}
    pieces: list  # MultimodalRunner's greedy pieces (NEW_TOKENS tokens)


@dataclass(frozen=True)
class MultimodalFixture:
    kind: str
    variant: str
    size: str
    pte: Path
    tokenizer: Path
    media: dict  # name -> .npy path
    cases: list

    def inputs(self, case: MultimodalCase) -> list:
        """The case's parts for pyruntime: strings, and ``Image`` / ``Audio`` arrays."""
        import numpy as np

        from pyruntime.llm import Audio, Image

        out = []
        for p in case.parts:
            if isinstance(p, str):
                out.append(p)
            elif "image" in p:
                out.append(Image(np.load(self.media[p["image"]])))
            else:
                out.append(Audio(np.load(self.media[p["audio"]])))
        return out


def _name(kind, variant, size) -> str:
    return f"{kind}-{variant}" + ("" if size == "tiny" else f"-{size}")


def _folder(kind, variant, size) -> Path:
    return cache_dir() / f"multimodal-{_name(kind, variant, size)}"


def _spec(kind, variant, size) -> dict:
    import dataclasses
    import importlib.metadata

    spec = {"format": FORMAT_VERSION, "kind": kind, "variant": variant,
            "size": dataclasses.asdict(SIZES[size]), "cases": CASES[kind],
            "new_tokens": NEW_TOKENS,
            "torch": importlib.metadata.version("torch"),
            "executorch": importlib.metadata.version("executorch")}
    return json.loads(json.dumps(spec))  # as key.json reads back (tuples as lists)


def _media_names(kind) -> list:
    return sorted({p[k] for case in CASES[kind] for p in case if isinstance(p, dict)
                   for k in p})


def _files(kind, variant, size) -> dict:
    d = _folder(kind, variant, size)
    return {"model.pte": d / "model.pte", "reference.json": d / "reference.json",
            **{f"{m}.npy": d / f"{m}.npy" for m in _media_names(kind)}}


def _valid(kind, variant, size) -> bool:
    try:
        key = json.loads((_folder(kind, variant, size) / "key.json").read_text())
        return key.get("spec") == _spec(kind, variant, size) and all(
            key["files"][n] == _sha256(p) for n, p in _files(kind, variant, size).items())
    except (OSError, ValueError, KeyError):
        return False


def _load(kind, variant, size) -> MultimodalFixture:
    d = _folder(kind, variant, size)
    ref = json.loads((d / "reference.json").read_text())
    cases = [MultimodalCase(parts, pieces) for parts, pieces in zip(CASES[kind], ref["pieces"])]
    return MultimodalFixture(kind, variant, size, d / "model.pte",
                             tokenizer_path(SIZES[size].tokenizer),
                             {m: d / f"{m}.npy" for m in _media_names(kind)}, cases)


def get_multimodal(kind: str, variant: str = "portable", size: str = "tiny"
                   ) -> MultimodalFixture:
    """Fixture (kind, variant, size), exporting every missing one of that size in one
    child process."""
    if kind not in KINDS or variant not in VARIANTS or size not in SIZES:
        raise KeyError(f"unknown multimodal fixture {kind!r}/{variant!r}/{size!r}: kinds "
                       f"{', '.join(KINDS)}, variants {', '.join(VARIANTS)}, sizes "
                       f"{', '.join(SIZES)}")
    if not _valid(kind, variant, size):
        missing = [_name(k, v, size) for k in KINDS for v in VARIANTS if not _valid(k, v, size)]
        tokenizer_path(SIZES[size].tokenizer)
        env = repo_env()
        r = subprocess.run([sys.executable, "-m", "tests.llm.multimodal_fixtures", "--build",
                            *missing], cwd=_REPO, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"exporting multimodal fixtures {missing} failed (exit "
                               f"{r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    return _load(kind, variant, size)


# ----------------------------------------------------------------- build (child process)


def _modules(kind, z: Size):
    """(encoder module, its example input, the Llama text model), random weights."""
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.examples.models.llama.source_transformation.custom_kv_cache import \
        replace_kv_cache_with_custom_kv_cache
    from executorch.examples.models.llama.source_transformation.sdpa import \
        replace_sdpa_with_custom_op

    torch.manual_seed({"llava": 11, "voxtral": 12}[kind])
    dim = z.dim
    args = ModelArgs(dim=dim, n_layers=z.layers, n_heads=z.heads, n_kv_heads=z.heads // 2,
                     vocab_size=z.vocab, hidden_dim=2 * dim, norm_eps=1e-5,
                     max_seq_len=z.max_seq, max_context_len=z.context, max_batch_size=1,
                     use_kv_cache=True,
                     enable_dynamic_shape=True, generate_full_logits=False)
    text = construct_transformer(args)
    with torch.no_grad():  # weights spread enough for varied greedy text
        for name, p in text.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape))
            else:
                scale = 3.0 if name == "output.weight" or ".wq." in name or ".wk." in name \
                    else 1.0
                p.copy_(torch.randn(p.shape) * (scale / p.shape[-1] ** 0.5))
    text = replace_sdpa_with_custom_op(replace_kv_cache_with_custom_kv_cache(text)).eval()

    class Vision(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = torch.nn.Conv2d(3, 32, 8, stride=8)
            self.proj1, self.proj2 = torch.nn.Linear(32, dim), torch.nn.Linear(dim, dim)
            self.register_buffer("mean", torch.tensor([0.48, 0.46, 0.41]).view(1, 3, 1, 1))
            self.register_buffer("std", torch.tensor([0.27, 0.26, 0.28]).view(1, 3, 1, 1))

        def forward(self, image):  # uint8 [3, H, W]
            x = (image.unsqueeze(0).to(torch.float32) / 255.0 - self.mean) / self.std
            x = self.patch(x).flatten(2).transpose(1, 2)  # [1, H * W / 64, 32]
            return self.proj2(torch.nn.functional.gelu(self.proj1(x)))

    class AudioEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv1d(128, dim, 3, padding=1)
            self.conv2 = torch.nn.Conv1d(dim, dim, 3, stride=2, padding=1)
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, features):  # float [1, 128, T]
            x = torch.nn.functional.gelu(self.conv1(features))
            x = torch.nn.functional.gelu(self.conv2(x)).transpose(1, 2)  # [1, T/2, dim]
            return self.proj(x)

    if kind == "llava":
        enc, example = Vision().eval(), torch.randint(0, 256, z.image, dtype=torch.uint8)
    else:
        enc, example = AudioEncoder().eval(), torch.randn(z.audio)
    with torch.no_grad():
        for p in enc.parameters():
            p.mul_(3.0)  # media embeddings as loud as the token embeddings
    return enc, example, text


def _export(kind, variant, z: Size, path: Path) -> None:
    import torch
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, \
        to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass
    from torch.export import Dim

    enc, example, text = _modules(kind, z)

    class TextDecoder(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, embeddings, input_pos):
            return self.model(None, {"input_pos": input_pos}, embeddings)

    tokens = torch.tensor([[2, 3, 4]], dtype=torch.long)
    with torch.no_grad(), torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        embeds = text.tok_embeddings(tokens)
        programs = {
            "vision_encoder" if kind == "llava" else "audio_encoder":
                torch.export.export(enc, (example,), strict=True),
            "token_embedding": torch.export.export(
                text.tok_embeddings, (tokens,),
                dynamic_shapes=[{1: Dim("t", min=2, max=z.max_seq)}], strict=True),
            "text_decoder": torch.export.export(
                TextDecoder(text), (embeds, torch.tensor([0], dtype=torch.long)),
                dynamic_shapes=({1: Dim("token_dim", min=2, max=z.max_seq)}, None),
                strict=True),
        }
    partitioner = None
    if variant == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import \
            XnnpackPartitioner
        partitioner = {name: [XnnpackPartitioner()] for name in programs}
    constants = {"get_max_seq_len": z.max_seq, "get_max_context_len": z.context,
                 "get_vocab_size": z.vocab, "use_kv_cache": True, "enable_dynamic_shape": True,
                 "use_sdpa_with_kv_cache": True, "get_bos_id": BOS_ID, "get_eos_ids": [EOS_ID]}
    edge = to_edge_transform_and_lower(programs, partitioner=partitioner,
                                       constant_methods=constants,
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    et = edge.to_executorch(ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
        sym_shape_eval_pass={n: ConstraintBasedSymShapeEvalPass() for n in programs}))
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(et.buffer)
    os.replace(tmp, path)


def _media(kind, z: Size, folder: Path) -> None:
    import numpy as np

    for i, name in enumerate(_media_names(kind)):
        rng = np.random.default_rng(100 + i)
        if name.startswith("image"):
            arr = rng.integers(0, 256, z.image, dtype=np.uint8)
        else:
            arr = rng.standard_normal(z.audio).astype(np.float32)
        np.save(folder / f"{name}.npy", arr)


def _et_reference(kind, z: Size, folder: Path) -> dict:
    import numpy as np
    import torch

    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401 - llama ops
    from executorch.extension.llm.runner import (GenerationConfig, MultimodalRunner,
                                                 make_audio_input, make_image_input,
                                                 make_text_input)

    runner = MultimodalRunner(str(folder / "model.pte"), str(tokenizer_path(z.tokenizer)))
    pieces = []
    for case in CASES[kind]:
        inputs = []
        for p in case:
            if isinstance(p, str):
                inputs.append(make_text_input(p))
            elif "image" in p:
                inputs.append(make_image_input(torch.from_numpy(
                    np.load(folder / f"{p['image']}.npy"))))
            else:
                inputs.append(make_audio_input(torch.from_numpy(
                    np.load(folder / f"{p['audio']}.npy"))))
        got = []
        runner.reset()
        runner.generate(inputs, GenerationConfig(echo=False, max_new_tokens=NEW_TOKENS,
                                                 temperature=0.0), got.append)
        pieces.append(got)
    return {"pieces": pieces}


def _build(kind, variant, size) -> float:
    d, z = _folder(kind, variant, size), SIZES[size]
    d.mkdir(parents=True, exist_ok=True)
    (d / "key.json").unlink(missing_ok=True)
    t0 = time.perf_counter()
    _export(kind, variant, z, d / "model.pte")
    dt = time.perf_counter() - t0
    _media(kind, z, d)
    ref = _et_reference(kind, z, d)
    ref["export_s"] = round(dt, 1)
    (d / "reference.json").write_text(json.dumps(ref, indent=1))
    key = {"spec": _spec(kind, variant, size),
           "files": {n: _sha256(p) for n, p in _files(kind, variant, size).items()}}
    (d / "key.json").write_text(json.dumps(key, indent=1))
    return dt


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.llm.multimodal_fixtures",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="kind-variant[-size] (default: all tiny)")
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)  # the child
    args = ap.parse_args(argv)
    names = args.names or [f"{k}-{v}" for k in KINDS for v in VARIANTS]
    if args.build:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.INFO)
        for name in names:
            kind, variant, size = (name.split("-") + ["tiny"])[:3]
            with _lock(cache_dir() / f"multimodal-{name}.lock"):
                if not _valid(kind, variant, size):
                    print(f"exported {name} in {_build(kind, variant, size):.1f} s", flush=True)
        return 0
    for name in names:
        fx = get_multimodal(*(name.split("-") + ["tiny"])[:3])
        print(f"{name}: {fx.pte} ({fx.pte.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
