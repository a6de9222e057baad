"""Runs the contract suite's models in a process of their own: on the JAX
backend, or on TensorFlow with its portable CPU kernels (oneDNN off, as on
CPUs where TensorFlow does not use it, such as AMD's).

Usage: KERAS_BACKEND=jax python backend_worker.py DIR SUFFIX --jax-checks
       KERAS_BACKEND=tensorflow TF_ENABLE_ONEDNN_OPTS=0 python backend_worker.py DIR SUFFIX

For every `<id>.tf.npz` case in DIR written by the main process, loads the
`.keras` files named there with nothing but `import keras_relrec`, and writes
`<id>.<SUFFIX>.npz` with the outputs and the weights after one SGD step;
with `--jax-checks`, also the same with masks, whether a step on all-zero
inputs stays finite and the results of the dropout runs.
"""

import pathlib
import sys

import keras
import numpy as np

import keras_relrec  # noqa: F401  (registers the layers)


def pack(prefix, values):
    """{prefix_k: array} for one array or a list of them (several inputs or
    outputs), to store in an .npz."""
    values = values if isinstance(values, (list, tuple)) else [values]
    return {f"{prefix}_{k}": np.asarray(v) for k, v in enumerate(values)}


def unpack(data, prefix):
    """What `pack` stored: one array, or a list of them."""
    values = [data[f"{prefix}_{k}"] for k in range(len(data)) if f"{prefix}_{k}" in data]
    return values[0] if len(values) == 1 else values


def sgd_mse(model, **compile_kwargs):
    """`model`, compiled for SGD (learning rate 0.1) on the MSE."""
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", **compile_kwargs)
    return model


def fit_one_step(model, x, y, **compile_kwargs):
    """The weights after one step of `sgd_mse`."""
    sgd_mse(model, **compile_kwargs).train_on_batch(x, y)
    return model.get_weights()


def zeros_step_finite(model, weights, x, y):
    """Whether a step on all-zero inputs (blank pixels, silence) leaves the
    weights finite, for a model that `fit_one_step` compiled, from its
    fresh `weights`: the `Dense` in front (`behind_a_dense` in
    test_contract.py) has zero biases, so that the layer sees all-zero
    rows, and the layer's own zero-initialised weights (biases, norms'
    offsets) are still zero, so that rows inside it are constant too. No
    sqrt or norm of a constant row may give 0/0 (JAX's sqrt gradient at 0
    times 0 is NaN where TensorFlow's is not). Same shapes, so the compiled
    step is reused."""
    model.set_weights(weights)
    model.train_on_batch(keras.tree.map_structure(np.zeros_like, x), y)
    return all(np.all(np.isfinite(w)) for w in model.get_weights())


def main(folder, suffix, jax_checks=False):
    folder = pathlib.Path(folder)
    for case in sorted(folder.glob("*.tf.npz")):
        name = case.name[: -len(".tf.npz")]
        data = dict(np.load(case))
        out = {}
        x, y = unpack(data, "x"), unpack(data, "y")
        model = keras.saving.load_model(folder / f"{name}.keras", safe_mode=True)
        fresh = model.get_weights()
        out.update(pack("outputs", model.predict_on_batch(x)))
        weights = fit_one_step(model, x, y)
        for i, w in enumerate(weights):
            out[f"fit_weight_{i}"] = np.asarray(w)

        masked_path = folder / f"{name}.masked.keras"
        if jax_checks:
            out["zeros_step_finite"] = np.array(zeros_step_finite(model, fresh, x, y))
        if jax_checks and masked_path.exists():
            # Every output flattened into one, by the same model that takes
            # the training step: gradients through masked steps too (a
            # masked softmax's).
            flat = keras.saving.load_model(masked_path, safe_mode=True)
            x_masked = unpack(data, "x_masked")
            out["masked_outputs"] = np.asarray(flat.predict_on_batch(x_masked))
            for i, w in enumerate(fit_one_step(flat, x_masked, unpack(data, "y_masked"))):
                out[f"masked_fit_weight_{i}"] = np.asarray(w)

        dropout_path = folder / f"{name}.dropout.keras"
        if jax_checks and dropout_path.exists():
            # Masks drawn inside JAX's `lax.scan` would fail; a training step
            # and a training-mode call must run and draw real masks.
            dropout = keras.saving.load_model(dropout_path, safe_mode=True)
            fit_one_step(dropout, x, y)
            out["dropout_train"] = np.asarray(dropout(x, training=True))
            out["dropout_infer"] = np.asarray(dropout(x, training=False))
        np.savez(folder / f"{name}.{suffix}.npz", **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], jax_checks="--jax-checks" in sys.argv[3:])
