"""Packaging for keras_relrec."""

import pathlib

from setuptools import find_packages
from setuptools import setup

HERE = pathlib.Path(__file__).parent
VERSION = {}
exec((HERE / "keras_relrec" / "version.py").read_text(), VERSION)

setup(
    name="keras_relrec",
    version=VERSION["__version__"],
    description=(
        "Relational and recurrent sequence layers for Keras 3: peephole, "
        "coupled and convolutional LSTM cells, relational memory, "
        "bag-of-features and bilinear layers."
    ),
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["keras_relrec", "keras_relrec.*"]),
    # The versions we test; the package itself only needs Keras 3 and NumPy.
    install_requires=[
        "keras==3.15.1",
        "numpy>=1.26",
    ],
    extras_require={
        "tensorflow": ["tensorflow-cpu==2.21.0"],
        "jax": ["jax[cpu]==0.10.2"],
        "tutorials": ["tensorflow-cpu==2.21.0", "matplotlib==3.11.2"],
        "test": [
            "tensorflow-cpu==2.21.0",
            "jax[cpu]==0.10.2",
            "matplotlib==3.11.2",
            "pytest==9.2.0",
            "pytest-xdist==3.8.0",
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "License :: OSI Approved :: Apache Software License",
    ],
)
