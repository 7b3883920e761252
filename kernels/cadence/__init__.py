"""Cadence's int8 DSP kernels (``cadence::*``): reference (numpy) and compiled tiers."""
