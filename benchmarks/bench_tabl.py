"""Benchmark the temporal attention-augmented bilinear layer (TABL) on CPU.

Tran et al. (2019) built TABL for limit-order-book data (FI-2010: D = 40
features x T = 10 steps) and high-frequency trading, where latency matters.
We measure:

1. One layer over a grid of (D, T, D', T') points: the paper's A network
   (40, 10, 3, 1), the paper's hidden layers (40, 10, 60, 10) and
   (40, 10, 120, 5), and single-dimension sweeps from (40, 10, 120, 5) in D,
   T, D' and T'. At each point four models, every one
   `Input((T, D)) -> layer -> Dense(3)`:
   - `TABL(D', T', activation="relu")` (`squeeze=True` at T' = 1, else
     `Flatten` before the head);
   - the same with `BilinearLayer` (TABL without the attention);
   - an "equivalent dense" layer: `Flatten -> Dense(D'·T', "relu")`, same
     output size;
   - `keras.layers.LSTM(U)`, U chosen so that its 4·(D·U + U² + U) weights
     come closest to the TABL layer's.
2. The paper's whole C(TABL) network, 40x10 -> BL(60, 10) + ReLU ->
   BL(120, 5) + ReLU -> TABL(3, 1) (class logits; no dropout, which does
   not change the timing much), against C(BL) (the last layer a
   `BilinearLayer`) and `LSTM(U) -> Dense(3)` with about the same number of
   weights as C(TABL).
   Parts 1 and 2 time one `train_on_batch` and one `predict_on_batch` call
   (batch 256 by default; Adam, sparse categorical cross-entropy from
   logits, 3 classes, random inputs and labels), each variant once per
   round (round robin over all variants of the run), summarized by the
   median; `jit_compile` False by default (`--jit both` adds XLA).
3. Latency at batch 1, the paper's use case: part 2's three models
   exported with `keras_relrec.export.export_tflite(model, path,
   dynamic_length=False)` (float32, builtins only) and timed as single
   calls of the LiteRT `serve` signature runner (looked up once, only its
   calls timed), against Keras `predict_on_batch` on one example; with the
   file sizes and the largest difference from Keras' outputs.

Results are written to the `bench_tabl` section of benchmarks/RESULTS.md.

Full run (47 models traced; about 1-2 minutes on 2 cores, longer with
`--jit both`, which XLA-compiles 47 more):
    python benchmarks/bench_tabl.py
Smoke test (well under a minute):
    python benchmarks/bench_tabl.py --quick --output /tmp/tabl.md
"""

import argparse
import dataclasses
import importlib.metadata
import os
import pathlib
import statistics
import sys
import tempfile
import time

# The shared helpers live next to this file; inserting the folder makes the
# import work however the script is started.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

results_file.use_tensorflow_backend()

import keras  # noqa: E402
import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402
from results_file import one_line  # noqa: E402
from results_file import prepare_and_time  # noqa: E402
from results_file import rewarmed  # noqa: E402
from results_file import round_robin  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import time_once  # noqa: E402
from results_file import write_section  # noqa: E402

import keras_relrec  # noqa: E402
from keras_relrec.export import export_tflite  # noqa: E402
from keras_relrec.export import run_sequence  # noqa: E402
from keras_relrec.layers import TABL  # noqa: E402
from keras_relrec.layers import BilinearLayer  # noqa: E402

SECTION = "bench_tabl"
NUM_CLASSES = 3  # FI-2010's mid-price movement: down, stationary, up
INPUT_NAME = "sequence"
# Part 1: one layer, then the head.
LAYER_MODELS = {"tabl": "TABL", "bl": "BilinearLayer", "dense": "Dense", "lstm": "LSTM"}
# Part 2: whole networks.
NETWORK_MODELS = {"ctabl": "C(TABL)", "cbl": "C(BL)", "clstm": "LSTM"}
DEFAULT_GRID = [
    (40, 10, 3, 1),  # the paper's A network (TABL as the output layer)
    (40, 10, 60, 10),  # C(TABL)'s first hidden layer
    (40, 10, 120, 5),  # C(TABL)'s second hidden layer: the sweeps' base
    (144, 10, 120, 5), (400, 10, 120, 5),  # D (144: FI-2010's full feature set)
    (40, 50, 120, 5), (40, 100, 120, 5),  # T
    (40, 10, 240, 5), (40, 10, 480, 5),  # D'
    (40, 10, 120, 1), (40, 10, 120, 10),  # T'
]
DIMENSIONS = ("D", "T", "D'", "T'")


