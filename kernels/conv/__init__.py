"""Convolutions: ``reference``; ``typed`` (im2col + GEMM and the direct/depthwise paths, ``typed_direct``); ``generic`` (any dtype); ``opencl``."""
