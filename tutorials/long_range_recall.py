"""Long-range recall: where the segment cache's retrieval beats a FIFO memory.

A stream of segments of L = 8 positions: early on, a *facts* segment holds
eight key→value pairs, one per position (a multi-hot vector of a key and a
value, keys distinct, both drawn from 16); then D segments of distractors
(random fillers); then a *question* segment whose positions all ask for
the value of one of the eight keys (the question flag and the key),
answered at its last position. Chance is 1/16.

Models, trained on the same streams (`--segments` long, D drawn from 0 to
segments − 2), the positions projected to width 64 and read by the same
backbone (2 layers, 2 heads), compared at the same attention budget of 2
segments (16 positions), each trained with the same recipe (8 epochs of
12,000 streams, Adam with a cosine decay from 3e-3, XLA):

- Transformer-XL with a FIFO memory of 16 positions (`mem_len` = k·L);
- `SegmentCacheTransformer` with N = `--slots` (4) slots and top-k = 2,
  for each query mode (`standard`, `compute_first`) and each summary
  (`dense`, `mlp`, `bilstm`), exploring its recall in training
  (`explore_recall`, Gumbel-top-k; `--no-explore` trains without);
- an LSTM.

Accuracy is measured at every distance D from 0 to N + 2 on longer
streams where needed (the cache forgets the facts once they are more than
N segments old at the question: D + 1 > N) and plotted; for the cache,
also how often the question recalls the facts segment at each D, and
for a few test streams the segments it recalled and their α.

    python tutorials/long_range_recall.py            # the README's figures
    python tutorials/long_range_recall.py --tiny     # seconds, for CI
"""

import argparse
import itertools
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
from keras_relrec.layers import SegmentCacheTransformer  # noqa: E402
from keras_relrec.layers import TransformerXL  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402
from keras_relrec.utils import model_card  # noqa: E402

SEGMENT = 8
KEYS, VALUES, FILLERS = 16, 16, 8
# One position is a multi-hot vector: a key and a value (a fact), a filler
# (a distractor), or the question flag and a key.
KEY0, VALUE0, FILLER0 = 0, KEYS, KEYS + VALUES
QUESTION = KEYS + VALUES + FILLERS
FEATURES = QUESTION + 1
CACHES = [(query, summary) for query in ("standard", "compute_first") for summary in ("dense", "mlp", "bilstm")]


