"""Accelerometer and gyroscope: the Deep Recurrent Relation Transformer on
two real sensors.

The DRRT (Belanger Nzakimuena, "Deep Recurrent Relation Transformer", 2022)
relates two inputs region by region; its original task (OCT
scans with visual fields) is not public. UEA's BasicMotions ships inside the
`aeon` wheel and has two modalities with a natural correspondence: a
smartwatch's 3-axis accelerometer and 3-axis gyroscope, 100 steps at 10 Hz,
while standing, walking, running or playing badminton (4 classes, 40
recordings to train and 40 to test, the UEA split). Regions are K = 4 aligned
time windows of 25 steps. Each channel is standardised with the training
set's statistics.

Models, each trained with the same recipe (`--epochs` 150, batch 8, Adam
with a cosine decay from 2e-3, XLA), `--seeds` 5 seeds each:

- DRRT with fusion by sum, maxout and concatenation (`drrt_classifier`:
  local recurrence M = 5 on each sensor's 16 features, the interaction
  transformer with relation maps of 16 units and local recurrence (16
  units) over the maps, average fusion, a 32-16 classifier), as the DRRT note
  writes eq. (5);
- DRRT (dot): the same with Ψ_ij = u_i·v_j (eq. 5 as written is an outer
  sum, under which a global map's rows are all equal);
- DRT: no local recurrence, neither on the features nor on the maps;
- each sensor alone: its local-recurrence features, mean over time, the
  same classifier;
- LSTM: one layer of 32 units on the six channels concatenated.

The test accuracy after the last epoch is reported as mean ± std over the
seeds; a figure shows the global and the summed regional relation maps of
the first DRRT for one test recording of each class.

    python tutorials/basic_motions_drrt.py            # the README's figures
    python tutorials/basic_motions_drrt.py --tiny     # seconds, for CI
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
from keras_relrec.datasets import load_basic_motions  # noqa: E402
from keras_relrec.datasets.basic_motions import CLASSES  # noqa: E402
from keras_relrec.layers import LocalRecurrence  # noqa: E402
from keras_relrec.models import drrt_classifier  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402
from keras_relrec.utils import model_card  # noqa: E402

MODELS = ("DRRT (sum)", "DRRT (maxout)", "DRRT (concat)", "DRRT (dot)", "DRT", "accelerometer alone",
          "gyroscope alone", "LSTM")
INPUTS = ("accelerometer", "gyroscope")


def data():
    """((train accelerometer, train gyroscope), y), the same for test; each
    channel standardised with the training set's mean and std."""
    train, test = load_basic_motions("train"), load_basic_motions("test")
    stats = [(x.mean((0, 1)), x.std((0, 1))) for x in train[:2]]

    def scaled(split):
        return [(x - mean) / std for x, (mean, std) in zip(split[:2], stats)]

    return (scaled(train), train[2]), (scaled(test), test[2])


def build(kind, args):
    common = {"feature_units": args.features, "window_size": args.window, "relation_units": args.relation_units,
              "regions": args.regions, "map_units": args.map_units, "hidden_units": (32, 16), "dropout": args.dropout,
              "input_names": INPUTS, "seed": 0}
    shapes = ((args.steps, 3), (args.steps, 3))
    if kind.startswith("DRRT"):
        variant = kind[len("DRRT (") : -1]
        pairwise, fusion = ("dot", "sum") if variant == "dot" else ("concat", variant)
        return drrt_classifier(shapes, len(CLASSES), fusion=fusion, pairwise=pairwise, **common)
    if kind == "DRT":
        return drrt_classifier(shapes, len(CLASSES), local_recurrence=False, **common)
    if kind == "LSTM":
        inputs = [keras.Input((args.steps, 3), name=name) for name in INPUTS]
        h = keras.layers.LSTM(32)(keras.layers.Concatenate()(inputs))
        return keras.Model(inputs, head(h, args), name="lstm")
    name = kind.split()[0]
    inputs = keras.Input((args.steps, 3), name=name)
    h = LocalRecurrence(keras.layers.SimpleRNNCell(args.features), args.window)(inputs)
    h = keras.layers.Dense(args.features, activation="tanh")(h)
    return keras.Model(inputs, head(keras.layers.GlobalAveragePooling1D()(h), args), name=name)


def head(h, args):
    """The DRRT's classifier: two ReLU layers and the logits."""
    for units in (32, 16):
        h = keras.layers.Dropout(args.dropout, seed=0)(keras.layers.Dense(units, activation="relu")(h))
    return keras.layers.Dense(len(CLASSES))(h)


def inputs_of(kind, x):
    if kind.endswith("alone"):
        return x[INPUTS.index(kind.split()[0])]
    return list(x)


def train(kind, data, seed, args):
    keras.utils.set_random_seed(seed)
    model = build(kind, args)
    (x, y), (x_test, y_test) = data
    steps = args.epochs * -(-len(y) // args.batch)
    model.compile(keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(args.learning_rate, steps)),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  jit_compile=args.jit, run_eagerly=args.tiny)
    start = time.perf_counter()
    history = model.fit(inputs_of(kind, x), y, batch_size=args.batch, epochs=args.epochs, verbose=0)
    seconds = time.perf_counter() - start
    test_accuracy = float((model.predict(inputs_of(kind, x_test), verbose=0).argmax(-1) == y_test).mean())
    print(f"{kind} (seed {seed}): test accuracy {test_accuracy:.3f}, train accuracy "
          f"{history.history['accuracy'][-1]:.3f}, {seconds:.0f} s")
    return model, {"model": kind, "seed": seed, "weights": model.count_params(), "seconds": seconds,
                   "test_accuracy": test_accuracy, "train_accuracy": float(history.history["accuracy"][-1])}


