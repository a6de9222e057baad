"""Tutorial: deploy a recurrent model to a device.

Trains a small model of keras_relrec cells to recognise the speaker of a
spoken Japanese vowel (UEA JapaneseVowels, from the `aeon` wheel: 12 LPC
coefficients per frame, 7 to 29 frames, 9 speakers), exports it for
streaming as float32 and int8 TFLite, for phones (LiteRT) and for
microcontrollers (TFLite Micro, float32 and fully integer: int8 frames,
probabilities and states), and runs the test utterances frame by frame, the
way a device receives them: one frame per call, states fed back, the
answer read after the last frame. It writes to --output-dir a card of the
files (`deploy_card.json`: size, arena, runtime, quantization parameters), a
table (`deploy_results.md`) of file size, tensor arena, test accuracy and time per
frame for Keras and each file in its runtime, the drift of the int8 states
over a 1,000-frame stream, and a plot (`deploy_streaming.png`) of the class
probabilities of one utterance as its frames arrive.

    python tutorials/deploy_to_device.py            # the full run, a minute or two
    python tutorials/deploy_to_device.py --tiny     # seconds, for CI
"""

import argparse
import json
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
from keras_relrec import save_model  # noqa: E402
from keras_relrec.datasets import load_japanese_vowels  # noqa: E402
from keras_relrec.datasets.japanese_vowels import NUM_CLASSES  # noqa: E402
from keras_relrec.layers import CoupledLSTMCell  # noqa: E402
from keras_relrec.layers import PeepholeLSTMCell  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402

# The bound of the cell states, as TFLite's quantized LSTMs clip theirs.
CELL_CLIP = 10.0


def build_model(x_train, lengths, units):
    # Normalisation statistics of the real (unpadded) training frames; the
    # layer sits after Masking, so padded frames stay masked.
    valid = np.concatenate([x[:n] for x, n in zip(x_train, lengths)])
    inputs = keras.Input((None, x_train.shape[-1]), name="frames")
    h = keras.layers.Masking(0.0)(inputs)
    h = keras.layers.Normalization(mean=valid.mean(0), variance=valid.var(0))(h)
    # The cell states are clipped (as TFLite's quantized LSTMs clip theirs):
    # an int8 or int16 state holds one calibrated range, and a stream that
    # goes on without a reset would otherwise carry a cell state far beyond
    # anything the utterances showed.
    h = keras.layers.RNN(PeepholeLSTMCell(units, cell_clip=CELL_CLIP), return_sequences=True)(h)
    h = keras.layers.RNN(CoupledLSTMCell(units, use_peepholes=True, cell_clip=CELL_CLIP))(h)
    outputs = keras.layers.Dense(NUM_CLASSES, activation="softmax")(h)
    return keras.Model(inputs, outputs, name="speaker")


def stream_utterances(runner, x_test, lengths):
    """Class probabilities after each frame of each utterance (a new stream
    per utterance), and the time of each step call."""
    streams, times = [], []
    for x, n in zip(x_test, lengths):
        runner.reset()
        probs = []
        for frame in x[:n]:
            start = time.perf_counter()
            probs.append(runner(frame[None])[0])
            times.append(time.perf_counter() - start)
        streams.append(np.array(probs))
    return streams, times


