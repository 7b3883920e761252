"""Our own readers for ExecuTorch's flatbuffer schemas (written from the spec, no generated code)."""
