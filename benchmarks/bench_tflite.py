"""Benchmark keras_relrec's LiteRT export against TF and Keras, batch 1, CPU.

The model is `Input((None, 40)) -> RNN(PeepholeLSTMCell(128),
return_sequences=True) -> Dense(10)` with random (untrained) weights. We
measure:

1. Per-step (streaming) latency: the `step` signature of
   `export_tflite(..., streaming=True)` in LiteRT for every quantize mode,
   the same step as a TF `tf.function`, and Keras `predict_on_batch` on a
   one-frame sequence.
2. Per-sequence latency: the `serve` signature of `export_tflite(...)` for
   every quantize mode, `tf.function` of the same endpoint and of the Keras
   model, Keras `predict_on_batch`, and Keras' own LiteRT export of an
   unrolled, fixed-length copy of the model (the Flex-free route Keras
   offers). Keras' default export of the original model is inspected for
   Flex ops only.
3. File sizes against the float32 weights, and the largest output
   difference from float32 Keras, per quantize mode.

Variants of each latency table are timed round robin and summarized by
their median. Results go to the `bench_tflite` section of
benchmarks/RESULTS.md.

Full run:
    python benchmarks/bench_tflite.py
Smoke test (seconds):
    python benchmarks/bench_tflite.py --quick --output /tmp/results.md
"""

import argparse
import importlib.metadata
import itertools
import os
import pathlib
import statistics
import sys
import tempfile
import time
import warnings

# The shared helpers live next to this file; inserting the folder makes the
# import work however the script is started.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

results_file.use_tensorflow_backend()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from results_file import one_line  # noqa: E402
from results_file import rewarmed  # noqa: E402
from results_file import round_robin  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import time_once  # noqa: E402
from results_file import write_section  # noqa: E402

import keras_relrec  # noqa: E402
from keras_relrec.export import export_tflite  # noqa: E402
from keras_relrec.export import run_sequence  # noqa: E402
from keras_relrec.export import run_streaming  # noqa: E402
from keras_relrec.export.graph import endpoints  # noqa: E402
from keras_relrec.export.graph.export_plan import plan_export  # noqa: E402
from keras_relrec.export.runtime.tflite_inspect import custom_ops  # noqa: E402

# int8 calibration runs TF's own (deprecated) tf.lite.Interpreter inside the
# converter; the warning concerns TF, not this script, which uses LiteRT.
warnings.filterwarnings("ignore", message=r"\s*Warning: tf.lite.Interpreter is deprecated")

SECTION = "bench_tflite"
INPUT_NAME = "sequence"
QUANTIZE_MODES = (None, "float16", "dynamic_int8", "int8")
STEP_SPEEDUP_TARGET = 10.0  # LiteRT step vs TF tf.function step
SIZE_RATIO_TARGET = 1.1  # float32 .tflite vs float32 weights


def label(quantize):
    return quantize or "float32"


def build_model(args, unroll=False):
    # Keras can only unroll a loop whose length it knows when building.
    length = args.seq_len if unroll else None
    inputs = keras.Input((length, args.features), name=INPUT_NAME)
    cell = keras_relrec.layers.PeepholeLSTMCell(args.units)
    rnn = keras.layers.RNN(cell, return_sequences=True, unroll=unroll)
    return keras.Model(inputs, keras.layers.Dense(args.outputs)(rnn(inputs)))


def keras_unrolled_export(model, path):
    """Keras' own LiteRT export of `model`; if Keras cannot export it, its
    SavedModel converted with builtins only. Returns the route taken."""
    try:
        model.export(str(path), format="litert", verbose=False)
        return '`model.export(format="litert")`'
    except Exception as error:  # exporters raise many types
        failure = one_line(error)
    try:
        with tempfile.TemporaryDirectory() as folder:
            model.export(folder, format="tf_saved_model", verbose=False)
            converter = tf.lite.TFLiteConverter.from_saved_model(folder)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
            path.write_bytes(converter.convert())
    except Exception as error:
        # Keep both reasons: the table shows this instead of a time.
        raise RuntimeError(f'format="litert": {failure}; builtins-only conversion of '
                           f"its SavedModel: {one_line(error)}") from None
    return ('SavedModel from `model.export(format="tf_saved_model")`, converted '
            f'with TFLITE_BUILTINS only (`format="litert"` failed: {failure})')


def litert_interpreter(path, args):
    return Interpreter(model_path=str(path), num_threads=args.litert_threads)


def only_signature(interpreter):
    """(runner, input name) of a single-signature, single-input file, whatever
    Keras named them."""
    (key,) = interpreter.get_signature_list()
    runner = interpreter.get_signature_runner(key)
    (name,) = runner.get_input_details()
    return runner, name


