"""Tutorial: a hyperparameter search for the neural bag-of-features classifier
with keras-tuner (UEA JapaneseVowels), its best model exported to TFLite.

`keras_relrec.tuning.HyperNBoF` over its documented default space (codewords,
attention set, quantizer scale, head width, dropout, learning rate), searched
by keras-tuner's BayesianOptimization on the validation loss of a split of
the training utterances (the test utterances are read once, by the best model). Every
trial fits its own k-means codebook on its training part. The script prints
one line per trial as the search runs, writes to --output-dir a table of the
trials and the best model's test accuracy (`tuning_results.md`), a plot of
the trials (`tuning_trials.png`) and the best model as builtins-only TFLite
(`best_nbof.tflite`), whose LiteRT outputs it compares with Keras'.

    python tutorials/tune_japanese_vowels_nbof.py                 # about half an hour
    python tutorials/tune_japanese_vowels_nbof.py --tiny          # seconds, for CI

Needs the `[tuning]` and `[tutorials]` extras.
"""

import argparse
import os
import pathlib
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_tuner  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from keras_relrec.datasets import load_japanese_vowels  # noqa: E402
from keras_relrec.datasets.japanese_vowels import NUM_CLASSES  # noqa: E402
from keras_relrec.export import export_tflite  # noqa: E402
from keras_relrec.export import run_sequence  # noqa: E402
from keras_relrec.tuning import HyperNBoF  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402

MAX_LENGTH = 29
SHOWN = ("num_codewords", "attention", "scale", "hidden_units", "dropout", "learning_rate")


class ReportingSearch(keras_tuner.BayesianOptimization):
    """BayesianOptimization that prints one line per finished trial."""

    def __init__(self, *args, max_trials, **kwargs):
        super().__init__(*args, max_trials=max_trials, **kwargs)
        self.total, self.started, self.rows = max_trials, time.perf_counter(), []

    def on_trial_begin(self, trial):
        super().on_trial_begin(trial)
        self.trial_start = time.perf_counter()

    def on_trial_end(self, trial):
        super().on_trial_end(trial)
        values = trial.hyperparameters.values
        # The metrics of the epoch the objective chose (the checkpointed one).
        epoch = trial.metrics.get_best_step("val_loss")
        accuracy = {o.step: o.mean() for o in trial.metrics.get_history("val_accuracy")}[epoch]
        row = {"trial": len(self.rows) + 1, "val_loss": trial.score, "val_accuracy": float(accuracy),
               "seconds": time.perf_counter() - self.trial_start, **{k: values[k] for k in SHOWN}}
        self.rows.append(row)
        best = min(r["val_loss"] for r in self.rows)
        print(f"trial {row['trial']:2d}/{self.total}  val loss {row['val_loss']:.3f} (best {best:.3f}), "
              f"accuracy {row['val_accuracy']:.3f}  {describe(row)}  {row['seconds']:.0f} s", flush=True)


def describe(row):
    return (f"K={row['num_codewords']} attention={row['attention']} scale={row['scale']} "
            f"hidden={row['hidden_units']} dropout={row['dropout']:.1f} lr={row['learning_rate']:.1e}")


def split(x, y, fraction, seed):
    """A stratified validation split of the training utterances."""
    rng = np.random.default_rng(seed)
    validation = np.concatenate([rng.permutation(np.flatnonzero(y == c))[: max(1, round(fraction * np.sum(y == c)))]
                                 for c in np.unique(y)])
    train = np.setdiff1d(np.arange(len(y)), validation)
    return (x[train], y[train]), (x[validation], y[validation])


