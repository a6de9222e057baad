"""Edge targets × runtimes × the shipped models: does each file run, and how
closely does it agree with Keras on the model's own test data?

For each classifier in savedmodels/ it exports, from the `.keras` file:
float32 for phones (target "litert", run in LiteRT and in tflite-runtime
2.14), float32 for microcontrollers (target "micro", run in the tflite-micro
interpreter), fully integer int8 and 16x8 for microcontrollers (int8, or
int16, inputs and outputs, calibrated on the first test examples, run in
TFLM), and float32
for GPU / NPU delegates (target "accelerator": fixed shapes, loops
unrolled; run in LiteRT). Agreement: the largest absolute difference of the
outputs from Keras', and the share of examples with Keras' answer.

    python benchmarks/bench_edge_targets.py            # its section of RESULTS.md
    python benchmarks/bench_edge_targets.py --quick --output /tmp/edge.md   # a few examples

tflite-runtime 2.14 runs in its own environment (`make check` creates
.venv-tflite-2.14; or set OLD_RUNTIME_PYTHON).
"""

import argparse
import importlib.util
import json
import os
import pathlib
import sys
import tempfile

# The shared helpers live next to this file; inserting the folder makes the
# import work however the script is started.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

results_file.use_tensorflow_backend()

import keras  # noqa: E402
import numpy as np  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import write_section  # noqa: E402

import keras_relrec  # noqa: E402, F401  (registers the layers)
from keras_relrec.datasets import load_japanese_vowels  # noqa: E402
from keras_relrec.datasets import nth_farthest  # noqa: E402
from keras_relrec.datasets import synthetic_lob  # noqa: E402
from keras_relrec.export import export_tflite  # noqa: E402
from keras_relrec.export import micro  # noqa: E402
from keras_relrec.export import plan_export  # noqa: E402
from keras_relrec.export import run_sequence  # noqa: E402
from keras_relrec.export.export_error import ExportError  # noqa: E402
from keras_relrec.export.tflite import quantization  # noqa: E402

ROOT = pathlib.Path(_HERE).parent
SAVED = ROOT / "savedmodels"
WORKER = ROOT / "tests" / "export" / "old_runtime_worker.py"


def card(folder):
    return json.loads((SAVED / folder / "card.json").read_text())


def test_data():
    """{model: (folder, stem, inputs {name: array}, labels)}."""
    data = {}
    c = card("japanese_vowels_nbof")
    x, y, _ = load_japanese_vowels("test", max_length=c["max_length"])
    data["NBoF (JapaneseVowels)"] = ("japanese_vowels_nbof", {"sequence": x}, y)
    c = card("lob_tabl")
    x, y = synthetic_lob(c["test_size"], signal=c["signal"], seed=tuple(c["test_seed"]))
    data["C(TABL) (synthetic LOB)"] = ("lob_tabl", {"sequence": x}, y)
    x, y = nth_farthest(300, **card("nth_farthest_rmc")["task"], seed=12345)
    data["RMC (Nth farthest)"] = ("nth_farthest_rmc", {"sequence": x}, y)
    digits = np.load(SAVED / "sequential_digits" / "test_digits.npz")
    data["R-Transformer (digits)"] = ("sequential_digits", {"pixels": digits["pixels"]}, digits["labels"])
    motions = np.load(SAVED / "basic_motions" / "test_recordings.npz")
    data["DRRT (BasicMotions)"] = ("basic_motions", {k: motions[k] for k in ("accelerometer", "gyroscope")},
                                   motions["labels"])
    return data


def old_runtime(path, inputs):
    python = os.environ.get("OLD_RUNTIME_PYTHON", str(ROOT / ".venv-tflite-2.14" / "bin" / "python"))
    result = _worker().run_in(python, path, "serve", inputs)
    if "error" in result:
        raise RuntimeError(result["error"])
    return result["output"]


