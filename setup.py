"""Builds the Cython execute loop; everything else is in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup

setup(ext_modules=cythonize([Extension("cython_ext._loop", ["cython_ext/_loop.pyx"],
                                       extra_link_args=["-pthread"])],
                            compiler_directives={"language_level": 3}))
