"""Text generation over ExecuTorch LLM programs (Llama 3.2, Qwen 3, Phi-4-mini, ...).

    from pyruntime.llm import TextGenerator
    gen = TextGenerator("model.pte", "tokenizer.json")       # load once
    text = gen.generate("Once upon a time", max_new_tokens=64, temperature=0)
    for piece in gen.stream("Then", max_new_tokens=64):     # streaming
        print(piece, end="", flush=True)
    print(gen.stats)                                         # tok/s, time to first token
    gen.reset()                                              # a fresh context

or ``python -m pyruntime generate model.pte --tokenizer tokenizer.json --prompt ...``.
Programs are the ones ExecuTorch's LLM export writes (``forward(tokens, input_pos)``
and the constant methods get_max_seq_len, ...): portable, XNNPACK-delegated or
8da4w-quantized. Tokenizers: HF ``tokenizer.json``, tiktoken and sentencepiece
(``pip install 'pyruntime[llm]'``). The runtime underneath imports neither torch
nor executorch.
"""
import importlib

# Names load on first use, so that `pyruntime.llm.cli` (imported by every `pyruntime`
# command to register `generate`) costs nothing until text is generated.
_WHERE = {
    "TextGenerator": "runner", "GenerationStats": "runner", "Sampler": "sampling",
    "load_tokenizer": "tokenizer", "Tokenizer": "tokenizer", "HFTokenizer": "tokenizer",
    "TiktokenTokenizer": "tokenizer", "SentencePieceTokenizer": "tokenizer",
    "TextStream": "tokenizer", "apply_chat_template": "chat", "detect_template": "chat",
    "TEMPLATES": "chat", "LLMMetadata": "contract", "read_metadata": "contract",
    "LLMError": "errors", "NotAnLLMError": "errors", "TokenizerError": "errors",
    "TokenizerMismatchError": "errors", "PromptTooLongError": "errors",
    "ContextFullWarning": "errors", "MediaError": "errors",
    "MultimodalGenerator": "multimodal", "Image": "media", "Audio": "media",
    "Transcriber": "speech", "TranscriptionStats": "speech",
}
__all__ = list(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"pyruntime.llm.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pyruntime.llm' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
