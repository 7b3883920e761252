"""Builds the Cython execute loop; everything else is in pyproject.toml."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

setup(ext_modules=cythonize([Extension("cython_ext._loop", ["cython_ext/_loop.pyx"],
                                       include_dirs=[numpy.get_include()],
                                       define_macros=[("NPY_NO_DEPRECATED_API",
                                                       "NPY_1_7_API_VERSION")],
                                       extra_link_args=["-pthread"])],
                            compiler_directives={"language_level": 3}))
