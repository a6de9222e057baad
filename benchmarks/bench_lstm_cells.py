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
import datetime
import os
import platform
import re
import shlex
import statistics
import sys
import time

# Must be set before keras is imported; setdefault lets a caller override it,
# although the numbers below are only meaningful for the TF backend.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# Keep TF's C++ log noise out of the benchmark output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# Each benchmarked model traces its own fresh tf.functions once, which trips
# TF's "excessive retracing" warning; it is expected here, not a bug.
tf.get_logger().setLevel("ERROR")

START = "<!-- bench_lstm_cells:start -->"
END = "<!-- bench_lstm_cells:end -->"
DEFAULT_OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "RESULTS.md")
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


def median_seconds(fn, repeats, warmup):
    """Median wall time of `fn()`; warm-up calls (tracing/XLA compile) excluded.

    `fn` must block until the result is ready.
    """
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_once(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


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


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def render(args, peak, rows):
    by_key = {(r["name"], r["jit"]): r for r in rows}
    lines = [
        START,
        "## LSTM-family cells vs `keras.layers.LSTM` (`bench_lstm_cells.py`)",
        "",
    ]
    if args.quick:
        lines += ["> **Quick smoke-test run (tiny sizes): numbers are not "
                  "meaningful.**", ""]
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    command = [os.path.basename(sys.executable)] + sys.argv
    lines += [
        f"- Date: {now}",
        f"- Machine: {cpu_model()}, {os.cpu_count()} cores (CPU only)",
        f"- Python {platform.python_version()}, TensorFlow {tf.__version__}, "
        f"Keras {keras.__version__} ({keras.backend.backend()} backend), "
        f"NumPy {np.__version__}",
        f"- Command: `{shlex.join(command)}`",
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
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_section(path, section):
    """Replace only our delimited section so other scripts' results survive."""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    else:
        text = "# Benchmark results\n\nGenerated by the scripts in `benchmarks/`.\n"
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END) + r"\n?", re.S)
    if pattern.search(text):
        # A function replacement avoids re interpreting backslashes in section.
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=30, help="timed runs (median)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--units", type=int, default=128)
    p.add_argument("--features", type=int, default=128, help="input width D")
    p.add_argument("--seq-len", type=int, default=100)
    p.add_argument("--matmul-size", type=int, default=2048)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and 2 repeats, for smoke tests")
    p.add_argument("--output", default=DEFAULT_OUTPUT,
                   help="Markdown file whose section is (re)written")
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

    section = render(args, peak, rows)
    write_section(args.output, section)
    print(section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
