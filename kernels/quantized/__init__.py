"""Quantized ops (quantize/dequantize, int8 conv/linear, weight-only embeddings and mixed mm): ``reference``; ``typed``, ``typed_weights``; ``opencl``."""
