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
        "Relational and recurrent sequence layers for Keras 3: the relational "
        "memory core, peephole, coupled and convolutional LSTM cells, the "
        "neural bag-of-features family, with builtins-only TFLite export."
    ),
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["keras_relrec", "keras_relrec.*"]),
    # The cells reuse Keras' RNN dropout mixin and ConvLSTM cell, and the
    # export path Keras' functional executor, from `keras.src`: hence the
    # bounded Keras range. The tested versions are pinned in the extras.
    install_requires=[
        "keras>=3.15.1,<3.16",
        "numpy>=1.26",
    ],
    extras_require={
        "tensorflow": ["tensorflow-cpu==2.21.0"],
        "jax": ["jax[cpu]==0.10.2"],
        "export": ["tensorflow-cpu==2.21.0", "ai-edge-litert==2.3.0"],
        # tensorflow-datasets imports these while preparing a data set.
        "datasets": [
            "aeon==1.6.0",
            "tensorflow-datasets==4.9.10",
            "importlib_resources==7.1.0",
            "dill==0.4.1",
        ],
        "kmeans": ["scikit-learn==1.9.1"],
        "tutorials": [
            "tensorflow-cpu==2.21.0",
            "scikit-learn==1.9.1",
            "ai-edge-litert==2.3.0",
            "aeon==1.6.0",
            "matplotlib==3.11.2",
        ],
        "test": [
            "tensorflow-cpu==2.21.0",
            "jax[cpu]==0.10.2",
            "matplotlib==3.11.2",
            "ai-edge-litert==2.3.0",
            "aeon==1.6.0",
            "scikit-learn==1.9.1",
            "tensorflow-datasets==4.9.10",
            "importlib_resources==7.1.0",
            "dill==0.4.1",
            "pytest==9.2.0",
            "pytest-xdist==3.8.0",
        ],
    },
    entry_points={
        "console_scripts": ["keras-relrec=keras_relrec.export.cli:main"],
    },
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "License :: OSI Approved :: Apache Software License",
    ],
)
