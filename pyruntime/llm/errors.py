"""The text-generation runner's errors: ValueError subclasses that say what and where.

Errors of the runtime underneath (a kernel failing, a wrong input) stay
``pyruntime.ExecuTorchError``; these are about the LLM contract on top of it.
"""
from __future__ import annotations


class LLMError(ValueError):
    """Base class of the runner's errors."""


class NotAnLLMError(LLMError):
    """The program does not follow ExecuTorch's LLM export contract."""


class TokenizerError(LLMError):
    """The tokenizer file cannot be read, or its package is missing."""


class TokenizerMismatchError(LLMError):
    """The tokenizer and the program do not belong together (vocabulary, BOS/EOS ids)."""


class PromptTooLongError(LLMError):
    """The prompt does not fit in the program's context (its KV cache)."""


class ContextFullWarning(UserWarning):
    """Generation was clamped to the context: fewer tokens than asked for will be made."""


class MediaError(LLMError):
    """A media file or array (image, audio, wav) cannot be read or does not fit the method
    that takes it."""
