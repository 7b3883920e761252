"""Chat templates: a conversation as the prompt text a chat model was trained on.

    from pyruntime.llm.chat import apply_chat_template
    prompt = apply_chat_template([{"role": "user", "content": "Hi!"}], "llama3")

Built in: ``llama3`` (Llama 3.x), ``qwen3`` (ChatML with an empty thinking block,
Qwen 3's non-thinking mode), ``chatml`` and ``phi4`` (Phi-4-mini). ``template``
may also be a Jinja string (a ``chat_template`` from ``tokenizer_config.json``;
needs ``jinja2``), or None: the tokenizer's own template when its
``tokenizer_config.json`` has one (and jinja2 is installed), else the built-in
one whose special tokens the tokenizer has.
"""
from __future__ import annotations

from pyruntime.llm.errors import LLMError

# role header, end of turn, and what opens the assistant's reply
TEMPLATES = {
    "llama3": dict(start="<|begin_of_text|>",
                   turn="<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>",
                   reply="<|start_header_id|>assistant<|end_header_id|>\n\n"),
    "chatml": dict(start="", turn="<|im_start|>{role}\n{content}<|im_end|>\n",
                   reply="<|im_start|>assistant\n"),
    "qwen3": dict(start="", turn="<|im_start|>{role}\n{content}<|im_end|>\n",
                  reply="<|im_start|>assistant\n<think>\n\n</think>\n\n"),
    "phi4": dict(start="", turn="<|{role}|>{content}<|end|>", reply="<|assistant|>"),
}
# a special token only that family's tokenizer has, tried in order
_MARKERS = (("<|start_header_id|>", "llama3"), ("<think>", "qwen3"), ("<|im_start|>", "chatml"),
            ("<|assistant|>", "phi4"))


def detect_template(tokenizer) -> str | None:
    """The built-in template whose special tokens ``tokenizer`` has, or None."""
    for marker, name in _MARKERS:
        if tokenizer.token_id(marker) is not None:
            return name
    return None


def apply_chat_template(messages, template=None, *, tokenizer=None,
                        add_generation_prompt: bool = True) -> str:
    """``messages``: ``[{"role": "system" | "user" | "assistant", "content": str}, ...]``."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise LLMError(f"message {i} must be a dict with 'role' and 'content', got {m!r}")
    if template is None and tokenizer is not None:
        jinja = getattr(tokenizer, "chat_template", None)
        if isinstance(jinja, str) and _has_jinja():
            template = jinja
        else:
            template = detect_template(tokenizer)
    if template is None:
        raise LLMError("no chat template: pass template= (one of "
                       f"{', '.join(TEMPLATES)} or a Jinja string)")
    if template in TEMPLATES:
        t = TEMPLATES[template]
        text = t["start"] + "".join(t["turn"].format(role=m["role"], content=m["content"])
                                    for m in messages)
        return text + (t["reply"] if add_generation_prompt else "")
    if "{%" in template or "{{" in template:
        return _render_jinja(template, messages, add_generation_prompt, tokenizer)
    raise LLMError(f"unknown chat template {template!r} (built in: {', '.join(TEMPLATES)})")


def _has_jinja() -> bool:
    try:
        import jinja2  # noqa: F401
    except ImportError:
        return False
    return True


def _render_jinja(source, messages, add_generation_prompt, tokenizer) -> str:
    try:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as e:
        raise LLMError("a Jinja chat template needs the 'jinja2' package") from e
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env.globals["raise_exception"] = raise_exception
    special = {}
    if tokenizer is not None:
        for attr, key in (("bos_id", "bos_token"), ("eos_id", "eos_token")):
            i = getattr(tokenizer, attr, None)
            if i is not None:
                special[key] = tokenizer.decode([i])
    try:
        return env.from_string(source).render(messages=messages,
                                              add_generation_prompt=add_generation_prompt,
                                              **special)
    except jinja2.exceptions.TemplateError as e:
        raise LLMError(f"the chat template failed: {e}") from e
