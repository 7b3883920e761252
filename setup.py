"""Builds the Cython execute loop and maps the repository's folders into one package.

The wheel installs a single top-level name, ``pyruntime``: the folders kernels/, delegates/,
cython_ext/ and exporter/ stay at the repository's top and install as pyruntime.kernels,
pyruntime.delegates, ... (a source checkout finds them through pyruntime/__init__.py).
Everything else is in pyproject.toml.
"""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

INSIDE = ("kernels", "delegates", "cython_ext", "exporter")

setup(packages=find_packages(include=["pyruntime", "pyruntime.*"]) + [
          f"pyruntime.{p}" for p in find_packages(include=[f"{t}{s}" for t in INSIDE
                                                           for s in ("", ".*")])],
      package_dir={f"pyruntime.{t}": t for t in INSIDE},
      ext_modules=cythonize([Extension("pyruntime.cython_ext._loop", ["cython_ext/_loop.pyx"],
                                       include_dirs=[numpy.get_include()],
                                       define_macros=[("NPY_NO_DEPRECATED_API",
                                                       "NPY_1_7_API_VERSION")],
                                       extra_link_args=["-pthread"])],
                            compiler_directives={"language_level": 3}))
