"""A character-level language model of Python's own source code with Transformer-XL.

The corpus is the standard library that ships with the interpreter (its
top-level `*.py` files, read as bytes: 256 symbols), split by file: every
20th file is test, the next one validation, the rest training. Three models
of about the same number of weights read it as 32 parallel streams, one
segment of 64 characters at a time, and learn by truncated back-propagation
over segments (the paper's training: the state carries over, gradients stop
at it):

- Transformer-XL with memory (`mem_len` 128: each character sees up to 192
  earlier ones, and more through the layers);
- the same model without memory (each segment on its own);
- a stateful LSTM of about the same weight count;
- `SegmentCacheTransformer` in place of the FIFO memory (`--models cache`,
  not run by default): a cache of `--slots` segments of which the
  `mem_len / segment` most relevant are recalled (the same 128 positions
  attended), with the causal query (the next characters never choose
  what is recalled).

It reports bits per character on the test files, plots the validation
curves, generates a sample with `TransformerXLGenerator`, and can save the
memory model as `.keras`, SavedModel and TFLite (streaming by segment).

    python tutorials/char_lm_transformer_xl.py --save-dir savedmodels/char_lm_transformer_xl
    python tutorials/char_lm_transformer_xl.py --tiny     # seconds, for CI
"""

import argparse
import math
import os
import pathlib
import sysconfig
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
from keras_relrec.models import TransformerXLGenerator  # noqa: E402
from keras_relrec.models import build_training_state  # noqa: E402
from keras_relrec.utils import atomic_files  # noqa: E402
from keras_relrec.utils import model_card  # noqa: E402

VOCABULARY = 256
MODELS = ("Transformer-XL, memory", "Transformer-XL, no memory", "LSTM")
CACHE = "Segment cache"


def corpus(limits):
    """(train, validation, test) byte arrays from the standard library."""
    files = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    parts = ([], [], [])
    for index, path in enumerate(files):
        part = 2 if index % 20 == 0 else 1 if index % 20 == 1 else 0
        parts[part].append(path.read_bytes())
    return tuple(np.frombuffer(b"".join(p), np.uint8)[:limit].astype("int32") for p, limit in zip(parts, limits))


def streams(data, batch, length):
    """Inputs and next-character targets as `batch` contiguous streams,
    ordered so that row r of batch k + 1 continues row r of batch k."""
    steps = (len(data) - 1) // (batch * length)
    usable = steps * batch * length
    x = data[:usable].reshape(batch, steps, length)
    y = data[1 : usable + 1].reshape(batch, steps, length)
    order = lambda a: a.transpose(1, 0, 2).reshape(steps * batch, length)  # noqa: E731
    return order(x), order(y)


