"""Softmax and log-softmax: ``reference``; ``typed``; ``generic``; ``opencl``."""
