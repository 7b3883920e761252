"""Compiled kernels for every dtype, one family per module, named after the reference
module it mirrors (``kernels/<family>.py``): elementwise (``unary``, ``binary``, with the
engine in ``elementwise``), data movement (``copy_shape``, ``creation``, engine in
``move``), indexing (``gather``, ``index``, ``mask``, ``topk``, ``rand``), spatial
(``pool``, ``upsample``, ``grid_sample``, ``dist``), neural-net (``linalg``, ``conv``,
``norm``) and reductions (``reduce``, ``var``, ``cumsum``, ``softmax``). ``*_io``
modules hold a family's typed element access and scratch layout.

Each kernel reads dtypes from the descriptors at run time, so one compile serves every
dtype and dim order; the typed kernels in ``kernels/fast/*.py`` are the hot paths for
the common float cases and these are registered as their fallbacks (or as the only
binder where no typed kernel exists).
"""
