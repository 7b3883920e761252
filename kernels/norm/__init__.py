"""Normalizations (layer, group, batch, RMS): ``reference``; ``typed``; ``generic``; ``opencl``."""