class Exports:
    """Every file compared, written to `folder`; a failed export keeps its
    one-line reason instead of a path so the rest of the run goes on."""

    def __init__(self, model, unrolled, calibration, folder, args):
        self.sequence, self.streaming = {}, {}
        for quantize in QUANTIZE_MODES:
            representative = calibration if quantize == "int8" else None
            for streaming, files in ((False, self.sequence), (True, self.streaming)):
                kind = "streaming" if streaming else "sequence"
                path = folder / f"{kind}_{label(quantize)}.tflite"
                print(f"export_tflite {kind} {label(quantize)}", flush=True)
                try:
                    export_tflite(model, path, streaming=streaming, quantize=quantize,
                                  representative_data=representative)
                    files[quantize] = path
                except Exception as error:
                    files[quantize] = one_line(error)

        print("Keras export, unrolled", flush=True)
        self.unrolled = folder / "keras_unrolled.tflite"
        try:
            self.unrolled_route = keras_unrolled_export(unrolled, self.unrolled)
        except Exception as error:
            self.unrolled, self.unrolled_route = one_line(error), None

        # Only to show what Keras' default route produces for a model with a
        # symbolic loop: TensorList ops, i.e. Flex.
        print("Keras export, default", flush=True)
        self.keras_default = folder / "keras_default.tflite"
        self.keras_default_runs = None  # or why it does not run in LiteRT
        try:
            model.export(str(self.keras_default), format="litert", verbose=False)
        except Exception as error:
            self.keras_default = one_line(error)
            return
        try:
            runner, name = only_signature(litert_interpreter(self.keras_default, args))
            runner(**{name: np.zeros((1, args.seq_len, args.features), np.float32)})
        except Exception as error:
            self.keras_default_runs = one_line(error)


# Samplers: each runs its variant once and returns the seconds it took. The
# streaming ones carry their states from call to call, as a real stream
# does, but feed them back outside the timed region.

def litert_step_sampler(interpreter, frames):
    runner = interpreter.get_signature_runner("step")
    feed = dict(interpreter.get_signature_runner("initial_state")(
        batch_size=np.array(1, np.int32)))
    state_names = list(feed)
    frame_iter = itertools.cycle(frames)

    def sample():
        feed[INPUT_NAME] = next(frame_iter)
        t0 = time.perf_counter()
        result = runner(**feed)
        elapsed = time.perf_counter() - t0
        for name in state_names:
            feed[name] = result[name]
        return elapsed

    return sample


def tf_step_sampler(model, frames):
    plan = plan_export(model)
    step = tf.function(endpoints.step_fn(model, plan))
    states = dict(tf.function(endpoints.initial_state_fn(plan))(tf.constant(1)))
    frame_iter = itertools.cycle([tf.constant(f) for f in frames])

    def sample():
        feed = {INPUT_NAME: next(frame_iter), **states}
        t0 = time.perf_counter()
        result = step(feed)
        result["output"].numpy()  # waits for the result
        elapsed = time.perf_counter() - t0
        for name in states:
            states[name] = result[name]
        return elapsed

    return sample


def plain_sampler(fn):
    return lambda: time_once(fn)


def timed_medians(variants, repeats, warmup):
    """Median seconds per variant (None where `variants` holds a failure
    reason instead of a sampler), sampled round robin."""
    live = [v for v in variants if callable(v["sampler"])]
    for v in live:
        for _ in range(warmup):  # tracing, delegate set-up, allocation
            v["sampler"]()
    samples = round_robin([rewarmed(v["sampler"]) for v in live], repeats)
    for v, times in zip(live, samples):
        v["seconds"] = statistics.median(times)
    for v in variants:
        v.setdefault("seconds", None)
    return variants


def step_variants(model, exports, frames, args):
    variants = []
    for quantize in QUANTIZE_MODES:
        path = exports.streaming[quantize]
        sampler = (litert_step_sampler(litert_interpreter(path, args), frames)
                   if isinstance(path, pathlib.Path) else f"export failed: {path}")
        variants.append(dict(name="LiteRT `step` signature (`export_tflite(streaming=True)`)",
                             quantize=label(quantize), sampler=sampler, note=""))
    variants.append(dict(name="TF `tf.function(endpoints.step_fn(model, plan))`",
                         quantize="float32", sampler=tf_step_sampler(model, frames), note=""))
    one_frame = frames[0][:, None]
    variants.append(dict(
        name="Keras `model.predict_on_batch`, one-frame sequence", quantize="float32",
        sampler=plain_sampler(lambda: model.predict_on_batch(one_frame)),
        note="restarts from zero state on every call: the per-call cost, not a true step"))
    return variants