def summary(runs):
    rows = []
    for kind in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == kind]
        accuracy = np.array([r["test_accuracy"] for r in mine])
        rows.append({"model": kind, "weights": mine[0]["weights"], "test_accuracy_mean": float(accuracy.mean()),
                     "test_accuracy_std": float(accuracy.std()), "test_accuracy_min": float(accuracy.min()),
                     "seconds_mean": float(np.mean([r["seconds"] for r in mine])), "seeds": len(mine)})
    return rows


def table(rows):
    lines = [f"| model | weights | test accuracy (mean ± std, {rows[0]['seeds']} seeds) | worst seed | "
             "train time per seed |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['weights']:,} | {100 * r['test_accuracy_mean']:.1f} ± "
              f"{100 * r['test_accuracy_std']:.1f} % | {100 * r['test_accuracy_min']:.1f} % | "
              f"{r['seconds_mean']:.0f} s |" for r in rows]
    return "\n".join(lines) + "\n"


def plot_maps(model, x_test, y_test, out):
    """The global map α^g and the regional maps Σ_k α^{r(k)} of the first
    interaction transformer, before the recurrence, for the first test
    recording of each class."""
    features = keras.Model(model.inputs, [model.get_layer("features_a").output,
                                          model.get_layer("features_b").output])
    block = model.get_layer("interaction_0")
    picks = [int(np.flatnonzero(y_test == c)[0]) for c in range(len(CLASSES))]
    a, b = features.predict([x[picks] for x in x_test], verbose=0)
    maps = {k: np.asarray(v) for k, v in block.relation_maps([a, b]).items()}
    fig, axes = plt.subplots(2, len(picks), figsize=(3 * len(picks), 6))
    for c, name in enumerate(CLASSES):
        for row, (title, image) in enumerate([("global α", maps["global_alpha"][c]),
                                              ("regional Σ_k α", maps["regional_alpha"][c].sum(0))]):
            ax = axes[row, c]
            ax.imshow(image, cmap="viridis", aspect="auto")
            ax.set_title(f"{name}: {title}", fontsize=9)
            ax.set_xlabel("gyroscope step j", fontsize=8)
            ax.set_ylabel("accelerometer step i", fontsize=8)
    fig.tight_layout()
    with atomic_files.replacing(out / "basic_motions_relation_maps.png") as temp:
        fig.savefig(temp, dpi=90)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--epochs", type=int, default=150)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--features", type=int, default=16, help="d of A' and B'")
    parser.add_argument("--window", type=int, default=5, help="M of every local recurrence")
    parser.add_argument("--relation-units", type=int, default=16)
    parser.add_argument("--regions", type=int, default=4, help="K aligned time windows")
    parser.add_argument("--map-units", type=int, default=16, help="width of the recurrence over the maps")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="the start of a cosine decay")
    parser.add_argument("--no-jit", dest="jit", action="store_false", help="train without XLA")
    parser.add_argument("--models", nargs="*", choices=MODELS, help="run only these")
    parser.add_argument("--output-dir", default="tutorial_output")
    parser.add_argument("--save-dir", help="write the first DRRT (sum), seed 0, here")
    args = parser.parse_args(argv)
    args.steps = 100
    (x, y), (x_test, y_test) = data()
    if args.tiny:
        # Eager: tracing a graph for one step of eight examples takes longer
        # than the step.
        args.epochs, args.seeds, args.features, args.relation_units, args.jit = 1, 1, 4, 4, False
        args.steps = 20
        # Two recordings of each class, 20 steps.
        keep, keep_test = (np.concatenate([np.flatnonzero(labels == c)[:2] for c in range(len(CLASSES))])
                           for labels in (y, y_test))
        x, x_test = [v[keep, :20] for v in x], [v[keep_test, :20] for v in x_test]
        y, y_test = y[keep], y_test[keep_test]
    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs, first = [], {}
    for kind in args.models or MODELS:
        for seed in range(args.seeds):
            model, run = train(kind, ((x, y), (x_test, y_test)), seed, args)
            if seed == 0:
                first[kind] = model
            runs.append(run)
    rows = summary(runs)
    text = table(rows)
    if "DRRT (sum)" in first:
        plot_maps(first["DRRT (sum)"], x_test, y_test, out)
        if args.save_dir:
            save(first["DRRT (sum)"], (x_test, y_test), argv or [], pathlib.Path(args.save_dir))
    atomic_files.write_text(out / "basic_motions_drrt.md", text)
    atomic_files.write_text(out / "basic_motions_drrt.json",
                            json.dumps({"summary": rows, "runs": runs}, indent=1) + "\n")
    print(text)
    return rows, runs


def save(model, test, argv, folder):
    from keras_relrec import export

    folder.mkdir(parents=True, exist_ok=True)
    (accelerometer, gyroscope), y = test
    save_model(model, folder / "basic_motions_drrt.keras")
    with atomic_files.replacing(folder / "test_recordings.npz") as temp:
        np.savez_compressed(temp, accelerometer=accelerometer, gyroscope=gyroscope, labels=y)
    export.export_saved_model(model, folder / "basic_motions_drrt_savedmodel")
    export.export_tflite(model, folder / "basic_motions_drrt.tflite")
    card = {
        "model": "DRRT (sum)",
        "weights": model.count_params(),
        "test_accuracy": float((model.predict([accelerometer, gyroscope], verbose=0).argmax(-1) == y).mean()),
        "command": model_card.reproduce_command("tutorials/basic_motions_drrt.py", argv,
                                                "savedmodels/basic_motions"),
    }
    model_card.write_card(folder / "card.json", card)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
