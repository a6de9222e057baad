"""The float32 and float64 runs of the layers' NumPy float64 reference tests.

Under the float64 dtype policy (JAX's x64 on for the run) a layer must meet
the float64 reference within 1e-10, with no relative tolerance: a constant
or table made in float32 on the way, a rounding of about 1e-7, fails it.
The float32 run keeps each test's own tolerance. The float64 runs are
marked to run again on JAX (tests/layers/conftest.py): one per family in
`make check`, every one in `make test-slow`."""

import contextlib

import keras
import numpy as np

from keras_relrec.utils import keras_internals

ATOL = 1e-10


@contextlib.contextmanager
def float64_types():
    """On JAX, 64-bit types within the block (TensorFlow has them always),
    for layers of their own float64 dtype under any policy."""
    with contextlib.ExitStack() as stack:
        if keras.backend.backend() == "jax":
            import jax

            # JAX truncates float64 to float32 without it.
            stack.enter_context(jax.enable_x64(True))
            # Keras' type promotion maps float64 results to float32 on JAX
            # whatever x64 says (see keras_internals.float64_results).
            stack.enter_context(keras_internals.float64_results())
        yield


@contextlib.contextmanager
def float64_policy():
    """The float64 dtype policy, and on JAX 64-bit types, within the block;
    the previous policy after it."""
    previous = keras.config.dtype_policy()
    with float64_types():
        keras.config.set_dtype_policy("float64")
        try:
            yield
        finally:
            keras.config.set_dtype_policy(previous)


class Precision:
    """What a reference test varies with the dtype it runs in (the
    `precision` fixture of tests/layers/conftest.py)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self):
        return self.dtype

    def array(self, x):
        """`x` as the layer takes inputs and weights in this run."""
        return np.asarray(x, self.dtype)

    def assert_close(self, got, want, atol, err_msg=""):
        """float32: within the test's `atol`, as NumPy's default; float64: a
        float64 result within 1e-10 of the reference, absolutely."""
        if self.dtype == "float32":
            np.testing.assert_allclose(got, want, atol=atol, err_msg=err_msg)
            return
        assert keras.backend.standardize_dtype(got.dtype) == "float64", f"a {got.dtype} result under float64"
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want, rtol=0, atol=ATOL, err_msg=err_msg)