def sequence_variants(model, exports, x, args):
    variants = []
    for quantize in QUANTIZE_MODES:
        path = exports.sequence[quantize]
        if isinstance(path, pathlib.Path):
            runner = litert_interpreter(path, args).get_signature_runner("serve")
            sampler = plain_sampler(lambda runner=runner: runner(**{INPUT_NAME: x}))
        else:
            sampler = f"export failed: {path}"
        variants.append(dict(name="LiteRT `serve` signature (`export_tflite`)",
                             quantize=label(quantize), sampler=sampler, note=""))

    x_tf = tf.constant(x)
    serve = tf.function(endpoints.serve_fn(model, plan_export(model)))
    keras_loop = tf.function(model)
    variants += [
        dict(name="TF `tf.function(endpoints.serve_fn(model, plan))`", quantize="float32",
             sampler=plain_sampler(lambda: serve({INPUT_NAME: x_tf})["output"].numpy()),
             note="keras_relrec's builtins-only loop"),
        dict(name="TF `tf.function(model)`", quantize="float32",
             sampler=plain_sampler(lambda: keras_loop(x_tf).numpy()),
             note="Keras' own loop"),
        dict(name="Keras `model.predict_on_batch`", quantize="float32",
             sampler=plain_sampler(lambda: model.predict_on_batch(x)), note=""),
    ]

    if isinstance(exports.unrolled, pathlib.Path):
        runner, name = only_signature(litert_interpreter(exports.unrolled, args))
        # Default arguments bind now, not when the sampler runs.
        sampler = plain_sampler(lambda runner=runner, name=name: runner(**{name: x}))
    else:
        sampler = f"conversion failed: {exports.unrolled}"
    variants.append(dict(
        name="LiteRT, Keras' export of the model with `unroll=True`", quantize="float32",
        sampler=sampler,
        note="; ".join(filter(None, [f"fixed length {args.seq_len}", exports.unrolled_route]))))

    # Keras' default export is timed only in the unlikely case this LiteRT
    # build can run its Flex ops.
    if isinstance(exports.keras_default, pathlib.Path) and exports.keras_default_runs is None:
        runner, name = only_signature(litert_interpreter(exports.keras_default, args))
        variants.append(dict(
            name="LiteRT, Keras' default export (`unroll=False`)", quantize="float32",
            sampler=plain_sampler(lambda runner=runner, name=name: runner(**{name: x})),
            note="contains Flex ops"))
    return variants


def max_abs_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def accuracy_and_sizes(model, exports, x_eval, args):
    """Rows of the size/accuracy table: sizes in bytes, largest absolute
    difference from float32 Keras on held-out input."""
    reference = model.predict_on_batch(x_eval)
    rows = []
    for quantize in QUANTIZE_MODES:
        row = {"quantize": label(quantize), "custom_ops": set()}
        for kind, path in (("sequence", exports.sequence[quantize]),
                           ("streaming", exports.streaming[quantize])):
            if not isinstance(path, pathlib.Path):
                row[kind] = row[kind + "_diff"] = None
                continue
            content = path.read_bytes()
            row[kind] = len(content)
            row["custom_ops"].update(custom_ops(content))
            interpreter = litert_interpreter(path, args)
            if kind == "sequence":
                output = run_sequence(interpreter, x_eval)["output"]
            else:
                output = run_streaming(interpreter, x_eval)["output"]
            row[kind + "_diff"] = max_abs_diff(output, reference)
        rows.append(row)

    unrolled = {"quantize": "float32, Keras export, `unroll=True`",
                "sequence": None, "sequence_diff": None, "streaming": None,
                "streaming_diff": None, "custom_ops": None, "keras_export": True}
    if isinstance(exports.unrolled, pathlib.Path):
        content = exports.unrolled.read_bytes()
        unrolled["sequence"] = len(content)
        unrolled["custom_ops"] = set(custom_ops(content))
        runner, name = only_signature(litert_interpreter(exports.unrolled, args))
        (output,) = runner(**{name: x_eval}).values()
        unrolled["sequence_diff"] = max_abs_diff(output, reference)
    rows.append(unrolled)
    return rows


def fmt_time(seconds, scale, digits):
    return "—" if seconds is None else f"{seconds * scale:.{digits}f}"


