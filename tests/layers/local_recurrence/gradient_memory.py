"""The temporary memory of a layer's gradient on JAX, compiled and not run
(XLA's memory analysis), in a process of its own (the backend is fixed at
import)."""

import os
import subprocess
import sys

CODE = """if True:
    import jax, keras, numpy as np
    from keras_relrec.layers import {name}
    def temp(chunk):
        layer = {name}({arguments}, chunk_size=chunk)
        x = np.zeros({shape}, "float32")
        layer(x[:, :2])
        ntv = [v.value for v in layer.non_trainable_variables]
        loss = lambda tv, x: (layer.stateless_call(tv, ntv, x, training=True)[0] ** 2).sum()
        tv = [v.value for v in layer.trainable_variables]
        compiled = jax.jit(jax.grad(loss)).lower(tv, x).compile()
        return compiled.memory_analysis().temp_size_in_bytes
    print(temp(None), temp({chunk_size}))
"""


def gradient_temporaries(name, arguments, shape, chunk_size):
    """Bytes of XLA temporaries of the gradient of `name(arguments)` on
    inputs of `shape`: all at once, and with `chunk_size`."""
    code = CODE.format(name=name, arguments=arguments, shape=shape, chunk_size=chunk_size)
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    whole, chunked = map(int, result.stdout.split()[-2:])
    return whole, chunked
