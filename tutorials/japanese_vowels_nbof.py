"""Tutorial: neural bag-of-features on real time series (UEA JapaneseVowels).

Trains four speaker classifiers on the UEA JapaneseVowels set (from the
`aeon` wheel: 12 LPC coefficients per frame, 7 to 29 frames, 9 speakers,
270 training and 370 test utterances; padded utterances are masked):

- NBoF: `BoFQuantizer` memberships averaged into a histogram, then an MLP;
- attention NBoF: the same with `TwoDAttention` on the input features, on
  the codewords and over time;
- recurrent NBoF: `RecurrentBoFCell` histograms averaged over the frames;
- an LSTM baseline.

The quantizers see each frame's 12 coefficients as they are
(`front_end=None`): a frame already describes the sound. On raw series
of one value per step, keep the builders' default front-end (see
`benchmarks/bench_ucr.py`).

When τ ends at 0. The attention's output is τ (S ⊙ A) + (1 − τ) S, and A
sums to 1 over the attended axis, so S ⊙ A is about L times smaller than S
(L = 29 frames, or K codewords). Raising τ thus also shrinks what the next
layer sees; where the reweighting tells the classifier less than it costs
in signal, gradient descent drives τ down to 0, where the constraint holds
it, and the layer passes S on unchanged: the model has fallen back to plain
NBoF. It is a verdict on the attention for this data, not a failure of
training; the plot of the temporal attention shows τ in its title.

Each quantizer's codebook starts from k-means on the training frames. Every
model is trained with several seeds; the script writes to --output-dir a
table (`nbof_results.md`) of test accuracy (mean ± std over the seeds)
beside published results, the codeword histograms per speaker
(`nbof_histograms.png`) and the temporal attention over one utterance
(`nbof_temporal_attention.png`). With --save-dir it saves, of the
bag-of-features model with the best mean accuracy, the one trained with the
first seed, as `.keras`, SavedModel and TFLite with a card.

    python tutorials/japanese_vowels_nbof.py                    # a few minutes
    python tutorials/japanese_vowels_nbof.py --tiny             # seconds, for CI
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
from keras_relrec.datasets import load_japanese_vowels  # noqa: E402
from keras_relrec.datasets.japanese_vowels import NUM_CLASSES  # noqa: E402
from keras_relrec.models import nbof_classifier  # noqa: E402
from keras_relrec.models import recurrent_nbof_classifier  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402
from keras_relrec.utils import model_card  # noqa: E402

# The longest utterance of the set: the temporal attention needs a fixed length.
MAX_LENGTH = 29
MODELS = ("NBoF", "Attention NBoF", "Recurrent NBoF", "LSTM")
BAG_OF_FEATURES = MODELS[:3]
# Published test accuracies on the same split (see tutorials/README.md).
PUBLISHED = [
    ("1NN-ED", "92.4%", "UEA archive paper, Bagnall et al. 2018"),
    ("1NN-DTW-D", "94.9%", "UEA archive paper, Bagnall et al. 2018"),
    ("1NN-DTW-I", "95.9%", "UEA archive paper, Bagnall et al. 2018"),
    ("TapNet", "96.5%", "Zhang et al., AAAI 2020"),
    ("MLSTM-FCN", "97.6%", "as run by Zhang et al., AAAI 2020"),
]


def build(kind, codewords, normalization, x_train, seed, lstm_units):
    shape = (MAX_LENGTH, x_train.shape[-1])
    # The papers' models: the quantizer sees the 12 coefficients of each
    # frame as they are (they already describe the frame), and the
    # temporal attention has its full 29 × 29 W.
    common = dict(normalization=normalization, codebook_data=x_train, seed=seed, front_end=None)
    if kind == "NBoF":
        model = nbof_classifier(shape, NUM_CLASSES, codewords, **common)
    elif kind == "Attention NBoF":
        model = nbof_classifier(shape, NUM_CLASSES, codewords,
                                attention=("input", "codeword", "temporal"), temporal_rank=None, **common)
    elif kind == "Recurrent NBoF":
        model = recurrent_nbof_classifier(shape, NUM_CLASSES, codewords, **common)
    else:
        inputs = keras.Input(shape, name="sequence")
        h = keras.layers.Masking(0.0)(inputs)
        h = keras.layers.Normalization(mean=normalization[0], variance=normalization[1])(h)
        h = keras.layers.LSTM(lstm_units)(h)
        h = keras.layers.Dense(64, activation="relu")(h)
        h = keras.layers.Dropout(0.2, seed=seed)(h)
        model = keras.Model(inputs, keras.layers.Dense(NUM_CLASSES)(h), name="lstm")
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def plot_histograms(model, x, y, out):
    """Mean codeword histogram of the test utterances of each speaker."""
    histograms = keras.Model(model.input, model.get_layer("histogram").output).predict(x, verbose=0)
    means = np.stack([histograms[y == c].mean(0) for c in range(NUM_CLASSES)])
    fig, ax = plt.subplots(figsize=(7, 3.2))
    image = ax.imshow(means, aspect="auto", cmap="magma")
    ax.set(xlabel="codeword", ylabel="speaker", yticks=range(NUM_CLASSES),
           yticklabels=[str(c + 1) for c in range(NUM_CLASSES)],
           title=f"{model.name}: mean codeword histogram per speaker (test)")
    fig.colorbar(image)
    fig.tight_layout()
    with atomic_files.replacing(out / "nbof_histograms.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)


def plot_temporal_attention(model, x, length, out):
    """Temporal attention A over the frames of one utterance, per codeword."""
    layer = model.get_layer("temporal_attention")
    # What the temporal attention sees: the codeword attention's output.
    upstream = keras.Model(model.input, model.get_layer("codeword_attention").output)
    phi = upstream.predict(x[None], verbose=0)
    mask = np.any(x[None] != 0.0, axis=-1)
    attention = np.asarray(layer.attention_weights(phi, mask=mask))[0, :length]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    image = ax.imshow(attention.T, aspect="auto", cmap="viridis")
    ax.set(xlabel="frame", ylabel="codeword",
           title=f"Temporal attention over one test utterance (τ = {float(layer.tau.numpy()):.2f})")
    fig.colorbar(image)
    fig.tight_layout()
    with atomic_files.replacing(out / "nbof_temporal_attention.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)


def save(model, kind, accuracy, args, argv, folder):
    from keras_relrec import export

    folder.mkdir(parents=True, exist_ok=True)
    save_model(model, folder / "japanese_vowels_nbof.keras")
    # Temporal attention is over the 29 frames: fixed-length exports.
    export.export_saved_model(model, folder / "japanese_vowels_nbof_savedmodel",
                              dynamic_length=False)
    export.export_tflite(model, folder / "japanese_vowels_nbof.tflite", dynamic_length=False)
    card = {
        "model": kind,
        "codewords": args.codewords,
        "max_length": MAX_LENGTH,
        "seed": args.first_seed,
        "test_accuracy": accuracy,
        "command": model_card.reproduce_command("tutorials/japanese_vowels_nbof.py", argv,
                                                "savedmodels/japanese_vowels_nbof"),
    }
    model_card.write_card(folder / "card.json", card)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--seeds", type=int, default=5, help="training runs per model")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=150)
    parser.add_argument("--codewords", type=int, default=32)
    parser.add_argument("--lstm-units", type=int, default=64)
    parser.add_argument("--output-dir", default="tutorial_output")
    parser.add_argument("--save-dir", help="write the first seed's model of the best "
                        "bag-of-features kind here")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.tiny:
        args.seeds, args.epochs, args.codewords, args.lstm_units = 2, 2, 8, 8

    x_train, y_train, lengths = load_japanese_vowels("train", max_length=MAX_LENGTH)
    x_test, y_test, test_lengths = load_japanese_vowels("test", max_length=MAX_LENGTH)
    # Statistics of the real frames only; padding stays zero for the mask.
    frames = np.concatenate([x[:n] for x, n in zip(x_train, lengths)])
    normalization = (frames.mean(0), frames.var(0))

    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results, kept = [], {}
    for kind in MODELS:
        accuracies, start = [], time.perf_counter()
        for seed in seeds:
            keras.utils.set_random_seed(seed)
            model = build(kind, args.codewords, normalization, x_train, seed, args.lstm_units)
            model.fit(x_train, y_train, batch_size=32, epochs=args.epochs, verbose=0)
            accuracies.append(float(model.evaluate(x_test, y_test, verbose=0)[1]))
            if seed == args.first_seed:
                kept[kind] = (model, accuracies[0])
        results.append({
            "model": kind,
            "params": kept[kind][0].count_params(),
            "accuracies": accuracies,
            "mean": float(np.mean(accuracies)),
            "std": float(np.std(accuracies)),
            "seconds_per_run": (time.perf_counter() - start) / len(accuracies),
        })
        print(f"{kind}: {np.mean(accuracies):.1%} ± {np.std(accuracies):.1%}", flush=True)

    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    best = max((r for r in results if r["model"] in BAG_OF_FEATURES), key=lambda r: r["mean"])
    plot_histograms(kept[best["model"]][0], x_test, y_test, out)
    plot_temporal_attention(kept["Attention NBoF"][0], x_test[0], test_lengths[0], out)

    lines = [
        f"UEA JapaneseVowels, 270 training / 370 test utterances; {args.codewords} codewords "
        f"(k-means initialised); Adam 3e-3, batch 32, {args.epochs} epochs; "
        f"{len(seeds)} seeds ({seeds[0]}–{seeds[-1]}).",
        "",
        "| model | weights | test accuracy, mean ± std | per seed | s per run |",
        "|---|---:|---:|---|---:|",
    ]
    for r in results:
        per_seed = ", ".join(f"{a:.1%}" for a in r["accuracies"])
        lines.append(f"| {r['model']} | {r['params']:,} | {r['mean']:.1%} ± {r['std']:.1%} | "
                     f"{per_seed} | {r['seconds_per_run']:.0f} |")
    for method, accuracy, source in PUBLISHED:
        lines.append(f"| {method} (published) | | {accuracy} | {source} | |")
    table = "\n".join(lines) + "\n"
    atomic_files.write_text(out / "nbof_results.md", table)
    print(table)

    if args.save_dir:
        model, accuracy = kept[best["model"]]
        save(model, best["model"], accuracy, args, argv, pathlib.Path(args.save_dir))
    return results


if __name__ == "__main__":
    main()
