"""Upsampling and grid sampling: ``reference``; ``generic``, ``generic_grid``; ``opencl``."""
