"""LLM ops (custom_sdpa, update_cache, rope, fallbacks...): ``reference``, ``reference_extra``; ``typed``, ``typed_extra``, ``typed_attention`` (few query rows); ``opencl``."""
