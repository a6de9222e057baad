"""Wrong answers on device: fresh interpreters, batch 1, XNNPACK on.

A relational memory core's sequence file (its `WHILE` loop) once answered
wrong in some fresh interpreters' first invoke: RESHAPEs in the loop body
took shapes computed at run time, and XNNPACK's delegated ops read a stale
buffer (tools/litert_runtime_reshape). This counts the wrong runs of three
files, each run in a new interpreter with its default delegates, in LiteRT
and in TensorFlow's own `tf.lite.Interpreter`:

- the file as TensorFlow's converter wrote it before the fix
  (tools/litert_runtime_reshape/runtime_reshapes.tflite);
- the same file with those RESHAPEs given constant shapes (`static_reshapes`);
- an RMC of the same size exported by this checkout's `export_tflite`.

A run is wrong if it differs by more than 1e-4 from the same file run in
LiteRT without delegates (which no run has shown wrong).

    python benchmarks/bench_fresh_interpreters.py            # its section of RESULTS.md
    python benchmarks/bench_fresh_interpreters.py --quick --output /tmp/fresh.md
"""

import argparse
import os
import pathlib
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

results_file.use_tensorflow_backend()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from ai_edge_litert.interpreter import OpResolverType  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import write_section  # noqa: E402

from keras_relrec import layers  # noqa: E402
from keras_relrec.export import export_tflite  # noqa: E402
from keras_relrec.export.tflite import static_reshapes  # noqa: E402

REPRO = pathlib.Path(_HERE).parent / "tools" / "litert_runtime_reshape"
LENGTHS = (2, 7, 50, 500)
TOLERANCE = 1e-4


def exported_rmc(folder):
    """An RMC of the kept file's size (3 slots of 8, two blocks of two
    heads, 3 features per step), exported in sequence mode."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((None, 3), name="sequence")
    cell = layers.RelationalMemoryCell(mem_slots=3, head_size=4, num_heads=2, num_blocks=2, key_size=3,
                                       bias_initializer="random_normal")
    model = keras.Model(inputs, keras.layers.RNN(cell, return_sequences=True)(inputs))
    path = folder / "rmc.tflite"
    export_tflite(model, path)
    return path.read_bytes()


def litert(content):
    return Interpreter(model_content=content).get_signature_runner("serve")


def tf_lite(content):
    return tf.lite.Interpreter(model_content=content).get_signature_runner("serve")


def wrong_runs(content, make_runner, runs):
    """{length: wrong runs of `runs`} for fresh runners made by `make_runner`."""
    rng = np.random.default_rng(0)
    found = {}
    for length in LENGTHS:
        x = rng.normal(size=(1, length, 3)).astype("float32")
        plain = Interpreter(model_content=content,
                            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        want = plain.get_signature_runner("serve")(sequence=x)["output"]
        found[length] = sum(float(np.abs(make_runner(content)(sequence=x)["output"] - want).max()) > TOLERANCE
                            for _ in range(runs))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_file.add_common_arguments(parser, "10 runs per length")
    args = parser.parse_args(argv)
    runs = 10 if args.quick else 250
    before = (REPRO / "runtime_reshapes.tflite").read_bytes()
    with tempfile.TemporaryDirectory() as folder:
        files = {
            "as converted (before the fix)": before,
            "constant RESHAPE shapes": static_reshapes.make_static(before)[0],
            "exported by this checkout": exported_rmc(pathlib.Path(folder)),
        }
    lines = [
        "| file | runtime-shaped RESHAPEs | interpreter | " + " | ".join(f"length {n}" for n in LENGTHS)
        + " | all |",
        "|---|---:|---|" + "---:|" * (len(LENGTHS) + 1),
    ]
    rows = []
    for name, content in files.items():
        count = len(static_reshapes.runtime_shaped(content))
        for runtime, make_runner in (("LiteRT", litert), ("tf.lite.Interpreter", tf_lite)):
            found = wrong_runs(content, make_runner, runs)
            total = sum(found.values())
            rows.append({"file": name, "runtime": runtime, "wrong": total, "runs": runs * len(LENGTHS)})
            cells = " | ".join(f"{found[n]}/{runs}" for n in LENGTHS)
            lines.append(f"| {name} | {count} | {runtime} | {cells} | {total}/{runs * len(LENGTHS)} |")
            print(lines[-1], flush=True)
    body = section_header("Fresh interpreters, batch 1, XNNPACK on (wrong runs)", args.quick) + [
        "",
        f"Wrong runs of a relational memory core's sequence file (3 slots of 8, two blocks), each run in a new "
        f"interpreter with its default delegates, batch 1; wrong: more than {TOLERANCE:g} from the same file "
        "run without delegates. How often the file as converted goes wrong varies with the machine and its "
        "load; the other two files must never.",
        "",
        *lines,
    ]
    print(write_section(args.output, "bench_fresh_interpreters", "\n".join(body)))
    return rows


if __name__ == "__main__":
    main()