def plot(rows, out):
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    trials = [r["trial"] for r in rows]
    scores = [r["val_loss"] for r in rows]
    left.plot(trials, scores, "o", label="trial")
    left.plot(trials, np.minimum.accumulate(scores), "-", label="best so far")
    left.set(xlabel="trial", ylabel="validation loss", yscale="log", title="BayesianOptimization over HyperNBoF")
    left.legend()
    kinds = sorted({r["attention"] for r in rows})
    for k, kind in enumerate(kinds):
        points = [r for r in rows if r["attention"] == kind]
        right.scatter([r["num_codewords"] for r in points], [r["val_loss"] for r in points],
                      label=kind, marker="os^vD<>p"[k % 8])
    right.set(xscale="log", yscale="log", xlabel="codewords K", ylabel="validation loss", title="by attention set")
    right.legend(fontsize=7)
    fig.tight_layout()
    with atomic_files.replacing(out / "tuning_trials.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=100, help="per trial, with early stopping")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", default="tutorial_output")
    args = parser.parse_args(argv)
    if args.tiny:
        args.trials, args.epochs = 2, 2

    x, y, lengths = load_japanese_vowels("train", max_length=MAX_LENGTH)
    x_test, y_test, _ = load_japanese_vowels("test", max_length=MAX_LENGTH)
    if args.tiny:
        x, y, lengths, x_test, y_test = x[::4], y[::4], lengths[::4], x_test[:40], y_test[:40]
    (x_train, y_train), validation = split(x, y, 0.2, args.seed)
    frames = np.concatenate([u[:n] for u, n in zip(x, lengths)])
    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    keras.utils.set_random_seed(args.seed)
    hypermodel = HyperNBoF((MAX_LENGTH, x.shape[-1]), NUM_CLASSES, seed=args.seed,
                           normalization=(frames.mean(0), frames.var(0)))
    # Validation accuracy saturates on 54 utterances; the loss ranks the trials.
    tuner = ReportingSearch(hypermodel, objective="val_loss", max_trials=args.trials, seed=args.seed,
                            directory=str(out / "tuning"), project_name="japanese_vowels_nbof", overwrite=True)
    start = time.perf_counter()
    tuner.search(x_train, y_train, validation_data=validation, epochs=args.epochs, batch_size=32, verbose=0,
                 callbacks=[keras.callbacks.EarlyStopping("val_loss", patience=20)])
    search_minutes = (time.perf_counter() - start) / 60

    best_row = min(tuner.rows, key=lambda r: r["val_loss"])
    best = tuner.get_best_models(1)[0]
    test_accuracy = float(best.evaluate(x_test, y_test, verbose=0, return_dict=True)["accuracy"])
    path = out / "best_nbof.tflite"
    export_tflite(best, path)
    lite = run_sequence(path, x_test)["output"]
    agreement = float(np.max(np.abs(lite - best.predict(x_test, verbose=0))))
    lite_accuracy = float(np.mean(np.argmax(lite, -1) == y_test))
    plot(tuner.rows, out)

    lines = [
        f"UEA JapaneseVowels: {len(y_train)} training / {len(validation[1])} validation utterances (a stratified "
        f"split of the 270 training ones), {len(y_test)} test; BayesianOptimization, {args.trials} trials of up to "
        f"{args.epochs} epochs (objective and early stopping: validation loss, patience 20); search "
        f"{search_minutes:.1f} min.",
        "",
        "| trial | codewords | attention | scale | hidden | dropout | learning rate | val loss | val accuracy | s |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in tuner.rows:
        lines.append(f"| {r['trial']} | {r['num_codewords']} | {r['attention']} | {r['scale']} "
                     f"| {r['hidden_units']} | {r['dropout']:.1f} | {r['learning_rate']:.1e} "
                     f"| {r['val_loss']:.3f} | {r['val_accuracy']:.3f} | {r['seconds']:.0f} |")
    lines += [
        "",
        f"Best (trial {best_row['trial']}: {describe(best_row)}): test accuracy {test_accuracy:.1%} in Keras, "
        f"{lite_accuracy:.1%} in LiteRT (`best_nbof.tflite`, max |diff| of the logits {agreement:.1e}).",
    ]
    table = "\n".join(lines) + "\n"
    atomic_files.write_text(out / "tuning_results.md", table)
    print(table)
    return {"rows": tuner.rows, "test_accuracy": test_accuracy, "lite_accuracy": lite_accuracy,
            "agreement": agreement, "search_minutes": search_minutes}


if __name__ == "__main__":
    main()
