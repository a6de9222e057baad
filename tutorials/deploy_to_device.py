"""Tutorial: deploy a recurrent model to a device.

Trains a small model of keras_relrec cells to recognise the speaker of a
spoken Japanese vowel (UEA JapaneseVowels, from the `aeon` wheel: 12 LPC
coefficients per frame, 7 to 29 frames, 9 speakers), exports it for
streaming as float32 and as full-int8 TFLite, and runs the test utterances
frame by frame in LiteRT, the way a device receives them: one frame per
call, states fed back, the answer read after the last frame. It writes to
--output-dir a table (`deploy_results.md`) of file size, test accuracy and
time per frame for Keras and each LiteRT file, and a plot
(`deploy_streaming.png`) of the class probabilities of one utterance as its
frames arrive.

    python tutorials/deploy_to_device.py            # the full run, a minute or two
    python tutorials/deploy_to_device.py --tiny     # seconds, for CI
"""

import argparse
import os
import pathlib
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402

from keras_relrec import export  # noqa: E402
from keras_relrec.datasets import load_japanese_vowels  # noqa: E402
from keras_relrec.datasets.japanese_vowels import NUM_CLASSES  # noqa: E402
from keras_relrec.layers import CoupledLSTMCell  # noqa: E402
from keras_relrec.layers import PeepholeLSTMCell  # noqa: E402


def build_model(x_train, lengths, units):
    # Normalisation statistics of the real (unpadded) training frames; the
    # layer sits after Masking, so padded frames stay masked.
    valid = np.concatenate([x[:n] for x, n in zip(x_train, lengths)])
    inputs = keras.Input((None, x_train.shape[-1]), name="frames")
    h = keras.layers.Masking(0.0)(inputs)
    h = keras.layers.Normalization(mean=valid.mean(0), variance=valid.var(0))(h)
    h = keras.layers.RNN(PeepholeLSTMCell(units), return_sequences=True)(h)
    h = keras.layers.RNN(CoupledLSTMCell(units, use_peepholes=True))(h)
    outputs = keras.layers.Dense(NUM_CLASSES, activation="softmax")(h)
    return keras.Model(inputs, outputs, name="speaker")


class Streamer:
    """A LiteRT streaming model: reset, then feed frames one at a time."""

    def __init__(self, path):
        interpreter = Interpreter(model_path=str(path))
        self.step = interpreter.get_signature_runner("step")
        self.initial_state = interpreter.get_signature_runner("initial_state")
        self.frame_times = []

    def run(self, frames):
        """Class probabilities after each frame of one utterance (T, D)."""
        states = self.initial_state(batch_size=np.array(1, np.int32))
        outputs = []
        for frame in frames:
            start = time.perf_counter()
            result = self.step(frames=frame[None], **states)
            self.frame_times.append(time.perf_counter() - start)
            states = {k: result[k] for k in states}
            outputs.append(result["output"][0])
        return np.array(outputs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--output-dir", default="tutorial_output")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    units, epochs, n_test = (8, 1, 12) if args.tiny else (32, 60, None)

    x_train, y_train, len_train = load_japanese_vowels("train")
    x_test, y_test, len_test = load_japanese_vowels("test")
    if n_test:
        x_test, y_test, len_test = x_test[:n_test], y_test[:n_test], len_test[:n_test]

    keras.utils.set_random_seed(args.seed)
    model = build_model(x_train, len_train, units)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=32, epochs=epochs, verbose=0)

    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "LiteRT float32": out / "speaker_step_float32.tflite",
        "LiteRT int8": out / "speaker_step_int8.tflite",
    }
    export.export_tflite(model, files["LiteRT float32"], streaming=True)
    # Calibrate on the training utterances, streamed as on the device.
    export.export_tflite(model, files["LiteRT int8"], streaming=True,
                         quantize="int8", representative_data=x_train)
    keras_path = out / "speaker.keras"
    model.save(keras_path)

    keras_probs = model.predict(x_test, verbose=0)
    keras_times = []
    for x in x_test[:20]:  # Keras, one utterance per call, for comparison
        start = time.perf_counter()
        model.predict_on_batch(x[None])
        keras_times.append(time.perf_counter() - start)
    rows = [{
        "name": "Keras (float32, whole utterance per call)",
        "bytes": keras_path.stat().st_size,
        "accuracy": float((keras_probs.argmax(-1) == y_test).mean()),
        "us_per_frame": 1e6 * statistics.median(keras_times) / float(np.mean(len_test[:20])),
    }]
    streams = {}
    for name, path in files.items():
        streamer = Streamer(path)
        streams[name] = [streamer.run(x[:n]) for x, n in zip(x_test, len_test)]
        predictions = np.array([probs[-1].argmax() for probs in streams[name]])
        rows.append({
            "name": f"{name}, frame by frame",
            "bytes": path.stat().st_size,
            "accuracy": float((predictions == y_test).mean()),
            "us_per_frame": 1e6 * statistics.median(streamer.frame_times),
            "agree": float((predictions == keras_probs.argmax(-1)).mean()),
        })

    lines = [
        f"JapaneseVowels, {len(x_train)} training and {len(x_test)} test utterances; "
        f"two recurrent layers of width {units}, {epochs} epochs, seed {args.seed}.",
        "",
        "| model | file size (bytes) | test accuracy | agrees with Keras | time per frame (µs) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        agree = f"{r['agree']:.1%}" if "agree" in r else "—"
        lines.append(f"| {r['name']} | {r['bytes']:,} | {r['accuracy']:.1%} | {agree} | "
                     f"{r['us_per_frame']:.0f} |")
    table = "\n".join(lines) + "\n"
    (out / "deploy_results.md").write_text(table)
    print(table)

    k = int(np.argmax(len_test))  # the longest utterance of the test set
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    for ax, name in zip(axes, files):
        probs = streams[name][k]
        for c in range(NUM_CLASSES):
            ax.plot(np.arange(1, len(probs) + 1), probs[:, c],
                    lw=2.5 if c == y_test[k] else 0.8, label=f"speaker {c + 1}")
        ax.set(title=name, xlabel="frames received")
    axes[0].set_ylabel("probability")
    axes[1].legend(fontsize=7, loc="center right")
    fig.suptitle(f"Test utterance {k}: speaker {y_test[k] + 1} (thick line)")
    fig.tight_layout()
    fig.savefig(out / "deploy_streaming.png", dpi=120)
    plt.close(fig)
    return rows


if __name__ == "__main__":
    main()
