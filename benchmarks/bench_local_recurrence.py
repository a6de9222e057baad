"""Local recurrence: the windowed cell against the same cell over the sequence.

A GRU of d = 32 units on 32 features, batch 1, for each length T (up to
100,000 steps) and window M:

- **local**: `LocalRecurrence(GRUCell(32), M)`: T windows of M steps, each
  from the zero state (the M steps unrolled, the T windows a batch);
- **RNN**: `keras.layers.RNN(GRUCell(32), return_sequences=True)`: the same
  cell once over the T steps (Keras' loop).

Each is timed as a `tf.function` (graph), with XLA (`jit_compile`) and on
JAX (`jax.jit`, in a process of its own), and the local layer with
`chunk_size=1024` on JAX (where its chunks run in a loop): medians of
`--repeats` calls after warm-up. Memory: the temporary buffers of the XLA program JAX compiles
(`memory_analysis()`, what the forward pass needs beside its input and
output) for the local layer at once and with `chunk_size=1024`, and the
window copy that R-Transformer's public code makes (B·T·M·d floats);
and the same for a training step's gradient (compiled, not run), at once
and chunked (where the gradient recomputes each chunk).

Results go to the `bench_local_recurrence` section of benchmarks/RESULTS.md.
Full run (about 2 minutes on 2 cores):
    python benchmarks/bench_local_recurrence.py
Smoke test:
    python benchmarks/bench_local_recurrence.py --quick --output /tmp/local.md
"""

import argparse
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

if results_file.jax_worker_argument() is not None:
    os.environ["KERAS_BACKEND"] = "jax"
results_file.use_tensorflow_backend()

import keras  # noqa: E402
import numpy as np  # noqa: E402
from results_file import jax_forward  # noqa: E402
from results_file import jax_version  # noqa: E402
from results_file import median_seconds  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import write_section  # noqa: E402

from keras_relrec.layers import LocalRecurrence  # noqa: E402

SECTION = "bench_local_recurrence"
WIDTH = 32
CHUNK = 1024


def layers(window):
    """The local layer (and its chunked twin, same cell) and the RNN."""
    cell = keras.layers.GRUCell(WIDTH)
    local = LocalRecurrence(cell, window)
    chunked = LocalRecurrence(cell, window, chunk_size=CHUNK)
    rnn = keras.layers.RNN(keras.layers.GRUCell(WIDTH), return_sequences=True)
    return {"local": local, "chunked": chunked, "rnn": rnn}


def inputs(steps):
    return np.random.default_rng(0).normal(size=(1, steps, WIDTH)).astype("float32")


def tensorflow_row(steps, window, args, rnn_times):
    import tensorflow as tf

    x = tf.constant(inputs(steps))
    row = {"T": steps, "M": window}
    built = layers(window)
    for name in ("local", "rnn"):
        if name == "rnn" and steps in rnn_times:  # the RNN does not depend on M
            row.update(rnn_times[steps])
            continue
        layer = built[name]
        layer(x[:, :2])
        for jit in (False, True):
            function = tf.function(layer, jit_compile=jit)
            row[f"{name}_{'xla' if jit else 'graph'}"] = median_seconds(lambda f=function: f(x).numpy(),
                                                                         args.repeats, 1)
        if name == "rnn":
            rnn_times[steps] = {k: v for k, v in row.items() if k.startswith("rnn_")}
    return row


def jax_worker(grid, repeats):
    """Runs in a process with KERAS_BACKEND=jax: times and XLA memory."""
    rows = []
    for steps, window in grid:
        x = inputs(steps)
        row = {"T": steps, "M": window}
        for name, layer in layers(window).items():
            layer(x[:, :2])
            call, row[f"{name}_temp_bytes"] = jax_forward(layer, x)
            row[f"{name}_jax"] = median_seconds(call, repeats, 1)
            if name != "rnn":
                row[f"{name}_train_temp_bytes"] = jax_training_temp_bytes(layer, x)
        rows.append(row)
    return rows


def jax_training_temp_bytes(layer, x):
    """The temporary bytes of the XLA program JAX compiles for the gradient
    of a loss of `layer(x, training=True)` with respect to its weights:
    what a training step needs beside its inputs and outputs (compiled,
    not run)."""
    import jax

    frozen = [v.value for v in layer.non_trainable_variables]

    def loss(trainable, x):
        return (layer.stateless_call(trainable, frozen, x, training=True)[0] ** 2).sum()

    trainable = [v.value for v in layer.trainable_variables]
    compiled = jax.jit(jax.grad(loss)).lower(trainable, x).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


def mib(count):
    return count / 2**20


def render(args, rows):
    lines = section_header("Local recurrence: windows of M steps against the cell over the sequence", args.quick,
                           {"jax": jax_version()})
    lines += [
        f"- Cell: `GRUCell({WIDTH})` on {WIDTH} features, batch 1; local = `LocalRecurrence(cell, M)`, RNN = "
        f"`keras.layers.RNN(cell, return_sequences=True)`; medians of {args.repeats} calls after warm-up",
        "- Memory: the XLA program's temporary buffers (JAX `memory_analysis`) for the forward pass; chunked = "
        f"`chunk_size={CHUNK}`; window copy = the B·T·M·d floats the public R-Transformer code gathers; "
        "training = the same for the gradient of a loss of the outputs (training=True), where the chunked layer's "
        "gradient recomputes each chunk",
        "",
        "| T | M | local: graph / XLA / JAX (ms) | chunked: JAX (ms) | RNN: graph / XLA / JAX (ms) "
        "| local ÷ RNN (XLA) | local ÷ RNN (JAX) | temp MiB: local / chunked / RNN | window copy (MiB) "
        "| training temp MiB: local / chunked |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ms = {k: v * 1e3 for k, v in r.items() if isinstance(v, float)}
        copy = mib(r["T"] * r["M"] * WIDTH * 4)
        lines.append(
            f"| {r['T']:,} | {r['M']} | {ms['local_graph']:,.1f} / {ms['local_xla']:,.1f} / {ms['local_jax']:,.1f} "
            f"| {ms['chunked_jax']:,.1f} "
            f"| {ms['rnn_graph']:,.1f} / {ms['rnn_xla']:,.1f} / {ms['rnn_jax']:,.1f} "
            f"| {r['local_xla'] / r['rnn_xla']:.2f}× | {r['local_jax'] / r['rnn_jax']:.2f}× "
            f"| {mib(r['local_temp_bytes']):,.1f} / {mib(r['chunked_temp_bytes']):,.1f} / "
            f"{mib(r['rnn_temp_bytes']):,.1f} | {copy:,.1f} "
            f"| {mib(r['local_train_temp_bytes']):,.1f} / {mib(r['chunked_train_temp_bytes']):,.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_file.add_common_arguments(parser, "tiny sizes, a few seconds")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    keras.utils.set_random_seed(0)
    t0 = time.perf_counter()
    if args.quick:
        grid, args.repeats = [(50, 3)], 2
    else:
        grid = [(steps, window) for steps in (1_000, 10_000, 100_000) for window in (4, 8, 16)]
    rnn_times = {}
    rows = [tensorflow_row(steps, window, args, rnn_times) for steps, window in grid]
    for row, jax_row in zip(rows, results_file.jax_rows(__file__, {"grid": grid, "repeats": args.repeats})):
        row.update(jax_row)
    section = write_section(args.output, SECTION, render(args, rows))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    work = results_file.jax_worker_argument()
    if work is not None:
        import json

        print(json.dumps(jax_worker([tuple(g) for g in work["grid"]], work["repeats"])))
    else:
        main()
