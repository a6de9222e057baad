"""Tutorial: temporal attention-augmented bilinear networks (TABL).

Trains the paper's C network (Tran et al., IEEE TNNLS 2019) with a TABL
last layer, C(TABL), and with a bilinear one, C(BL), on two data sets, each
over several seeds, with the paper's training setup (Adam 0.01,
class-weighted loss, max-norm constraints, dropout 0.1):

- synthetic limit-order-book windows (`keras_relrec.datasets.synthetic_lob`:
  10 events × 40 features, ten levels of ask/bid price and volume, label
  the coming mid-price move), in Keras' (batch, time, features) layout;
- UEA BasicMotions from the `aeon` wheel (6 motion channels × 100 steps,
  4 activities), in the paper's (batch, features, time) layout.

It writes to --output-dir a table (`tabl_results.md`: accuracy and macro-F1,
mean ± std over the seeds), λ during training (`tabl_lambda.png`; the paper
reports λ rising toward 1) and the learned attention over one example
(`tabl_attention.png`). With --save-dir it saves the first seed's C(TABL)
trained on the synthetic order books as `.keras`, SavedModel and TFLite.

With FI-2010 on disk (it cannot be downloaded here), the paper's Setup 2
(anchored split: train on the first 7 days, test on the last 3) is:

    python tutorials/lob_tabl.py --fi2010-train Train_Dst_NoAuction_ZScore_CF_7.txt \\
        --fi2010-test Test_Dst_NoAuction_ZScore_CF_7.txt \\
        Test_Dst_NoAuction_ZScore_CF_8.txt Test_Dst_NoAuction_ZScore_CF_9.txt --horizon 10

    python tutorials/lob_tabl.py            # synthetic + BasicMotions, a few minutes
    python tutorials/lob_tabl.py --tiny     # seconds, for CI
"""

import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from keras_relrec import save_model  # noqa: E402
from keras_relrec.datasets import load_fi2010  # noqa: E402
from keras_relrec.datasets import synthetic_lob  # noqa: E402
from keras_relrec.models import class_weights  # noqa: E402
from keras_relrec.models import compile_as_in_paper  # noqa: E402
from keras_relrec.models import tabl_network  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402
from keras_relrec.utils import model_card  # noqa: E402

KINDS = ("TABL", "BL")
MAX_NORM = 5.0  # the middle of the paper's 3, 5, 7


class LambdaHistory(keras.callbacks.Callback):
    """λ of the TABL layer after every epoch."""

    def __init__(self):
        super().__init__()
        self.values = []

    def on_epoch_end(self, epoch, logs=None):
        self.values.append(float(keras.ops.convert_to_numpy(
            self.model.get_layer("tabl").lambda_)))


def macro_f1(y, predictions, num_classes):
    scores = []
    for c in range(num_classes):
        tp = np.sum((predictions == c) & (y == c))
        precision = tp / max(np.sum(predictions == c), 1)
        recall = tp / max(np.sum(y == c), 1)
        scores.append(0.0 if tp == 0 else 2 * precision * recall / (precision + recall))
    return float(np.mean(scores))


def basic_motions():
    """BasicMotions as (examples, 6 channels, 100 steps), z-scored per
    channel with the training statistics; labels 0..3."""
    from aeon.datasets import load_basic_motions

    (x_train, y_train), (x_test, y_test) = (load_basic_motions(split=s) for s in ("train", "test"))
    classes = sorted(set(y_train))
    mean = x_train.mean(axis=(0, 2), keepdims=True)
    std = x_train.std(axis=(0, 2), keepdims=True)
    encode = lambda y: np.array([classes.index(v) for v in y], np.int32)  # noqa: E731
    return (((x_train - mean) / std).astype("float32"), encode(y_train),
            ((x_test - mean) / std).astype("float32"), encode(y_test), len(classes))


def run(data, kind, seed, epochs, batch, data_format):
    x_train, y_train, x_test, y_test, num_classes = data
    keras.utils.set_random_seed(seed)
    model = compile_as_in_paper(tabl_network(
        "C", kind, input_shape=x_train.shape[1:], num_classes=num_classes,
        max_norm=MAX_NORM, data_format=data_format))
    history = LambdaHistory() if kind == "TABL" else None
    model.fit(x_train, y_train, batch_size=batch, epochs=epochs, verbose=0,
              class_weight=class_weights(y_train), callbacks=[history] if history else [])
    predictions = model.predict(x_test, verbose=0).argmax(-1)
    return model, {
        "accuracy": float((predictions == y_test).mean()),
        "f1": macro_f1(y_test, predictions, num_classes),
        "lambda": history.values if history else None,
    }


