"""Benchmark keras_relrec's LSTM-family cells against `keras.layers.LSTM`.

Every model is `Input((T, D)) -> RNN(cell) -> Dense(1)` trained with MSE/SGD.
For each model and for `jit_compile` in {False, True} we time one training
step (`train_on_batch`) and one inference call (`predict_on_batch`), report
the median over `--repeats` runs, the ratio against `keras.layers.LSTM` under
the same jit setting, and the achieved GFLOP/s relative to a large float32
matmul measured in the same process (our practical "peak" for this machine).

Results are written to a delimited section of benchmarks/RESULTS.md, so
other benchmark scripts can share the file.

Full run (slow on small CPUs):
    python benchmarks/bench_lstm_cells.py
Smoke test (seconds):
    python benchmarks/bench_lstm_cells.py --quick --output /tmp/results.md
"""

import argparse
import os
import statistics
import sys

# The shared helpers live next to this file; inserting the folder makes the
# import work however the script is started (from the repo root, by path,
# or imported by another script).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

results_file.use_tensorflow_backend()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from results_file import median_seconds  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import time_once  # noqa: E402
from results_file import write_section  # noqa: E402

SECTION = "bench_lstm_cells"  # its markers in the results file
TARGET_RATIO = 1.15  # the cells must stay within 15% of keras.layers.LSTM
BASELINE = "keras.layers.LSTM"


def model_specs(units):
    """(name, factory) pairs; each factory returns a fresh recurrent layer.

    Factories (rather than layer instances) are needed because every
    (model, jit) combination must start from freshly built, uncompiled weights.
    """
    from keras_relrec.layers import CoupledLSTMCell as coupled
    from keras_relrec.layers import PeepholeLSTMCell as peephole

    return [
        (BASELINE, lambda: keras.layers.LSTM(units)),
        ("PeepholeLSTMCell", lambda: keras.layers.RNN(peephole(units))),
        ("CoupledLSTMCell", lambda: keras.layers.RNN(coupled(units))),
        (
            "CoupledLSTMCell(use_peepholes=True)",
            lambda: keras.layers.RNN(coupled(units, use_peepholes=True)),
        ),
    ]


def recurrent_flops_per_step(layer, batch):
    """Forward matmul FLOPs of one time step, derived from the built weights.

    A cell with G gate blocks has a (D, G*U) input kernel and a (U, G*U)
    recurrent kernel, i.e. 2*B*(D+U)*G*U FLOPs per step. Summing over the
    2-D weights instead of hard-coding G keeps the count honest whatever
    gates a cell actually computes (e.g. a coupled-gate cell has one block
    fewer). Peephole weights are 1-D, elementwise work, and are not counted;
    neither are biases, activations or the tiny Dense head.
    """
    flops = 0
    for w in layer.trainable_weights:
        if len(w.shape) == 2:
            rows, cols = w.shape
            flops += 2 * batch * rows * cols
    return flops


def matmul_peak_gflops(n, repeats):
    """GFLOP/s of an n x n float32 matmul: the practical ceiling for our FLOPs.

    Wrapped in a tf.function so we time the kernel, not eager dispatch;
    `.numpy()` makes each call synchronous.
    """
    rng = np.random.default_rng(0)
    a = tf.constant(rng.standard_normal((n, n), dtype=np.float32))
    b = tf.constant(rng.standard_normal((n, n), dtype=np.float32))
    matmul = tf.function(lambda x, y: tf.linalg.matmul(x, y))
    sec = median_seconds(lambda: matmul(a, b).numpy(), repeats, warmup=2)
    return 2 * n**3 / sec / 1e9


def prepare_model(make_layer, jit, args, x, y):
    """A compiled model and its warmed-up train and inference callables.

    `train_on_batch`/`predict_on_batch` return NumPy values, so each call
    waits for its result.
    """
    keras.utils.set_random_seed(0)
    inputs = keras.Input((args.seq_len, args.features))
    rnn = make_layer()
    model = keras.Model(inputs, keras.layers.Dense(1)(rnn(inputs)))
    # jit_compile is explicit: "auto" silently means no XLA on CPU TF.
    model.compile(optimizer="sgd", loss="mse", jit_compile=jit)
    train = lambda: model.train_on_batch(x, y)  # noqa: E731
    infer = lambda: model.predict_on_batch(x)  # noqa: E731
    for _ in range(args.warmup):
        train(), infer()
    return {
        # Keras may silently downgrade jit; report what actually ran.
        "effective_jit": bool(model.jit_compile),
        "train": train,
        "infer": infer,
        "fwd_flops": recurrent_flops_per_step(rnn, args.batch) * args.seq_len,
    }