def transformer_xl(args, mem_len, batch, stateful, cache=False):
    common = dict(
        num_layers=args.layers, num_heads=args.heads, head_size=args.width // args.heads,
        hidden_dim=args.width, intermediate_dim=4 * args.width, segment_len=args.segment,
        vocabulary_size=VOCABULARY, dropout=args.dropout, stateful=stateful,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02), seed=args.seed, name="backbone",
    )
    if cache:
        return SegmentCacheTransformer(num_slots=args.slots, top_k=args.memory // args.segment, **common)
    return TransformerXL(mem_len=mem_len, **common)


def language_model(kind, args, batch=None, stateful=True):
    """tokens (batch, segment) → logits; stateful models need the batch."""
    tokens = keras.Input((args.segment if stateful else None,), batch_size=batch, dtype="int32", name="tokens")
    if kind == "LSTM":
        hidden = keras.layers.Embedding(VOCABULARY, args.width)(tokens)
        hidden = keras.layers.LSTM(lstm_units(args), return_sequences=True, stateful=stateful)(hidden)
    else:
        hidden = transformer_xl(args, args.memory if kind == MODELS[0] else 0, batch, stateful,
                                cache=kind == CACHE)(tokens)
    name = kind.split(",")[0].replace(" ", "_")
    return keras.Model(tokens, keras.layers.Dense(VOCABULARY, name="head")(hidden), name=name)


def lstm_units(args):
    """The LSTM width whose model has about the Transformer-XL's weights."""
    target = language_model(MODELS[1], args, stateful=False).count_params()
    embedding, head = VOCABULARY * args.width, VOCABULARY

    def weights(u):
        return embedding + 4 * (u * (args.width + u) + u) + u * VOCABULARY + head

    return min(range(8, 4 * args.width), key=lambda u: abs(weights(u) - target))


def reset(model):
    for layer in model.layers:
        if getattr(layer, "stateful", False):
            layer.reset_state()


def bits_per_character(model, x, y, batch):
    reset(model)
    loss = model.evaluate(x, y, batch_size=batch, verbose=0)
    reset(model)
    return loss / math.log(2)


def train(kind, data, args):
    keras.utils.set_random_seed(args.seed)
    (x, y), (xv, yv), (xt, yt) = (streams(d, args.batch, args.segment) for d in data)
    model = language_model(kind, args, batch=args.batch)
    model.compile(keras.optimizers.Adam(args.learning_rate, clipnorm=0.25),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    # The optimizer's state made now, so that TensorFlow traces the first
    # step once rather than twice.
    build_training_state(model, x[: args.batch], y[: args.batch])
    curve, start = [], time.perf_counter()
    for epoch in range(args.epochs):
        reset(model)
        model.fit(x, y, batch_size=args.batch, shuffle=False, verbose=0)
        curve.append(bits_per_character(model, xv, yv, args.batch))
        print(f"{kind}: epoch {epoch + 1}, validation {curve[-1]:.3f} bpc")
    return {
        "model": kind,
        "keras_model": model,
        "weights": model.count_params(),
        "curve": curve,
        "test_bpc": bits_per_character(model, xt, yt, args.batch),
        "seconds": time.perf_counter() - start,
    }


def stateless_copy(result, args):
    model = language_model(result["model"], args, stateful=False)
    model.set_weights(result["keras_model"].get_weights())
    return model


def sample(result, args, prompt=b"def ", length=300):
    model = stateless_copy(result, args)
    generator = TransformerXLGenerator(model.get_layer("backbone"), model.get_layer("head"))
    tokens = generator.generate(np.frombuffer(prompt, np.uint8)[None].astype("int32"), length,
                                sampling="sample", temperature=0.7, seed=args.seed)
    return bytes(tokens[0].astype(np.uint8)).decode("utf-8", errors="replace")


def plot(results, out):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for r in results:
        ax.plot(range(1, len(r["curve"]) + 1), r["curve"], marker="o", label=r["model"])
    ax.set(xlabel="epoch", ylabel="validation bits per character", title="Python source, character level")
    ax.legend()
    fig.tight_layout()
    with atomic_files.replacing(out / "char_lm_curves.png") as temp:
        fig.savefig(temp, dpi=120)
    plt.close(fig)


def save(result, args, argv, folder, test_data):
    from keras_relrec import export

    folder.mkdir(parents=True, exist_ok=True)
    model = stateless_copy(result, args)
    save_model(model, folder / "char_lm_transformer_xl.keras")
    export.export_saved_model(model, folder / "char_lm_transformer_xl_savedmodel", streaming=True)
    export.export_tflite(model, folder / "char_lm_transformer_xl.tflite")
    export.export_tflite(model, folder / "char_lm_transformer_xl_step.tflite", streaming=True)
    snippet = test_data[: 4 * args.segment]
    card = {
        "model": result["model"],
        "weights": result["weights"],
        "segment_len": args.segment,
        "mem_len": args.memory,
        "test_bpc": result["test_bpc"],
        "test_snippet": bytes(snippet.astype(np.uint8)).decode("latin-1"),
        "snippet_bpc": snippet_bits(model, snippet),
        "command": model_card.reproduce_command("tutorials/char_lm_transformer_xl.py", argv,
                                                "savedmodels/char_lm_transformer_xl"),
    }
    model_card.write_card(folder / "card.json", card)


def snippet_bits(model, tokens):
    """Bits per character of the stateless model over `tokens`, from an
    empty memory (what the saved model's test recomputes)."""
    logits = model.predict(tokens[None], verbose=0)[0, :-1].astype("float64")
    logits -= logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return float(-log_probs[np.arange(len(logits)), tokens[1:]].mean() / math.log(2))


def table(results):
    lines = ["| model | weights | test bpc | validation bpc by epoch | s |", "|---|---:|---:|---|---:|"]
    for r in results:
        curve = ", ".join(f"{v:.3f}" for v in r["curve"])
        lines.append(f"| {r['model']} | {r['weights']:,} | {r['test_bpc']:.3f} | {curve} | {r['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for CI")
    parser.add_argument("--train-chars", type=int, default=1_500_000)
    parser.add_argument("--eval-chars", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--segment", type=int, default=64)
    parser.add_argument("--memory", type=int, default=128)
    parser.add_argument("--slots", type=int, default=8, help="segments in the cache")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS) + [CACHE],
                        help="the models to train (the cache is not trained by default)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", default="tutorial_output")
    parser.add_argument("--save-dir", help="write the memory model here")
    raw = argv
    args = parser.parse_args(argv)
    if args.tiny:
        args.train_chars, args.eval_chars, args.epochs = 6_000, 2_000, 1
        args.batch, args.segment, args.memory, args.width, args.heads = 4, 8, 8, 8, 2
    out = pathlib.Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = corpus((args.train_chars, args.eval_chars, args.eval_chars))
    print(f"corpus: {len(data[0]):,} training, {len(data[1]):,} validation, {len(data[2]):,} test characters")
    results = [train(kind, data, args) for kind in args.models]
    text = table(results)
    atomic_files.write_text(out / "char_lm_results.md", text)
    plot(results, out)
    print(text)
    if results[0]["model"] != MODELS[0]:
        return results
    generated = sample(results[0], args)
    atomic_files.write_text(out / "char_lm_sample.txt", generated)
    print(generated)
    if args.save_dir:
        save(results[0], args, raw or [], pathlib.Path(args.save_dir), data[2])
    return results


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