def plot_lambda(curves, out):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in curves.items():
        ax.plot(range(1, len(values) + 1), values, label=name)
    ax.set(xlabel="epoch", ylabel="λ", ylim=(-0.05, 1.05),
           title="TABL's λ during training (seed 0)")
    ax.legend()
    fig.tight_layout()
    with atomic_files.replacing(out / "tabl_lambda.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)


def plot_attention(model, x, out):
    """A of the last layer for one synthetic window: (time, projected features)."""
    layer = model.get_layer("tabl")
    upstream = keras.Model(model.input, model.get_layer("dropout_2").output)
    attention = keras.ops.convert_to_numpy(layer.attention_weights(upstream(x[None])))[0]
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    image = ax.imshow(attention.T, aspect="auto", cmap="viridis")
    ax.set(xlabel="time step of the last layer's input", ylabel="class row",
           title="TABL attention, one window")
    fig.colorbar(image)
    fig.tight_layout()
    with atomic_files.replacing(out / "tabl_attention.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)


def fi2010(args):
    x_train, y_train = load_fi2010(args.fi2010_train, horizon=args.horizon)
    x_test, y_test = load_fi2010(args.fi2010_test, horizon=args.horizon)
    data = (x_train, y_train, x_test, y_test, 3)
    for kind in KINDS:
        _, result = run(data, kind, args.first_seed, args.epochs, 256, "channels_last")
        print(f"FI-2010, horizon {args.horizon}, C({kind}): accuracy {result['accuracy']:.2%}, "
              f"macro-F1 {result['f1']:.2%} (paper, C(TABL), H=10: 78.01% / 72.84%)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--signal", type=float, default=0.5,
                        help="how much a synthetic window tells about its label")
    parser.add_argument("--epochs", type=int, default=30, help="epochs on the order books")
    parser.add_argument("--fi2010-train", nargs="+", help="FI-2010 training file(s)")
    parser.add_argument("--fi2010-test", nargs="+", help="FI-2010 test file(s)")
    parser.add_argument("--horizon", type=int, default=10, choices=(10, 20, 30, 50, 100))
    parser.add_argument("--output-dir", default="tutorial_output")
    parser.add_argument("--save-dir", help="write the first seed's C(TABL) on order books here")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.fi2010_train or args.fi2010_test:
        if not (args.fi2010_train and args.fi2010_test):
            parser.error("--fi2010-train and --fi2010-test go together")
        return fi2010(args)

    train_size, test_size, motions_epochs = 20_000, 5_000, 200
    if args.tiny:
        args.seeds, args.epochs, train_size, test_size, motions_epochs = 2, 2, 512, 256, 2
    lob = (*synthetic_lob(train_size, signal=args.signal, seed=(args.first_seed, 1)),
           *synthetic_lob(test_size, signal=args.signal, seed=(args.first_seed, 2)), 3)
    datasets = {
        f"synthetic order books (signal {args.signal:g})": (lob, args.epochs, 256, "channels_last"),
        "BasicMotions": (basic_motions(), motions_epochs, 8, "channels_first"),
    }

    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows, curves, kept = [], {}, {}
    for name, (data, epochs, batch, data_format) in datasets.items():
        for kind in KINDS:
            results, start = [], time.perf_counter()
            for seed in seeds:
                model, result = run(data, kind, seed, epochs, batch, data_format)
                results.append(result)
                if seed == args.first_seed:
                    kept[(name, kind)] = (model, result)
                    if kind == "TABL":
                        curves[name] = result["lambda"]
            rows.append({
                "data": name, "model": f"C({kind})", "params": kept[(name, kind)][0].count_params(),
                "accuracy": [r["accuracy"] for r in results], "f1": [r["f1"] for r in results],
                "seconds_per_run": (time.perf_counter() - start) / len(results),
                "final_lambda": [r["lambda"][-1] for r in results] if kind == "TABL" else None,
            })
            print(f"{name}, C({kind}): accuracy {np.mean(rows[-1]['accuracy']):.1%}, "
                  f"macro-F1 {np.mean(rows[-1]['f1']):.1%}", flush=True)

    plot_lambda(curves, out)
    lob_name = next(iter(datasets))
    plot_attention(kept[(lob_name, "TABL")][0], lob[2][0], out)

    lines = [
        f"C networks, the paper's setup (Adam 0.01, class-weighted loss, max-norm {MAX_NORM:g}, "
        f"dropout 0.1); {len(seeds)} seeds. Order books: {train_size:,} training and "
        f"{test_size:,} test windows, {args.epochs} epochs, batch 256. BasicMotions: 40 / 40 "
        f"recordings, {motions_epochs} epochs, batch 8.",
        "",
        "| data | model | weights | accuracy | macro-F1 | final λ | s per run |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lam = "" if r["final_lambda"] is None else (
            f"{np.mean(r['final_lambda']):.2f} ± {np.std(r['final_lambda']):.2f}")
        lines.append(
            f"| {r['data']} | {r['model']} | {r['params']:,} | "
            f"{np.mean(r['accuracy']):.1%} ± {np.std(r['accuracy']):.1%} | "
            f"{np.mean(r['f1']):.1%} ± {np.std(r['f1']):.1%} | {lam} | "
            f"{r['seconds_per_run']:.0f} |")
    lines += ["", "Paper, FI-2010 Setup 2, horizon 10: C(TABL) 78.01% accuracy, 72.84% F1."]
    table = "\n".join(lines) + "\n"
    atomic_files.write_text(out / "tabl_results.md", table)
    print(table)

    if args.save_dir:
        from keras_relrec import export

        model, result = kept[(lob_name, "TABL")]
        folder = pathlib.Path(args.save_dir)
        folder.mkdir(parents=True, exist_ok=True)
        save_model(model, folder / "lob_tabl.keras")
        export.export_saved_model(model, folder / "lob_tabl_savedmodel", dynamic_length=False)
        export.export_tflite(model, folder / "lob_tabl.tflite", dynamic_length=False)
        card = {
            "model": "C(TABL)",
            "signal": args.signal,
            "seed": args.first_seed,
            "test_seed": [args.first_seed, 2],
            "test_size": test_size,
            "test_accuracy": result["accuracy"],
            "command": model_card.reproduce_command("tutorials/lob_tabl.py", argv, "savedmodels/lob_tabl"),
        }
        model_card.write_card(folder / "card.json", card)
    return rows


if __name__ == "__main__":
    main()