def summarize(prepared, train_times, infer_times, args):
    train_s = statistics.median(train_times)
    infer_s = statistics.median(infer_times)
    fwd_flops = prepared["fwd_flops"]
    return {
        "effective_jit": prepared["effective_jit"],
        "train_ms": train_s * 1e3,
        "infer_ms": infer_s * 1e3,
        # Backward costs ~2x forward (grads w.r.t. activations and weights),
        # so a training step is counted as 3x the forward FLOPs.
        "train_gflops": 3 * fwd_flops / train_s / 1e9,
        "infer_gflops": fwd_flops / infer_s / 1e9,
        "gate_blocks": fwd_flops
        // args.seq_len
        // (2 * args.batch * (args.features + args.units) * args.units),
    }


def render(args, peak, rows):
    """The section's Markdown, without its markers (`write_section` adds them)."""
    by_key = {(r["name"], r["jit"]): r for r in rows}
    lines = section_header("LSTM-family cells vs `keras.layers.LSTM` (`bench_lstm_cells.py`)",
                           args.quick)
    lines += [
        f"- Shapes: batch {args.batch}, seq len {args.seq_len}, input width "
        f"{args.features}, units {args.units}; SGD, MSE; median of "
        f"{args.repeats} timed runs per model, taken round robin across the "
        f"models, after {args.warmup} warm-up run(s)",
        f"- Matmul peak: {peak:.1f} GFLOP/s ({args.matmul_size}x{args.matmul_size} "
        "float32 `tf.linalg.matmul`, same run)",
        "- GFLOP/s counts only the recurrent matmuls, 2·B·(D+U)·G·U per time "
        "step (G = gate blocks); a training step counts as 3x forward. "
        "Shown as train / inference.",
        "",
        "| Model | jit | G | Train ms | Infer ms | Train ratio | Infer ratio "
        "| GFLOP/s | % of matmul peak |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        base = by_key[(BASELINE, r["jit"])]
        r["train_ratio"] = r["train_ms"] / base["train_ms"]
        r["infer_ratio"] = r["infer_ms"] / base["infer_ms"]
        jit = str(r["jit"]) + ("" if r["effective_jit"] == r["jit"] else " (off!)")
        lines.append(
            f"| {r['name']} | {jit} | {r['gate_blocks']} | {r['train_ms']:.2f} "
            f"| {r['infer_ms']:.2f} | {r['train_ratio']:.2f}x | "
            f"{r['infer_ratio']:.2f}x | {r['train_gflops']:.3g} / "
            f"{r['infer_gflops']:.3g} | {100 * r['train_gflops'] / peak:.3g}% / "
            f"{100 * r['infer_gflops'] / peak:.3g}% |"
        )
    lines += ["", f"Target: each cell within {TARGET_RATIO}x of `{BASELINE}` "
              "(train and inference):", ""]
    for r in rows:
        if r["name"] == BASELINE:
            continue
        ok = max(r["train_ratio"], r["infer_ratio"]) <= TARGET_RATIO
        lines.append(
            f"- {r['name']}, jit={r['jit']}: "
            f"{'**within target**' if ok else '**NOT within target**'} "
            f"(train {r['train_ratio']:.2f}x, inference {r['infer_ratio']:.2f}x)"
        )
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=30, help="timed runs (median)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--units", type=int, default=128)
    p.add_argument("--features", type=int, default=128, help="input width D")
    p.add_argument("--seq-len", type=int, default=100)
    p.add_argument("--matmul-size", type=int, default=2048)
    results_file.add_common_arguments(p, "tiny sizes and 2 repeats, for smoke tests")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.warmup = 2, 1
        args.batch, args.units, args.features, args.seq_len = 4, 8, 8, 5
        args.matmul_size = 256
    return args


def main(argv=None):
    args = parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, args.seq_len, args.features), dtype=np.float32)
    y = rng.standard_normal((args.batch, 1), dtype=np.float32)

    peak = matmul_peak_gflops(args.matmul_size, max(args.repeats, 3))
    print(f"matmul peak: {peak:.1f} GFLOP/s", flush=True)

    configs = [
        (name, jit, prepare_model(make_layer, jit, args, x, y))
        for name, make_layer in model_specs(args.units)
        for jit in (False, True)
    ]
    # Round robin: every repeat times each model once, so a slow spell of
    # the machine hits all models alike instead of whichever ran then.
    train_times = [[] for _ in configs]
    infer_times = [[] for _ in configs]
    for _ in range(args.repeats):
        for k, (_, _, prepared) in enumerate(configs):
            train_times[k].append(time_once(prepared["train"]))
            infer_times[k].append(time_once(prepared["infer"]))

    rows = []
    for k, (name, jit, prepared) in enumerate(configs):
        r = summarize(prepared, train_times[k], infer_times[k], args)
        r.update(name=name, jit=jit)
        rows.append(r)
        print(f"{name:38s} jit={jit!s:5s} train {r['train_ms']:8.2f} ms  "
              f"infer {r['infer_ms']:8.2f} ms", flush=True)

    section = write_section(args.output, SECTION, render(args, peak, rows))
    print(section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