@dataclasses.dataclass(frozen=True)
class Spec:
    """One benchmarked model; equal specs are built and timed only once."""

    model: str  # a key of LAYER_MODELS or NETWORK_MODELS
    batch: int
    point: tuple  # (D, T, D', T'); for a network its input and output
    jit: bool
    lstm_units: int = 0  # for "lstm" and "clstm"
    hidden: tuple = ()  # networks: the hidden BilinearLayers' (D', T')


def parse_point(text):
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 4 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected D,T,D',T' (4 positive ints), got {text!r}")
    return values


def parse_pair(text):
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 2 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected two positive ints a,b, got {text!r}")
    return values


def point_label(point):
    return "({}, {}, {}, {})".format(*point)


def lstm_params(units, features):
    return 4 * units * (features + units + 1)


def matched_lstm_units(params, features, head=lambda units: 0):
    """U whose LSTM weights, plus `head(U)`, come closest to `params`."""
    best, units = None, 1
    while True:
        total = lstm_params(units, features) + head(units)
        if best is None or abs(total - params) < best[0]:
            best = (abs(total - params), units)
        if total > params:
            return best[1]
        units += 1


def bilinear(cls, units, steps, activation=None, name=None):
    return cls(units, steps, activation=activation, squeeze=steps == 1, name=name)


def build_model(spec):
    """The uncompiled Keras model of `spec`; the benchmarked layer (part 1)
    is named "layer"."""
    features, steps_in, units, steps = spec.point
    inputs = keras.Input((steps_in, features), name=INPUT_NAME)
    head = keras.layers.Dense(NUM_CLASSES, name="head")
    if spec.model in ("tabl", "bl"):
        cls = TABL if spec.model == "tabl" else BilinearLayer
        x = bilinear(cls, units, steps, "relu", name="layer")(inputs)
        if steps > 1:
            x = keras.layers.Flatten()(x)
        outputs = head(x)
    elif spec.model == "dense":
        x = keras.layers.Flatten()(inputs)
        outputs = head(keras.layers.Dense(units * steps, activation="relu", name="layer")(x))
    elif spec.model in ("lstm", "clstm"):
        outputs = head(keras.layers.LSTM(spec.lstm_units, name="layer")(inputs))
    else:  # the paper's C(TABL) / C(BL): hidden BLs, then the output layer
        x = inputs
        for hidden_units, hidden_steps in spec.hidden:
            x = bilinear(BilinearLayer, hidden_units, hidden_steps, "relu")(x)
        cls = TABL if spec.model == "ctabl" else BilinearLayer
        outputs = bilinear(cls, units, steps, name="output")(x)  # logits
    return keras.Model(inputs, outputs)


def layer_params(spec):
    """Weights of part 1's benchmarked layer alone (no head)."""
    return build_model(spec).get_layer("layer").count_params()


def model_params(spec):
    return build_model(spec).count_params()


def forward_flops(spec):
    """Matmul FLOPs of the benchmarked layer's forward pass, per example:
    TABL's W1 X (2·T·D·D'), attention logits X̄ W (2·T²·D') and time map
    (2·T·T'·D'); the dense layer's 2·(T·D)·(D'·T'); the LSTM's
    2·T·4U·(D + U)."""
    features, steps_in, units, steps = spec.point
    if spec.model == "lstm":
        return 2 * steps_in * 4 * spec.lstm_units * (features + spec.lstm_units)
    if spec.model == "dense":
        return 2 * steps_in * features * units * steps
    flops = 2 * steps_in * features * units + 2 * steps_in * steps * units
    if spec.model == "tabl":
        flops += 2 * steps_in * steps_in * units
    return flops


