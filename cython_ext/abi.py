"""The descriptor ABI shared by the Cython loop and compiled kernels.

A tensor at run time is a row of ``DESC_WORDS`` int64 words in the method's
descriptor table (``DescTable``); compiled kernels receive the addresses of
rows in their argument block and read/write them directly:

=========  ======================================================
word       meaning
=========  ======================================================
0          data pointer (0 = no data)
1          scalar type (ExecuTorch ScalarType code)
2          rank
3          numel (current)
4          capacity in elements (serialized, upper-bound sizes)
5          shape dynamism (0 static, 1 dynamic bound)
8..23      sizes
24..39     strides in elements (derived from sizes and dim order)
40..55     dim order
=========  ======================================================

Kernel status codes are ExecuTorch error codes (0 = Ok).
"""
DESC_WORDS = 64
D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_CAP, D_DYN = 0, 1, 2, 3, 4, 5
D_SIZES, D_STRIDES, D_DIMORDER = 8, 24, 40
MAX_DIMS = 16
