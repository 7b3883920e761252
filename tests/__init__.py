import os

# Tests, fuzz campaigns and benchmarks run compiled kernels even on a machine whose kernel
# cache is empty: they compile at load (the background mode users get by default has its
# own tests in test_warmup.py).
os.environ.setdefault("PYRUNTIME_COMPILE", "sync")