def make_data(spec, batch=None):
    """Random inputs and labels: the values do not change the work done."""
    features, steps_in, _, _ = spec.point
    rng = np.random.default_rng(0)
    batch = batch or spec.batch
    x = rng.standard_normal((batch, steps_in, features), dtype=np.float32)
    y = rng.integers(0, NUM_CLASSES, batch).astype(np.int32)
    return x, y


def prepare(spec, warmup):
    """A compiled model with warmed-up (traced, and for jit XLA-compiled)
    train and inference callables. `train_on_batch`/`predict_on_batch`
    return NumPy values, so each call waits for its result.

    Seeding happens once, in `main`: `tf.random.set_seed` makes every
    existing tf.function retrace, so seeding here would recompile the models
    prepared before this one during their timed calls."""
    x, y = make_data(spec)
    t0 = time.perf_counter()
    model = build_model(spec)
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # Explicit: "auto" means no XLA on CPU TF.
        jit_compile=spec.jit,
    )
    train = lambda: model.train_on_batch(x, y)  # noqa: E731
    infer = lambda: model.predict_on_batch(x)  # noqa: E731
    for _ in range(warmup):
        train(), infer()
    return {
        "model": model,
        "train": train,
        "infer": infer,
        # Keras may silently drop jit; report what actually ran.
        "effective_jit": bool(model.jit_compile),
        "warmup_s": time.perf_counter() - t0,
    }


def describe(spec):
    name = {**LAYER_MODELS, **NETWORK_MODELS}[spec.model]
    if spec.lstm_units:
        name += f"({spec.lstm_units})"
    return f"{name} (D, T, D', T') = {point_label(spec.point)} B={spec.batch} jit={spec.jit}"


def plan(args):
    """Every spec of parts 1 and 2: grid rows of (point, {model: {jit: spec}})
    and the networks' {model: {jit: spec}}."""
    grid = []
    for point in args.grid:
        tabl = Spec("tabl", args.batch, point, False)
        units = matched_lstm_units(layer_params(tabl), point[0])
        by_model = {}
        for model in LAYER_MODELS:
            by_model[model] = {jit: Spec(model, args.batch, point, jit,
                                         units if model == "lstm" else 0)
                               for jit in args.jits}
        grid.append((point, by_model))

    features, steps_in = args.network_input
    point = (features, steps_in, NUM_CLASSES, 1)
    hidden = tuple(args.network_hidden)
    ctabl = Spec("ctabl", args.batch, point, False, hidden=hidden)
    # The whole LSTM model, head included, against the whole C(TABL).
    units = matched_lstm_units(model_params(ctabl), features,
                               head=lambda u: (u + 1) * NUM_CLASSES)
    networks = {}
    for model in NETWORK_MODELS:
        networks[model] = {jit: Spec(model, args.batch, point, jit,
                                     units if model == "clstm" else 0,
                                     () if model == "clstm" else hidden)
                           for jit in args.jits}
    return {"grid": grid, "networks": networks}


def all_specs(p):
    specs = [s for _, by_model in p["grid"] for by_jit in by_model.values()
             for s in by_jit.values()]
    specs += [s for by_jit in p["networks"].values() for s in by_jit.values()]
    return list(dict.fromkeys(specs))


def measure(p, args):
    """Prepares every distinct spec and times them all in one round robin.

    Returns {(spec, "train" | "infer"): median seconds} and {spec: prepared}.
    """
    keys = [(spec, kind) for spec in all_specs(p) for kind in ("train", "infer")]
    return prepare_and_time(keys, lambda spec: prepare(spec, args.warmup), describe,
                            args.repeats)


# Part 3: batch 1 in LiteRT and Keras.

def export(model, path):
    """Exports with a fixed length; if that fails, with a dynamic one.
    Returns a note on how it went ("" for the plain route), or raises
    with both reasons."""
    try:
        export_tflite(model, path, dynamic_length=False)
        return ""
    except Exception as error:  # the converter raises several types
        fixed = one_line(error)
    try:
        export_tflite(model, path, dynamic_length=True)
    except Exception as error:
        raise RuntimeError(f"dynamic_length=False: {fixed}; dynamic_length=True: "
                           f"{one_line(error)}") from None
    return f"exported with dynamic_length=True (dynamic_length=False failed: {fixed})"


