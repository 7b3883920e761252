"""Imports every kernel family's reference modules so that their kernels register.

A family is a folder under ``kernels/`` (``kernels/pool/``...); its modules named
``reference*`` are the reference tier, the others the compiled tier (``typed*``,
``generic*``: see ``kernels.fast.kernel_modules``) and ``opencl`` the OpenCL tier.
"""
import importlib

from pyruntime.kernels import family_modules

for _name in family_modules("reference"):
    importlib.import_module(_name)