class MicroRunner:
    """The tflite-micro interpreter behind `Streamer`'s interface: one frame
    per call, the states kept (int8 for an integer file)."""

    def __init__(self, path, arena_bytes):
        self.streamer = export.micro.MicroStreamer(path, arena_size=arena_bytes)

    def reset(self):
        self.states = dict(self.streamer.initial_state)

    def __call__(self, frame):
        result = self.streamer.run(frame[:, None], self.states)
        self.states = {k: v for k, v in result.items() if k != "output"}
        return result["output"][:, 0]


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
    keras_path = out / "speaker.keras"
    save_model(model, keras_path)
    # Calibrated on the training utterances streamed one after another, as a
    # device hears them: the states' ranges must hold over a long stream,
    # not only from a reset (the test stream below is the test utterances).
    calibration = np.concatenate([x[:n] for x, n in zip(x_train, len_train)])[None]
    calibration = calibration[:, :400] if args.tiny else calibration
    int8 = {"quantize": "int8", "representative_data": calibration}
    int16x8 = {"quantize": "int16x8", "representative_data": calibration}
    exports = {
        "LiteRT float32": ("speaker_step_float32.tflite", {}),
        "LiteRT int8": ("speaker_step_int8.tflite", int8),
        "TFLM float32": ("speaker_micro_float32.tflite", {"target": "micro"}),
        "TFLM int8, integer I/O and states": ("speaker_micro_int8.tflite", {"target": "micro", **int8}),
        "TFLM 16x8, int16 I/O and states": ("speaker_micro_int16x8.tflite", {"target": "micro", **int16x8}),
    }
    files, summaries = {}, {}
    for name, (file_name, options) in exports.items():
        files[name] = out / file_name
        summaries[name] = export.export_tflite(model, files[name], streaming=True, **options)

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
        micro_file = "micro" in summaries[name]
        arena = summaries[name]["micro"]["arena_bytes"] if micro_file else None
        runner = MicroRunner(path, 4 * arena) if micro_file else export.Streamer(path)
        streams[name], times = stream_utterances(runner, x_test, len_test)
        predictions = np.array([probs[-1].argmax() for probs in streams[name]])
        rows.append({
            "name": f"{name}, frame by frame",
            "bytes": path.stat().st_size,
            "arena": arena,
            "accuracy": float((predictions == y_test).mean()),
            "us_per_frame": 1e6 * statistics.median(times),
            "agree": float((predictions == keras_probs.argmax(-1)).mean()),
        })

    # The price of LiteRT's signature runner, which resizes and allocates on
    # every call, against the Streamer (allocated once) and a whole-utterance
    # call, per frame, on the float32 file.
    sequence_path = out / "speaker_sequence_float32.tflite"
    export.export_tflite(model, sequence_path)
    step_interpreter = Interpreter(model_path=str(files["LiteRT float32"]))
    sequence_interpreter = Interpreter(model_path=str(sequence_path))
    runs = {
        "signature runner, a frame per call": lambda u: export.run_streaming(step_interpreter, u),
        "whole utterance per call": lambda u: export.run_sequence(sequence_interpreter, u),
    }
    per_call = {key: [] for key in runs}
    for x, n in zip(x_test[:20], len_test[:20]):
        for key, run in runs.items():
            start = time.perf_counter()
            run(x[None, :n])
            per_call[key].append((time.perf_counter() - start) / n)
    overhead = {key: 1e6 * statistics.median(values) for key, values in per_call.items()}

    # Drift: 1,000 frames without a reset (the test utterances one after
    # the other), each fully integer file against float32.
    frames = np.concatenate([x[:n] for x, n in zip(x_test, len_test)])
    frames = np.resize(frames, (1000, frames.shape[-1]))
    long = {}
    for name in ("TFLM float32", "TFLM int8, integer I/O and states", "TFLM 16x8, int16 I/O and states"):
        runner = MicroRunner(files[name], 4 * summaries[name]["micro"]["arena_bytes"])
        runner.reset()
        long[name] = np.array([runner(frame[None])[0] for frame in frames])
    drift = {}
    for name in ("TFLM int8, integer I/O and states", "TFLM 16x8, int16 I/O and states"):
        error = np.abs(long[name] - long["TFLM float32"]).max(-1)
        drift[name.split(",")[0].removeprefix("TFLM ")] = {
            "max": float(error.max()),
            "first_100": float(error[:100].mean()),
            "last_100": float(error[-100:].mean()),
            "agree": float((long[name].argmax(-1) == long["TFLM float32"].argmax(-1)).mean()),
        }

    lines = [
        f"JapaneseVowels, {len(x_train)} training and {len(x_test)} test utterances; "
        f"two recurrent layers of width {units}, {epochs} epochs, seed {args.seed}.",
        "",
        "| model | file size (bytes) | tensor arena (bytes) | test accuracy | agrees with Keras "
        "| time per frame (µs) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        agree = f"{r['agree']:.1%}" if "agree" in r else "—"
        arena = f"{r['arena']:,}" if r.get("arena") else "—"
        lines.append(f"| {r['name']} | {r['bytes']:,} | {arena} | {r['accuracy']:.1%} | {agree} | "
                     f"{r['us_per_frame']:.0f} |")
    streamer_us = rows[1]["us_per_frame"]
    lines += [
        "",
        f"LiteRT float32, per frame: Streamer {streamer_us:.0f} µs, "
        + ", ".join(f"{key} {us:.0f} µs" for key, us in overhead.items()) + ".",
        "",
        "Fully integer files against float32, all in TFLM, over 1,000 frames without a reset "
        "(probability differences):",
        "",
        "| | " + " | ".join(drift) + " |",
        "|---|" + "---:|" * len(drift),
        "| the same most likely speaker | " + " | ".join(f"{d['agree']:.1%}" for d in drift.values()) + " |",
        "| largest difference | " + " | ".join(f"{d['max']:.3f}" for d in drift.values()) + " |",
        "| mean difference, first 100 frames | " + " | ".join(f"{d['first_100']:.4f}" for d in drift.values()) + " |",
        "| mean difference, last 100 frames | " + " | ".join(f"{d['last_100']:.4f}" for d in drift.values()) + " |",
    ]
    table = "\n".join(lines) + "\n"
    atomic_files.write_text(out / "deploy_results.md", table)
    # The card a device build reads: each file's size, arena, the oldest
    # runtime it needs, and the scale and zero point of every integer input,
    # output and state (real = scale × (integer − zero point)).
    card = {
        path.name: {
            "bytes": path.stat().st_size,
            "arena_bytes": summaries[name].get("micro", {}).get("arena_bytes"),
            "min_runtime": summaries[name]["min_runtime"],
            "quantization": summaries[name]["quantization"],
        }
        for name, path in files.items()
    }
    atomic_files.write_text(out / "deploy_card.json", json.dumps(card, indent=1) + "\n")
    print(table)
    for r in rows:
        r.setdefault("arena", None)
    rows[1]["overhead"] = overhead
    rows[-1]["drift"] = drift

    k = int(np.argmax(len_test))  # the longest utterance of the test set
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    for ax, name in zip(axes, ("LiteRT float32", "TFLM int8, integer I/O and states")):
        probs = streams[name][k]
        for c in range(NUM_CLASSES):
            ax.plot(np.arange(1, len(probs) + 1), probs[:, c],
                    lw=2.5 if c == y_test[k] else 0.8, label=f"speaker {c + 1}")
        ax.set(title=name, xlabel="frames received")
    axes[0].set_ylabel("probability")
    axes[1].legend(fontsize=7, loc="center right")
    fig.suptitle(f"Test utterance {k}: speaker {y_test[k] + 1} (thick line)")
    fig.tight_layout()
    with atomic_files.replacing(out / "deploy_streaming.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)
    return rows


if __name__ == "__main__":
    main()
