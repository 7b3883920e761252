"""Matrix products: ``reference`` (mm, bmm, addmm, linear...); ``typed`` (GEMM and BLAS); ``generic`` (any dtype), ``generic_dist`` (cdist/pdist); ``opencl``."""
