"""Cadence's int8 DSP kernels (``cadence::*``): reference tier only."""
