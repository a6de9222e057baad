"""The main job of `make demo`: train, save, export, reload, compare.

Trains a small model built from keras_relrec cells on the adding problem
(Hochreiter & Schmidhuber 1997; generated here, nothing is downloaded): each
step holds a random value and a marker, and the target is the sum of the two
marked values. The model is saved as `.keras`, exported as a SavedModel and
as builtins-only TFLite (whole sequences, and streaming one step at a time),
everything is reloaded, and a table shows how the outputs agree with the
in-memory model and how long a batch takes on each.

    keras-relrec demo [--tiny] [--output-dir DIR]      (what `make demo` runs)

(The launcher chooses TensorFlow and keeps its start-up and converter log
lines off the terminal before Python imports the package; run directly, set
KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2 and
`python -m keras_relrec.demo`.)

`main` returns the table's rows: (name, max |diff|, ms per batch).
"""

import argparse
import pathlib
import statistics
import sys
import time

import keras
import numpy as np

from keras_relrec import export
from keras_relrec import save_model
from keras_relrec.layers import CoupledLSTMCell
from keras_relrec.layers import PeepholeLSTMCell


def adding_problem(n, length, seed):
    """Inputs (n, length, 2): a value in [0, 1) and a 0/1 marker on exactly
    two steps (one in each half); targets (n, 1): the sum of the marked
    values. Always guessing the mean (1.0) gives an MSE of 1/6."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(size=(n, length))
    marks = np.zeros((n, length))
    rows = np.arange(n)
    first = rng.integers(0, length // 2, n)
    second = rng.integers(length // 2, length, n)
    marks[rows, first] = marks[rows, second] = 1.0
    x = np.stack([values, marks], -1).astype("float32")
    y = (values[rows, first] + values[rows, second])[:, None].astype("float32")
    return x, y


def build_model(length, units):
    inputs = keras.Input((length, 2), name="sequence")
    h = keras.layers.RNN(PeepholeLSTMCell(units), return_sequences=True)(inputs)
    h = keras.layers.RNN(CoupledLSTMCell(units, use_peepholes=True))(h)
    outputs = keras.layers.Dense(1, name="sum")(h)
    return keras.Model(inputs, outputs, name="adding_problem")


def median_ms(fn, x, repeats):
    fn(x)  # the first call traces
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.asarray(fn(x))
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--output-dir", default="demo_output")
    args = parser.parse_args(argv)

    import tensorflow as tf  # the SavedModel half of the demo needs it
    from ai_edge_litert.interpreter import Interpreter

    length, units, n_train, epochs = (10, 8, 256, 1) if args.tiny else (50, 32, 4000, 12)
    keras.utils.set_random_seed(0)
    x_train, y_train = adding_problem(n_train, length, seed=0)
    x_test, y_test = adding_problem(512, length, seed=1)

    model = build_model(length, units)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse")
    start = time.perf_counter()
    model.fit(x_train, y_train, batch_size=64, epochs=epochs, verbose=0)
    train_s = time.perf_counter() - start
    mse = float(model.evaluate(x_test, y_test, verbose=0))
    print(f"Adding problem, length {length}: trained {epochs} epochs in {train_s:.1f} s")
    print(f"test MSE {mse:.4f} (always guessing the mean: {1 / 6:.4f})\n")

    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    keras_path = out / "adding_problem.keras"
    saved_model_path = out / "adding_problem_savedmodel"
    tflite_path = out / "adding_problem.tflite"
    step_path = out / "adding_problem_step.tflite"
    save_model(model, keras_path)
    export.export_saved_model(model, saved_model_path)
    export.export_tflite(model, tflite_path)
    export.export_tflite(model, step_path, streaming=True)

    reloaded = keras.saving.load_model(keras_path, safe_mode=True)
    exported = tf.saved_model.load(str(saved_model_path))
    sequence_interpreter = Interpreter(model_path=str(tflite_path))
    step_interpreter = Interpreter(model_path=str(step_path))

    batch = x_test[:64]
    reference = np.asarray(model.predict_on_batch(batch))

    def streamed(b):
        # The step output at the last frame is the output for the sequence.
        return export.run_streaming(step_interpreter, b)["output"][:, -1]

    runs = [
        ("Keras predict_on_batch, in memory", model.predict_on_batch),
        (f"reloaded {keras_path.name}", reloaded.predict_on_batch),
        ("SavedModel, serve", lambda b: exported.serve({"sequence": b})["output"]),
        (f"LiteRT, {tflite_path.name}", lambda b: export.run_sequence(sequence_interpreter, b)["output"]),
        (f"LiteRT, {step_path.name} ({length} steps)", streamed),
    ]
    # Every run finishes before the table is printed, so that the log lines
    # TensorFlow and LiteRT write on stderr (XLA, delegates) come before it.
    rows = []
    for name, fn in runs:
        diff = float(np.max(np.abs(np.asarray(fn(batch)) - reference)))
        rows.append((name, diff, median_ms(fn, batch, 5 if args.tiny else 20)))
    sys.stderr.flush()
    print(f"{'model':<44} {'max |diff|':>11} {'ms / batch of 64':>17}")
    for name, diff, ms in rows:
        print(f"{name:<44} {diff:>11.2e} {ms:>17.2f}")
    print(f"\nfiles written to {out}/")
    return rows


if __name__ == "__main__":
    main()
