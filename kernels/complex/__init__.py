"""Complex numbers and FFTs: ``reference`` (view_as_real/complex...), ``reference_fft`` (``_fft_*``), ``typed`` (compiled complex views)."""