def streams(count, segments, distances, rng):
    """`count` streams of `segments` segments (features (count, steps,
    FEATURES)), the facts `distance` segments before the question segment
    (one distance per stream, drawn from `distances`). Returns the
    features, the answers (value index) and the distances."""
    distance = rng.choice(distances, size=count)
    rows = np.arange(count)[:, None, None]
    positions = np.arange(segments * SEGMENT).reshape(1, segments, SEGMENT)
    x = np.zeros((count, segments, SEGMENT, FEATURES), "float32")
    # Distractors everywhere first, then the facts and the question.
    fillers = FILLER0 + rng.integers(0, FILLERS, (count, segments, SEGMENT))
    x[rows, positions // SEGMENT, positions % SEGMENT, fillers] = 1
    facts = facts_segment(segments, distance)
    keys = np.argsort(rng.random((count, KEYS)), axis=1)[:, :SEGMENT]  # eight distinct keys
    values = rng.integers(0, VALUES, (count, SEGMENT))
    x[np.arange(count), facts] = 0.0
    rows, slots = np.arange(count)[:, None], np.arange(SEGMENT)[None]
    x[rows, facts[:, None], slots, KEY0 + keys] = 1
    x[rows, facts[:, None], slots, VALUE0 + values] = 1
    asked = rng.integers(0, SEGMENT, count)
    x[:, -1] = 0.0
    x[:, -1, :, QUESTION] = 1
    x[rows, -1, slots, KEY0 + keys[np.arange(count), asked][:, None]] = 1
    answers = values[np.arange(count), asked].astype("int32")
    return x.reshape(count, segments * SEGMENT, FEATURES), answers, distance


def backbone(kind, args):
    common = dict(num_layers=2, num_heads=2, head_size=args.width // 2, hidden_dim=args.width,
                  intermediate_dim=2 * args.width, segment_len=SEGMENT, name="backbone")
    if kind == "Transformer-XL, FIFO":
        return TransformerXL(mem_len=2 * SEGMENT, **common)
    query, summary = kind.split(" ")[-1].strip("()").split(",")
    # Exploration: training draws the recalled slots from α (see the layer).
    return SegmentCacheTransformer(num_slots=args.slots, top_k=2, query=query, summary=summary,
                                   explore_recall=args.explore, seed=args.seed, **common)


def model_for(kind, args):
    """features (batch, steps, FEATURES) → logits over the values at every
    position (only the last one is trained and read; per position, so that
    the model streams)."""
    features = keras.Input((None, FEATURES), name="features")
    hidden = keras.layers.Dense(args.width, use_bias=False, name="embedding")(features)
    if kind == "LSTM":
        hidden = keras.layers.LSTM(4 * args.width, return_sequences=True)(hidden)
    else:
        hidden = backbone(kind, args)(hidden)
    return keras.Model(features, keras.layers.Dense(VALUES, name="head")(hidden),
                       name=kind.split(" ")[0].strip(","))


def last_position_targets(x, answers):
    """The answer at each stream's last position, weight 1 there only."""
    targets, weights = np.zeros(x.shape[:2], "int32"), np.zeros(x.shape[:2], "float32")
    targets[:, -1], weights[:, -1] = answers, 1.0
    return targets, weights


def answer(model, x):
    return model.predict(x, batch_size=256, verbose=0)[:, -1].argmax(-1)


def kinds(args):
    names = ["Transformer-XL, FIFO"] + [f"cache ({q},{s})" for q, s in CACHES] + ["LSTM"]
    return [k for k in names if not args.models or any(m in k for m in args.models)]


def train(kind, data, args):
    keras.utils.set_random_seed(args.seed)
    model = model_for(kind, args)
    steps = args.epochs * -(-int(0.9 * len(data[0])) // args.batch)
    schedule = keras.optimizers.schedules.CosineDecay(args.learning_rate, steps)
    model.compile(keras.optimizers.Adam(schedule, clipnorm=1.0),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), weighted_metrics=["accuracy"],
                  jit_compile=args.jit, run_eagerly=args.tiny)
    x, answers = data
    targets, weights = last_position_targets(x, answers)
    start = time.perf_counter()
    history = model.fit(x, targets, sample_weight=weights, batch_size=args.batch, epochs=args.epochs, verbose=0,
                        validation_split=0.1, shuffle=True)
    seconds = time.perf_counter() - start
    print(f"{kind}: validation accuracy by epoch {np.round(history.history['val_accuracy'], 3).tolist()}, "
          f"{seconds:.0f} s")
    return model, seconds, history.history["val_accuracy"]


def facts_segment(segments, distance):
    """Where `streams` puts the facts: D segments before the question, the
    last one."""
    return segments - 2 - distance


def by_distance(model, args, rng, probe=None):
    """At each distance D = 0 … slots + 2 (longer streams when needed: the
    layers take any length): the accuracy and, with the cache's `probe`,
    how often the question segment recalls the facts segment."""
    n = args.test_per_distance

    def length(distance):
        return max(args.segments, distance + 2)

    distances = range(args.slots + 3)
    # Drawn one distance after another (the seed's streams), then the
    # distances whose streams have one length answered in one call: an
    # eager call of the segment loop costs about as much for a few streams
    # as for several times more.
    drawn = [streams(n, length(d), [d], rng)[:2] for d in distances]
    accuracy, recalled = {}, {}
    for segments, group in itertools.groupby(distances, key=length):
        group = list(group)
        x = np.concatenate([drawn[d][0] for d in group])
        correct = answer(model, x) == np.concatenate([drawn[d][1] for d in group])
        chosen = question_recall(probe, model, args, x)[0] if probe is not None else None
        for k, distance in enumerate(group):
            rows = slice(k * n, (k + 1) * n)
            accuracy[distance] = float(correct[rows].mean())
            if probe is not None:
                recalled[distance] = float((chosen[rows] == facts_segment(segments, distance)).any(-1).mean())
    return accuracy, recalled


def recall_probe(model, args):
    """The cache of `model` (same weights), returning its states."""
    layer = model.get_layer("backbone")
    probe = SegmentCacheTransformer.from_config({**layer.get_config(), "return_state": True})
    probe(np.zeros((1, SEGMENT, args.width), "float32"))
    probe.set_weights(layer.get_weights())
    return probe


def question_recall(probe, model, args, x):
    """At each stream's last (question) segment: the earlier segments the
    cache recalls, counted from the stream's start, (streams, k), and
    their α."""
    # The states before the last segment, then the recall it makes.
    embedding = model.get_layer("embedding")
    _, *states = probe(embedding(x[:, :-SEGMENT]))
    alpha, indices = (keras.ops.convert_to_numpy(t)
                      for t in probe.recalled_slots(embedding(x[:, -SEGMENT:]), states))
    # Slot s holds segment (written − N + s), written the segments before
    # the question.
    written = x.shape[1] // SEGMENT - 1
    return written - args.slots + indices, np.take_along_axis(alpha, indices, axis=1)


def recalled_segments(probe, model, args, rng, examples=3):
    """For a few streams: which segments the question recalled and α."""
    x, _, distance = streams(examples, args.segments, list(range(args.segments - 1)), rng)
    chosen, alpha = question_recall(probe, model, args, x)
    return [{"facts_segment": int(facts_segment(args.segments, distance[n])), "recalled": chosen[n].tolist(),
             "alpha": [round(float(a), 3) for a in alpha[n]]} for n in range(examples)]


def plot(results, args, out):
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        distances = sorted(r["by_distance"])
        ax.plot(distances, [r["by_distance"][d] for d in distances], marker="o", label=r["model"])
    ax.axhline(1 / VALUES, color="grey", linestyle=":", label="chance")
    ax.axvline(args.slots - 2, color="grey", linestyle="--", linewidth=0.8)
    ax.set(xlabel="distractor segments between the facts and the question (D)", ylabel="accuracy",
           title=f"Long-range recall, attention budget 2 segments, cache of {args.slots}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_files.replacing(out / "long_range_recall.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)


def table(results, args):
    head = "| model | weights | " + " | ".join(f"D={d}" for d in range(args.slots + 3)) + " | s |"
    lines = [head, "|---|---:|" + "---:|" * (args.slots + 3) + "---:|"]
    for r in results:
        cells = " | ".join(f"{r['by_distance'][d]:.2f}" for d in range(args.slots + 3))
        lines.append(f"| {r['model']} | {r['weights']:,} | {cells} | {r['seconds']:.0f} |")
    lines += ["", "How often the question recalls the facts segment:", "",
              "| model | " + " | ".join(f"D={d}" for d in range(args.slots + 3)) + " |",
              "|---|" + "---:|" * (args.slots + 3)]
    for r in results:
        if "facts_recalled" in r:
            cells = " | ".join(f"{r['facts_recalled'][d]:.2f}" for d in range(args.slots + 3))
            lines.append(f"| {r['model']} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--slots", type=int, default=4, help="N, the cache's segments")
    parser.add_argument("--segments", type=int, default=5, help="segments per training stream")
    parser.add_argument("--train", type=int, default=12_000, help="training streams")
    parser.add_argument("--test-per-distance", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--no-explore", dest="explore", action="store_false",
                        help="recall the top k in training too (no exploration)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="the start of a cosine decay")
    parser.add_argument("--no-jit", dest="jit", action="store_false", help="train without XLA")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="*", help="run only the models whose name contains one of these")
    parser.add_argument("--output-dir", default="tutorial_output")
    parser.add_argument("--save-dir", help="write the cache (standard, dense) model here")
    args = parser.parse_args(argv)
    if args.tiny:
        # 36 + 4 streams: two whole batches of 18 to train on, one to
        # validate; eagerly, since tracing a graph costs more than the few
        # steps. An eager step costs about as much at any of these sizes
        # (Python, not arithmetic), so the steps are few rather than small.
        args.slots, args.segments, args.train, args.test_per_distance = 2, 5, 40, 8
        args.epochs, args.batch, args.width, args.jit = 1, 18, 8, False
        # Every kind of model, each query and two summaries (the layer's
        # tests hold the third).
        args.models = args.models or ["FIFO", "standard,dense", "compute_first,bilstm", "LSTM"]
    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    x, y, _ = streams(args.train, args.segments, list(range(args.segments - 1)), rng)
    results = []
    for kind in kinds(args):
        model, seconds, curve = train(kind, (x, y), args)
        probe = recall_probe(model, args) if kind.startswith("cache") else None
        accuracy, facts_recalled = by_distance(model, args, np.random.default_rng(args.seed + 1), probe)
        result = {"model": kind, "weights": model.count_params(), "seconds": seconds, "curve": curve,
                  "by_distance": accuracy}
        if probe is not None:
            result["facts_recalled"] = facts_recalled
            result["recalled"] = recalled_segments(probe, model, args, np.random.default_rng(args.seed + 2))
        if args.save_dir and kind == "cache (standard,dense)":
            save(model, result, args, argv or [], pathlib.Path(args.save_dir))
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "curve"}))
    text = table(results, args)
    atomic_files.write_text(out / "long_range_recall.md", text)
    atomic_files.write_text(out / "long_range_recall.json", json.dumps(results, indent=1) + "\n")
    plot(results, args, out)
    print(text)
    return results


def save(model, result, args, argv, folder):
    from keras_relrec import export

    folder.mkdir(parents=True, exist_ok=True)
    save_model(model, folder / "long_range_recall_cache.keras")
    rng = np.random.default_rng(args.seed + 3)
    x, y, distance = streams(64, args.segments, list(range(args.segments - 1)), rng)
    # Multi-hot, so bytes hold them exactly.
    with atomic_files.replacing(folder / "test_streams.npz") as temp:
        np.savez_compressed(temp, features=x.astype("uint8"), answers=y, distances=distance)
    export.export_saved_model(model, folder / "long_range_recall_cache_savedmodel", streaming=True)
    export.export_tflite(model, folder / "long_range_recall_cache_step.tflite", streaming=True)
    card = {
        "model": result["model"],
        "weights": result["weights"],
        "segment_len": SEGMENT,
        "num_slots": args.slots,
        "top_k": 2,
        "accuracy_by_distance": result["by_distance"],
        "test_streams_accuracy": float((answer(model, x) == y).mean()),
        "command": model_card.reproduce_command("tutorials/long_range_recall.py", argv,
                                                "savedmodels/long_range_recall"),
    }
    model_card.write_card(folder / "card.json", card)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
