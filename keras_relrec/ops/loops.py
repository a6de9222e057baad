"""Loops over a count of chunks (segments), and whether they are unrolled.

A loop whose count is known when it is traced (the segments of a sequence
of known length) is a backend loop (`counted_loop`): XLA and JAX compile
its body once, where an unrolled loop is compiled once per iteration and
its first call grows with the sequence. It is unrolled (`unrolls`):

- in training: the backward pass of a loop keeps every iteration's
  intermediates in stacks that XLA and JAX neither fuse nor overlap, and
  its later steps cost more than the unrolled iterations' (see the
  `bench_first_step` section of benchmarks/RESULTS.md); besides, a seed
  generator's draws (dropout) cannot leave JAX's scan, nor give XLA on
  TensorFlow shapes inside a WHILE;
- in an export, which traces within `unrolled()`: its files keep one copy
  of the body per iteration and no WHILE, as accelerator delegates and
  TensorFlow Lite's 16x8 calibration need.

An unrolled iteration is traced once per call of the layer in it (Keras
traces a layer's call each time it is called). `traced_once` lets the
iterations of one training step share one trace where the backend can
(TensorFlow's graph, filled in by `keras_relrec.export.tensorflow_internals`,
the one module that may use TensorFlow's private API).
"""

import contextlib
import contextvars

import keras
from keras import ops

_UNROLLED = contextvars.ContextVar("unrolled", default=False)


def unrolls(count, training):
    """Whether a loop of `count` iterations (an int, or a tensor) is traced
    unrolled, in training or not."""
    return isinstance(count, int) and (count == 1 or bool(training) or unrolling())


def unrolling():
    """Whether an export is being traced (`unrolled()`)."""
    return _UNROLLED.get()


@contextlib.contextmanager
def unrolled():
    """Within it, loops of a known count are traced unrolled."""
    token = _UNROLLED.set(True)
    try:
        yield
    finally:
        _UNROLLED.reset(token)


def traced_once(owner, call):
    """`call` (a method of `owner` taking tensors and Python values), or a
    function that runs it with one trace per signature of its arguments,
    shared by every call in a trace; never in an export (`unrolled()`:
    its files keep one graph of builtins)."""
    if keras.backend.backend() != "tensorflow" or unrolling():
        return call
    from keras_relrec.export import tensorflow_internals

    return tensorflow_internals.traced_once(owner, call)


def counted_loop(count, body, carry):
    """`body(index, carry)` for index 0 … count − 1 (an int, or a scalar
    tensor on TensorFlow), differentiable: the carry after the last.

    On TensorFlow a WHILE that knows its count (`maximum_iterations`),
    which XLA needs to differentiate it; elsewhere `ops.fori_loop` (on JAX
    a scan for a known count, which JAX differentiates; a WHILE is not)."""
    if keras.backend.backend() != "tensorflow":
        return ops.fori_loop(0, count, body, carry)
    return ops.while_loop(lambda index, _: index < count, lambda index, carry: (index + 1, body(index, carry)),
                          (0, carry), maximum_iterations=count)[1]
