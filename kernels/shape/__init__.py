"""Data movement (views, permute, cat, copy, pad, flip...): ``reference``, ``reference_copy``; ``typed``; ``generic`` with ``generic_move``, ``generic_space``; ``opencl``."""
