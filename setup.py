"""Packaging for keras_relrec."""

import pathlib

from setuptools import find_packages
from setuptools import setup

HERE = pathlib.Path(__file__).parent
VERSION = {}
exec((HERE / "keras_relrec" / "version.py").read_text(), VERSION)

EXTRAS = {
    # One TensorFlow or the other: `[export]` brings no TensorFlow, so it
    # installs beside the `tensorflow` (GPU) or `tensorflow-cpu` already
    # there without pulling in the second one.
    "tensorflow": ["tensorflow>=2.21,<2.22"],
    "tensorflow-cpu": ["tensorflow-cpu>=2.21,<2.22"],
    "jax": ["jax>=0.10.2,<0.11"],
    "export": ["ai-edge-litert>=2.3,<3"],
    # tensorflow-datasets imports these while preparing a data set.
    "datasets": [
        "aeon>=1.6,<2",
        "tensorflow-datasets>=4.9.10,<5",
        "importlib_resources>=6",
        "dill>=0.3.8",
    ],
    "kmeans": ["scikit-learn>=1.5,<2"],
    # export(target="micro") runs the file in TFLite Micro's own
    # interpreter (published as dated development builds only).
    "micro": ["tflite-micro>=0.dev20261023182759", "pyyaml>=6"],
    # keras_relrec.tuning: keras-tuner imports tensorboard before every
    # trial on the TensorFlow backend (tensorflow-cpu does not bring it);
    # BayesianOptimization needs scikit-learn.
    "tuning": ["keras-tuner>=1.4.8,<1.5", "tensorboard>=2.21,<2.22", "scikit-learn>=1.5,<2"],
    "tutorials": [
        "ai-edge-litert>=2.3,<3",
        "aeon>=1.6,<2",
        "scikit-learn>=1.5,<2",
        "matplotlib>=3.8",
    ],
    # The documentation site (make docs): MkDocs with the Material theme,
    # the API pages from the docstrings by mkdocstrings' Python handler
    # (griffe, published as griffelib).
    "docs": [
        "mkdocs>=1.6,<2",
        "mkdocs-material>=9.5,<10",
        "pymdown-extensions>=10,<14",
        "mkdocstrings>=1.0,<2",
        "mkdocstrings-python>=2.0,<3",
        "griffelib>=2.4,<3",
    ],
    "test": [
        "tensorflow-cpu>=2.21,<2.22",
        "jax>=0.10.2,<0.11",
        "ai-edge-litert>=2.3,<3",
        "aeon>=1.6,<2",
        "scikit-learn>=1.5,<2",
        "matplotlib>=3.8",
        "tensorflow-datasets>=4.9.10,<5",
        "importlib_resources>=6",
        "dill>=0.3.8",
        "keras-tuner>=1.4.8,<1.5",
        "tensorboard>=2.21,<2.22",
        "tflite-micro>=0.dev20261023182759",
        "pyyaml>=6",
        # pytest-xdist 3.8's `--dist loadgroup` (make test) cannot group
        # tests under pytest 9.2, which stores node ids otherwise.
        "pytest>=8,<9.2",
        "pytest-xdist>=3.5",
        "ruff>=0.15",
    ],
}
# Every optional feature: all but the TensorFlow build (take `tensorflow` or
# `tensorflow-cpu` beside it), the tests and the documentation's tools.
EXTRAS["all"] = sorted({requirement for name in ("jax", "export", "datasets", "kmeans", "micro", "tuning", "tutorials")
                         for requirement in EXTRAS[name]})

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
    # The command's launcher, beside the package so that it starts without
    # importing Keras (see its docstring).
    py_modules=["keras_relrec_cli"],
    # The cells reuse Keras' RNN dropout mixin and ConvLSTM cell, and the
    # export path Keras' functional executor, from `keras.src` (all in
    # keras_relrec/utils/keras_internals.py): hence the bounded Keras range.
    # The extras give ranges; the exact versions tested are pinned in
    # constraints.txt, which `make test` and `make demo` install with.
    install_requires=[
        "keras>=3.15.1,<3.16",
        "numpy>=1.26",
    ],
    extras_require=EXTRAS,
    entry_points={
        "console_scripts": ["keras-relrec=keras_relrec_cli:main"],
    },
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "License :: OSI Approved :: Apache Software License",
    ],
)
