"""Pooling (max, avg, adaptive): ``reference``; ``typed`` (float32 NCHW); ``generic`` (any dtype and layout); ``opencl``."""
