"""Indexing: ``reference`` (index, gather, scatter, masks, top-k...); ``typed``; ``generic`` with ``generic_gather``, ``generic_mask``, ``generic_topk``; ``opencl``."""
