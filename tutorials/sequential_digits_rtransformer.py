"""Sequential digits: R-Transformer against an LSTM, a GRU and a Transformer.

R-Transformer's pixel-by-pixel MNIST task (Wang et al. 2019, after Le et
al. 2015) on the handwritten digits that ship inside scikit-learn
(`sklearn.datasets.load_digits`: 1,797 images of 8×8 pixels, 10 classes;
MNIST itself cannot be downloaded here). Each image is read as a sequence
of 64 pixels, one value per step, row by row (`--permute`: in a fixed
random order, the permuted task), standardised; the class is read at the
last step.
The split is fixed: 1,257 images to train, 180 to validate, 360 to test.

Models of about the same number of weights (~38 k), each trained with the
same recipe (`--epochs` 40, batch 32, Adam with a cosine decay from 2e-3,
XLA), `--seeds` 3 seeds each:

- R-Transformer: a projection to d = 32, two `RTransformerBlock`s (a GRU
  over windows of M = 8 pixels, 4 heads of causal attention, feed-forward
  128), the last step to 10 classes (the public code's MNIST model, with
  its width and window; it uses 8 blocks of d = 32 on 784 steps);
- Transformer: the same blocks without local recurrence
  (`num_local_layers=0`) and a learned position embedding instead, widened
  to the same weight count;
- LSTM and GRU: one layer, widened to the same weight count.

The validation accuracy per epoch is plotted (learning curves) and the
test accuracy of the last epoch reported as mean ± std over the seeds.
The paper's MNIST task has 28×28 images (784 steps) and 60,000 training
images: the task here is smaller in every way, so only the order of the
models compares. (The paper's figures we could confirm offline are for
tasks whose data do not ship in a wheel: Nottingham 2.37 NLL, PTB
characters 1.24 bits.)

    python tutorials/sequential_digits_rtransformer.py            # the README's figures
    python tutorials/sequential_digits_rtransformer.py --tiny     # seconds, for CI
"""

import argparse
import json
import os
import pathlib
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import matplotlib  # noqa: E402
import numpy as np  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from keras_relrec import save_model  # noqa: E402
from keras_relrec.layers import RTransformerBlock  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402
from keras_relrec.utils import model_card  # noqa: E402

STEPS, CLASSES = 64, 10
MODELS = ("R-Transformer", "Transformer", "LSTM", "GRU")


def digits(permute, seed=0):
    """(x_train, y_train), (x_val, y_val), (x_test, y_test): (n, 64, 1)
    pixel sequences, split in a fixed random order."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.images.reshape(-1, STEPS) / 16.0).astype("float32")
    rng = np.random.default_rng(seed)
    if permute:
        x = x[:, rng.permutation(STEPS)]
    order = rng.permutation(len(x))
    x, y = x[order, :, None], data.target[order].astype("int32")
    # Standardised with the training images' mean and std, as the public
    # code does for MNIST: a blank pixel is then not an all-zero input,
    # whose layer norm (the std in a denominator) has no useful gradient.
    x = (x - x[:1257].mean()) / x[:1257].std()
    return (x[:1257], y[:1257]), (x[1257:1437], y[1257:1437]), (x[1437:], y[1437:])


class LearnedPositions(keras.layers.Layer):
    """Adds a learned vector per position: the Transformer's order."""

    def build(self, input_shape):
        self.positions = self.add_weight(name="positions", shape=tuple(input_shape[1:]),
                                         initializer=keras.initializers.RandomNormal(stddev=0.02))

    def call(self, inputs):
        return inputs + self.positions


def last_step(h, width):
    """The output at the last step, (batch, width)."""
    return keras.layers.Reshape((width,))(keras.layers.Cropping1D((STEPS - 1, 0))(h))


def build(kind, width, args):
    inputs = keras.Input((STEPS, 1), name="pixels")
    if kind in ("LSTM", "GRU"):
        layer = keras.layers.LSTM if kind == "LSTM" else keras.layers.GRU
        h = layer(width, name=kind.lower())(inputs)
    else:
        h = keras.layers.Dense(width, name="projection")(inputs)
        local = args.local_layers if kind == "R-Transformer" else 0
        if local == 0:
            h = LearnedPositions(name="positions")(h)
        for n in range(args.blocks):
            h = RTransformerBlock(args.heads, args.window, num_local_layers=local, dropout=args.dropout,
                                  name=f"block_{n}")(h)
        h = last_step(h, width)
    outputs = keras.layers.Dense(CLASSES, name="classes")(h)
    return keras.Model(inputs, outputs, name=kind.lower().replace("-", "_"))


def matched_width(kind, target, args):
    """The width whose model has the weight count nearest `target` (a
    multiple of the heads for the attention models)."""
    step = args.heads if kind == "Transformer" else 1
    widths = range(step, 4 * args.width + 1, step)

    def count(width):
        return build(kind, width, args).count_params()

    # Counts grow with the width: bisect for the first width at or above
    # the target, then take the nearer of it and the one before.
    low, high = 0, len(widths) - 1
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if count(widths[middle]) < target else (low, middle)
    return min(widths[max(low - 1, 0) : low + 1], key=lambda w: abs(count(w) - target))


