"""The Deep Recurrent Relation Transformer: time and memory against n, m and K.

`drrt_classifier` for two inputs of n and m steps (3 features each, batch
8): local recurrence M = 5 on each input's d = 16 features, one interaction
transformer (relation units 16, K regions of an equal split, the recurrence
over the maps with 16 units, fusion by sum), average fusion and the
classifier. For each (n, m, K):

- **DRRT**: the whole forward pass;
- **DRT**: the same without local recurrence (features and maps);
- **features**: DRRT's two feature extractors alone (eqs. 1–2), so that
  DRRT − features is the cost of the relation modules and what follows.

Times: medians of `--repeats` forward calls after warm-up, TensorFlow with
XLA (`jit_compile`). Memory: the temporary buffers of the XLA program JAX
compiles for the forward pass (`memory_analysis()`, in a process of its
own).

Results go to the `bench_relation_transformer` section of
benchmarks/RESULTS.md. Full run (about 3 minutes on 2 cores):
    python benchmarks/bench_relation_transformer.py
Smoke test:
    python benchmarks/bench_relation_transformer.py --quick --output /tmp/drrt.md
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

from keras_relrec.models import drrt_classifier  # noqa: E402

SECTION = "bench_relation_transformer"
BATCH, FEATURES, WIDTH, WINDOW = 8, 3, 16, 5


def models(n, m, regions):
    """DRRT, DRT and DRRT's feature extractors, as models of the two inputs."""
    common = {"feature_units": WIDTH, "window_size": WINDOW, "relation_units": WIDTH, "regions": regions,
              "map_units": WIDTH}
    drrt = drrt_classifier(((n, FEATURES), (m, FEATURES)), 4, **common)
    drt = drrt_classifier(((n, FEATURES), (m, FEATURES)), 4, local_recurrence=False, **common)
    features = keras.Model(drrt.inputs, [drrt.get_layer("features_a").output, drrt.get_layer("features_b").output])
    return {"drrt": drrt, "drt": drt, "features": features}


def inputs(n, m):
    rng = np.random.default_rng(0)
    return [rng.normal(size=(BATCH, length, FEATURES)).astype("float32") for length in (n, m)]


def tensorflow_row(n, m, regions, repeats):
    import tensorflow as tf

    x = [tf.constant(v) for v in inputs(n, m)]
    row = {"n": n, "m": m, "K": regions}
    for name, model in models(n, m, regions).items():
        function = tf.function(model, jit_compile=True)
        row[f"{name}_xla"] = median_seconds(lambda f=function: keras.tree.map_structure(np.asarray, f(x)),
                                            repeats, 1)
    return row


def jax_worker(grid):
    """Runs in a process with KERAS_BACKEND=jax: XLA's temporary memory."""
    rows = []
    for n, m, regions in grid:
        x = inputs(n, m)
        rows.append({f"{name}_temp_bytes": jax_forward(model, x)[1]
                     for name, model in models(n, m, regions).items()})
    return rows


def render(args, rows):
    lines = section_header("Deep Recurrent Relation Transformer: time and memory against n, m and K", args.quick,
                           {"jax": jax_version()})
    lines += [
        f"- `drrt_classifier`: inputs of n and m steps × {FEATURES} features, batch {BATCH}; d = {WIDTH}, "
        f"M = {WINDOW}, relation units {WIDTH}, map recurrence of {WIDTH} units, K regions, fusion by sum; "
        "DRT = `local_recurrence=False`; features = DRRT's two feature extractors alone (eqs. 1–2)",
        f"- Forward pass with XLA (TensorFlow `jit_compile`), medians of {args.repeats} calls after warm-up; "
        "memory: temporary buffers of the XLA program (JAX `memory_analysis`)",
        "",
        "| n | m | K | DRRT (ms) | DRT (ms) | features (ms) | relations' share of DRRT "
        "| temp MiB: DRRT / DRT / features |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        share = 1 - r["features_xla"] / r["drrt_xla"]
        lines.append(
            f"| {r['n']} | {r['m']} | {r['K']} | {r['drrt_xla'] * 1e3:,.2f} | {r['drt_xla'] * 1e3:,.2f} "
            f"| {r['features_xla'] * 1e3:,.2f} | {100 * share:.0f} % "
            f"| {r['drrt_temp_bytes'] / 2**20:,.1f} / {r['drt_temp_bytes'] / 2**20:,.1f} / "
            f"{r['features_temp_bytes'] / 2**20:,.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_file.add_common_arguments(parser, "tiny sizes, a few seconds")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    keras.utils.set_random_seed(0)
    t0 = time.perf_counter()
    if args.quick:
        grid, args.repeats = [(12, 10, 2)], 2
    else:
        grid = [(n, n, k) for n in (50, 100, 200, 400) for k in (1, 4, 16)] + [(100, 400, 4), (400, 100, 4)]
    rows = [tensorflow_row(n, m, k, args.repeats) for n, m, k in grid]
    for row, jax_row in zip(rows, results_file.jax_rows(__file__, grid)):
        row.update(jax_row)
    section = write_section(args.output, SECTION, render(args, rows))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    work = results_file.jax_worker_argument()
    if work is not None:
        import json

        print(json.dumps(jax_worker([tuple(g) for g in work])))
    else:
        main()
