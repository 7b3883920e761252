"""Reductions and scans: ``reference``; ``typed``; ``generic`` with ``generic_var``, ``generic_cumsum``; ``opencl``."""