def train(kind, width, data, seed, args):
    keras.utils.set_random_seed(seed)
    model = build(kind, width, args)
    (x, y), validation, test = data
    steps = args.epochs * -(-len(x) // args.batch)
    model.compile(keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(args.learning_rate, steps)),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  jit_compile=args.jit)
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=args.batch, epochs=args.epochs, validation_data=validation, verbose=0)
    seconds = time.perf_counter() - start
    test_accuracy = float((model.predict(test[0], verbose=0).argmax(-1) == test[1]).mean())
    curve = [round(a, 4) for a in history.history["val_accuracy"]]
    print(f"{kind} (seed {seed}): test accuracy {test_accuracy:.3f}, {seconds:.0f} s, validation {curve}")
    return model, {"model": kind, "seed": seed, "weights": model.count_params(), "width": width,
                   "seconds": seconds, "test_accuracy": test_accuracy, "curve": curve}


def summary(runs):
    rows = []
    for kind in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == kind]
        accuracy = np.array([r["test_accuracy"] for r in mine])
        rows.append({"model": kind, "weights": mine[0]["weights"], "width": mine[0]["width"],
                     "test_accuracy_mean": float(accuracy.mean()), "test_accuracy_std": float(accuracy.std()),
                     "seconds_mean": float(np.mean([r["seconds"] for r in mine])), "seeds": len(mine)})
    return rows


def table(rows, args):
    task = "permuted" if args.permute else "sequential"
    lines = [f"| model ({task} digits) | weights | test accuracy (mean ± std, {rows[0]['seeds']} seeds) | "
             "train time per seed |", "|---|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['weights']:,} | {100 * r['test_accuracy_mean']:.1f} ± "
              f"{100 * r['test_accuracy_std']:.1f} % | {r['seconds_mean']:.0f} s |" for r in rows]
    return "\n".join(lines) + "\n"


def plot(runs, args, out):
    fig, ax = plt.subplots(figsize=(6, 4))
    for color, kind in zip(("C0", "C1", "C2", "C3"), dict.fromkeys(r["model"] for r in runs)):
        curves = np.array([r["curve"] for r in runs if r["model"] == kind])
        epochs = np.arange(1, curves.shape[1] + 1)
        ax.plot(epochs, curves.mean(0), color=color, label=kind)
        ax.fill_between(epochs, curves.min(0), curves.max(0), color=color, alpha=0.2)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy")
    ax.set_title(f"{'Permuted' if args.permute else 'Sequential'} 8×8 digits, 64 steps (min–max over seeds)")
    ax.set_ylim(0, 1)
    ax.legend()
    fig.tight_layout()
    with atomic_files.replacing(out / f"{stem(args)}.png") as temp:
        fig.savefig(temp, dpi=100)
    plt.close(fig)


def stem(args):
    return "permuted_digits_rtransformer" if args.permute else "sequential_digits_rtransformer"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--permute", action="store_true", help="the pixels in a fixed random order")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=32, help="R-Transformer's d; the others match its weights")
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--local-layers", type=int, default=1, help="N, local-recurrence layers per block")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--window", type=int, default=8, help="M, the local recurrence's window")
    parser.add_argument("--dropout", type=float, default=0.05)
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="the start of a cosine decay")
    parser.add_argument("--no-jit", dest="jit", action="store_false", help="train without XLA")
    parser.add_argument("--models", nargs="*", choices=MODELS, help="run only these")
    parser.add_argument("--output-dir", default="tutorial_output")
    parser.add_argument("--save-dir", help="write the first R-Transformer (seed 0) here")
    args = parser.parse_args(argv)
    if args.tiny:
        args.epochs, args.seeds, args.width, args.blocks, args.heads, args.jit = 1, 1, 8, 1, 2, False
    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = digits(args.permute)
    if args.tiny:
        data = tuple((x[:64], y[:64]) for x, y in data)
    target = build("R-Transformer", args.width, args).count_params()
    runs = []
    for kind in args.models or MODELS:
        width = args.width if kind == "R-Transformer" else matched_width(kind, target, args)
        for seed in range(args.seeds):
            model, run = train(kind, width, data, seed, args)
            if args.save_dir and kind == "R-Transformer" and seed == 0:
                save(model, run, data[2], args, argv or [], pathlib.Path(args.save_dir))
            runs.append(run)
    rows = summary(runs)
    text = table(rows, args)
    atomic_files.write_text(out / f"{stem(args)}.md", text)
    atomic_files.write_text(out / f"{stem(args)}.json", json.dumps({"summary": rows, "runs": runs}, indent=1) + "\n")
    plot(runs, args, out)
    print(text)
    return rows, runs


def save(model, run, test, args, argv, folder):
    from keras_relrec import export

    folder.mkdir(parents=True, exist_ok=True)
    name = stem(args)
    save_model(model, folder / f"{name}.keras")
    x, y = test
    with atomic_files.replacing(folder / "test_digits.npz") as temp:
        np.savez_compressed(temp, pixels=x, labels=y)
    export.export_saved_model(model, folder / f"{name}_savedmodel")
    export.export_tflite(model, folder / f"{name}.tflite")
    card = {
        "model": run["model"],
        "weights": run["weights"],
        "permuted": args.permute,
        "test_accuracy": float((model.predict(x, verbose=0).argmax(-1) == y).mean()),
        "command": model_card.reproduce_command("tutorials/sequential_digits_rtransformer.py", argv,
                                                "savedmodels/sequential_digits"),
    }
    model_card.write_card(folder / "card.json", card)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