def _worker():
    """The tests' old-runtime worker module (its client side), by path."""
    spec = importlib.util.spec_from_file_location("old_runtime_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_by_one(run, inputs):
    """A runtime of batch 1 over every example."""
    count = len(next(iter(inputs.values())))
    return np.concatenate([run({k: v[i : i + 1] for k, v in inputs.items()}) for i in range(count)])


def measure(model, inputs, folder):
    """{(target, runtime): (outputs or None, note)}."""
    length = next(iter(inputs.values())).shape[1]
    found = {}
    phone = folder / "phone.tflite"
    export_tflite(model, phone)
    found["float32 (litert)", "LiteRT"] = (run_sequence(phone, inputs)["output"], "")
    try:
        found["float32 (litert)", "tflite-runtime 2.14"] = (old_runtime(phone, inputs), "")
    except RuntimeError as error:
        found["float32 (litert)", "tflite-runtime 2.14"] = (None, str(error).splitlines()[0][:80])
    # int8 in sequence mode calibrates through the WHILE loop of a recurrent
    # model, which crashes TF's calibrator (2.21): recurrent models are
    # calibrated, and run, frame by frame through their step.
    streams = plan_export(model).can_stream
    calibration = {k: v[:50] for k, v in inputs.items()}
    for name, options in (("float32 (micro)", {}),
                          ("int8 integer I/O (micro)", {"quantize": "int8", "representative_data": calibration}),
                          ("16x8 integer I/O (micro)", {"quantize": "int16x8", "representative_data": calibration})):
        path = folder / "micro.tflite"
        step = streams and "quantize" in options
        try:
            summary = export_tflite(model, path, target="micro", streaming=step,
                                    length=None if step else length, **options)
        except ExportError as error:
            found[name, "TFLM"] = (None, str(error))
            continue
        note = f"arena {summary['micro']['arena_bytes'] / 1024:.1f} KiB, file {summary['size_bytes'] / 1024:.0f} KiB"
        if step:
            streamer = micro.MicroStreamer(path, arena_size=4 * summary["micro"]["arena_bytes"])
            found[name, "TFLM"] = (one_by_one(lambda f, s=streamer: s.run(*f.values())["output"][:, -1], inputs),
                                   note + ", the step")
            continue
        runner = micro.MicroInterpreter(path, "serve", arena_size=4 * summary["micro"]["arena_bytes"])
        params = summary["quantization"].get("serve", {})
        dtypes = {k: np.dtype(dtype) for k, (_, dtype) in summary["signatures"]["serve"]["inputs"].items()}

        def run(feed, runner=runner, params=params, dtypes=dtypes):
            if params:
                feed = {k: quantization.quantize(v, tuple(params["inputs"][k].values()), dtypes[k])
                        for k, v in feed.items()}
            out = runner(**feed)["output"]
            return quantization.dequantize(out, tuple(params["outputs"]["output"].values())) if params else out

        found[name, "TFLM"] = (one_by_one(run, inputs), note)
    gpu = folder / "gpu.tflite"
    try:
        summary = export_tflite(model, gpu, target="accelerator", length=length)
        ready = "delegate-ready" if summary["accelerator"]["ready"] else "; ".join(summary["accelerator"]["reasons"])
        found["float32 (accelerator)", "LiteRT"] = (one_by_one(lambda f: run_sequence(gpu, f)["output"], inputs),
                                                    f"{ready}, {summary['ops'].get('WHILE', 0)} WHILE")
    except ExportError as error:
        found["float32 (accelerator)", "LiteRT"] = (None, str(error))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_file.add_common_arguments(parser, "a few examples per model")
    args = parser.parse_args(argv)
    examples = 4 if args.quick else 200
    # Quick: the two models without a recurrent loop (seconds each).
    models = list(test_data().items())[: 2 if args.quick else None]
    lines = [
        "| model | file | runtime | test accuracy | agrees with Keras (answers) | largest difference | notes |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    rows = []
    for model_name, (folder_name, inputs, labels) in models:
        inputs = {k: np.asarray(v[:examples], np.float32) for k, v in inputs.items()}
        (keras_file,) = (SAVED / folder_name).glob("*.keras")
        model = keras.saving.load_model(keras_file, safe_mode=True)
        if len(inputs) == 1:  # by the model's own input name
            inputs = {model.inputs[0].name: next(iter(inputs.values()))}
        reference = model.predict(inputs if len(inputs) > 1 else next(iter(inputs.values())), verbose=0)
        labels = np.asarray(labels[:examples])
        lines.append(f"| {model_name} | .keras | Keras | {(reference.argmax(-1) == labels).mean():.1%} | — | — | |")
        with tempfile.TemporaryDirectory() as folder:
            for (target, runtime), (outputs, note) in measure(model, inputs, pathlib.Path(folder)).items():
                if outputs is None:
                    correct = agree = difference = "does not run"
                else:
                    correct = f"{(outputs.argmax(-1) == labels).mean():.1%}"
                    agree = f"{(outputs.argmax(-1) == reference.argmax(-1)).mean():.1%}"
                    difference = f"{np.abs(outputs - reference).max():.1e}"
                rows.append({"model": model_name, "file": target, "runtime": runtime, "agree": agree})
                lines.append(f"| {model_name} | {target} | {runtime} | {correct} | {agree} | {difference} | {note} |")
    body = section_header("Edge targets × runtimes", args.quick) + [
        "",
        f"{examples} test examples of each shipped classifier (its own test data), exported from its `.keras` "
        "file for each target and run in each runtime; the answers agree with Keras' where the file runs.",
        "",
        *lines,
    ]
    print(write_section(args.output, "bench_edge_targets", "\n".join(body)))
    return rows


if __name__ == "__main__":
    main()