def latency_table(variants, unit, scale, digits):
    base = next(v["seconds"] for v in variants
                if v["name"].startswith("LiteRT `") and v["quantize"] == "float32")
    lines = [f"| Variant | Quantize | Median {unit} | vs LiteRT float32 | Note |",
             "|---|---|---:|---:|---|"]
    for v in variants:
        if v["seconds"] is None:  # the sampler is the reason it is missing
            time_cell, ratio, note = v["sampler"], "—", v["note"]
        else:
            time_cell = fmt_time(v["seconds"], scale, digits)
            ratio = "—" if base is None else f"{v['seconds'] / base:.2f}x"
            note = v["note"]
        lines.append(f"| {v['name']} | {v['quantize']} | {time_cell} | {ratio} | {note} |")
    return lines


def size_cell(size, weights_bytes):
    if size is None:
        return "export failed", "—"
    return f"{size:,}", f"{size / weights_bytes:.2f}x"


def diff_cell(diff):
    return "—" if diff is None else f"{diff:.2e}"


def failed_exports(exports):
    lines = []
    for kind, files in (("sequence", exports.sequence), ("streaming", exports.streaming)):
        for quantize, path in files.items():
            if not isinstance(path, pathlib.Path):
                lines.append(f"- `export_tflite` {kind}, {label(quantize)} failed: {path}")
    return lines


def keras_default_line(exports):
    if not isinstance(exports.keras_default, pathlib.Path):
        return ("- Keras' default LiteRT export of the model (`unroll=False`): failed: "
                f"{exports.keras_default}")
    content = exports.keras_default.read_bytes()
    flex = custom_ops(content)
    ops = ", ".join(op.split(":", 1)[1] for op in flex) or "none"
    runs = ("runs in LiteRT (timed above)" if exports.keras_default_runs is None
            else f"does not run in LiteRT: {exports.keras_default_runs}")
    return (f"- Keras' default LiteRT export of the model (`unroll=False`, "
            f'`model.export(format="litert")`): {len(content):,} bytes; '
            f"Flex ops: {ops}; {runs}")


def targets(step_rows, size_rows, weights_bytes):
    def find(name_prefix, quantize="float32"):
        return next((v["seconds"] for v in step_rows if v["name"].startswith(name_prefix)
                     and v["quantize"] == quantize), None)

    def verdict(ok):
        return "**met**" if ok else "**NOT met**"

    lines = []
    litert, tf_step = find("LiteRT"), find("TF")
    if litert and tf_step:
        speedup = tf_step / litert
        lines.append(
            f"- Streaming step on LiteRT (float32) at least {STEP_SPEEDUP_TARGET:g}x faster "
            f"than the TF `tf.function` step: {verdict(speedup >= STEP_SPEEDUP_TARGET)} "
            f"({speedup:.1f}x: {litert * 1e6:.1f} µs vs {tf_step * 1e6:.1f} µs)")
    else:
        lines.append(f"- Streaming step on LiteRT (float32) at least {STEP_SPEEDUP_TARGET:g}x "
                     "faster than the TF `tf.function` step: **not measured** (export failed)")
    float32 = size_rows[0]
    for kind in ("sequence", "streaming"):
        if float32[kind] is None:
            lines.append(f"- float32 {kind} file no more than {SIZE_RATIO_TARGET:g}x the "
                         "weights: **not measured** (export failed)")
            continue
        ratio = float32[kind] / weights_bytes
        lines.append(f"- float32 {kind} file no more than {SIZE_RATIO_TARGET:g}x the float32 "
                     f"weights: {verdict(ratio <= SIZE_RATIO_TARGET)} ({ratio:.3f}x: "
                     f"{float32[kind]:,} vs {weights_bytes:,} bytes)")
    return lines


