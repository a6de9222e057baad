"""Tutorial: the relational memory core against an LSTM on Nth-farthest.

Santoro et al. (2018) introduced the relational memory core (RMC) with a
task an LSTM cannot do: shown a set of vectors one per step, say which is
the n-th farthest from vector m. This script trains an RMC and an LSTM with
about as many weights on streams of fresh examples for the same wall-clock
time each, and writes to --output-dir: learning curves
(`nth_farthest_curves.png`), the RMC's attention over its memory and the
input on one example (`nth_farthest_attention.png`), and a table
(`nth_farthest_results.md`) with test accuracy overall and for each n, beside
the paper's figures. With --save-dir it also writes the trained RMC as
`.keras`, SavedModel and TFLite.

The default task is the smallest that still needs a comparison of
distances, 3 vectors of 1 dimension: there the RMC leaves, within minutes
on a CPU, the plateau where both models only name vector m itself; the
LSTM stays on it. `--task reduced` (Sonnet's 4 x 4) and `--task paper`
(8 x 16) need far more training than a CPU gives in half an hour.

    python tutorials/nth_farthest_rmc.py                       # 2 x 15 minutes
    python tutorials/nth_farthest_rmc.py --tiny                # seconds, for CI
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
from keras_relrec.datasets import nth_farthest  # noqa: E402
from keras_relrec.datasets.nth_farthest import PAPER  # noqa: E402
from keras_relrec.datasets.nth_farthest import REDUCED  # noqa: E402
from keras_relrec.layers import RelationalMemoryCell  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402
from keras_relrec.utils import model_card  # noqa: E402

PAPER_RESULTS = "RMC about 91%, LSTM and DNC about 30% (8 vectors of 16 dimensions)"
# The smallest instance of the task that still needs a comparison of
# distances: 3 vectors on a line. At a CPU budget it is the one where the
# RMC leaves the plateau that precedes learning (see tutorials/README.md).
TASKS = {"small": {"num_objects": 3, "num_features": 1}, "reduced": REDUCED, "paper": PAPER}


def build(kind, task, rmc_config, lstm_units, mlp_width, learning_rate, eager=False):
    width = task["num_features"] + 3 * task["num_objects"]
    inputs = keras.Input((task["num_objects"], width), name="rows")
    if kind == "RMC":
        h = keras.layers.RNN(RelationalMemoryCell(**rmc_config), name="rmc")(inputs)
    else:
        h = keras.layers.LSTM(lstm_units, name="lstm")(inputs)
    # A final MLP on the last output, as in the reference's example.
    h = keras.layers.Dense(mlp_width, activation="relu")(h)
    h = keras.layers.Dense(mlp_width, activation="relu")(h)
    outputs = keras.layers.Dense(task["num_objects"], name="logits")(h)
    model = keras.Model(inputs, outputs, name=f"nth_farthest_{kind.lower()}")
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate, clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=not eager,
        run_eagerly=eager,
    )
    return model


def recurrent_weights(model):
    return sum(w.size for w in model.layers[1].get_weights())


def matching_lstm_units(target, width):
    """LSTM units whose weights, 4·(D·U + U² + U), come closest to `target`."""
    return min(range(1, 2048), key=lambda u: abs(4 * (width * u + u * u + u) - target))


def train(model, task, examples, minutes, chunk, batch, validation, seed, log=None):
    """Fresh examples every chunk until `examples` are seen or `minutes`
    pass; returns the curve as (examples seen, seconds, validation accuracy)."""
    curve, seen, start, k = [], 0, time.perf_counter(), 0
    while seen < examples and time.perf_counter() - start < 60 * minutes:
        x, y = nth_farthest(chunk, **task, seed=(seed, 100 + k))
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
        seen += chunk
        k += 1
        accuracy = model.evaluate(*validation, verbose=0)[1]
        curve.append((seen, time.perf_counter() - start, accuracy))
        if log:
            log(f"{model.name}: {seen:,} examples, {curve[-1][1] / 60:.1f} min, "
                f"validation accuracy {accuracy:.1%}")
    return curve


def attention_on(model, x):
    """The RMC's attention at the last step of one example, mean over heads:
    the memory rows (the only queries of the last block) over the memory
    rows and the input row."""
    cell = model.get_layer("rmc").cell
    states = cell.get_initial_state(1)
    for t in range(x.shape[0]):
        _, states, attention = cell.step(x[t][None], states)
    return np.asarray(attention[-1])[0].mean(0)


def progress(line):
    print(line, flush=True)


def plot_attention(weights, mem_slots, out):
    fig, ax = plt.subplots(figsize=(4, 3.5))
    image = ax.imshow(weights, vmin=0, vmax=1, cmap="viridis")
    rows = [f"M{k}" for k in range(mem_slots)]
    ax.set(xticks=range(len(rows) + 1), yticks=range(len(rows)),
           xticklabels=rows + ["input"], yticklabels=rows, xlabel="attends to",
           ylabel="memory row", title="RMC attention, last step")
    fig.colorbar(image)
    fig.tight_layout()
    with atomic_files.replacing(out / "nth_farthest_attention.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--task", choices=list(TASKS), default="small",
                        help="3 x 1 (default), Sonnet's 4 x 4 or the paper's 8 x 16")
    parser.add_argument("--objects", type=int, help="vectors per example (overrides --task)")
    parser.add_argument("--features", type=int, help="dimensions per vector (overrides --task)")
    parser.add_argument("--count-from", choices=["nearest", "farthest"], default="nearest",
                        help="which way n counts (the reference: from the nearest)")
    parser.add_argument("--models", nargs="+", choices=["RMC", "LSTM"], default=["RMC", "LSTM"])
    parser.add_argument("--mem-slots", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--head-size", type=int, default=32)
    parser.add_argument("--num-blocks", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--examples", type=int, default=20_000_000, help="training examples per model")
    parser.add_argument("--minutes", type=float, default=15.0, help="wall-clock cap per model")
    parser.add_argument("--output-dir", default="tutorial_output")
    parser.add_argument("--save-dir", help="write the trained RMC here")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv

    task = dict(TASKS[args.task], count_from=args.count_from)
    if args.objects:
        task["num_objects"] = args.objects
    if args.features:
        task["num_features"] = args.features
    if args.tiny:
        rmc_config = dict(mem_slots=2, head_size=4, num_heads=2)
        examples, minutes, chunk, batch, mlp_width, n_eval = 512, 1.0, 256, 64, 16, 256
    else:
        rmc_config = dict(mem_slots=args.mem_slots, head_size=args.head_size,
                          num_heads=args.num_heads, num_blocks=args.num_blocks)
        examples, minutes, chunk = args.examples, args.minutes, 20_000
        batch, mlp_width, n_eval = args.batch_size, 256, 5_000
    validation = nth_farthest(n_eval, **task, seed=(args.seed, 1))
    x_test, y_test = nth_farthest(n_eval, **task, seed=(args.seed, 2))

    keras.utils.set_random_seed(args.seed)
    # The LSTM is sized by the RMC's weights, so the RMC is built either way.
    # Tiny runs eagerly: compiling costs more than their few steps.
    rmc = build("RMC", task, rmc_config, None, mlp_width, args.learning_rate, eager=args.tiny)
    width = task["num_features"] + 3 * task["num_objects"]
    units = matching_lstm_units(recurrent_weights(rmc), width)
    models = {"RMC": rmc,
              "LSTM": build("LSTM", task, None, units, mlp_width, args.learning_rate, eager=args.tiny)}
    models = {kind: models[kind] for kind in args.models}

    results, curves = [], {}
    for kind, model in models.items():
        keras.utils.set_random_seed(args.seed)
        curves[kind] = train(model, task, examples, minutes, chunk, batch, validation,
                             args.seed, log=None if args.tiny else progress)
        predictions = model.predict(x_test, verbose=0).argmax(-1)
        n = x_test[:, 0, task["num_features"] + task["num_objects"]:][:, : task["num_objects"]].argmax(-1)
        results.append({
            "model": kind,
            "recurrent_weights": recurrent_weights(model),
            "examples": curves[kind][-1][0],
            "minutes": curves[kind][-1][1] / 60,
            "accuracy": float((predictions == y_test).mean()),
            "by_n": [float((predictions == y_test)[n == k].mean()) for k in range(task["num_objects"])],
        })

    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for kind, curve in curves.items():
        seen, _, accuracy = zip(*curve)
        ax.plot(seen, accuracy, label=kind)
    ax.axhline(1 / task["num_objects"], color="grey", ls=":", label="chance")
    ax.set(xlabel="training examples", ylabel="validation accuracy",
           title=f"Nth-farthest ({task['num_objects']} x {task['num_features']}, "
                 f"n from the {task['count_from']})")
    ax.legend()
    fig.tight_layout()
    with atomic_files.replacing(out / "nth_farthest_curves.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)

    if "RMC" in models:
        plot_attention(attention_on(rmc, x_test[0]), rmc_config["mem_slots"], out)

    heads = " | ".join(f"n={k}" for k in range(task["num_objects"]))
    lines = [
        f"Nth-farthest ({task['num_objects']} vectors of {task['num_features']} "
        f"dimensions; n counted from the {task['count_from']}"
        f"{', as the reference generator does' if task['count_from'] == 'nearest' else ''}); "
        f"fresh training examples, batch {batch}, Adam {args.learning_rate:g}; "
        f"test on {n_eval} new examples; seed {args.seed}. RMC: {rmc_config}.",
        "",
        f"| model | recurrent weights | examples seen | minutes | test accuracy | {heads} |",
        "|---|---:|---:|---:|---:|" + "---:|" * task["num_objects"],
    ]
    for r in results:
        by_n = " | ".join(f"{a:.1%}" for a in r["by_n"])
        lines.append(f"| {r['model']} | {r['recurrent_weights']:,} | {r['examples']:,} | "
                     f"{r['minutes']:.1f} | {r['accuracy']:.1%} | {by_n} |")
    lines += ["", f"Paper (Santoro et al. 2018, full task, GPU-scale training): {PAPER_RESULTS}."]
    table = "\n".join(lines) + "\n"
    atomic_files.write_text(out / "nth_farthest_results.md", table)
    print(table)

    if args.save_dir and "RMC" in models:
        from keras_relrec import export

        save = pathlib.Path(args.save_dir)
        save.mkdir(parents=True, exist_ok=True)
        save_model(rmc, save / "nth_farthest_rmc.keras")
        export.export_saved_model(rmc, save / "nth_farthest_rmc_savedmodel")
        export.export_tflite(rmc, save / "nth_farthest_rmc.tflite")
        # What the savedmodels test checks the files against.
        card = {
            "task": task,
            "rmc": rmc_config,
            "test_accuracy": results[0]["accuracy"],
            "examples_seen": results[0]["examples"],
            "command": model_card.reproduce_command("tutorials/nth_farthest_rmc.py", argv or [],
                                                    "savedmodels/nth_farthest_rmc"),
        }
        model_card.write_card(save / "card.json", card)
    return results


if __name__ == "__main__":
    main()
