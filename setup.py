"""Builds the optional native scans of gep.signals (gep/_scan.c); everything else is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and gep.signals runs its
pure-Python path, which gives the same results.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("gep._scan", ["gep/_scan.c"], optional=True, extra_compile_args=["-O2"])])