def render(args, weights, step_rows, sequence_rows, size_rows, exports):
    """The section's Markdown, without its markers (`write_section` adds them)."""
    count, weights_bytes = weights
    lines = section_header("LiteRT export vs TF and Keras, batch 1 (`bench_tflite.py`)",
                           args.quick, {
        "ai-edge-litert": importlib.metadata.version("ai-edge-litert"),
        "keras_relrec": keras_relrec.__version__,
    })
    threads = "LiteRT's default" if args.litert_threads is None else args.litert_threads
    lines += [
        f"- Model: `Input((None, {args.features}))` -> `RNN(PeepholeLSTMCell({args.units}), "
        f"return_sequences=True)` -> `Dense({args.outputs})`; random untrained weights "
        f"(seed {args.seed}): {count:,} float32 weights, {weights_bytes:,} bytes",
        f"- Timing: batch 1, CPU; median of {args.repeats} calls per step variant and "
        f"{args.sequence_repeats} per sequence variant (length {args.seq_len}), taken round "
        f"robin across the variants of each table (each timed call right after one untimed call "
        "of the same variant, so it does not inherit caches another variant left cold), "
        f"after {args.warmup} warm-up call(s). "
        "LiteRT times only the signature-runner call; TF times include `.numpy()` on the "
        f"output. LiteRT interpreter threads: {threads}; TF: its default thread pools",
        f"- `int8`: calibrated on {args.calibration_examples} random normal sequences, drawn "
        "like, but apart from, the held-out input",
        "",
        "### Per-step (streaming) latency",
        "",
        *latency_table(step_rows, "µs", 1e6, 1),
        "",
        f"### Per-sequence latency (length {args.seq_len})",
        "",
        *latency_table(sequence_rows, "ms", 1e3, 3),
        "",
        keras_default_line(exports),
        *failed_exports(exports),
        "",
        "### File size and accuracy",
        "",
        f"Sizes against the float32 weights ({weights_bytes:,} bytes); difference = largest "
        f"|output - float32 Keras output| over {args.eval_examples} held-out random normal "
        f"sequences of length {args.seq_len} (streaming: fed frame by frame with "
        "`run_streaming`).",
        "",
        "| Quantize | Sequence file bytes | / weights | Streaming file bytes | / weights "
        "| Custom/Flex ops | Max abs diff, sequence | Max abs diff, streaming |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for row in size_rows:
        seq_size, seq_ratio = size_cell(row["sequence"], weights_bytes)
        if row.get("keras_export"):  # Keras exports no streaming form
            stream_size, stream_ratio = "—", "—"
        else:
            stream_size, stream_ratio = size_cell(row["streaming"], weights_bytes)
        ops = ("—" if row["custom_ops"] is None
               else ", ".join(op.split(":", 1)[1] for op in sorted(row["custom_ops"])) or "none")
        lines.append(f"| {row['quantize']} | {seq_size} | {seq_ratio} | {stream_size} | "
                     f"{stream_ratio} | {ops} | {diff_cell(row['sequence_diff'])} | "
                     f"{diff_cell(row['streaming_diff'])} |")
    lines += ["", "### Targets", "", *targets(step_rows, size_rows, weights_bytes)]
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=50, help="timed calls per step variant")
    p.add_argument("--sequence-repeats", type=int, default=20,
                   help="timed calls per sequence variant")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first")
    p.add_argument("--units", type=int, default=128)
    p.add_argument("--features", type=int, default=40, help="input width")
    p.add_argument("--outputs", type=int, default=10, help="Dense head width")
    p.add_argument("--seq-len", type=int, default=100)
    p.add_argument("--calibration-examples", type=int, default=32,
                   help="random sequences that calibrate int8")
    p.add_argument("--eval-examples", type=int, default=8,
                   help="held-out random sequences for the accuracy columns")
    p.add_argument("--litert-threads", type=int, default=None,
                   help="LiteRT interpreter num_threads (default: LiteRT's own)")
    p.add_argument("--seed", type=int, default=0)
    results_file.add_common_arguments(p, "tiny sizes and few repeats, for smoke tests")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.sequence_repeats, args.warmup = 5, 3, 1
        args.units, args.features, args.seq_len = 8, 8, 5
        args.calibration_examples, args.eval_examples = 4, 2
    return args


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    model = build_model(args)
    unrolled = build_model(args, unroll=True)
    unrolled.set_weights(model.get_weights())
    weights = model.get_weights()
    weights = (sum(w.size for w in weights), sum(w.nbytes for w in weights))

    # Three disjoint draws from one distribution: timing input, int8
    # calibration, and the held-out accuracy check.
    rng = np.random.default_rng(args.seed)
    def draw(n):
        return rng.standard_normal((n, args.seq_len, args.features), dtype=np.float32)

    x_time, calibration, x_eval = draw(1), draw(args.calibration_examples), draw(args.eval_examples)
    frames = [x_time[:, t] for t in range(args.seq_len)]

    with tempfile.TemporaryDirectory() as folder:
        exports = Exports(model, unrolled, calibration, pathlib.Path(folder), args)
        print("timing per-step variants", flush=True)
        step_rows = timed_medians(step_variants(model, exports, frames, args),
                                  args.repeats, args.warmup)
        print("timing per-sequence variants", flush=True)
        sequence_rows = timed_medians(sequence_variants(model, exports, x_time, args),
                                      args.sequence_repeats, args.warmup)
        print("sizes and accuracy", flush=True)
        size_rows = accuracy_and_sizes(model, exports, x_eval, args)
        body = render(args, weights, step_rows, sequence_rows, size_rows, exports)

    section = write_section(args.output, SECTION, body)
    print(section)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