def measure_litert(p, prepared, args, folder):
    """Exports part 2's models and times batch-1 calls. Returns one row per
    model: {"model", "spec", "params", "bytes", "note", "diff", "litert",
    "keras"},
    the times in seconds (None where the export failed)."""
    rows = []
    jit = args.jits[0]
    x1, _ = make_data(next(iter(p["networks"]["ctabl"].values())), batch=1)
    x_eval = np.random.default_rng(1).standard_normal(
        (args.eval_examples,) + x1.shape[1:], dtype=np.float32)
    variants = []  # (row, kind, sampler)
    for model_key, by_jit in p["networks"].items():
        spec = by_jit[jit]
        model = prepared[spec]["model"]
        row = {"model": model_key, "spec": spec, "params": model.count_params(),
               "bytes": None, "note": "", "diff": None, "litert": None, "keras": None}
        path = pathlib.Path(folder) / f"{model_key}.tflite"
        print(f"export_tflite {describe(spec)}", flush=True)
        try:
            row["note"] = export(model, path)
        except Exception as error:
            row["note"] = f"export failed: {one_line(error)}"
            path = None
        if path is not None:
            row["bytes"] = path.stat().st_size
            reference = model.predict_on_batch(x_eval)
            output = run_sequence(path, x_eval)["output"]
            row["diff"] = float(np.max(np.abs(output - reference)))
            interpreter = Interpreter(model_path=str(path), num_threads=args.litert_threads)
            runner = interpreter.get_signature_runner("serve")
            (name,) = runner.get_input_details()
            variants.append((row, "litert",
                             lambda runner=runner, name=name: time_once(
                                 lambda: runner(**{name: x1}))))
        variants.append((row, "keras",
                         lambda model=model: time_once(lambda: model.predict_on_batch(x1))))
        rows.append(row)

    for _, _, sampler in variants:
        for _ in range(args.litert_warmup):  # retracing for batch 1, allocation
            sampler()
    t0 = time.perf_counter()
    samples = round_robin([rewarmed(s) for _, _, s in variants], args.litert_repeats)
    print(f"timed {len(variants)} batch-1 variants x {args.litert_repeats} calls in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)
    for (row, kind, _), times in zip(variants, samples):
        row[kind] = statistics.median(times)
    return rows


# Rendering.

def ms(seconds):
    return f"{seconds * 1e3:.2f}"


def ratio(a, b):
    return f"{a / b:.2f}×"


def jit_label(jit):
    return "XLA" if jit else "no XLA"


def spread(values):
    """"a×–b× (median c×)" of some ratios, or "a×" for one."""
    if len(values) == 1:
        return f"{values[0]:.2f}×"
    return f"{min(values):.2f}×–{max(values):.2f}× (median {statistics.median(values):.2f}×)"


def grid_table(p, args, med, prepared):
    heads = " | ".join(f"{jit_label(j)} train ms | {jit_label(j)} infer ms | train vs TABL | "
                       f"infer vs TABL" for j in args.jits)
    out = [f"| (D, T, D', T') | Model | Layer params | Model params | Layer fwd kFLOP/example | "
           f"{heads} |",
           "|---|---|---:|---:|---:|" + "---:|" * (4 * len(args.jits))]
    for point, by_model in p["grid"]:
        for model, by_jit in by_model.items():
            spec = by_jit[args.jits[0]]
            cells = []
            for jit in args.jits:
                s, tabl = by_jit[jit], by_model["tabl"][jit]
                off = "" if prepared[s]["effective_jit"] == jit else " (jit off!)"
                cells.append(f"{ms(med[(s, 'train')])}{off} | {ms(med[(s, 'infer')])} | "
                             f"{ratio(med[(s, 'train')], med[(tabl, 'train')])} | "
                             f"{ratio(med[(s, 'infer')], med[(tabl, 'infer')])}")
            name = LAYER_MODELS[model] + (f"({spec.lstm_units})" if spec.lstm_units else "")
            model_obj = prepared[spec]["model"]
            out.append(f"| {point_label(point)} | {name} | "
                       f"{model_obj.get_layer('layer').count_params():,} | "
                       f"{model_obj.count_params():,} | {forward_flops(spec) / 1e3:,.1f} | "
                       f"{' | '.join(cells)} |")
    return out


def sweeps(p):
    """Per dimension, the longest run of grid points that differ in that
    dimension only: [(dimension index, [(value, by_model), ...])]."""
    out = []
    for k in range(4):
        groups = {}
        for point, by_model in p["grid"]:
            rest = point[:k] + point[k + 1:]
            groups.setdefault(rest, []).append((point[k], by_model))
        best = max(groups.values(), key=len)  # the first of the longest
        if len(best) >= 2:
            out.append((k, sorted(best, key=lambda item: item[0])))
    return out


def growth_lines(p, args, med):
    jit = args.jits[0]
    out = []
    for k, points in sweeps(p):
        (v0, first), (v1, last) = points[0], points[-1]
        fixed = ", ".join(f"{DIMENSIONS[i]} = {first['tabl'][jit].point[i]}"
                          for i in range(4) if i != k)
        parts = []
        for model, name in LAYER_MODELS.items():
            a, b = first[model][jit], last[model][jit]
            parts.append(f"{name} ×{med[(b, 'train')] / med[(a, 'train')]:.2f} / "
                         f"×{med[(b, 'infer')] / med[(a, 'infer')]:.2f}")
        tabl_a, tabl_b = first["tabl"][jit], last["tabl"][jit]
        out.append(
            f"- {DIMENSIONS[k]} {v0} → {v1} (×{v1 / v0:.3g}) at {fixed}: training / inference "
            f"time {'; '.join(parts)}; TABL's forward FLOPs "
            f"×{forward_flops(tabl_b) / forward_flops(tabl_a):.2f}.")
    if not out:
        out.append("- The grid has no two points that differ in one dimension only.")
    return out


def network_table(p, args, med, prepared):
    heads = " | ".join(f"{jit_label(j)} train ms | {jit_label(j)} infer ms | train vs C(TABL) | "
                       f"infer vs C(TABL)" for j in args.jits)
    out = [f"| Model | Params | {heads} |", "|---|---:|" + "---:|" * (4 * len(args.jits))]
    for by_jit in p["networks"].values():
        spec = by_jit[args.jits[0]]
        cells = []
        for jit in args.jits:
            s, base = by_jit[jit], p["networks"]["ctabl"][jit]
            off = "" if prepared[s]["effective_jit"] == jit else " (jit off!)"
            cells.append(f"{ms(med[(s, 'train')])}{off} | {ms(med[(s, 'infer')])} | "
                         f"{ratio(med[(s, 'train')], med[(base, 'train')])} | "
                         f"{ratio(med[(s, 'infer')], med[(base, 'infer')])}")
        out.append(f"| {network_name(spec)} | {prepared[spec]['model'].count_params():,} | "
                   f"{' | '.join(cells)} |")
    return out


def network_name(spec):
    if spec.model == "clstm":
        return f"`LSTM({spec.lstm_units}) -> Dense({NUM_CLASSES})`"
    features, steps_in, units, steps = spec.point
    layers = [f"BL({u}, {s})+ReLU" for u, s in spec.hidden]
    layers.append(f"{'TABL' if spec.model == 'ctabl' else 'BL'}({units}, {steps})")
    return f"{NETWORK_MODELS[spec.model]}: {features}×{steps_in} → " + " → ".join(layers)


def us(seconds):
    return "—" if seconds is None else f"{seconds * 1e6:.1f}"


def litert_table(rows):
    base = next(r["litert"] for r in rows if r["model"] == "ctabl")
    out = ["| Model | Params | float32 weight bytes | .tflite bytes | LiteRT `serve` µs "
           "| vs C(TABL) LiteRT | Keras `predict_on_batch` µs | Keras / LiteRT "
           "| Max abs diff | Note |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        params = r["params"]
        vs = "—" if r["litert"] is None or base is None else ratio(r["litert"], base)
        keras_vs = "—" if r["litert"] is None else ratio(r["keras"], r["litert"])
        size = "—" if r["bytes"] is None else f"{r['bytes']:,}"
        diff = "—" if r["diff"] is None else f"{r['diff']:.2e}"
        out.append(f"| {network_name(r['spec'])} | {params:,} | {4 * params:,} | {size} | "
                   f"{us(r['litert'])} | {vs} | {us(r['keras'])} | {keras_vs} | {diff} | "
                   f"{r['note']} |")
    return out


def conclusions(p, args, med, rows):
    jit = args.jits[0]
    out = []
    for kind, what in (("train", "to train"), ("infer", "to infer")):
        by_other = {}
        for _, by_model in p["grid"]:
            tabl = med[(by_model["tabl"][jit], kind)]
            for model in ("bl", "lstm", "dense"):
                by_other.setdefault(model, []).append(tabl / med[(by_model[model][jit], kind)])
        out.append(
            f"- One layer, {jit_label(jit)}, over {len(p['grid'])} grid point(s), TABL takes "
            f"{spread(by_other['bl'])} the time of a BilinearLayer {what}, "
            f"{spread(by_other['lstm'])} that of the matched LSTM and "
            f"{spread(by_other['dense'])} that of the equivalent dense layer.")
    nets = {m: by_jit[jit] for m, by_jit in p["networks"].items()}
    c = {kind: {m: med[(s, kind)] for m, s in nets.items()} for kind in ("train", "infer")}
    out.append(
        f"- Whole network, {jit_label(jit)}: C(TABL) takes "
        f"{c['train']['ctabl'] / c['train']['cbl']:.2f}× C(BL)'s training time and "
        f"{c['infer']['ctabl'] / c['infer']['cbl']:.2f}× its inference time, and "
        f"{c['train']['ctabl'] / c['train']['clstm']:.2f}× / "
        f"{c['infer']['ctabl'] / c['infer']['clstm']:.2f}× those of "
        f"LSTM({nets['clstm'].lstm_units}) of about the same size.")
    r = {row["model"]: row for row in rows}
    if r["ctabl"]["litert"] is None:
        out.append("- Batch 1 in LiteRT: not measured, C(TABL) did not export.")
    else:
        t = r["ctabl"]["litert"]
        names = {"cbl": "C(BL)", "clstm": f"LSTM({r['clstm']['spec'].lstm_units})"}
        others = [f"{t / r[m]['litert']:.2f}× {names[m]}'s {us(r[m]['litert'])} µs"
                  for m in names if r[m]["litert"] is not None]
        failed = [names[m] for m in names if r[m]["litert"] is None]
        out.append(
            f"- Batch 1: C(TABL) answers in {us(t)} µs in LiteRT, "
            f"{r['ctabl']['keras'] / t:.0f}× faster than Keras `predict_on_batch` "
            f"({us(r['ctabl']['keras'])} µs)"
            + (f"; it takes {' and '.join(others)}" if others else "")
            + (f"; {' and '.join(failed)} did not export" if failed else "")
            + ".")
    return out


def render(args, p, med, prepared, rows):
    """The section's Markdown, without its markers (`write_section` adds them)."""
    lines = section_header("TABL vs BilinearLayer, dense and LSTM; LiteRT latency "
                           "(`bench_tabl.py`)", args.quick, {
        "ai-edge-litert": importlib.metadata.version("ai-edge-litert"),
        "keras_relrec": keras_relrec.__version__,
    })
    threads = "LiteRT's default" if args.litert_threads is None else args.litert_threads
    lines += [
        f"- Part 1 models, at each (D, T, D', T'): `Input((T, D)) -> layer -> "
        f"Dense({NUM_CLASSES})` with layer `TABL(D', T', activation=\"relu\")` (`squeeze=True` "
        "at T' = 1, else `Flatten` before the head), the same `BilinearLayer`, "
        "`Flatten -> Dense(D'·T', activation=\"relu\")` (same output size) or "
        "`LSTM(U)` with U chosen so that its 4·(D·U + U² + U) weights come closest to the "
        "TABL layer's. Params: of the layer alone, and of the whole model",
        "- Part 2: the paper's C(TABL) network and C(BL) (its last layer a `BilinearLayer`), "
        "no dropout, against `LSTM(U) -> Dense(3)` with U chosen so that the whole model "
        "has about C(TABL)'s weight count",
        f"- Training and inference: batch {args.batch}, random inputs and labels, Adam, sparse "
        f"categorical cross-entropy from logits ({NUM_CLASSES} classes); one "
        "`train_on_batch` / `predict_on_batch` call; median of "
        f"{args.repeats} rounds, every variant of parts 1 and 2 timed once per round (round "
        f"robin), after {args.warmup} warm-up call(s); "
        + ", ".join(f"*{jit_label(j)}* = jit_compile={j}" for j in args.jits),
        "- Batch 1: `export_tflite(model, path, dynamic_length=False)` (float32, builtins "
        "only) of part 2's models"
        + (" (without XLA)" if len(args.jits) > 1 else "")
        + "; median of "
        f"{args.litert_repeats} calls of the LiteRT `serve` signature runner (only its "
        "calls timed) and of Keras `predict_on_batch` on one example, round robin, each "
        f"timed call right after an untimed one of the same variant, after "
        f"{args.litert_warmup} warm-up call(s); LiteRT interpreter threads: {threads}. Max "
        f"abs diff: largest |LiteRT − Keras| over {args.eval_examples} random examples",
        "",
        f"### 1. One layer over (D, T, D', T'), batch {args.batch}",
        "",
        *grid_table(p, args, med, prepared),
        "",
        "How time grows with each dimension (first to last point of the longest "
        f"one-dimension sweep in the grid, {jit_label(args.jits[0])}):",
        "",
        *growth_lines(p, args, med),
        "",
        f"### 2. The paper's C(TABL) network, batch {args.batch}",
        "",
        *network_table(p, args, med, prepared),
        "",
        "### 3. Batch-1 latency: LiteRT vs Keras",
        "",
        *litert_table(rows),
        "",
        "### Conclusions",
        "",
        *conclusions(p, args, med, rows),
    ]
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=10, help="timed rounds (median)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls first")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--grid", type=parse_point, nargs="+", default=DEFAULT_GRID,
                   metavar="D,T,D',T'", help="part 1's points")
    p.add_argument("--network-input", type=parse_pair, default=(40, 10), metavar="D,T",
                   help="part 2's input: features, steps")
    p.add_argument("--network-hidden", type=parse_pair, nargs="+",
                   default=[(60, 10), (120, 5)], metavar="D',T'",
                   help="part 2's hidden BilinearLayers")
    p.add_argument("--jit", choices=["false", "true", "both"], default="false",
                   help="jit_compile settings of parts 1 and 2")
    p.add_argument("--litert-repeats", type=int, default=500,
                   help="timed batch-1 calls per variant (median)")
    p.add_argument("--litert-warmup", type=int, default=20, help="untimed batch-1 calls first")
    p.add_argument("--litert-threads", type=int, default=None,
                   help="LiteRT interpreter num_threads (default: LiteRT's own)")
    p.add_argument("--eval-examples", type=int, default=16,
                   help="random examples for the LiteRT vs Keras difference")
    p.add_argument("--seed", type=int, default=0)
    results_file.add_common_arguments(p, "tiny sizes and 2 repeats, for smoke tests")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.warmup, args.batch = 2, 1, 8
        # Two points that differ in T only, so the growth lines run too.
        args.grid = [(8, 4, 3, 1), (8, 8, 3, 1)]
        args.network_input, args.network_hidden = (8, 4), [(6, 4), (12, 2)]
        args.jit = "false"
        args.litert_repeats, args.litert_warmup, args.eval_examples = 5, 1, 2
    args.jits = {"false": (False,), "true": (True,), "both": (False, True)}[args.jit]
    return args


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    t0 = time.perf_counter()
    p = plan(args)
    med, prepared = measure(p, args)
    with tempfile.TemporaryDirectory() as folder:
        rows = measure_litert(p, prepared, args, folder)
    section = write_section(args.output, SECTION, render(args, p, med, prepared, rows))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
